"""The collect halves of the numpy notebooks (01 and 02) run in a kernel that has no PyTorch.

A graded Part I kernel has no torch, and no grading half: everything its test cells import must
work without either. Each test runs a fresh interpreter, so that nothing this test session has
already imported (torch, the graders) can hide an import.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from autograder.checks import ENTRY_POINTS

NUMPY_NOTEBOOKS = ("linear_layer", "two_layer_net")


def run_python(code: str) -> dict:
    """Run ``code`` in a fresh interpreter; it prints one JSON object last, which is returned."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_check_of_notebooks_01_and_02_imports_and_collects_with_torch_blocked():
    names = [name for module in NUMPY_NOTEBOOKS for name in ENTRY_POINTS[module]]
    result = run_python(
        f"""
        import contextlib, io, json, sys
        import numpy as np
        sys.modules["torch"] = None  # any "import torch" now raises ImportError

        from autograder.checks import {", ".join(names)}
        from autograder.checks.two_layer_net import RELU, TWO_LAYER_NET

        def relu_forward(x):
            return np.maximum(x, 0.0), x

        def relu_backward(dout, cache):
            return dout * (cache > 0)

        def two_layer_net(params, X, y=None, reg=0.0):
            raise NotImplementedError()

        evidence = RELU.collect(relu_forward, relu_backward, seed=3)
        net = TWO_LAYER_NET.collect(two_layer_net, seed=0)
        loaded = sorted(m for m in sys.modules if m.startswith(("torch.", "autograder.grading")))
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            score = check_relu(relu_forward, relu_backward)
        print(json.dumps({{
            "dx": evidence["cases"]["N=4, D=5"]["outputs"]["dx"].tolist(),
            "error": evidence["cases"]["N=4, D=5"]["error"],
            "score": score,
            "printed": printed.getvalue(),
            "net_error": net["cases"]["N=1"]["loss"]["error"],
            "loaded": loaded,
        }}))
        """
    )
    assert result["error"] is None and len(result["dx"]) == 4
    # in such a kernel a test cell records its evidence, cannot grade it (the graders need torch),
    # and says so
    assert result["score"] == 0.0
    assert "recorded; the grading engine scores it outside your kernel" in result["printed"]
    assert "not implemented yet" in result["net_error"]
    assert result["loaded"] == []


def test_the_collect_modules_of_notebooks_01_and_02_import_neither_torch_nor_grading():
    result = run_python(
        f"""
        import json, sys
        for module in {list(NUMPY_NOTEBOOKS)!r}:
            __import__(f"autograder.checks.{{module}}")
        print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "torch"
                                or m.startswith("autograder.grading"))))
        """
    )
    assert result == []


def test_the_torch_free_test_can_fail():
    # notebook 03's collect module uses torch to run the learner's code: blocking torch must show
    result = run_python(
        """
        import json, sys
        sys.modules["torch"] = None
        try:
            from autograder.checks import check_sgd_step
        except ImportError as exc:
            print(json.dumps(str(exc)))
        else:
            print(json.dumps(None))
        """
    )
    assert result is not None and "torch" in result
