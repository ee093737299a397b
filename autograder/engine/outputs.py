"""What grading leaves behind: gradebook scores, feedback pages, a grades CSV and a class summary.

The feedback a learner reads is built here from trusted results only: the check reports the engine
recomputed, the learner's own answer code, and the reason when something stopped the notebook.
No test cell source (hidden or not) and no traceback from a test cell is ever written into it.
"""

from __future__ import annotations

import csv
import html
import warnings
from collections import Counter, defaultdict
from pathlib import Path

from autograder.build import Assignment
from autograder.engine.grade import Outcome
from autograder.engine.intake import Rejected


def write_gradebook(db_url: str, outcomes: list[Outcome], assignments: dict[str, Assignment]) -> None:
    """Store every graded outcome's cell scores as nbgrader auto scores, creating students as needed."""
    from nbgrader.api import Gradebook, MissingEntry
    from sqlalchemy.exc import SAWarning

    warnings.filterwarnings("ignore", category=SAWarning)
    with Gradebook(db_url) as gb:
        for o in outcomes:
            if o.status == "failed":
                continue
            notebook = Path(assignments[o.assignment].notebook).stem
            gb.update_or_create_student(o.student)
            try:
                gb.find_submission(o.assignment, o.student)
            except MissingEntry:
                gb.add_submission(o.assignment, o.student)
            for cell in o.cells:
                grade = gb.find_grade(cell["grade_id"], notebook, o.assignment, o.student)
                grade.auto_score = cell["score"]
            gb.db.commit()


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
        f"<h1>{e(o.assignment)}</h1><p>Student: <b>{e(o.student)}</b></p>",
        f"<p class='score {_cls(o.score, o.max_score)}'>Score: {o.score:g} / {o.max_score:g}</p>",
    ]
    if o.reason:
        parts.append(
            f"<p class='stop'>{e(o.reason[0].upper() + o.reason[1:])}. "
            "Cells that ran before keep their points.</p>"
        )
    for note in o.restored:
        parts.append(f"<p class='stop'>{e(note)}.</p>")
    parts.append("<h2>Exercises</h2><table><tr><th>test</th><th>points</th></tr>")
    for c in o.cells:
        parts.append(
            f"<tr><td>{e(c['grade_id'])}</td><td class='{_cls(c['score'], c['points'])}'>"
            f"{c['score']:g} / {c['points']:g}</td></tr>"
        )
    parts.append("</table>")
    for c in o.cells:
        parts.append(
            f"<h3>{e(c['grade_id'])}: {c['score']:g} / {c['points']:g}</h3><pre>{e(c['feedback'])}</pre>"
        )
    if o.errors:
        parts.append("<h2>Errors in your other cells</h2><ul>")
        parts.extend(f"<li>{e(err)}</li>" for err in o.errors)
        parts.append("</ul>")
    if o.answers:
        parts.append("<h2>Your answers</h2>")
        parts.extend(f"<h3>{e(a['id'])}</h3><pre>{e(a['source'])}</pre>" for a in o.answers)
    parts.append("</body></html>")
    return "\n".join(parts)


def write_feedback(root: Path, outcomes: list[Outcome], assignments: dict[str, Assignment]) -> None:
    """Write ``feedback/<student>/<assignment>/<notebook>.html`` (nbgrader's layout) for every outcome."""
    for o in outcomes:
        a = assignments[o.assignment]
        path = root / "feedback" / o.student / a.name / f"{Path(a.notebook).stem}.html"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(feedback_html(o), encoding="utf-8")


