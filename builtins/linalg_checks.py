"""The checks the Linear algebra builtins (builtins/linalg.py) make on plain values before a
factorization: a matrix (or batch) of the right shape, finite entries, invertible to working
precision. Messages name only numbers that do not depend on the machine's BLAS (DESIGN.md rule 9).
"""
from __future__ import annotations

import numpy as np

from tapeml.array import ops
from tapeml.syntax.errors import ShapeError, ValueErr
from tapeml.array.tape import raw
from tapeml.array.values import describe, shape_text


# ---- checks on plain values --------------------------------------------------------------------
def _shape(v):
    return np.shape(raw(v))


def _floated(x):
    """A bool or whole-number matrix takes part as numbers (as in arithmetic)."""
    r = raw(x)
    if isinstance(r, np.ndarray) and r.dtype.kind != "f":
        return ops.as_float(r.astype(np.float64))
    return x


def _matrix(fname, x, name="A", square=False):
    s = _shape(x)
    if len(s) < 2:
        raise ShapeError(f"{fname}(): {name} must be a matrix (or a batch of matrices), got {describe(x)}")
    if square and s[-1] != s[-2]:
        raise ShapeError(f"{fname}(): {name} must be square, got {shape_text(s)} "
                         f"({s[-2]} rows, {s[-1]} columns)")
    return _floated(x)


def _finite(fname, x, name="A"):
    r = np.asarray(raw(x))
    if r.size and not np.isfinite(r).all():
        at = tuple(int(i) for i in np.argwhere(~np.isfinite(r))[0])
        raise ValueErr(f"{fname}(): {name} holds {'nan' if np.isnan(r[at]) else 'inf'} (at "
                       f"[{', '.join(map(str, at))}]); linear algebra needs finite entries")


def _which(flat_index, batch):
    return "" if not batch else f" (matrix [{', '.join(map(str, np.unravel_index(flat_index, batch)))}] of the batch)"


def _sci(x):
    """3 significant digits with an exponent: 2.52e16, 8.39e6."""
    m, e = f"{x:.2e}".split("e")
    return f"{m.rstrip('0').rstrip('.')}e{int(e)}"


def _invertible(fname, x, name="A"):
    """Refuse a singular matrix, or one singular to working precision: condition number (largest /
    smallest singular value) at or past 1/eps of the dtype. The message names the bound, not the
    condition number: past 1/eps the smallest singular value is rounding noise (its digits, even
    whether it comes out as exactly 0, change with the BLAS kernel of the machine)."""
    r = np.asarray(raw(x))
    if r.size == 0:                 # an empty matrix, or an empty batch: nothing to refuse
        return
    s = np.linalg.svd(r, compute_uv=False)
    big, small = s[..., 0], s[..., -1]
    with np.errstate(divide="ignore", invalid="ignore"):
        cond = np.where(small > 0, big / np.where(small > 0, small, 1.0), np.inf)
    eps = np.finfo(r.dtype).eps
    worst = int(np.argmax(cond.reshape(-1)))
    c = float(cond.reshape(-1)[worst])
    if c * eps >= 1.0:
        raise ValueErr(f"{fname}(): {name}{_which(worst, r.shape[:-2])} is singular to working precision: its "
                       f"condition number (largest / smallest singular value) is at or past 1/eps = "
                       f"{_sci(1 / eps)} for {r.dtype}, so a solution would be meaningless. For a "
                       f"least-squares answer use lstsq or pinv")


def _noise_to_zero(x: float, scale: float, n: int, dtype) -> float:
    """x, or 0 when it is within rounding of 0 for a computation of size n at this scale (its
    digits would be noise that changes with the machine's BLAS kernel)."""
    return 0.0 if abs(x) <= 10 * n * np.finfo(dtype).eps * scale else x
