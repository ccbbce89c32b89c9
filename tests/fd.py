"""Helpers shared by the gradient tests: central differences of a scalar function, a scalar loss
made of a function's results with fixed random weights, and `grad` of a Python function through
the builtins' own autodiff (PyInterp stands in for the builtins' Context: it calls Python functions)."""
import numpy as np

from tapeml.array import ops
from tapeml.array.tape import raw
from tapeml.builtins.autodiff import value_and_grad_impl


def leaves(v):
    """The matrices and numbers of a (possibly nested) tuple result, in order."""
    r = raw(v)
    return [x for item in r for x in leaves(item)] if isinstance(r, tuple) else [v]


def fd_grad(f, x, h=1e-6):
    """Central differences of the scalar function f at x, element by element."""
    x = np.asarray(x, dtype=np.float64)
    g = np.zeros_like(x)
    for i in range(x.size):
        xp, xm = x.copy(), x.copy()
        xp.flat[i] += h
        xm.flat[i] -= h
        g.flat[i] = (float(raw(f(xp))) - float(raw(f(xm)))) / (2 * h)
    return g


def weighted(f, inputs, seed=1):
    """loss(args) = sum over results of sum(result * R), R fixed pseudo-random weights."""
    rng = np.random.default_rng(seed)
    Rs = [rng.standard_normal(np.shape(raw(y))) for y in leaves(f(*inputs))]

    def loss(*args):
        total = 0.0
        for y, R in zip(leaves(f(*args)), Rs):
            total = ops.add(total, ops.sum_(ops.mul(y, R)))
        return total
    return loss


class PyInterp:
    """Calls Python functions where the builtins expect their Context (lang/array/context.py)."""

    @staticmethod
    def call(f, *args, **kwargs):
        return f(*args, **kwargs)

    @staticmethod
    def argument_name(i):
        return None


def grad(f, x):
    """grad of the Python function f at x (a matrix, a number or a tree), on the tape."""
    return value_and_grad_impl(PyInterp(), f, x)[1]
