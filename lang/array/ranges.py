"""Ranges and walks.

A range start:step:stop has one constructor, `plan_range`, which checks it and gives a `Range`:
its length and its elements, chunk by chunk, without a vector. `make_range` (the `a:s:b` syntax
as a value, the arrays builtins) asks it for the whole vector; a `for` loop walks it a chunk at a
time, so `for i in 1:1e8` starts at once and holds CHUNK numbers, not 1e8.

A *walk* is what a `for` loop visits, not made into a value: a Range, the items of a value
(`ValueWalk`: a vector's elements a chunk at a time, a matrix's rows, a tuple's items, a string's
characters, a number once), and the lazy forms of enumerate and zip over walks. Walks live only
between the iterable of a `for` loop and the loop (lang/evaluator/statements.py, `loop_value`); a builtin
that has a lazy form declares it (`walk=` in builtins/registry.py: range, progress, enumerate,
zip). `walk_items` is the one place that says what the items of a value are, for `for` and for
the collection builtins (map, filter, reduce, zip, enumerate).
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from tapeml.array import backend as B, limits, ops
from tapeml.syntax.errors import ValueErr
from tapeml.array.tape import Box, raw
from tapeml.array.values import Dict

RANGE_MAX = limits.RANGE_MAX
RANGE_ULPS = 4
CHUNK = 4096          # numbers made at a time when a loop walks a range or a vector


class Walk:
    """What a `for` loop visits, one item at a time: `len(w)` items, `iter(w)` walks them."""
    __slots__ = ()

    def __len__(self) -> int:
        raise NotImplementedError

    def __iter__(self):
        raise NotImplementedError


class Range(Walk):
    """The inclusive range start:step:stop, planned (length and rounding of the end decided) but
    not made: `values()` is the whole vector, `iter()` its elements a chunk at a time. With a
    tracked start or step (`given_start`, `given_step` Boxes inside grad), every element is
    start + k*step on the tape (the end only sets the length)."""
    __slots__ = ("start", "step", "stop", "n", "snap", "given_start", "given_step")

    def __init__(self, start: float, step: float, stop: float, n: int, snap: bool):
        self.start, self.step, self.stop, self.n, self.snap = start, step, stop, n, snap
        self.given_start = self.given_step = None

    def __len__(self) -> int:
        return self.n

    def chunk(self, lo: int, hi: int) -> np.ndarray:
        """Elements lo .. hi-1 exactly as in the whole vector (the last snapped onto stop)."""
        out = self.start + self.step * np.arange(lo, hi, dtype=np.float64)
        if self.snap and hi == self.n and hi > lo:
            out[-1] = self.stop
        return ops.as_float(out)

    @property
    def tracked(self) -> bool:
        return type(self.given_start) is Box or type(self.given_step) is Box

    def tracked_chunk(self, lo: int, hi: int, device: bool = False):
        """chunk(lo, hi), plus the tracked terms (exact zeros) that carry start's and step's
        gradients to every element; with `device`, on the session's backend (a `for` loop's
        elements stay on the host: they become Python numbers)."""
        values = self.chunk(lo, hi)
        if device and B.current() is not B.NUMPY:
            values = B.current().asarray(values)
        if not self.tracked:
            return values

        def number(v):
            return ops.index(v, idx=(0,) * len(ops.shape_of(v))) if ops.shape_of(v) else v
        start_g = self.start if self.given_start is None else self.given_start
        step_g = self.step if self.given_step is None else self.given_step
        k = np.arange(lo, hi, dtype=np.float64)
        k = B.of(values).asarray(k, B.of(values).np_dtype(values.dtype)) if type(values) is not np.ndarray \
            else k.astype(values.dtype)
        return ops.add(values, ops.add(ops.sub(number(start_g), self.start),
                                       ops.mul(ops.sub(number(step_g), self.step), k)))

    def values(self):
        """The whole range as a vector (tracked when its start or step is)."""
        return self.tracked_chunk(0, self.n, device=True)

    def __iter__(self):
        if self.tracked:
            return self._tracked_items()
        # a chunk's Python floats at a time, walked at C speed (a loop's iteration pays no
        # generator step of its own)
        n = self.n
        return itertools.chain.from_iterable(self.chunk(lo, min(lo + CHUNK, n)).tolist()
                                             for lo in range(0, n, CHUNK))

    def _tracked_items(self):
        n = self.n
        for lo in range(0, n, CHUNK):
            hi = min(lo + CHUNK, n)
            c = self.tracked_chunk(lo, hi)
            for i in range(hi - lo):
                yield ops.index(c, idx=(i,))


def plan_range(start: float, step: float, stop: float, span=None) -> Range:
    """Check the inclusive range start:step:stop and decide its length (`1:0` is empty).

    Elements are start + k*step; the last is stop exactly when start + k*step lands on stop
    within rounding (RANGE_ULPS ulps of the largest of |start|, |stop|, |step|), so
    `(0:0.1:0.3)[end] == 0.3` (docs/language.md, "Ranges"). Past RANGE_MAX elements it is the
    limits' ValueError, whether the range becomes a vector or is walked by a loop."""
    if step == 0:
        raise ValueErr("a range step cannot be 0", span)
    if not (math.isfinite(start) and math.isfinite(stop) and math.isfinite(step)):
        raise ValueErr("a range needs finite start, step and end", span)
    q = (stop - start) / step          # inf when the step is tiny (0:1e-320:1)
    if not math.isfinite(q) or q >= RANGE_MAX:
        raise limits.range_error(math.floor(q) + 1 if math.isfinite(q) else q).with_span(span)
    tol = RANGE_ULPS * 2.0 ** -52 * max(abs(start), abs(stop), abs(step))
    k = math.floor(q) if q > -1 else -1          # the last whole step at or before stop
    if abs(start + (k + 1) * step - stop) <= tol:
        k += 1                                   # rounding left the last step just short of stop
    if k < 0:
        return Range(start, step, stop, 0, False)
    return Range(start, step, stop, k + 1, abs(start + step * float(k) - stop) <= tol)


