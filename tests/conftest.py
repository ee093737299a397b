"""Shared fixtures: one fresh build of the course per test session, in a temporary folder."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
# The suite's grade commands start their own runners: a resident service (`python -m autograder serve`)
# that the person running the tests keeps on this machine is never theirs to use. Its socket lives under
# XDG_RUNTIME_DIR; tests/test_service.py starts services of its own, each under a folder of its own.
os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="autograder-tests-run-")


@pytest.fixture(scope="session")
def built_course(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A course directory built from solutions/ by the real build: source/, release/ and the student
    versions in ``<root>/notebooks``."""
    from autograder.course.build import build

    root = tmp_path_factory.mktemp("course")
    build(root=root, out=root / "notebooks")
    return root
