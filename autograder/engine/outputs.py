"""What grading leaves behind, for the whole course: feedback pages, grades CSV, per-student totals,
a class summary, a histogram and the files to import into the LMS.

Every output describes the course (every assignment, every run so far), not one command: it is
rebuilt by :func:`write_report` from the stored outcomes (``<course>/autograder/results/``), the
ledger of input files every run kept (``<course>/autograder/runs.jsonl``) and the final scores in
nbgrader's gradebook (:func:`autograder.engine.gradebook.final_scores`: manual adjustments made in
formgrader and late penalties included). ``python -m autograder report`` runs it without grading.

The feedback a learner reads is built here from trusted results only: the check reports the engine
recomputed, the learner's own answer code, and the reason when something stopped the notebook.
No test cell source (hidden or not) and no traceback from a test cell is ever written into it.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from autograder.course import Assignment
from autograder.engine import gradebook, lms, untrusted
from autograder.engine.feedback import write_feedback
from autograder.engine.intake import Rejected
from autograder.engine.outcome import Outcome, result_store

CSV_COLUMNS = [
    "student",
    "name",
    "lms_id",
    "assignment",
    "score",
    "max_score",
    "automatic_score",
    "adjustment",
    "status",
    "late",
    "submitted",
    "reason",
    "file",
]


def write_csv(path: Path, outcomes: list[Outcome], rejected: list[Rejected]) -> None:
    """One row per input file of the course: graded, stopped and failed submissions (final scores),
    then files of other assignments set aside, then rejected files; every row names its student
    (``(unknown)`` when the file did not say)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        w = untrusted.CsvWriter(f)
        w.writerow(CSV_COLUMNS)
        for o in outcomes:
            auto = sum(c.score for c in o.cells) if o.status != "failed" else 0.0
            late = "late" if o.late else ""
            w.writerow(
                [
                    o.student,
                    o.name,
                    o.lms_id,
                    o.assignment,
                    o.score,
                    o.max_score,
                    auto,
                    o.adjustment,
                    o.status,
                    late,
                    o.timestamp,
                    o.reason or "",
                    o.origin,
                ]
            )
        for r in sorted(rejected, key=lambda r: (not r.other_assignment, r.origin)):
            status = "other assignment" if r.other_assignment else "rejected"
            w.writerow(
                [
                    r.student or "(unknown)",
                    "",
                    "",
                    r.assignment,
                    "",
                    "",
                    "",
                    "",
                    status,
                    "",
                    "",
                    r.reason,
                    r.origin,
                ]
            )


def write_totals(path: Path, outcomes: list[Outcome], finals: dict) -> None:
    """Per-student totals: one row per student, a column per assignment, the total and the maximum."""
    names = sorted({o.assignment for o in outcomes})
    rows: dict[str, dict[str, Outcome]] = defaultdict(dict)
    for o in outcomes:
        rows[o.student][o.assignment] = o
    maxima = {o.assignment: o.max_score for o in outcomes}
    with path.open("w", newline="", encoding="utf-8") as f:
        w = untrusted.CsvWriter(f)
        w.writerow(["student", "name", "email", "lms_id", *names, "total", "max_total"])
        for student in sorted(rows):
            got = rows[student]
            any_o = next(iter(got.values()))
            final = next((finals[(student, a)] for a in got if (student, a) in finals), None)
            name = (
                " ".join(x for x in (final.first_name, final.last_name) if x) if final else ""
            ) or any_o.name
            w.writerow(
                [
                    student,
                    name,
                    final.email if final else "",
                    any_o.lms_id,
                    *(got[a].score if a in got else "" for a in names),
                    sum(o.score for o in got.values()),
                    sum(maxima[a] for a in names),
                ]
            )


def pass_rates(outcomes: list[Outcome]) -> list[tuple[str, str, int, float, float]]:
    """(assignment, test, submissions, share with full points, mean score / points) per graded cell."""
    stats: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for o in outcomes:
        if o.status == "failed":
            continue
        for c in o.cells:
            stats[(o.assignment, c.grade_id)].append((c.score, c.points))
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


def summary_text(
    outcomes: list[Outcome], rejected: list[Rejected], runs: list[dict], warnings: list[str] | None = None
) -> str:
    """The course summary as Markdown: warnings, the accounting of every run, the final scores, the
    pass rate of every test, every problem, and the files set aside and rejected.

    Every name, file name, reason, note and kernel text is written through :func:`untrusted.markdown`:
    none can end a table row, start a heading, or hold a link, an image, HTML or code."""
    md = untrusted.markdown
    status = Counter(o.status for o in outcomes)
    aside = [r for r in rejected if r.other_assignment]
    refused = [r for r in rejected if not r.other_assignment]
    lines = [
        "# Grading summary",
        "",
        f"{len(outcomes)} submissions in the course: {status['graded']} graded, "
        f"{status['stopped']} graded but stopped early, {status['failed']} failed; "
        f"{len(refused)} files rejected, {len(aside)} files of other assignments set aside.",
    ]
    for warning in warnings or []:
        lines += ["", f"**WARNING: {md(warning, 4_000)}**"]
    if outcomes and not all(o.jailed for o in outcomes):
        lines += [
            "",
            "Warning: some notebooks ran without the jail (not root, or no mount namespaces here): their "
            "code could read files on this machine. Scores are still recomputed outside their kernels.",
        ]
    lines += _runs_section(runs) + _scores_section(outcomes) + _problems_section(outcomes, refused)
    if aside:
        lines += ["", "## Files of other assignments (set aside, not graded in that run)", ""]
        lines.extend(
            f"- {md(r.origin)} (student {md(r.student or 'unknown')}): {md(r.assignment)}" for r in aside
        )
    return "\n".join(lines) + "\n"


