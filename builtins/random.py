"""Random: the language's one seeded random number generator.

All randomness in tapeml (rand, randn, randint, dropout masks, transformer_block_init without
its own seed, and sampling) draws from ONE NumPy `Generator` kept in the session state. It starts
seeded from OS entropy; `seed(n)` replaces it with `numpy.random.default_rng(n)`, so a program
that calls `seed(n)` first prints the same numbers on every run and every machine.

Python code elsewhere gets the generator with `rng()` (never caching it: `seed` swaps it).
"""
from __future__ import annotations

import numpy as np

from tapeml.array import context
from tapeml.builtins.registry import P, builtin, non_negative
from tapeml.builtins.vocabulary import DIMS
from tapeml.builtins.util import check_size
from tapeml.syntax.errors import ShapeError, ValueErr
from tapeml.array.ops import as_float
from tapeml.array.tape import raw
from tapeml.array.values import describe

CAT = "Random"

# The generator is the current session's (lang/array/context.py: per thread, a Session has its own),
# made on first use (importing numpy.random costs start-up time).
context.slot("rng", lambda: np.random.default_rng())


def rng() -> "np.random.Generator":
    """The current generator (replaced by every `seed(n)`; seeded from OS entropy until then)."""
    return context.LIVE["rng"]


def _out(a: np.ndarray, dims):
    """No sizes: one number; otherwise the array."""
    return float(a) if not dims else a




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
    return _out(as_float(rng().random(shape)), shape)


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
    return _out(as_float(rng().standard_normal(shape)), shape)


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
    return _out(rng().integers(int(lo), int(hi), size=shape).astype(np.float64), shape)


def bernoulli_mask(shape: tuple, keep: float) -> np.ndarray:
    """A bool array, each element true with probability `keep` (dropout's mask)."""
    return rng().random(shape) < keep


__all__ = ["rng", "seed", "rand", "randn", "randint", "bernoulli_mask", "raw"]

# ---- sampling (added by the training work) ---------------------------------------------------


@builtin("sample", "Random", "Draw one category per row from probabilities: an id in 0..V-1.",
         [P("probs", "array", shape="[V] or [N, V]", doc="non-negative weights; each row is normalized")],
         returns="a number for a vector, a vector of N ids for a matrix",
         what="Picks a class at random, class i with probability probs[i] / sum(probs); the "
              "sampling step of text generation (after softmax with a temperature).",
         how="Inverse-CDF sampling: u = rand() from the one seeded generator, then the first i whose "
             "cumulative sum exceeds u * sum(row); zero-weight classes are never drawn. Like "
             "PyTorch's `torch.multinomial(p, 1)`, rows need not sum to 1.",
         errors=["ValueError when a weight is negative or not finite, or a row sums to 0",
                 "ShapeError when probs is not a vector or a matrix"],
         examples=["seed(0)\nsample([0.1, 0.2, 0.7])", "sample([0, 0, 1; 1, 0, 0])"])
def sample(probs):
    p = np.asarray(raw(probs), dtype=np.float64)
    if p.ndim not in (1, 2) or p.shape[-1] == 0:
        raise ShapeError(f"sample(): probs must be a non-empty vector or a matrix (one row per draw), got "
                         f"{describe(probs)}")
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        raise ValueErr("sample(): probabilities must be finite and >= 0")
    rows = p.reshape(-1, p.shape[-1])
    c = np.cumsum(rows, axis=1)
    total = c[:, -1]
    if np.any(total <= 0):
        raise ValueErr("sample(): every row of probs must have a positive sum")
    u = rng().random(rows.shape[0]) * total
    out = np.array([min(int(np.searchsorted(ci, ui, side="right")), rows.shape[1] - 1)
                    for ci, ui in zip(c, u)], dtype=np.float64)
    # never pick a zero-weight class at the right edge (u == total after rounding)
    for i, k in enumerate(out.astype(int)):
        while rows[i, k] == 0 and k > 0:
            k -= 1
        out[i] = k
    return float(out[0]) if p.ndim == 1 else out


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
    return rng().permutation(int(n)).astype(np.float64)
