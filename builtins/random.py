"""Random: the language's one seeded random number generator.

All randomness in tapeml (rand, randn, randint, dropout masks, transformer_block_init without
its own seed, and sampling) draws from ONE NumPy `Generator` kept in the session state. It starts
seeded from OS entropy; `seed(n)` replaces it with `numpy.random.default_rng(n)`, so a program
that calls `seed(n)` first prints the same numbers on every run and every machine.

Python code elsewhere gets the generator with `rng()` (never caching it: `seed` swaps it).

On every backend the numbers are drawn on the host by that generator and then moved to the
session's device (lang/array/backend.py), so a seeded program prints the same numbers on NumPy,
torch:cpu and a GPU. The draw dominates the cost: a [512, 512] randn takes 7-10 ms on the host
(torch's own randn on the same CPU: 13.6 ms), rand 1-2 ms; on torch:cpu the move is free in
float64 (the tensor shares the host array's memory, 0.001 ms) and float32's cast takes 0.03 ms, so
randn(512, 512) costs the same on torch:cpu as on NumPy (measured on a shared 2-core machine); on
a GPU the move is one host-to-device copy of the drawn matrix.
"""
from __future__ import annotations

import numpy as np

from tapeml.array import backend as B, context
from tapeml.builtins.registry import P, builtin, non_negative
from tapeml.builtins.vocabulary import DIMS
from tapeml.builtins.util import check_size
from tapeml.syntax.errors import ShapeError, ValueErr
from tapeml.array.ops import FLOAT
from tapeml.array.tape import raw
from tapeml.array.values import describe

CAT = "Random"

# The generator is the current session's (lang/array/context.py: per thread, a Session has its own),
# made on first use (importing numpy.random costs start-up time).
context.slot("rng", lambda: np.random.default_rng())


def rng() -> "np.random.Generator":
    """The current generator (replaced by every `seed(n)`; seeded from OS entropy until then)."""
    return context.LIVE["rng"]


def _out(a: np.ndarray, dims, dtype=None):
    """A host draw as the builtin's result: no sizes, one number (rounded to the session's float
    type, as a matrix element would be); otherwise a matrix of the session's backend in `dtype`
    (None: the session's float type), cast on the host before the copy to the device."""
    dt = FLOAT["dtype"] if dtype is None else dtype
    if a.dtype != dt:
        a = a.astype(dt)
    if not dims:
        return float(a)
    values = context.current().values
    values["made"] = True
    be = values["backend"]
    return a if be is B.NUMPY else be.asarray(a)


def _on(like, a: np.ndarray):
    """A host result as a matrix of the backend of `like` (an array; a number: the session's)."""
    be = B.of(like)
    return a if be is B.NUMPY else be.asarray(a)



@builtin("seed", CAT, "Restart the random number generator from the whole number n.",
         [P("n", "int", doc="the seed, a whole number >= 0", check=non_negative, constraint=">= 0")],
         returns="none",
         what="After seed(n) every random draw (rand, randn, randint, dropout masks, "
              "transformer_block_init) repeats exactly from run to run. Without a call to seed the "
              "generator starts from operating-system entropy.",
         how="Replaces the one generator with NumPy's `default_rng(n)` (PCG64), so the streams are "
             "those of `numpy.random.default_rng(n)`: `seed(0); rand()` equals "
             "`numpy.random.default_rng(0).random()`.",
         errors=["ValueError when n is negative or not a whole number"],
         examples=["seed(0)\nrand(3)", "seed(1)\na = randn(2)\nseed(1)\nall(a == randn(2))"])
def seed(n):
    context.LIVE["rng"] = np.random.default_rng(int(n))
    return None


@builtin("rand", CAT, "Uniform random numbers in [0, 1): rand() is one number, rand(2, 3) a 2x3 matrix.",
         [DIMS], returns="a number, or [dims...]",
         what="Random numbers spread evenly over [0, 1): 0 can come out, 1 never does. rand() is one number, "
              "rand(dims...) a matrix; seed(n) makes the draws repeatable.",
         how="`Generator.random` of the one seeded generator (half-open interval [0, 1)), drawn in float64 "
             "and stored in the session's float type (set_dtype), so a seed gives the same numbers in both.",
         errors=["ValueError when a size is negative or not a whole number"],
         examples=["seed(0)\nrand()", "seed(0)\nsize(rand(2, 3))"])
