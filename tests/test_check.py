"""A learner's own check: the engine's verdicts, each printed as its test cell runs, without the class
path's machinery (the speed is measured in ``benchmarks/check_speed.py``, not asserted here)."""

from __future__ import annotations

import time
from pathlib import Path

import nbformat
from notebook_helpers import solved_notebook

from autograder.engine.check import check_notebook


class Timed:
    """A text stream that remembers when each line was written."""

    def __init__(self) -> None:
        self.lines: list[tuple[float, str]] = []

    def write(self, text: str) -> int:
        self.lines.extend((time.monotonic(), line) for line in text.splitlines() if line)
        return len(text)

    def flush(self) -> None:
        pass

    def when(self, start: str) -> float:
        return next(t for t, line in self.lines if line.startswith(start))


def test_each_result_is_shown_as_its_cell_runs_and_a_slow_cell_says_so(tmp_path: Path) -> None:
    nb = solved_notebook("01_linear_layer")
    first_test = next(i for i, c in enumerate(nb.cells) if c.get("id") == "test_numerical_gradient")
    nb.cells.insert(first_test + 1, nbformat.v4.new_code_cell("import time\ntime.sleep(15)"))
    path = tmp_path / "01_linear_layer.ipynb"
    nbformat.write(nb, path)

    out = Timed()
    outcome = check_notebook(path, out=out)
    ended = time.monotonic()

    assert (outcome.score, outcome.max_score) == (13, 13)
    shown = out.when("numerical_gradient: 3 / 3 points")
    assert ended - shown > 5, "the first result waited for the end of the notebook"
    # announced every 5 s the cell goes on, and no more once it ended
    slow = [
        line for _, line in out.lines if line.startswith(f"... cell {first_test + 2} still running after")
    ]
    assert slow and all(line.endswith(" s: import time") for line in slow)
    assert not any("still running after 20 s" in line for _, line in out.lines)
    # what was shown as each cell ran is the engine's verdict for that cell, word for word
    text = "\n".join(line for _, line in out.lines)
    for cell in outcome.cells:
        assert cell.feedback.splitlines()[0] in text
        assert all(line in text for line in cell.feedback.splitlines() if line.strip())


def test_the_check_command_on_an_untouched_course_notebook(tmp_path: Path, capsys) -> None:
    from autograder.__main__ import main
    from autograder.course.build import NOTEBOOKS

    path = tmp_path / "01_linear_layer.ipynb"
    path.write_bytes((NOTEBOOKS / "01_linear_layer.ipynb").read_bytes())
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Checking 01_linear_layer.ipynb with the tests you can see")
    assert "\n01_linear_layer: 0 / 13 points\n" in out
    # each result shown once, as its cell ran
    assert out.count("numerical_gradient: 0 / 3 points\n") == 1
    assert "numerical_gradient is not implemented yet" in out
    assert "seed=7" not in out

    assert main(["check", "--quiet", str(path)]) == 0
    quiet = capsys.readouterr().out
    assert quiet.startswith("01_linear_layer: 0 / 13 points")
    assert quiet.count("numerical_gradient: 0 / 3 points\n") == 1
    assert "still running" not in quiet