def write_csv(path: Path, outcomes: list[Outcome], rejected: list[Rejected]) -> None:
    """One row per input file: graded, stopped and failed submissions, then rejected files."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["student", "assignment", "score", "max_score", "status", "reason", "file"])
        for o in outcomes:
            w.writerow(
                [
                    o.student,
                    o.assignment,
                    f"{o.score:g}",
                    f"{o.max_score:g}",
                    o.status,
                    o.reason or "",
                    o.origin,
                ]
            )
        for r in rejected:
            w.writerow(["", "", "", "", "rejected", r.reason, r.origin])


def pass_rates(outcomes: list[Outcome]) -> list[tuple[str, str, int, float, float]]:
    """(assignment, test, submissions, share with full points, mean score / points) per graded cell."""
    stats: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for o in outcomes:
        if o.status == "failed":
            continue
        for c in o.cells:
            stats[(o.assignment, c["grade_id"])].append((c["score"], c["points"]))
    rows = []
    for (assignment, test), scores in sorted(stats.items()):
        full = sum(1 for s, p in scores if s >= p) / len(scores)
        mean = sum(s / p for s, p in scores if p) / len(scores)
        rows.append((assignment, test, len(scores), full, mean))
    return rows


def histogram(path: Path, outcomes: list[Outcome]) -> None:
    """A PNG histogram of the total score (as a percentage) per submission, one colour per assignment."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_assignment: dict[str, list[float]] = defaultdict(list)
    for o in outcomes:
        if o.status != "failed" and o.max_score:
            by_assignment[o.assignment].append(100 * o.score / o.max_score)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    if by_assignment:
        ax.hist(
            list(by_assignment.values()), bins=list(range(0, 105, 5)), label=list(by_assignment), stacked=True
        )
        ax.legend(fontsize="small")
    ax.set_xlabel("score (% of points)")
    ax.set_ylabel("submissions")
    ax.set_title("scores")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def summary_text(outcomes: list[Outcome], rejected: list[Rejected], inputs: int) -> str:
    """The class summary as Markdown: accounting, the scores table, per-test pass rates, problems."""
    status = Counter(o.status for o in outcomes)
    lines = ["# Grading summary", ""]
    lines.append(
        f"{inputs} input files: {status['graded']} graded, {status['stopped']} graded but stopped early, "
        f"{status['failed']} failed, {len(rejected)} rejected."
    )
    accounted = status["graded"] + status["stopped"] + status["failed"] + len(rejected)
    lines.append(f"Accounted for: {accounted} of {inputs}" + ("" if accounted == inputs else " (MISMATCH)"))
    if outcomes and not all(o.jailed for o in outcomes):
        lines.append("")
        lines.append(
            "Warning: some notebooks ran without the jail (not root, or no mount namespaces here): their "
            "code could read files on this machine. Scores are still recomputed outside their kernels."
        )
    lines += ["", "## Scores", "", "| student | assignment | score | status |", "|---|---|---|---|"]
    for o in outcomes:
        lines.append(f"| {o.student} | {o.assignment} | {o.score:g} / {o.max_score:g} | {o.status} |")
    lines += [
        "",
        "## Pass rate per test",
        "",
        "| assignment | test | submissions | full points | mean |",
        "|---|---|---|---|---|",
    ]
    for assignment, test, n, full, mean in pass_rates(outcomes):
        lines.append(f"| {assignment} | {test} | {n} | {100 * full:.0f}% | {100 * mean:.0f}% |")
    problems = [o for o in outcomes if o.reason or o.restored]
    if problems or rejected:
        lines += ["", "## Problems", ""]
        for o in problems:
            why = "; ".join(x for x in [o.reason, *o.restored] if x)
            lines.append(f"- {o.student} / {o.assignment} ({o.origin}): {why}")
        for r in rejected:
            lines.append(f"- rejected {r.origin}: {r.reason}")
    return "\n".join(lines) + "\n"


def table(outcomes: list[Outcome]) -> str:
    """A plain-text table: one row per student, one column per assignment, then the total."""
    names = sorted({o.assignment for o in outcomes})
    rows: dict[str, dict[str, Outcome]] = defaultdict(dict)
    for o in outcomes:
        rows[o.student][o.assignment] = o
    header = ["student", *names, "total", "notes"]
    out = [header]
    for student in sorted(rows):
        row = rows[student]
        cells = []
        for a in names:
            o = row.get(a)
            cells.append("-" if o is None else f"{o.score:g} / {o.max_score:g}")
        total = sum(o.score for o in row.values())
        maximum = sum(o.max_score for o in row.values())
        stopped = [o for o in row.values() if o.reason]
        notes = ""
        if stopped:
            first = stopped[0].reason.split(", and was stopped")[0].split(" (in cell")[0]
            where = stopped[0].assignment if len(stopped) == 1 else f"{len(stopped)} notebooks"
            notes = f"stopped early ({where}): {first}" + ("; see the summary" if len(stopped) > 1 else "")
        out.append([student, *cells, f"{total:g} / {maximum:g}", notes])
    widths = [max(len(r[i]) for r in out) for i in range(len(header) - 1)]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + ("  " + r[-1] if r[-1] else "")
        for r in out
    )
