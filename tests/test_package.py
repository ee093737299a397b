"""The course's package as the package index receives it: an sdist and a wheel of `backprop-course` whose
metadata passes the index's checks, and notebooks that install exactly that version by name.

Both are built as `python -m build --no-isolation` builds them, through setuptools' PEP 517 hooks
(`make dist`); the wheel is built a second time from the unpacked sdist, as pip does from an sdist. The
metadata is validated with `packaging.metadata` (the parser and validator the index's upload tools use:
required fields, versions, names, the license expression, the description's content type) and with
`twine check --strict`, the index's upload tool, which runs offline; the classifiers are compared with a
fixed list, since the index's list of valid classifiers is not available offline.
"""

from __future__ import annotations

import email
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from notebook_helpers import REPO, SOLUTIONS
from packaging.metadata import Metadata

PYPROJECT = (REPO / "pyproject.toml").read_text(encoding="utf-8")
NAME = re.search(r'^name = "([^"]+)"', PYPROJECT, re.M).group(1)
VERSION = re.search(r'^version = "([^"]+)"', PYPROJECT, re.M).group(1)
FILE_NAME = NAME.replace("-", "_")  # a distribution's files are named with `_` (PEP 427, PEP 625)
CLASSIFIERS = [
    "Development Status :: 4 - Beta",
    "Framework :: Jupyter",
    "Intended Audience :: Education",
    "Intended Audience :: Science/Research",
    "Operating System :: OS Independent",
    "Programming Language :: Python :: 3",
    "Programming Language :: Python :: 3 :: Only",
    "Programming Language :: Python :: 3.11",
    "Topic :: Education",
    "Topic :: Scientific/Engineering :: Artificial Intelligence",
]


def build(kind: str, source: Path, out: Path) -> Path:
    """Build ``kind`` (``sdist`` or ``wheel``) of the project in ``source`` into ``out``."""
    code = f"from setuptools import build_meta as b; print(b.build_{kind}({str(out)!r}))"
    done = subprocess.run([sys.executable, "-c", code], cwd=source, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return out / done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("dist")
    sdist = build("sdist", REPO, out)
    with tarfile.open(sdist) as tar:
        # the course's own sdist, built just now; Python 3.11 has extraction filters from 3.11.4 on only
        # (Debian 12's is 3.11.2), so the filter is used where there is one
        tar.extractall(out / "unpacked", **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    rebuilt = out / "rebuilt"
    rebuilt.mkdir()
    wheel = build("wheel", out / "unpacked" / f"{FILE_NAME}-{VERSION}", rebuilt)
    return {"sdist": sdist, "wheel": wheel}


def metadata_text(kind: str, path: Path) -> str:
    if kind == "wheel":
        return zipfile.ZipFile(path).read(f"{FILE_NAME}-{VERSION}.dist-info/METADATA").decode()
    with tarfile.open(path) as tar:
        return tar.extractfile(f"{FILE_NAME}-{VERSION}/PKG-INFO").read().decode()


@pytest.mark.parametrize("kind", ["sdist", "wheel"])
def test_the_metadata_passes_the_index_checks(dist: dict[str, Path], kind: str) -> None:
    path = dist[kind]
    assert path.name == (
        f"{FILE_NAME}-{VERSION}.tar.gz" if kind == "sdist" else f"{FILE_NAME}-{VERSION}-py3-none-any.whl"
    )
    text = metadata_text(kind, path)
    meta = Metadata.from_email(text, validate=True)  # raises on any invalid or missing field
    assert (str(meta.name), str(meta.version)) == (NAME, VERSION)
    assert meta.summary and meta.license_expression == "MIT" and meta.license_files == ["LICENSE"]
    assert meta.description_content_type == "text/markdown"
    body = email.message_from_string(text).get_payload()
    assert body.strip() == (REPO / "docs" / "package.md").read_text(encoding="utf-8").strip()
    assert meta.classifiers == CLASSIFIERS
    assert str(meta.requires_python) == ">=3.11"
    kernel = {r.name: str(r.specifier) for r in meta.requires_dist if r.marker is None}
    assert kernel == {"numpy": ">=1.26", "torch": ">=2.2", "matplotlib": ">=3.8"}


def twine_check(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, paths)],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )


def test_twine_check_passes_both_files(dist: dict[str, Path]) -> None:
    done = twine_check(dist["sdist"], dist["wheel"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("PASSED") == 2 and "warning" not in done.stdout.lower(), done.stdout


def test_twine_check_fails_a_broken_description(dist: dict[str, Path], tmp_path: Path) -> None:
    """The check above can fail: the same wheel, its description declared reStructuredText and broken
    (the index would show it as raw text), and without a description at all, are refused."""
    info = f"{FILE_NAME}-{VERSION}.dist-info/METADATA"
    metadata = metadata_text("wheel", dist["wheel"])
    head, _, _ = metadata.partition("\n\n")
    broken = {
        "rst": head.replace("Description-Content-Type: text/markdown", "Description-Content-Type: text/x-rst")
        + "\n\nTitle\n===\n\n`unclosed\n",
        "none": head + "\n",
    }
    for name, text in broken.items():
        wheel = tmp_path / name / dist["wheel"].name
        wheel.parent.mkdir()
        with zipfile.ZipFile(dist["wheel"]) as src, zipfile.ZipFile(wheel, "w") as out:
            for item in src.infolist():
                out.writestr(item, text if item.filename == info else src.read(item))
        done = twine_check(wheel)
        assert done.returncode != 0 and "FAILED" in done.stdout, (name, done.stdout)


def test_the_long_description_reads_alone() -> None:
    """The index shows docs/package.md without the repository around it: no relative link may break."""
    text = (REPO / "docs" / "package.md").read_text(encoding="utf-8")
    assert not re.search(r"\]\((?!https?:)[^)]*\)", text)
    assert f"%pip install {NAME}=={VERSION}" in text


def test_every_notebook_installs_this_version_by_name() -> None:
    line = f"%pip install {NAME}=={VERSION}"
    for source in sorted(SOLUTIONS.glob("[0-9][0-9]_*.py")):
        setup = source.read_text(encoding="utf-8").split('# %% locked grade_id="setup"')[1].split("# %%")[0]
        assert setup.count(line) == 1 and setup.count(f'"pip", "{line[5:]}"') == 1, source.name
        assert "whl" not in setup, source.name


def test_no_package_index_host_is_named_in_the_repository() -> None:
    """Which index a notebook installs from is the environment's choice (pip's configuration)."""
    hosts = re.compile(r"py" + r"pi\.org|python" + r"hosted\.org|anaconda\.org|conda-forge\.org")
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True)
    named = [
        f
        for f in tracked.stdout.splitlines()
        if (REPO / f).is_file() and hosts.search((REPO / f).read_text(encoding="utf-8", errors="replace"))
    ]
    assert named == []