def make_range(start: float, step: float, stop: float, span=None) -> np.ndarray:
    """The inclusive range start:step:stop as a float vector (see plan_range)."""
    r = plan_range(start, step, stop, span)
    return B.new_matrix(r.chunk(0, r.n) if r.n else np.zeros(0), ops.FLOAT["dtype"])


# ---- the items of a value, as `for` visits them ------------------------------------------------

def walkable(v) -> bool:
    """Whether `for` can walk v (a matrix or number, tracked or not, a tuple, a string, a
    dictionary: its keys)."""
    r = raw(v)
    return isinstance(r, (B.Matrix, tuple, str, Dict)) or \
        (isinstance(r, (float, int)) and not isinstance(r, (bool, np.bool_)))


def walk_length(v) -> int:
    """How many items `for` visits in v (walkable(v) holds)."""
    r = raw(v)
    if isinstance(r, B.Matrix):
        return 1 if r.ndim == 0 else r.shape[0]
    if isinstance(r, (tuple, str, Dict)):
        return len(r)
    return 1


def _vector_items(r: np.ndarray):
    for lo in range(0, r.shape[0], CHUNK):
        yield from r[lo:lo + CHUNK].tolist()


def walk_items(v):
    """The items `for` visits in v (walkable(v) holds), one at a time, keeping the tape: a vector's
    elements (as numbers, a chunk of them made at a time), a matrix's rows, a tracked matrix's
    elements or rows through the index primitive, a 0-d value or a number itself once, a tuple's
    items, a string's characters."""
    r = raw(v)
    if isinstance(r, B.Matrix):
        if r.ndim == 0:
            return iter((ops.index(v, idx=()),))
        if type(v) is Box:
            return (ops.index(v, idx=(i,)) for i in range(r.shape[0]))
        if r.ndim == 1:
            return _vector_items(r)
        return (r[i] for i in range(r.shape[0]))
    if isinstance(r, (tuple, str)):
        return iter(r)
    if isinstance(r, Dict):
        return iter(r.keys())          # a snapshot: the loop's body may set keys of the variable
    return iter((v,))


class ValueWalk(Walk):
    """The items of a value (walk_items), with its length; `value` is the value itself."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __len__(self) -> int:
        return walk_length(self.value)

    def __iter__(self):
        return walk_items(self.value)


class EnumerateWalk(Walk):
    """enumerate(xs) walked by a loop: (index, item) pairs made one at a time."""
    __slots__ = ("inner",)

    def __init__(self, inner: Walk):
        self.inner = inner

    def __len__(self) -> int:
        return len(self.inner)

    def __iter__(self):
        for i, x in enumerate(self.inner):
            yield (float(i), x)


class ZipWalk(Walk):
    """zip(a, b, ...) walked by a loop: tuples of the i-th items, made one at a time (the walks
    have equal lengths, checked by zip)."""
    __slots__ = ("inners",)

    def __init__(self, inners: list):
        self.inners = inners

    def __len__(self) -> int:
        return len(self.inners[0])

    def __iter__(self):
        return zip(*self.inners)
