"""The grader scores several notebooks at once, in threads of one process (``engine/grade.py``; the Dask
executor's client too): what one thread's scoring computes must not depend on what the others do
meanwhile. torch's default generator is one per process, and some references draw from it after
seeding it (``nn.Linear``'s initialisation, in notebook 04's graders): while another thread seeded
it between, a correct Linear lost 0.57 points, diagnosed as "a different initialisation or order of
draws", about once in four runs of ten notebooks on two workers.
"""

from __future__ import annotations

import sys
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from autograder.checks.compare import compare
from autograder.grading.custom_functions import linear_module, train_spiral


@pytest.fixture
def switching_often():
    """Threads take turns every microsecond (five milliseconds by default), so that one thread's
    seeded block is all but sure to be cut by the others' if nothing keeps them out."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def _cases() -> list[tuple[object, object]]:
    """(reference, its argument): nn.Linear's initialisation, the bias-first mistake's and the course's
    spiral run, for different seeds and shapes."""
    shapes = [{"torch_seed": 1000 + i, "in": 5 + i, "out": 2 + i % 3, "bias": i % 2 == 0} for i in range(6)]
    cases: list[tuple[object, object]] = [(linear_module._nn_linear_params, s) for s in shapes]
    cases += [(linear_module._bias_first_params, s) for s in shapes]
    cases += [(train_spiral.reference_train_spiral, seed) for seed in (3, 4)]
    return cases


def _same(a: object, b: object) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    return bool(np.array_equal(np.asarray(a), np.asarray(b)))


def test_seeded_references_are_the_same_whatever_the_other_threads_draw(switching_often) -> None:
    cases = _cases()
    alone = [reference(argument) for reference, argument in cases]
    jobs = [i % len(cases) for i in range(12 * len(cases))]

    def run(i: int) -> bool:
        reference, argument = cases[i]
        return _same(reference(argument), alone[i])

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(run, jobs))
    wrong = sorted({cases[i][0].__name__ for i, ok in zip(jobs, results, strict=True) if not ok})
    assert not wrong, f"references that changed when computed beside other threads: {wrong}"
    # and the generator of the thread that asked is as it was before (each block puts it back)
    assert _same(linear_module._nn_linear_params(cases[0][1]), alone[0])


def test_comparing_in_threads_leaves_the_warning_filters_as_they_were(switching_often) -> None:
    """``compare`` silences warnings while it works (Python 3.11's filters are one list per process):
    threads comparing at once once left "ignore" first in that list for good, and the grader's process
    silenced every warning after (found by an audit of the scoring threads, on 3 runs of 3)."""
    before = list(warnings.filters)
    ref = np.arange(6.0).reshape(2, 3)
    with ThreadPoolExecutor(8) as pool:
        oks = list(pool.map(lambda i: compare("x", ref * (1 + i % 2), ref).ok, range(2000)))
    assert oks == [i % 2 == 0 for i in range(2000)]
    assert warnings.filters == before
