"""The course's package: the wheel holds every module of the course, and a notebook on its own (a hosted
service, a copy out of the repository) installs it by name, at the course's version, from the package
index pip is given, and works after that, with nothing else of the course.

"Nothing else" is made true, not assumed: the tests run in a fresh virtual environment whose only other
packages are linked one by one from this environment's site-packages with the course's own entries (its
editable install, its metadata) left out; they first prove that the course cannot be imported there. The
by-name install links only what a hosted service gives a notebook (a kernel, pip, numpy, torch,
matplotlib and what they require) and serves the wheel from a PEP 503 index in a folder; every course
module imported then comes from the installed package.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from notebook_helpers import NAMES, REPO, SOLUTIONS, make_wheel, solved_notebook, student_notebook, wheel_name

# What the repository's files become in the wheel: utils/ is the package backprop_utils.
PACKAGES = {"autograder": "autograder", "utils": "backprop_utils"}
COURSE_ENTRIES = re.compile(r"^(autograder|backprop_utils|utils|(__editable__[._]+)?backprop_course\b.*)$")
KERNEL = "course-wheel-only"
LEARNER_UTILS = 'def helper() -> str:\n    return "the learner\'s own utils"\n'


def course_modules() -> list[str]:
    """Every module of the course, by its import name, from the files in the repository."""
    modules = []
    for folder, package in PACKAGES.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = [package, *path.relative_to(REPO / folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            modules.append(".".join(parts))
    return modules


@pytest.fixture(scope="module")
def wheel() -> Path:
    return make_wheel()


class BareVenv:
    """A virtual environment with the course's dependencies but not the course, and a kernel spec for it."""

    def __init__(self, root: Path, only: set[str] | None = None) -> None:
        """``only``: the site-packages entries to link (all but the course's when None)."""
        self.root = root
        deps = root / "deps"
        deps.mkdir()
        here = Path(sysconfig.get_paths()["purelib"])
        for entry in sorted(here.iterdir()):
            if not COURSE_ENTRIES.match(entry.name) and (only is None or entry.name in only):
                (deps / entry.name).symlink_to(entry)
        self.dir = root / "venv"
        # without its own pip and setuptools, which would shadow newer ones that a dependency needs
        # (torch needs setuptools >= 77): pip comes from the linked packages
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(self.dir)], check=True)
        self.python = self.dir / "bin" / "python"
        self.site = Path(self.run("import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())
        (self.site / "course-dependencies.pth").write_text(f"{deps}\n", encoding="utf-8")
        spec = root / "jupyter" / "kernels" / KERNEL
        spec.mkdir(parents=True)
        argv = [str(self.python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        kernel = {
            "argv": argv + ["--IPKernelApp.log_level=ERROR"],
            "display_name": KERNEL,
            "language": "python",
        }
        (spec / "kernel.json").write_text(json.dumps(kernel), encoding="utf-8")

    def run(self, code: str, cwd: Path | None = None) -> str:
        empty = cwd or self.root
        done = subprocess.run(
            [str(self.python), "-c", code], cwd=empty, capture_output=True, text=True, env=_clean_env()
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def importable(self, names: list[str]) -> list[str]:
        probe = (
            f"import importlib.util as u, json; print(json.dumps([m for m in {names!r} if u.find_spec(m)]))"
        )
        return json.loads(self.run(probe))


#: What a hosted notebook service gives a notebook, as far as this course needs: a kernel, pip and the
#: libraries the notebooks import.
HOSTED = ["ipykernel", "pip", "numpy", "torch", "matplotlib"]


def hosted_entries() -> set[str]:
    """The site-packages entries of :data:`HOSTED` and of everything they require, from this environment."""
    from importlib.metadata import PackageNotFoundError, distribution

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    entries: set[str] = set()
    seen: set[str] = set()
    todo = list(HOSTED)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            continue
        entries |= {f.parts[0] for f in dist.files or [] if f.parts[0] != ".."}
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return entries


def _clean_env() -> dict[str, str]:
    """This process's environment without anything that points Python at the repository, and a pip
    that reads no configuration: it can install the file it is given and nothing else."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_", "VIRTUAL_ENV"))}
    env.update(
        PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_NO_DEPS="1", PIP_DISABLE_PIP_VERSION_CHECK="1"
    )
    return env


@pytest.fixture
def bare_venv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> BareVenv:
    venv = BareVenv(tmp_path)
    for key, value in _clean_env().items():
        monkeypatch.setenv(key, value)
    for key in [k for k in os.environ if k.startswith(("PYTHON", "VIRTUAL_ENV"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    assert venv.importable(["autograder", "backprop_utils"]) == [], "the bare venv already has the course"
    assert venv.importable(["numpy", "torch", "matplotlib", "ipykernel"]) == [
        "numpy",
        "torch",
        "matplotlib",
        "ipykernel",
    ]
    return venv


def _execute(nb: nbformat.NotebookNode, folder: Path) -> None:
    NotebookClient(
        nb, timeout=300, kernel_name=KERNEL, resources={"metadata": {"path": str(folder)}}
    ).execute()


def test_pyproject_lists_every_package_folder() -> None:
    """setuptools takes only the packages pyproject.toml lists: a new folder of modules must be listed."""
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {m for m in course_modules() if (REPO / m.replace(".", "/") / "__init__.py").exists()}
    folders |= {"backprop_utils"}
    missing = sorted(folders - listed)
    assert not missing, f"add {missing} to [tool.setuptools] packages in pyproject.toml"
    assert listed <= folders, f"pyproject.toml lists packages with no folder: {sorted(listed - folders)}"


def test_the_wheel_holds_every_module_and_nothing_else(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {m.replace(".", "/") for m in course_modules()}
    files = {n.removesuffix(".py").removesuffix("/__init__") for n in names if n.endswith(".py")}
    assert files == expected
    assert not any(n.startswith(("utils/", "tests/", "solutions/", "notebooks/")) for n in names)
    metadata = zipfile.ZipFile(wheel).read(f"{wheel.name.split('-py3')[0]}.dist-info/METADATA").decode()
    assert {"numpy", "torch", "matplotlib"} <= set(
        re.findall(r"^Requires-Dist: ([A-Za-z0-9_-]+)", metadata, re.M)
    )


def test_every_module_imports_from_the_installed_wheel(wheel: Path, bare_venv: BareVenv) -> None:
    subprocess.run([str(bare_venv.python), "-m", "pip", "install", "--quiet", str(wheel)], check=True)
    modules = course_modules()
    assert "autograder.engine.grade" in modules and "backprop_utils.plots" in modules
    out = bare_venv.run(
        "import importlib, json\n"
        f"print(json.dumps({{m: importlib.import_module(m).__file__ for m in {modules!r}}}))"
    )
    where = json.loads(out)
    outside = {m: f for m, f in where.items() if not f.startswith(str(bare_venv.site) + os.sep)}
    assert not outside, f"imported from elsewhere than the installed wheel: {outside}"


def simple_index(folder: Path, files: list[Path]) -> str:
    """A package index in ``folder`` serving ``files`` as pip reads one (PEP 503's "simple" layout, as a
    folder): the index's URL."""
    project = folder / "simple" / "backprop-course"
    project.mkdir(parents=True)
    links = []
    for f in files:
        shutil.copyfile(f, project / f.name)
        links.append(f'<a href="{f.name}">{f.name}</a><br>')
    (project / "index.html").write_text("<!DOCTYPE html><html><body>" + "".join(links) + "</body></html>")
    (folder / "simple" / "index.html").write_text(
        '<!DOCTYPE html><html><body><a href="backprop-course/">backprop-course</a></body></html>'
    )
    return (folder / "simple").as_uri()


def test_a_notebook_alone_installs_the_course_by_name_and_works(
    wheel: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A notebook on its own (a hosted service, a copy out of the repository) installs the course's
    package by name, at the course's version, from the package index it is given: here one served
    from a folder, pip resolving the dependencies against what the environment has: only a kernel,
    pip, numpy, torch, matplotlib and what they require (no nbgrader, no Jupyter server)."""
    bare_venv = BareVenv(tmp_path, only=hosted_entries())
    for key, value in _clean_env().items():
        monkeypatch.setenv(key, value)
    for key in [k for k in os.environ if k.startswith(("PYTHON", "VIRTUAL_ENV"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    assert (
        bare_venv.importable(["autograder", "backprop_utils", "nbgrader", "nbclient", "jupyter_server"]) == []
    )
    for key in [k for k in os.environ if k.startswith("PIP_") and k != "PIP_CONFIG_FILE"]:
        monkeypatch.delenv(key)  # this index and nothing else: no other index, no local wheels
    monkeypatch.setenv("PIP_INDEX_URL", simple_index(tmp_path / "index", [wheel]))
    alone = tmp_path / "alone"  # the notebooks alone, where the learner also keeps a utils.py
    alone.mkdir()
    (alone / "utils.py").write_text(LEARNER_UTILS, encoding="utf-8")
    install = f"%pip install backprop-course=={wheel_name().split('-')[1]}"

    first = student_notebook(NAMES[0])
    with pytest.raises(CellExecutionError) as stopped:  # at the first exercise left to the learner
        _execute(first, alone)
    setup = next(c for c in first.cells if c.cell_type == "code")
    said = "".join(o.get("text", "") for o in setup.outputs)
    assert "NotImplementedError" in str(stopped.value), said
    assert f"installing it: {install}\n" in said and "Successfully installed backprop-course-" in said
    assert bare_venv.importable(["autograder", "backprop_utils"]) == ["autograder", "backprop_utils"]
    for name in NAMES:
        setup = next(c for c in student_notebook(name).cells if c.cell_type == "code")
        assert f'"pip", "{install[5:]}"' in setup.source, f"{name} installs another version than the build's"

    probe = nbformat.v4.new_code_cell(
        "import sys, autograder, backprop_utils, utils\n"
        "print(autograder.__file__, backprop_utils.__file__, sys.executable, utils.helper(), sep='\\n')"
    )
    for name in NAMES:
        nb = solved_notebook(name)
        nb.cells.append(probe)
        _execute(nb, alone)  # raises on the first cell that fails
        lines = "".join(o.get("text", "") for o in nb.cells[-1].outputs).splitlines()
        assert lines[0].startswith(str(bare_venv.site)) and lines[1].startswith(str(bare_venv.site)), lines
        assert lines[2] == str(bare_venv.python)
        assert lines[3] == "the learner's own utils"
        graded = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
        assert graded and all(c.outputs for c in graded), f"{name}: a test cell printed nothing"
        if name == NAMES[0]:
            nbformat.write(nb, alone / f"{name}.ipynb")

    # The learner's own check, run by the installed package (the course's sources, which the package
    # does not carry, from the repository; nbgrader and the rest of the instructor's tools it needs
    # linked in): full marks for the solved notebook.
    more = tmp_path / "instructor-deps"
    more.mkdir()
    for entry in sorted(Path(sysconfig.get_paths()["purelib"]).iterdir()):
        if not COURSE_ENTRIES.match(entry.name) and not (tmp_path / "deps" / entry.name).exists():
            (more / entry.name).symlink_to(entry)
    (bare_venv.site / "instructor-dependencies.pth").write_text(f"{more}\n", encoding="utf-8")
    command = [str(bare_venv.python), "-m", "autograder", "check", f"{NAMES[0]}.ipynb"]
    checked = subprocess.run(
        [*command, "--solutions", str(SOLUTIONS)],
        cwd=alone, capture_output=True, text=True, env=os.environ.copy(), timeout=600,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-2000:]
    points = sum(
        float(p) for p in re.findall(r"points=([0-9.]+)", (SOLUTIONS / f"{NAMES[0]}.py").read_text())
    )
    assert f"{NAMES[0]}: {points:g} / {points:g} points\n" in checked.stdout, checked.stdout[-2000:]