def rand(dims):
    shape = check_size("rand", dims)
    return _out(rng().random(shape), shape)


@builtin("randn", CAT, "Standard normal random numbers (mean 0, variance 1).",
         [DIMS], returns="a number, or [dims...]",
         what="Random numbers from the bell curve with mean 0 and standard deviation 1; randn(m, n) * s is a "
              "Gaussian weight initialization with standard deviation s.",
         how="`Generator.standard_normal` of the one seeded generator, drawn in float64 and stored in the "
             "session's float type (set_dtype).",
         errors=["ValueError when a size is negative or not a whole number"],
         examples=["seed(0)\nround(randn(3), 3)", "seed(0)\nabs(mean(randn(10000))) < 0.05"])
def randn(dims):
    shape = check_size("randn", dims)
    return _out(rng().standard_normal(shape), shape)


@builtin("randint", CAT, "Random whole numbers from lo up to but excluding hi.",
         [P("lo", "int", doc="smallest value drawn"), P("hi", "int", doc="one past the largest value drawn"),
          DIMS],
         returns="a number, or [dims...] of whole numbers (as float64)",
         what="Random whole numbers, each of lo, ..., hi - 1 equally likely: random token ids, or random "
              "start positions of training windows.",
         how="`Generator.integers(lo, hi)` of the one seeded generator: uniform over lo, ..., hi - 1 "
             "(hi is exclusive, as in NumPy and PyTorch), returned as float64 like every number.",
         errors=["ValueError when hi <= lo", "ValueError when a size is negative or not a whole number"],
         examples=["seed(0)\nrandint(0, 10, 5)", "seed(0)\nrandint(1, 7)"])
def randint(lo, hi, dims):
    if hi <= lo:
        raise ValueErr(f"randint(): hi must be greater than lo (hi is exclusive), got lo = {lo}, hi = {hi}")
    shape = check_size("randint", dims)
    return _out(rng().integers(int(lo), int(hi), size=shape), shape, np.float64)


def bernoulli_mask(shape: tuple, keep: float):
    """A NumPy bool array on the host, each element true with probability `keep` (dropout's
    mask), drawn from the session's generator (the same mask on every device: the caller scales
    it on the host and moves it); shape () gives a Python bool."""
    m = rng().random(shape) < keep
    return bool(m) if not shape else m


__all__ = ["rng", "seed", "rand", "randn", "randint", "bernoulli_mask", "raw"]

# ---- sampling (added by the training work) ---------------------------------------------------


@builtin("sample", "Random", "Draw categories from probabilities: sample(p) one id in 0..V-1, sample(p, n) n of them.",
         [P("probs", "array", shape="[V] or [N, V]", doc="non-negative weights; each row is normalized"),
          P("n", "int", None, doc="how many draws per row; none: one draw, without an axis for it",
            check=non_negative, constraint=">= 0"),
          P("replacement", "bool", True, doc="draw with replacement (false: no id twice in a row's draws)")],
         returns="sample(p): a number for a vector, a vector of N ids for a matrix; sample(p, n): [n] for a "
                 "vector, [N, n] for a matrix",
         what="Picks a class at random, class i with probability probs[i] / sum(probs); the "
              "sampling step of text generation (after softmax with a temperature). sample(p, n) draws "
              "n ids at once, as `torch.multinomial(p, n, replacement=True)`.",
         how="Inverse-CDF sampling: u = rand() from the one seeded generator, then the first i whose "
             "cumulative sum exceeds u * sum(row); zero-weight classes are never drawn. Like "
             "PyTorch's `torch.multinomial`, rows need not sum to 1. sample(p, n) draws row by row, "
             "each row's n uniforms in turn, so seed(k); sample(p, 1) starts as seed(k); sample(p) does. "
             "Draws are with replacement by default (NumPy's `choice` and makemore's "
             "`torch.multinomial(p, n, replacement=True)`); PyTorch's own default is replacement=False, "
             "which here is replacement=false: each draw then removes the class drawn from its row, so "
             "n may not exceed the number of classes of positive weight.",
         errors=["ValueError when a weight is negative or not finite, or a row sums to 0",
                 "ValueError when replacement is false and n exceeds a row's classes of positive weight",
                 "ShapeError when probs is not a vector or a matrix"],
         examples=["seed(0)\nsample([0.1, 0.2, 0.7])", "sample([0, 0, 1; 1, 0, 0])",
                   "seed(0)\nsample([0.1, 0.2, 0.7], 8)",
                   "seed(0)\nsample([0.5, 0.5, 0; 0, 0.1, 0.9], 3)",
                   "seed(0)\nsample([1, 1, 1, 1], 4, replacement=false)   # a random order of 0..3"])
