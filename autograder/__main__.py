"""Command line: ``python -m autograder {build,validate,grade,serve,report,check,gradescope,demo}``
(each with ``--help``)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from autograder.course import COURSE, NOTEBOOKS, SOLUTIONS, CourseError
from autograder.engine.contract import Limits
from autograder.engine.untrusted import clean, terminal

GIB, MIB = 1024**3, 1024**2


def _build(args: argparse.Namespace) -> int:
    from autograder.course.build import build

    for path in build(root=args.course, out=args.out):
        print(f"wrote {path}")
    return 0


def _validate(args: argparse.Namespace) -> int:
    from autograder.course.validate import validate_course

    results = validate_course(root=args.course, notebooks=args.notebooks)
    for r in results:
        status = "ok  " if r.ok else "FAIL"
        print(f"{status} {r.kind:<8} {r.notebook.name}  ({r.seconds:.1f} s)")
        for problem in r.problems:
            print(f"       {problem}")
    return 0 if all(r.ok for r in results) else 1


def _grade(args: argparse.Namespace) -> int:
    ahead = _runners_ahead(args)
    try:
        return _grade_with(args, ahead)
    finally:
        if ahead is not None:
            ahead.close()  # already closed by the grader, unless the run ended before it started


def _runners_ahead(args: argparse.Namespace):  # noqa: ANN202 - a LocalExecutor, imported here
    """This machine's runners, started before anything else of the command (its imports, the gradebook's
    check, intake): their zygotes' imports are what the first notebook waits for. As many as the
    notebooks given, up to the workers; None with a scheduler (the notebooks run on its cluster)."""
    if args.scheduler:
        return None
    from autograder.engine.executor import LocalExecutor, course_kinds, when_to_warm

    ahead = LocalExecutor()
    try:
        files = _notebook_files(args.submissions)
        count = min(args.workers or os.cpu_count() or 1, max(1, files))
        leased = _resident_runners(args, ahead, count)
        if count > leased:
            kinds = course_kinds(args.course, args.assignment)
            ahead.start_runners(count - leased, kinds, when_to_warm(files, count))
    except Exception:  # noqa: BLE001 - only a head start: the grader starts its runners itself
        ahead.close()
        return None
    return ahead


def _resident_runners(args: argparse.Namespace, ahead, count: int) -> int:  # noqa: ANN001
    """Lease up to ``count`` runners of this user's resident service (``serve``) for ``ahead``, unless
    ``--own-runners``; print which runners the command uses, and why not the service's. How many leased."""
    from autograder.engine import resident

    if args.own_runners:
        print("runners: own (--own-runners)", file=sys.stderr, flush=True)
        return 0

    def jailed() -> bool:
        from autograder.engine.jail import jail_available

        return not args.no_jail and jail_available()

    runners, line = resident.lease(count, jailed, ahead.work)
    if line:  # it quotes what the service said
        from autograder.engine.untrusted import terminal

        print(terminal(line), file=sys.stderr, flush=True)
    ahead.use_runners(runners)
    return len(runners)


def _serve(args: argparse.Namespace) -> int:
    from autograder.engine.service import serve_command

    return serve_command(args.workers or os.cpu_count() or 1, args.kinds, args.idle)


def _notebook_files(submissions: Path, most: int = 64) -> int:
    """How many notebooks the folder ``submissions`` seems to hold, counting up to ``most``: a guess, by
    name only, of how many runners the run can use. A zip (an LMS export) is not opened here: it is
    untrusted, and intake reads it within its bounds; the guess for it is ``most``."""
    try:
        if not submissions.is_dir():
            return most
        count = 0
        for _ in submissions.rglob("*.ipynb"):
            count += 1
            if count >= most:
                break
        return count
    except (OSError, ValueError):
        return most


