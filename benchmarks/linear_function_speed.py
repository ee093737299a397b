"""The reference ``LinearFunction`` (notebook 04) against ``torch.nn.functional.linear``.

    .venv/bin/python benchmarks/linear_function_speed.py [--sizes 8 64 512 1024] [--repeat 15]

Forward plus backward of a square layer (N = in = out = size) in float32 on one thread, the two
alternating, timed by the CPU time of the running thread (``time.thread_time``: wall-clock time on
a shared machine swings by 10%); prints the median time of each and their ratio. The solution's
class is taken from ``solutions/04_custom_functions.py`` itself, so this measures what learners are
graded against.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import jupytext
import torch
import torch.nn.functional as F

from autograder.course.build import SOLUTIONS


def load_linear_function() -> type:
    """Execute the setup cell and the LinearFunction answer cell of notebook 04's source."""
    nb = jupytext.read(SOLUTIONS / "04_custom_functions.py", fmt="py:percent")
    namespace: dict = {}
    for cell in nb.cells:
        if cell.metadata.get("grade_id") in ("setup", "linear_function"):
            exec(compile(cell.source, "04_custom_functions.py", "exec"), namespace)  # noqa: S102 - our own source
    return namespace["LinearFunction"]


def step(fn, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, g: torch.Tensor) -> float:
    """CPU seconds of one forward plus backward."""
    start = time.thread_time()
    out = fn(x, w, b)
    out.backward(g)
    return time.thread_time() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 64, 512, 1024])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    linear_function = load_linear_function()
    print(f"{'size':>6} {'LinearFunction':>15} {'F.linear':>10} {'ratio':>6}")
    for n in args.sizes:
        x = torch.randn(n, n, requires_grad=True)
        w = torch.randn(n, n, requires_grad=True)
        b = torch.randn(n, requires_grad=True)
        g = torch.randn(n, n)
        ours, theirs = [], []
        for _ in range(3):  # warm-up
            step(linear_function.apply, x, w, b, g)
            step(F.linear, x, w, b, g)
        for _ in range(args.repeat):
            ours.append(step(linear_function.apply, x, w, b, g))
            theirs.append(step(F.linear, x, w, b, g))
        a, c = statistics.median(ours), statistics.median(theirs)
        print(f"{n:>6} {a * 1e3:>12.3f} ms {c * 1e3:>7.3f} ms {a / c:>6.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
