# %% [markdown]
# # 01 · One linear layer by hand
#
# Placeholder intro.

# %%
import numpy as np

from autograder.checks import check_linear_layer
from utils import compare

# %% solution grade_id="linear_layer"
def linear_forward(x: np.ndarray, W: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, tuple]:
    """Compute ``out = x @ W.T + b``; x is (N, D), W is (M, D), b is (M,); out is (N, M)."""
    ### BEGIN SOLUTION
    out = x @ W.T + b
    cache = (x, W)
    ### END SOLUTION
    return out, cache


def linear_backward(dout: np.ndarray, cache: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of the loss with respect to x (N, D), W (M, D) and b (M,), given dout (N, M)."""
    ### BEGIN SOLUTION
    x, W = cache
    dx = dout @ W
    dW = dout.T @ x
    db = dout.sum(axis=0)
    ### END SOLUTION
    return dx, dW, db


# %% tests grade_id="test_linear_layer" points=4
"""linear_forward and linear_backward match PyTorch in shape, values and every gradient."""
score = check_linear_layer(linear_forward, linear_backward)
### BEGIN HIDDEN TESTS
score = check_linear_layer(linear_forward, linear_backward, seed=7)
### END HIDDEN TESTS
score
