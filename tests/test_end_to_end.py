"""End to end through nbgrader: generate, submit, autograde, read the scores from the gradebook."""

from __future__ import annotations

import shutil
from pathlib import Path

from nbgrader.api import Gradebook
from nbgrader.apps import NbGraderAPI

from autograder.course.build import (
    assignments,
    ensure_tools_on_path,
    generate,
    nbgrader_config,
    write_sources,
)


def test_reference_earns_the_maximum_and_blank_earns_zero(tmp_path: Path) -> None:
    root = tmp_path / "course"
    course = write_sources(root)
    generate(root, [a.name for a in course])
    submissions = {"reference": "source", "blank": "release"}
    for student, origin in submissions.items():
        for a in course:
            folder = root / "submitted" / student / a.name
            folder.mkdir(parents=True)
            shutil.copyfile(root / origin / a.name / a.notebook, folder / a.notebook)

    ensure_tools_on_path()
    api = NbGraderAPI(config=nbgrader_config(root))
    for a in course:
        for student in submissions:
            result = api.autograde(a.name, student)
            assert result["success"], result["log"]

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for a in assignments():
            maximum = gb.find_assignment(a.name).max_score
            assert maximum > 0
            assert gb.find_submission(a.name, "reference").score == maximum
            assert gb.find_submission(a.name, "blank").score == 0