#: What a run's counts account for: every input file is one of these.
_ACCOUNTED = ("graded", "skipped", "rejected", "other", "not_graded")


def _runs_section(runs: list[dict]) -> list[str]:
    """The summary's accounting of every run: one row per run, and the last run's total."""
    if not runs:
        return []
    md = untrusted.markdown
    lines = [
        "",
        "## Runs",
        "",
        "| when | assignment | input | files | graded now | already graded | "
        "rejected | other assignments | note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        c = run.get("counts", {})
        accounted = sum(c.get(k, 0) for k in _ACCOUNTED)
        note = md(run.get("note", ""), 4_000)
        if accounted != c.get("inputs", 0):
            note = (note + "; " if note else "") + f"MISMATCH: {accounted} accounted for"
        lines.append(
            f"| {md(run.get('time', ''))} | {md(run.get('assignment', ''))} | "
            f"{md(run.get('inputs', ''))} | "
            f"{c.get('inputs', 0)} | {c.get('graded', 0)} | {c.get('skipped', 0)} | "
            f"{c.get('rejected', 0)} | {c.get('other', 0)} | {note} |"
        )
    last = runs[-1].get("counts", {})
    accounted = sum(last.get(k, 0) for k in _ACCOUNTED)
    return [
        *lines,
        "",
        f"Last run: accounted for: {accounted} of {last.get('inputs', 0)} input files"
        + ("" if accounted == last.get("inputs", 0) else " (MISMATCH)"),
    ]


def _scores_section(outcomes: list[Outcome]) -> list[str]:
    """The summary's final scores, one row per submission, and the pass rate of every test."""
    md = untrusted.markdown
    lines = [
        "",
        "## Scores",
        "",
        "| student | name | assignment | score | status | late | note |",
        "|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        lines.append(
            f"| {md(o.student)} | {md(o.name)} | {md(o.assignment)} | {o.score:g} / {o.max_score:g} | "
            f"{md(o.status)} | {'late' if o.late else ''} | {md(o.adjustment)} |"
        )
    lines += [
        "",
        "## Pass rate per test",
        "",
        "| assignment | test | submissions | full points | mean |",
        "|---|---|---|---|---|",
    ]
    for assignment, test, n, full, mean in pass_rates(outcomes):
        lines.append(f"| {md(assignment)} | {md(test)} | {n} | {100 * full:.0f}% | {100 * mean:.0f}% |")
    return lines


def _problems_section(outcomes: list[Outcome], refused: list[Rejected]) -> list[str]:
    """The summary's problems: every submission that did not simply run (why), and every rejected file."""
    md = untrusted.markdown
    problems = [o for o in outcomes if o.reason or o.restored or o.regraded or o.flags]
    if not (problems or refused):
        return []
    lines = ["", "## Problems", ""]
    for o in problems:
        flags = [f"method check: {f}" for f in o.flags]
        why = "; ".join(x for x in [o.reason, *o.restored, o.regraded, *flags] if x)
        lines.append(f"- {md(o.student)} / {md(o.assignment)} ({md(o.origin)}): {md(why, 4_000)}")
    for r in refused:
        lines.append(f"- rejected {md(r.origin)} (student {md(r.student or 'unknown')}): {md(r.reason)}")
    return lines


def table(outcomes: list[Outcome]) -> str:
    """A plain-text table for the terminal: one row per student, one column per assignment, then the
    total; names and notes through :func:`untrusted.terminal` (no escape sequence reaches the terminal)."""
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
            first = _headline(stopped[0])
            where = stopped[0].assignment if len(stopped) == 1 else f"{len(stopped)} notebooks"
            notes = f"stopped early ({where}): {first}" + ("; see the summary" if len(stopped) > 1 else "")
        out.append(
            [untrusted.terminal(student, 200), *cells, f"{total:g} / {maximum:g}", untrusted.terminal(notes)]
        )
    widths = [max(len(r[i]) for r in out) for i in range(len(header) - 1)]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + ("  " + r[-1] if r[-1] else "")
        for r in out
    )


# -- the course's record and its report -------------------------------------------------------------


#: The roster of the last run that gave one, kept in ``<course>/autograder/`` for ``report``.
ROSTER_COPY = "roster.csv"


def read_results(root: Path) -> tuple[list[Outcome], list[str]]:
    """Every stored outcome of the course and a sentence for each that cannot be used
    (:meth:`~autograder.engine.outcome.ResultStore.read_all`)."""
    return result_store(root).read_all()