def sample(probs, n=None, replacement=True):
    # on the host on every backend (a loop over rows reading values), the ids moved back after
    like = raw(probs)
    p = np.asarray(B.to_numpy(like), dtype=np.float64)
    if p.ndim not in (1, 2) or p.shape[-1] == 0:
        raise ShapeError(f"sample(): probs must be a non-empty vector or a matrix (one row per draw), got "
                         f"{describe(probs)}")
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        raise ValueErr("sample(): probabilities must be finite and >= 0")
    rows = p.reshape(-1, p.shape[-1])
    if np.any(rows.sum(axis=1) <= 0):
        raise ValueErr("sample(): every row of probs must have a positive sum")
    if n is None:
        out = np.array([_draw(row, ui) for row, ui in zip(rows, rng().random(rows.shape[0]))])
        return float(out[0]) if p.ndim == 1 else _on(like, out)
    n = int(n)
    if not replacement:
        fewest = int((rows > 0).sum(axis=1).min())
        if n > fewest:
            raise ValueErr(f"sample(): cannot draw {n} ids without replacement from a row with {fewest} "
                           f"class{'es' if fewest != 1 else ''} of positive weight")
    from tapeml.array import limits
    limits.check_elements(f"sample() of {n} draws per row", (rows.shape[0], n))
    u = rng().random((rows.shape[0], n))
    out = np.zeros((rows.shape[0], n))
    for i, row in enumerate(rows):
        if replacement:
            out[i] = _draw(row, u[i])
            continue
        w = row.copy()
        for j in range(n):           # each draw removes its class from the row
            k = int(_draw(w, u[i, j]))
            out[i, j] = k
            w[k] = 0.0
    return _on(like, out[0] if p.ndim == 1 else out)


def _draw(row: np.ndarray, u):
    """Ids from one row of non-negative weights, one per uniform in u (a number or a vector of
    them, in [0, 1)): the first class whose cumulative weight exceeds u * total (inverse CDF);
    never a zero-weight class, even at the right edge (u * total == total after rounding)."""
    c = np.cumsum(row)
    k = np.minimum(np.searchsorted(c, np.asarray(u) * c[-1], side="right"), row.size - 1)
    while True:
        back = (row[k] == 0) & (k > 0)
        if not np.any(back):
            return k.astype(np.float64)
        k = np.where(back, k - 1, k)


@builtin("randperm", "Random", "A random permutation of 0, 1, ..., n-1 (a vector of whole numbers).",
         [P("n", "int", doc="how many numbers to shuffle", check=non_negative, constraint=">= 0")],
         returns="[n] (float64 whole numbers)",
         what="The numbers 0 to n-1 in a random order, each order equally likely: shuffling the rows of a "
              "data set each epoch, x[randperm(rows(x)), :].",
         how="`Generator.permutation(n)` of the one seeded generator (so seed(k) repeats it), 0-based as "
             "PyTorch's `torch.randperm(n)`; MATLAB's `randperm(n)` is 1-based. Returned as float64 like "
             "every number.",
         errors=["ValueError when n is negative or not a whole number"],
         examples=["seed(0)\nrandperm(6)", "seed(0)\np = randperm(5)\nsum(one_hot(p, 5), dim=0)  # each number once",
                   "seed(1)\nx = [10, 11; 20, 21; 30, 31]\nx[randperm(3), :]"])
def randperm(n):
    check_size("randperm", (n,))
    return B.new_matrix(rng().permutation(int(n)).astype(np.float64), np.float64)
