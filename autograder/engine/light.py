"""nbformat without the half-second that no grading step needs.

``import nbformat`` imports jsonschema, whose format checkers import ``rfc3987_syntax`` when it is
installed (JupyterLab's dependencies install it), and that package compiles a Lark grammar at import
time: about 0.8 s in every process that reads a notebook, the grader and each runner. nbformat's
notebook schema uses no IRI format, so a process that imports nbformat through :func:`nbformat`
first validates notebooks exactly as before, without that grammar. Only jsonschema's optional
``iri``/``iri-reference`` format checks are missing in such a process; nothing of the engine uses
them, and the lab, nbgrader's own commands and the learner's kernel never go through here.

The grading commands call it before anything imports nbformat (``tests/test_speed_paths.py``
checks which modules the grading path leaves out).
"""

from __future__ import annotations

import sys
from types import ModuleType

#: Imported by nbformat's dependencies at import time, and needed by no grading step.
NOT_NEEDED = ("rfc3987_syntax",)


def nbformat() -> ModuleType:
    """Import nbformat (once) without :data:`NOT_NEEDED`; return it."""
    if "nbformat" in sys.modules:
        return sys.modules["nbformat"]
    blocked = [name for name in NOT_NEEDED if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment] - an ImportError for whoever asks now
    try:
        import nbformat as module
    finally:
        for name in blocked:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]
    return module