def _grade_with(args: argparse.Namespace, ahead) -> int:  # noqa: ANN001
    from autograder.engine import outputs
    from autograder.engine.gradebook import GradebookError
    from autograder.engine.pipeline import grade_class
    from autograder.engine.roster import RosterError

    unreachable: tuple[type[Exception], ...] = ()
    if args.scheduler:
        from autograder.engine.distributed import ClusterUnavailable

        unreachable = (ClusterUnavailable,)

    limits = limits_from(args)
    use_jail = False if args.no_jail else None
    try:
        result = grade_class(
            args.submissions,
            args.assignment,
            root=args.course,
            solutions=args.solutions,
            workers=args.workers,
            force=args.force,
            db_url=args.db_url,
            limits=limits,
            use_jail=use_jail,
            out=args.out,
            roster=args.roster,
            due=args.due,
            late_penalty=args.late_penalty,
            withhold_flagged=args.withhold_flagged,
            scheduler=args.scheduler,
            executor=ahead,
        )
    except (GradebookError, RosterError, *unreachable) as exc:
        print(f"error: {terminal(exc)}. Nothing was graded.", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # before grading started (building the course, reading the export) or while writing outputs
        print("\nInterrupted. Run the same command again: what was graded is kept.", file=sys.stderr)
        return 130
    print(outputs.table(result.outcomes))
    for r in result.rejected:
        if not r.other_assignment:
            print(f"rejected {terminal(r.origin)}: {terminal(r.reason)}")
    aside = [r for r in result.rejected if r.other_assignment]
    if aside:
        print(f"{len(aside)} files of other assignments set aside (listed in the summary)")
    _print_files(result.files, args.course)
    for warning in result.warnings:
        print(f"\nWARNING: {terminal(warning).rstrip('.')}.", file=sys.stderr)
    if result.lost:
        return 4
    if result.interrupted:
        return 130
    if result.systemic:
        return 3
    return 1 if result.gradebook_error else 0


def limits_from(args: argparse.Namespace) -> Limits:
    """The limits the grade command's options set (the others as :class:`Limits` has them)."""
    return Limits(
        cell_seconds=args.cell_timeout,
        notebook_seconds=args.notebook_timeout,
        memory_bytes=int(args.memory_gb * GIB),
        output_bytes=int(args.output_mb * MIB),
    )


def _print_files(files: dict[str, Path], course: Path) -> None:
    print()
    for key, path in files.items():
        print(f"{key + ':':<12} {path}")
    print(f"{'feedback:':<12} {course / 'feedback'}")


def _report(args: argparse.Namespace) -> int:
    from autograder.engine import outputs
    from autograder.engine.pipeline import report_course

    report = report_course(args.course, args.solutions, db_url=args.db_url, out=args.out)
    print(outputs.table(report.outcomes))
    _print_files(report.files, args.course)
    for warning in report.warnings:
        print(f"\nWARNING: {terminal(warning)}.", file=sys.stderr)
    return 0


def _check(args: argparse.Namespace) -> int:
    from autograder.engine.check import check_notebook

    live = None if args.quiet else sys.stdout
    if live:
        name = terminal(args.notebook.name)
        print(f"Checking {name} with the tests you can see; each result as its cell runs.\n", flush=True)
    outcome = check_notebook(args.notebook, args.solutions, out=live)
    print(f"{outcome.assignment}: {outcome.score:g} / {outcome.max_score:g} points\n")
    if outcome.reason:
        print(f"Stopped early: {terminal(outcome.reason)}.\n")
    for note in outcome.restored + outcome.errors:
        print(f"Note: {terminal(note)}")
    for cell in outcome.cells:
        if live and not cell.feedback.startswith("not graded"):
            continue  # already shown as its cell ran
        feedback = clean(cell.feedback)  # several lines, none with an escape sequence
        print(feedback if feedback.startswith(cell.grade_id) else f"{cell.grade_id}: {feedback}")
        print()
    return 0


def _gradescope(args: argparse.Namespace) -> int:
    from autograder.engine.gradescope import autograder_zip

    out = autograder_zip(args.assignment, args.out, args.solutions, args.visibility, args.torch_index)
    print(f"wrote {out}: upload it as the autograder of a Gradescope programming assignment")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from autograder.course.demo import DEMO_ROOT, run_demo

    run_demo(args.root or DEMO_ROOT, workers=args.workers)
    return 0


def _absolute(text: str) -> Path:
    """A folder given on the command line, made absolute: nbgrader opens its gradebook by an URL that a
    relative path would make relative to another folder."""
    return Path(text).resolve()


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser; each command's function is its ``run`` default."""
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    # The option of every command that works on the nbgrader course.
    course = argparse.ArgumentParser(add_help=False)
    course.add_argument(
        "--course",
        type=_absolute,
        default=COURSE,
        help="nbgrader course directory (default: course/)",
    )

    p = commands.add_parser(
        "build", parents=[course], help="regenerate the student versions in notebooks/ from solutions/"
    )
    p.add_argument(
        "--out", type=Path, default=NOTEBOOKS, help="where student versions go (default: notebooks/)"
    )
    p.set_defaults(run=_build)

    p = commands.add_parser(
        "validate", parents=[course], help="prove every solution gets full marks and every blank version zero"
    )
    p.add_argument("--notebooks", type=Path, default=NOTEBOOKS, help="student versions (default: notebooks/)")
    p.set_defaults(run=_validate)

    p = commands.add_parser(
        "grade",
        parents=[course],
        help="grade a class: every submission scored, with feedback, a grades CSV and a summary",
        description="Grade every submission of ASSIGNMENT (or all) found in SUBMISSIONS: nbgrader's "
        "submitted/<student>/<assignment>/ layout, or a flat folder or zip of files named "
        "<student>_..._<assignment>.ipynb as a learning-management system exports them.",
    )
    p.add_argument("assignment", help="assignment name, e.g. 01_linear_layer, or 'all'")
    p.add_argument("submissions", type=Path, help="folder or .zip of submissions")
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="notebooks graded at once (default: cores; with --scheduler, the cluster's worker threads)",
    )
    p.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="run the notebooks on the Dask cluster whose scheduler is at ADDRESS (e.g. tcp://host:8786); "
        "scores, gradebook and outputs stay here",
    )
    p.add_argument("--solutions", type=Path, default=SOLUTIONS, help="course sources (default: solutions/)")
    p.add_argument("--force", action="store_true", help="regrade submissions already graded")
    p.add_argument("--db-url", default=None, help="gradebook database URL (default: SQLite in the course)")
    p.add_argument(
        "--out", type=Path, default=None, help="summary and CSV folder (default: <course>/grading)"
    )
    limits = Limits()
    p.add_argument(
        "--cell-timeout",
        type=float,
        default=limits.cell_seconds,
        help=f"seconds a cell may run (default {limits.cell_seconds:g})",
    )
    p.add_argument(
        "--notebook-timeout",
        type=float,
        default=limits.notebook_seconds,
        help=f"seconds a notebook may run (default {limits.notebook_seconds:g})",
    )
    p.add_argument(
        "--memory-gb",
        type=float,
        default=limits.memory_bytes / GIB,
        help=f"address space per kernel in GiB (default {limits.memory_bytes / GIB:g})",
    )
    p.add_argument(
        "--output-mb",
        type=float,
        default=limits.output_bytes / MIB,
        help=f"output per notebook in MiB (default {limits.output_bytes / MIB:g})",
    )
    p.add_argument("--no-jail", action="store_true", help="run kernels without namespaces (not recommended)")
    p.add_argument(
        "--roster",
        type=Path,
        default=None,
        help="the class roster: a Canvas or Moodle gradebook export, a Moodle grading worksheet, or "
        "nbgrader's student list (CSV); files of students not on it are rejected",
    )
    p.add_argument(
        "--due", default=None, help="the due date of the assignments graded (e.g. 2026-10-01 23:59 UTC)"
    )
    p.add_argument(
        "--late-penalty",
        choices=["none", "zero"],
        default="none",
        help="nbgrader's late-submission penalty method (default none)",
    )
    p.add_argument(
        "--withhold-flagged",
        action="store_true",
        help="give 0 to the test cells of answers a method check flags (a numpy exercise answered with "
        "PyTorch, a backward that asks autograd); without it, flags are only reported",
    )
    p.add_argument(
        "--own-runners",
        action="store_true",
        help="start this command's own runners even when a resident service (serve) is running",
    )
    p.set_defaults(run=_grade)

    p = commands.add_parser(
        "serve",
        help="keep warm runners for the grade commands of this user on this machine (in the foreground)",
        description="Start runner processes with their kernels' imports done and warmed, and listen on a "
        "per-user socket: grade commands of the same user and code use them instead of starting their own "
        "(saving seconds per command). Stops on Ctrl-C, SIGTERM or after --idle seconds with no request.",
    )
    p.add_argument("--workers", type=int, default=None, help="runners kept warm (default: cores)")
    p.add_argument(
        "--kinds",
        default="numpy,torch,compile",
        help="kinds of kernel whose zygotes each runner keeps warm (default numpy,torch,compile)",
    )
    p.add_argument(
        "--idle", type=float, default=1800, help="stop after this many seconds with no request (0: never)"
    )
    p.set_defaults(run=_serve)

    p = commands.add_parser(
        "report",
        parents=[course],
        help="write every output again from the gradebook (manual scores included), without grading",
    )
    p.add_argument("--db-url", default=None, help="gradebook database URL (default: SQLite in the course)")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: <course>/grading)")
    p.add_argument("--solutions", type=Path, default=SOLUTIONS, help="course sources (default: solutions/)")
    p.set_defaults(run=_report)

    p = commands.add_parser(
        "check", help="grade your own notebook with the visible tests and show the feedback"
    )
    p.add_argument("notebook", type=Path, help="your notebook, e.g. notebooks/01_linear_layer.ipynb")
    p.add_argument("--quiet", action="store_true", help="print only the whole result, at the end")
    p.add_argument(
        "--solutions",
        type=Path,
        default=SOLUTIONS,
        help="course sources (default: solutions/ of the checkout this package is in)",
    )
    p.set_defaults(run=_check)

    p = commands.add_parser(
        "gradescope",
        help="write the autograder.zip that grades ASSIGNMENT on Gradescope with this engine",
        description="Write Gradescope's autograder.zip for ASSIGNMENT: setup.sh installs the course on "
        "Gradescope's image, run_autograder grades the submitted notebook (hidden tests included) and "
        "writes results.json, one test per graded cell.",
    )
    p.add_argument("assignment", help="assignment name, e.g. 01_linear_layer")
    p.add_argument("--out", type=Path, default=Path("autograder.zip"), help="default: autograder.zip")
    p.add_argument("--solutions", type=Path, default=SOLUTIONS, help="course sources (default: solutions/)")
    p.add_argument(
        "--visibility",
        choices=["hidden", "after_due_date", "after_published", "visible"],
        default="after_published",
        help="when learners see each graded cell's test, its score and the total (default after_published: "
        "every cell's score comes from its hidden test)",
    )
    p.add_argument(
        "--torch-index",
        default=None,
        metavar="URL",
        help="the package index setup.sh installs PyTorch from (e.g. PyTorch's CPU wheel index; default: "
        "requirements.txt's, the CUDA build on Linux)",
    )
    p.set_defaults(run=_gradescope)

    p = commands.add_parser(
        "demo", help="build the course, grade a demo class, print the scores (the main job)"
    )
    p.add_argument("--root", type=Path, default=None, help="demo folder (default: build/demo/)")
    p.add_argument("--workers", type=int, default=None, help="notebooks graded at once (default: cores)")
    p.set_defaults(run=_demo)

    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run one command; return its exit status."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    args = build_parser().parse_args(argv)
    from autograder.engine import light

    light.nbformat()  # before anything imports it: see autograder.engine.light
    try:
        return args.run(args)
    except CourseError as exc:
        print(f"error: {terminal(exc)}", file=sys.stderr)
        return 2


def exit_now(code: int) -> None:
    """End the command with ``code`` as the interpreter would, less its teardown of every module: with
    PyTorch loaded that teardown took a one-notebook ``grade`` seconds after its last output on a loaded
    machine (docs/speed.md). Threads that are not daemons are waited for and the exit handlers run (logging's
    flush, temporary folders' clean-up), as at a normal exit."""
    import atexit
    import threading

    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()  # noqa: SLF001 - what the interpreter's own exit runs first
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # a closed pipe: the interpreter would exit with 120 too
        code = code or 120
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