def runs_path(root: Path) -> Path:
    """The ledger of every run's input files: one JSON line per run."""
    return root / "autograder" / "runs.jsonl"


def record_run(root: Path, run: dict) -> None:
    """Append one run (its time, input, counts, rejected and set-aside files, notes) to the ledger."""
    path = runs_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(run) + "\n")


def load_runs(root: Path) -> list[dict]:
    """The runs recorded so far, oldest first."""
    path = runs_path(root)
    if not path.exists():
        return []
    runs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            runs.append(json.loads(line))
        except ValueError:
            continue
    return runs


def _latest_rejections(runs: list[dict], outcomes: list[Outcome]) -> list[Rejected]:
    """Each rejected or set-aside file once (its latest verdict), unless it was graded since."""
    graded = {o.origin for o in outcomes}
    latest: dict[str, Rejected] = {}
    for run in runs:
        for r in run.get("rejected", []):
            latest[r["origin"]] = Rejected(**r)
    return [r for origin, r in sorted(latest.items()) if origin not in graded]


def with_final_scores(outcomes: list[Outcome], finals: dict) -> list[Outcome]:
    """Copies of the outcomes whose scores are the gradebook's final ones, with what changed them."""
    result = []
    for o in outcomes:
        f = finals.get((o.student, o.assignment))
        if f is None or o.status == "failed":
            result.append(o)
            continue
        notes = []
        if f.manual and abs(f.raw_score - o.score) > 1e-9:
            notes.append(f"adjusted by the instructor to {f.raw_score:g} (automatic score {o.score:g})")
        if f.late_penalty:
            notes.append(f"late penalty of {f.late_penalty:g} points")
        name = " ".join(x for x in (f.first_name, f.last_name) if x) or o.name
        late = o.late or f.seconds_late > 0  # the LMS's flag, or the submission time after the due date
        result.append(replace(o, score=round(f.score, 6), adjustment="; ".join(notes), name=name, late=late))
    return result


def _headline(o: Outcome) -> str:
    """Why a notebook stopped, in a few words; a failure's reason (which has no stop) as it is."""
    return o.stop.headline() if o.stop else o.failure or ""


@dataclass
class Report:
    """What :func:`write_report` wrote, and what it read."""

    outcomes: list[Outcome]
    rejected: list[Rejected]
    files: dict[str, Path] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def write_submitted(
    root: Path,
    outcomes: list[Outcome],
    paths: dict[tuple[str, str], Path],
    assignments: dict[str, Assignment],
) -> None:
    """Copy each graded notebook into nbgrader's ``submitted/<student>/<assignment>/`` with its
    ``timestamp.txt``, where formgrader counts and opens submissions."""
    for o in outcomes:
        source = paths.get((o.student, o.assignment))
        if source is None:
            continue
        a = assignments[o.assignment]
        folder = root / "submitted" / o.student / a.name
        if (folder / a.notebook).exists() and (folder / a.notebook).samefile(source):
            continue  # graded where nbgrader's collect put it: its files stay as they are
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, folder / a.notebook)
        if o.timestamp:
            from nbgrader.utils import parse_utc

            (folder / "timestamp.txt").write_text(
                parse_utc(o.timestamp).strftime("%Y-%m-%d %H:%M:%S.%f UTC"), encoding="utf-8"
            )


def write_report(
    root: Path,
    db_url: str,
    out: Path,
    assignments: dict[str, Assignment],
    warnings: list[str] | None = None,
) -> Report:
    """Write every output of the course from its record and the gradebook's final scores, without
    grading: grades CSV, per-student totals, summary, histogram, feedback pages, LMS import files."""
    warnings = list(warnings or [])
    stored, unreadable = read_results(root)
    warnings += unreadable
    outcomes = [o for o in stored if o.assignment in assignments]
    try:
        finals = gradebook.final_scores(db_url)
    except Exception as exc:  # noqa: BLE001 - the outputs are written anyway, the failure stated
        finals = {}
        warnings.append(
            f"the gradebook could not be read ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); "
            "the scores below are the automatic ones, without manual adjustments or late penalties"
        )
    outcomes = with_final_scores(outcomes, finals)
    runs = load_runs(root)
    rejected = _latest_rejections(runs, outcomes)
    report = Report(outcomes, rejected, warnings=warnings)
    out.mkdir(parents=True, exist_ok=True)
    warnings += write_feedback(root, outcomes, assignments)
    files = report.files
    files["grades"] = out / "grades.csv"
    write_csv(files["grades"], outcomes, rejected)
    files["totals"] = out / "totals.csv"
    write_totals(files["totals"], outcomes, finals)
    files["histogram"] = out / "scores.png"
    histogram(files["histogram"], outcomes)
    files.update(lms.write_import_files(out, outcomes, finals, root / "autograder" / ROSTER_COPY, warnings))
    files["summary"] = out / "summary.md"
    files["summary"].write_text(summary_text(outcomes, rejected, runs, warnings), encoding="utf-8")
    return report


def rejected_dict(r: Rejected) -> dict:
    """A rejected file as the run ledger stores it."""
    return asdict(r)
