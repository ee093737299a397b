"""The version of the code a score depends on, without importing it: a hash of the course's own files and
the installed versions of the libraries its kernels run. Light to import, so that the grade command can
compare them with a resident runner service's (:mod:`autograder.engine.resident`) before its own heavy
imports."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from autograder.engine.untrusted import one_line

#: The code a score depends on besides the source notebook: both halves of the checks and what they
#: are built from (modules or packages, found wherever they are installed).
GRADING_CODE = ("autograder.checks", "autograder.grading", "backprop_utils")
"""What a score depends on besides the submission, as whole packages: the kernel's side of the checks
(the folder the jail mounts), the trusted side (graders, references, preparing, seeds, verdicts) and
the course's helpers. A file added to any of them is in the version with nothing to list."""


def _code_files(module: str) -> list[tuple[str, Path]]:
    """The Python files of a module or package, each with its path inside the package."""
    import importlib.util

    spec = importlib.util.find_spec(module)
    if spec is None:
        return []
    if spec.submodule_search_locations:
        return sorted(
            (str(p.relative_to(d)), p) for d in spec.submodule_search_locations for p in Path(d).rglob("*.py")
        )
    return [(Path(spec.origin).name, Path(spec.origin))] if spec.origin else []


def _hash(modules: tuple[str, ...]) -> str:
    digest = hashlib.sha256()
    for module in modules:
        for name, f in _code_files(module):
            digest.update(f"{module}/{name}".encode() + b"\0" + f.read_bytes())
    return digest.hexdigest()


@functools.cache
def code_version() -> str:
    """A hash of the grading code as installed here (:data:`GRADING_CODE`), read once per process: a Dask
    worker with another one would grade otherwise (:mod:`autograder.engine.distributed`)."""
    return _hash(GRADING_CODE)


@functools.cache
def engine_version() -> str:
    """A hash of the engine's code (``autograder.engine``: runner, zygote, jail, kernel, relay): a resident
    runner started from other engine code would run notebooks otherwise than this command's own runners."""
    return _hash(("autograder.engine",))


#: The installed libraries a kernel's results depend on, by distribution name: what the learner's code and
#: the checks run (PyTorch, numpy, matplotlib) and what runs the kernel and carries its messages (IPython,
#: its kernel, jupyter_client, pyzmq). A runner started before one of them was upgraded still runs the old
#: one, imported, while this command's references and verdicts run the new one.
KERNEL_LIBRARIES = ("torch", "numpy", "matplotlib", "ipython", "ipykernel", "jupyter_client", "pyzmq")


@functools.cache
def library_versions() -> dict[str, str]:
    """The installed version of each of :data:`KERNEL_LIBRARIES` (``""`` for one not installed), read from
    its metadata without importing it, once per process: a resident service reports what its runners
    imported when it started."""
    from importlib import metadata

    found = {}
    for name in KERNEL_LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = ""
    return found


def library_difference(theirs: object) -> tuple[str, str, str] | None:
    """The first of :data:`KERNEL_LIBRARIES` whose version in ``theirs`` (what another process reported:
    anything) is not the one installed here, as its name, their version and this one's (``none``: not
    installed; ``not reported``: ``theirs`` does not name it; theirs bounded and made printable); None
    when every one is the same."""
    ours = library_versions()
    reported = theirs if isinstance(theirs, dict) else {}
    for name, version in ours.items():
        other = reported.get(name)
        if other != version:
            said = "not reported" if other is None else one_line(other, 40) or "none"
            return name, said, version or "none"
    return None
