"""Helpers shared by the gradient tests: a builtin as a Python function, central differences of a
scalar function, a scalar loss made of a function's results with fixed random weights, `grad` of a
Python function through the builtins' own autodiff (PyInterp stands in for the
builtins' Context: it calls Python functions), and the check of every input's gradient against finite differences.
On another backend (`pytest --device torch:cpu`) the inputs, weights and perturbed copies are put on
it (`on_device`) and the gradients come back as NumPy arrays; on NumPy nothing is converted."""
import numpy as np

from tapeml.array import backend as B
from tapeml.array import ops
from tapeml.array.tape import raw
from tapeml.builtins.autodiff import value_and_grad_impl


def leaves(v):
    """The matrices and numbers of a (possibly nested) tuple result, in order."""
    r = raw(v)
    return [x for item in r for x in leaves(item)] if isinstance(r, tuple) else [v]


def on_device(x):
    """A NumPy array on the session's backend (itself on NumPy); other values as they are."""
    be = B.current()
    return x if be is B.NUMPY or type(x) is not np.ndarray else be.asarray(x)


def fd_grad(f, x, h=1e-6, device=True):
    """Central differences of the scalar function f at x, element by element; f gets its inputs
    on the session's device (device=False: as NumPy arrays, for a reference written in NumPy)."""
    x = np.asarray(x, dtype=np.float64)
    g = np.zeros_like(x)
    move = on_device if device else (lambda v: v)
    for i in range(x.size):
        xp, xm = x.copy(), x.copy()
        xp.flat[i] += h
        xm.flat[i] -= h
        g.flat[i] = (float(raw(f(move(xp)))) - float(raw(f(move(xm))))) / (2 * h)
    return g


def fd_jacobian(f, x, h=1e-6):
    """Central differences of f (array in, array out) at x: J[out index + in index]."""
    x = np.asarray(x, dtype=np.float64)
    y0 = np.asarray(raw(f(x)))
    J = np.zeros(y0.shape + x.shape)
    for i in range(x.size):
        xp, xm = x.copy(), x.copy()
        xp.flat[i] += h
        xm.flat[i] -= h
        J[(...,) + np.unravel_index(i, x.shape)] = (np.asarray(raw(f(xp))) - np.asarray(raw(f(xm)))) / (2 * h)
    return J


def weighted(f, inputs, seed=1):
    """loss(args) = sum over results of sum(result * R), R fixed pseudo-random weights."""
    rng = np.random.default_rng(seed)
    Rs = [on_device(rng.standard_normal(tuple(np.shape(raw(y))))) for y in leaves(f(*map(on_device, inputs)))]

    def loss(*args):
        total = 0.0
        for y, R in zip(leaves(f(*args)), Rs):
            total = ops.add(total, ops.sum_(ops.mul(y, R)))
        return total
    return loss


class PyInterp:
    """Calls Python functions where the builtins expect their Context (builtins/context.py)."""

    @staticmethod
    def call(f, *args, **kwargs):
        return f(*args, **kwargs)

    @staticmethod
    def argument_name(i):
        return None


def grad(f, x):
    """grad of the Python function f at x (a matrix, a number or a tree), on the tape; its plain
    matrices as NumPy arrays whatever the device (a tracked one, inside an outer grad, is kept)."""
    from tapeml.builtins.util import tree_map
    return tree_map(B.to_numpy, value_and_grad_impl(PyInterp(), f, tree_map(on_device, x))[1])


def grad_array(f, x):
    """grad of f at x (a matrix or a number) as a float64 NumPy array."""
    return np.asarray(B.to_numpy(raw(grad(f, on_device(x)))), dtype=np.float64)


def builtin(name):
    """The builtin `name` as a Python function: arguments bound and checked by the registry (a
    builtin that takes the Context, one that calls a function value, gets PyInterp and its arguments as
    they are)."""
    from tapeml.builtins import REGISTRY         # registers every builtin
    b = REGISTRY[name]
    if b.context:
        return lambda *args, **kw: b.fn(PyInterp(), *args, **kw)
    return lambda *args, **kw: b.fn(*b.bind([on_device(a) for a in args], {k: on_device(v) for k, v in kw.items()}))


def check_grads(f, *inputs, tol=1e-6, which=None):
    """The gradient of weighted(f, inputs) with respect to each input (or those numbered in
    `which`), on the tape, against central differences: same shape, finite, and within `tol`
    relative to max(1, |fd|)."""
    loss = weighted(f, inputs)
    for k in (range(len(inputs)) if which is None else which):
        def lk(xk, k=k):
            args = [on_device(a) for a in inputs]
            args[k] = xk
            return loss(*args)
        tape = grad_array(lk, inputs[k])
        fd = fd_grad(lk, inputs[k])
        assert tape.shape == np.shape(inputs[k])
        assert np.all(np.isfinite(tape)), tape
        err = np.max(np.abs(tape - fd) / np.maximum(1.0, np.abs(fd))) if fd.size else 0.0
        assert err < tol, (k, err, tape, fd)
