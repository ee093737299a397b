"""The comparison table for "try it" cells: your values next to PyTorch's, one row per tensor."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

import numpy as np

from autograder.checks.compare import Verdict
from autograder.checks.compare import compare as compare_one
from autograder.checks.tolerances import FLOAT64, Tolerance


@dataclass(frozen=True)
class ComparisonTable:
    """Rows of verdicts, shown as text (``print``) or as an HTML table in JupyterLab."""

    verdicts: tuple[Verdict, ...]

    @property
    def all_ok(self) -> bool:
        """True when every row matches."""
        return all(v.ok for v in self.verdicts)

    def rows(self) -> list[tuple[str, str, str, str, str]]:
        """(name, shape ok, max abs error, max relative error, verdict) for each row, as text.

        The relative error of one element is ``|yours - ref| / max(|yours| + |ref|, 1e-8)``: 0 for
        equal numbers, at most 1, about 1e-16 for float64 rounding and up to about 3e-8 for a value
        rounded to float32 (notebook 01, "Reading the table", shows both).
        """
        out = []
        for v in self.verdicts:
            abs_err = "-" if v.max_abs_err is None else f"{v.max_abs_err:.1e}"
            rel_err = "-" if v.max_rel_err is None else f"{v.max_rel_err:.1e}"
            verdict = "ok" if v.ok else seen(v)
            out.append((v.name, "yes" if v.shape_ok else "no", abs_err, rel_err, verdict))
        return out

    def __repr__(self) -> str:
        header = ("name", "shape ok", "max abs err", "max rel err", "verdict")
        rows = [header, *self.rows()]
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        lines = [
            "  ".join(c.ljust(w) for c, w in zip(r[:4], widths, strict=True)) + "  " + r[4] for r in rows
        ]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{h}</th>" for h in ("name", "shape ok", "max abs err", "max rel err", "verdict"))
        body = "".join(
            "<tr>" + "".join(f"<td style='text-align:left'>{html.escape(c)}</td>" for c in row) + "</tr>"
            for row in self.rows()
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


#: Candidate causes that follow a pattern (after ``: `` or `` (``) are the graded check's to name;
#: a pattern that is itself only a guess at a cause is left out whole.
_GUESSES = ("an overflow",)


def seen(verdict: Verdict) -> str:
    """A failing row's verdict: what was found, and the pattern the values show when there is one.

    A try-it cell sees two arrays and nothing else (not whether an argument was changed in place, not
    the other cases the graded test runs), so it never names a cause: where the comparison's likely
    mistake is a question ("all zeros: is the computation missing, or a placeholder left in?"), only
    the pattern before the question is shown ("all zeros"). The graded test cell, which sees more,
    names the cause when it can tell.
    """
    pattern = verdict.likely
    if pattern and pattern.rstrip(")").endswith("?"):
        cuts = [i for i in (pattern.find(": "), pattern.find(" (")) if i > 0]
        pattern = pattern[: min(cuts)] if cuts else None
        if pattern and pattern.startswith(_GUESSES):
            pattern = None
    if not pattern:
        return verdict.detail
    return f"{verdict.detail} The values: {pattern}{'' if pattern.endswith('.') else '.'}"


def compare(tol: Tolerance = FLOAT64, **pairs: tuple[Any, Any]) -> ComparisonTable:
    """Compare your values with reference values, one table row per keyword.

    Introduced in notebook 01. Usage: ``compare(dx=(dx, dx_ref), dW=(dW, dW_ref))``. Each row says
    whether the shape matches, the largest absolute error ``|yours - ref|`` and the largest relative
    error ``|yours - ref| / (|yours| + |ref|)`` (a denominator below 1e-8 counts as 1e-8), and a
    verdict that says what was found and the pattern the values show, when there is one (``ok`` when
    every element is within ``tol``): sign flipped, transposed, all zeros, a constant factor. The graded
    test cell names the cause when it can tell; this table never guesses one. Uses the same comparison
    as the graded checks; values of any floating dtype are accepted here, float32 with float32's
    tolerance (the graded checks ask for float64).
    """
    verdicts = []
    for name, pair in pairs.items():
        if not (isinstance(pair, tuple) and len(pair) == 2):
            raise TypeError(f"compare({name}=...) takes a pair (yours, reference), got {type(pair).__name__}")
        mine, ref = pair
        if isinstance(ref, (list, tuple)):
            ref = np.asarray(ref, dtype=np.float64)  # a reference typed in as a list is still a reference
        verdicts.append(compare_one(name, mine, ref, tol=tol, dtype=None))
    return ComparisonTable(tuple(verdicts))
