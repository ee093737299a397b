"""Shared fixtures: one fresh build of the course per test session, in a temporary folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture(scope="session")
def built_course(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A course directory built from solutions/ by the real build: source/, release/ and the student
    versions in ``<root>/notebooks``."""
    from autograder.course.build import build

    root = tmp_path_factory.mktemp("course")
    build(root=root, out=root / "notebooks")
    return root
