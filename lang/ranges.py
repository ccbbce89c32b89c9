"""Ranges: the one constructor of the inclusive range start:step:stop (the `a:s:b` syntax and
the arrays builtins use it)."""
from __future__ import annotations

import math

import numpy as np

from . import limits, ops
from .errors import ValueErr

RANGE_MAX = limits.RANGE_MAX


def make_range(start: float, step: float, stop: float, span=None) -> np.ndarray:
    """The inclusive range start:step:stop as a float vector (`1:0` is empty).

    Elements are start + k*step; the last is stop exactly when start + k*step lands on stop
    within rounding (RANGE_ULPS ulps of the largest of |start|, |stop|, |step|), so
    `(0:0.1:0.3)[end] == 0.3` (docs/language.md, "Ranges")."""
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
        return np.zeros(0, dtype=ops.FLOAT["dtype"])
    out = start + step * np.arange(k + 1, dtype=np.float64)
    if abs(out[-1] - stop) <= tol:
        out[-1] = stop
    return ops.as_float(out)


RANGE_ULPS = 4
