"""What the notebooks import: comparison tables, data sets, plots and seeding. Never an answer."""

from utils.compare import ComparisonTable, compare
from utils.data import make_sine_regression, make_spiral
from utils.graph import draw_graph
from utils.plots import plot_decision_boundary, plot_fit, plot_losses
from utils.seeding import seed_everything

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
