"""A learner's feedback page: one HTML file per graded notebook, every score and sentence of the
outcome, every text escaped (names, feedback, reasons and kernel text are the learner's to choose)."""

from __future__ import annotations

import html
from pathlib import Path

from autograder.course import Assignment
from autograder.engine import exchange, untrusted
from autograder.engine.outcome import Outcome

_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; }
pre { background: #f6f8fa; padding: .75rem; overflow-x: auto; white-space: pre-wrap; }
.score { font-size: 1.4rem; }
.stop { background: #fff4e5; padding: .5rem .75rem; border-left: 4px solid #f0a020; }
table { border-collapse: collapse; }
td, th { border: 1px solid #ccc; padding: .25rem .6rem; text-align: left; }
.full { color: #1a7f37; } .partial { color: #9a6700; } .zero { color: #cf222e; }
"""


def _cls(score: float, points: float) -> str:
    return "full" if score >= points else ("zero" if score <= 0 else "partial")


def feedback_html(o: Outcome) -> str:
    """One learner's feedback page for one assignment."""
    e = html.escape
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{e(o.assignment)}: {e(o.student)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>{e(o.assignment)}</h1><p>Student: <b>{e(o.name or o.student)}</b></p>",
        f"<p class='score {_cls(o.score, o.max_score)}'>Score: {o.score:g} / {o.max_score:g}</p>",
    ]
    if o.adjustment:
        parts.append(f"<p class='stop'>{e(o.adjustment[0].upper() + o.adjustment[1:])}.</p>")
    if o.reason:
        parts.append(
            f"<p class='stop'>{e(o.reason[0].upper() + o.reason[1:])}. "
            "Cells that ran before keep their points.</p>"
        )
    for note in o.restored:
        parts.append(f"<p class='stop'>{e(note)}.</p>")
    for flag in o.flags:
        parts.append(f"<p class='stop'>Method check: {e(flag)}.</p>")
    parts.append("<h2>Exercises</h2><table><tr><th>test</th><th>points</th></tr>")
    for c in o.cells:
        parts.append(
            f"<tr><td>{e(c.grade_id)}</td><td class='{_cls(c.score, c.points)}'>"
            f"{c.score:g} / {c.points:g}</td></tr>"
        )
    parts.append("</table>")
    for c in o.cells:
        parts.append(f"<h3>{e(c.grade_id)}: {c.score:g} / {c.points:g}</h3><pre>{e(c.feedback)}</pre>")
    if o.errors:
        parts.append("<h2>Errors in your other cells</h2><ul>")
        parts.extend(f"<li>{e(err)}</li>" for err in o.errors)
        parts.append("</ul>")
    if o.answers:
        parts.append("<h2>Your answers</h2>")
        parts.extend(f"<h3>{e(a['id'])}</h3><pre>{e(a['source'])}</pre>" for a in o.answers)
    parts.append("</body></html>")
    return "\n".join(parts)


def write_feedback(root: Path, outcomes: list[Outcome], assignments: dict[str, Assignment]) -> list[str]:
    """Write ``feedback/<student>/<assignment>/<notebook>.html`` (nbgrader's layout) for every outcome;
    return a sentence for each page that could not be written (the others are)."""
    problems = []
    for o in outcomes:
        a = assignments[o.assignment]
        path = root / "feedback" / o.student / a.name / f"{Path(a.notebook).stem}.html"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(feedback_html(o), encoding="utf-8")
            # what nbgrader's release_feedback needs beside the page, when the submission came through it
            exchange.carry(root / "autograded" / o.student / a.name / a.notebook, "", path.parent)
        except Exception as exc:  # noqa: BLE001 - one student's page, stated; the others are written
            problems.append(
                f"the feedback of {untrusted.one_line(o.student, 300)} for {o.assignment} could not be "
                f"written ({type(exc).__name__}: {untrusted.one_line(exc, 200)})"
            )
    return problems
