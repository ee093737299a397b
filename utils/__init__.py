"""What the notebooks import: comparison tables, data sets, plots and seeding. Never an answer."""

from backprop_utils.compare import ComparisonTable, compare
from backprop_utils.data import make_sine_regression, make_spiral
from backprop_utils.graph import draw_graph
from backprop_utils.plots import plot_decision_boundary, plot_fit, plot_losses
from backprop_utils.seeding import seed_everything

__all__ = [
    "ComparisonTable",
    "compare",
    "draw_graph",
    "make_sine_regression",
    "make_spiral",
    "plot_decision_boundary",
    "plot_fit",
    "plot_losses",
    "seed_everything",
]
