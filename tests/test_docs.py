"""The documents send readers only to what exists, and cite nothing outside the repository.

Every relative link (and the heading its ``#anchor`` names) and every backquoted repository path in
the README, CONTRIBUTING.md and ``docs/*.md`` exists in the working tree; the README stays a
two-minute read; no document or source cites a standard by a file that is not in the repository
(the standard is ``docs/checks.md``) or a tracker's issue number, which a reader of the repository
cannot open.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
DOCS += sorted((ROOT / "benchmarks").glob("**/*.md"))
README_MAX_LINES = 130

#: The folders a backquoted path is checked under: a token that starts with one of them is a path.
FOLDERS = ("autograder", "tests", "benchmarks", "docs", "solutions", "notebooks", "utils", "jupyter-config")
_PATH = re.compile(rf"^(?:{'|'.join(re.escape(f) for f in FOLDERS)})/[^\s`'\"()\[\],;:]*")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", re.MULTILINE)

#: Sources whose comments and docstrings are read for citations, besides every document.
SOURCES = [
    *sorted(ROOT.glob("autograder/**/*.py")),
    *sorted(ROOT.glob("tests/**/*.py")),
    *sorted(ROOT.glob("benchmarks/**/*.py")),
    *sorted(ROOT.glob("utils/**/*.py")),
    *sorted(ROOT.glob("solutions/*.py")),
    ROOT / "Makefile",
]
#: The standard's old name, cited without its folder (spelled in two parts so this file does not cite it).
_OLD_STANDARD = re.compile("(?<![/\\w])" + "CHECKS" + r"\.md")
_ISSUE = re.compile(r"\b[Ii]ssues?\s+#?\d+")


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name


def _glob_of(token: str) -> str:
    """A documented path as a glob: ``NN`` is a notebook's number, ``<name>`` and ``*`` any name."""
    token = token.rstrip(".")
    token = re.sub(r"<[^>]*>", "*", token)
    return re.sub(r"\bNN(?=_)", "[0-9][0-9]", token)


def _exists(token: str) -> bool:
    pattern = _glob_of(token).rstrip("/")
    if not any(c in pattern for c in "*?["):
        return (ROOT / pattern).exists()
    return any(True for _ in ROOT.glob(pattern))


def repository_paths(text: str) -> set[str]:
    """Every backquoted token, in code spans and fenced blocks, that names a path in the repository."""
    fenced = [m.group(0) for m in _FENCE.finditer(text)]
    spans = [m.group(2) for m in _CODE_SPAN.finditer(_FENCE.sub("", text))]
    tokens = {t for chunk in spans + fenced for t in re.split(r"[\s=]+", chunk)}
    return {m.group(0) for t in tokens if (m := _PATH.match(t))}


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def broken_links(doc: Path) -> list[str]:
    """The relative links of ``doc`` whose file, or whose heading, does not exist."""
    broken = []
    for target in _LINK.findall(_FENCE.sub("", doc.read_text())):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        path = (doc.parent / file).resolve() if file else doc
        if not path.exists():
            broken.append(f"{target}: no file {file}")
        elif anchor and path.suffix == ".md":
            anchors = {slug(h) for h in _HEADING.findall(_FENCE.sub("", path.read_text()))}
            if anchor not in anchors:
                broken.append(f"{target}: no heading #{anchor} in {_rel(path)}")
    return broken


@pytest.mark.parametrize("doc", DOCS, ids=_rel)
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(doc: Path) -> None:
    """A reader sent somewhere by a document finds it."""
    assert broken_links(doc) == [], f"{_rel(doc)} links to what does not exist"


@pytest.mark.parametrize("doc", DOCS, ids=_rel)
def test_every_backquoted_repository_path_exists(doc: Path) -> None:
    """A file or folder a document names is in the repository, under that name."""
    missing = sorted(p for p in repository_paths(doc.read_text()) if not _exists(p))
    assert missing == [], f"{_rel(doc)} names paths that do not exist: {missing}"


def test_the_readme_is_a_two_minute_read() -> None:
    """The README says what the course is, how to start and where to go; the rest lives in docs/."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines, at most {README_MAX_LINES}: move the section to docs/"
    )


@pytest.mark.parametrize("path", DOCS + SOURCES, ids=_rel)
def test_nothing_cites_a_file_or_an_issue_outside_the_repository(path: Path) -> None:
    """The standard is cited as ``docs/checks.md``; an issue number means nothing in the repository."""
    if path == Path(__file__).resolve():
        return
    found = []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        for pattern, fix in ((_OLD_STANDARD, "docs/checks.md"), (_ISSUE, "say what it is, not its number")):
            found += [f"line {number}: {m.group(0)!r} ({fix})" for m in pattern.finditer(line)]
    assert found == [], f"{_rel(path)} cites what is not in the repository: {found}"


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        ("see `autograder/checks/compare.py`, then", {"autograder/checks/compare.py"}),
        ("run `python benchmarks/check_speed.py 01 --repeat 1`", {"benchmarks/check_speed.py"}),
        ("```bash\n.venv/bin/python benchmarks/grading_speed.py --x\n```", {"benchmarks/grading_speed.py"}),
        ("`solutions/NN_*.py`: the source (`tests/`, `autograder.grading`)", {"solutions/NN_*.py", "tests/"}),
        ("a path outside backquotes: autograder/nothing.py", set()),
    ],
)
def test_repository_paths_are_read_from_code_spans_and_blocks(text: str, paths: set[str]) -> None:
    assert repository_paths(text) == paths


def test_a_missing_path_and_a_missing_heading_are_found(tmp_path: Path) -> None:
    """The checks above can fail: a made-up path, file and heading are each reported."""
    assert not _exists("autograder/no_such_module.py")
    assert _exists("solutions/NN_*.py") and _exists("tests/test_checks_<notebook>.py")
    doc = ROOT / "docs" / "speed.md"
    (tmp_path / "a.md").write_text(
        f"# Title\n[ok](#title) [gone](#nowhere) [file]({doc}) [no](missing.md) [web](https://x.org/y)\n"
    )
    assert broken_links(tmp_path / "a.md") == [
        "#nowhere: no heading #nowhere in a.md",
        "missing.md: no file missing.md",
    ]
    assert slug("A learner's check against `plain` execution") == "a-learners-check-against-plain-execution"
