"""The primitives that cut and join: concat, stack, indexing, indexed stores (lang/array/ops.py)."""
from __future__ import annotations

import math

import numpy as np

from tapeml.array import backend as B
from tapeml.array.backend import ARRAYS
from tapeml.array.primitive_table import FLOAT, bools_as_floats, primitive, python_scalar, shape_of
from tapeml.array.arith_ops import zmul
from tapeml.array.shape_ops import reshape, unbroadcast
from tapeml.array.tape import raw

_ND = np.ndarray


def _device_like(xs):
    """The first of xs that is another backend's matrix (a tensor), or None: NumPy's path."""
    for x in xs:
        t = type(x)
        if t is not _ND and t in ARRAYS:
            return x
    return None


def _on(be, xs):
    """xs as matrices of the backend `be` (numbers and NumPy arrays cross to it)."""
    t = be.array_type
    return [x if type(x) is t else be.asarray(x) for x in xs]


def _concat(*xs, dim=0):
    _check_total("concat", xs, dim)
    like = _device_like(xs)
    if like is None:
        return np.concatenate(xs, axis=dim)
    be = B.of(like)
    try:
        return be.xp.concat(_on(be, xs), axis=dim)
    except RecursionError:
        raise
    except be.shape_errors as e:        # torch says RuntimeError: NumPy's ValueError, as callers expect
        raise ValueError(str(e)) from e


def _check_total(name, xs, dim):
    """The size guard for concat and stack: the result holds all the parts."""
    n = 0
    for x in xs:
        t = type(x)
        n += x.size if t is _ND else math.prod(x.shape) if t in ARRAYS else 1
    from tapeml.array import limits
    if n > limits.max_elements():
        s = list(shape_of(xs[0]))
        if name == "stack":
            s.insert(dim % (len(s) + 1), len(xs))
        elif s:
            s[dim] = sum(shape_of(x)[dim] if shape_of(x) else 1 for x in xs)
        from tapeml.array.values import shape_text
        err = limits.elements_error(f"{name}() of {len(xs)} parts (a result of {shape_text(tuple(s))})", n)
        err.operation = (name, tuple(s), n)         # a builtin or a matrix literal names itself instead
        raise err


def _vjp_concat(g, ans, saved, tracked, *xs, dim=0):
    out, start = [], 0
    nd = len(shape_of(ans))
    idx = [slice(None)] * nd
    d = dim % nd
    for x, need in zip(xs, tracked):
        n = shape_of(x)[d]
        if need:
            idx[d] = slice(start, start + n)
            out.append(index(g, idx=tuple(idx)))
        else:
            out.append(None)
        start += n
    return tuple(out)


def _vjp_concat_plain(g, ans, saved, tracked, *xs, dim=0):
    """First order: the cotangent cut into views (matrices are never changed in place), not copies."""
    if type(g) not in ARRAYS:
        return None
    out, start = [], 0
    idx = [slice(None)] * g.ndim
    d = dim % g.ndim
    for x, need in zip(xs, tracked):
        n = shape_of(x)[d]
        if need:
            idx[d] = slice(start, start + n)
            out.append(g[tuple(idx)])
        else:
            out.append(None)
        start += n
    return tuple(out)


concat = primitive("concat", _concat, _vjp_concat, vjp_plain=_vjp_concat_plain)


def _stack(*xs, dim=0):
    _check_total("stack", xs, dim)
    like = _device_like(xs)
    if like is None:
        r = np.stack(xs, axis=dim)
        for x in xs:
            if type(x) is _ND:
                return r
        if r.dtype != np.bool_:     # numbers: the session's float type (NumPy's is float64); bools stay
            r = r.astype(FLOAT["dtype"], copy=False)
        if len(ARRAYS) == 1:        # no other backend loaded
            return r
        be = B.current()            # numbers only: a matrix of the session's backend
        return r if be is B.NUMPY else be.asarray(r)
    be = B.of(like)
    try:
        return be.xp.stack(_on(be, xs), axis=dim)
    except RecursionError:
        raise
    except be.shape_errors as e:
        raise ValueError(str(e)) from e


def _vjp_stack(g, ans, saved, tracked, *xs, dim=0):
    nd = len(shape_of(ans))
    d = dim % nd
    return tuple(index(g, idx=tuple(i if ax == d else slice(None) for ax in range(nd))) if need else None
                 for i, need in enumerate(tracked))


stack = primitive("stack", _stack, _vjp_stack)


# ---- indexing -------------------------------------------------------------------------------
# The language's indexing rule: each index makes its own axis, in order (a number drops it); so
# `a[1, :, [1, 0]]` of a 2x3x4 `a` is 3x2, and several index vectors pick every combination.
# `orthogonal` turns the per-axis parts into the one NumPy index that means exactly that; reads,
# writes and both VJPs use the index it returns, so NumPy's rule for mixed advanced indices
# (which moves the vector's axis to the front) is never in play.
def orthogonal(parts, shape) -> tuple:
    """The NumPy index for per-axis `parts` (ints, slices, integer vectors) of an array of
    `shape`. With no vector this is plain basic indexing; with one vector and no number NumPy
    keeps the vector's axis in place; otherwise every part that keeps an axis becomes a vector
    of its own grid axis (np.ix_), so that all of them broadcast into the grid in order and the
    numbers, adjacent to them or not, only drop their axes."""
    vectors = numbers = 0
    for p in parts:
        if type(p) is np.ndarray:
            vectors += 1
        elif type(p) is not slice:
            numbers += 1
    if vectors == 0 or (vectors == 1 and numbers == 0):
        return tuple(parts)
    return _grid(parts, shape)


def _grid(parts, shape) -> tuple:
    """`parts` with every part that keeps an axis (a slice or a vector) made a vector of its own
    grid axis: the same elements, in the same layout, as integer arrays and numbers only."""
    kept = [i for i, p in enumerate(parts) if type(p) is np.ndarray or type(p) is slice]
    out = list(parts)
    m = len(kept)
    for j, i in enumerate(kept):
        p = parts[i]
        vec = np.arange(shape[i])[p] if type(p) is slice else p
        out[i] = vec.reshape([1] * j + [-1] + [1] * (m - j - 1))
    return tuple(out)


# ---- the index on another backend ---------------------------------------------------------------
# An index stays a NumPy (host) index, whatever the backend: the evaluator checks it there, and
# last_writes and _may_repeat read it there. Applied to another backend's matrix, its integer and
# bool arrays cross to that backend's device (`device_index`); PyTorch has no negative slice
# steps, so an index holding one is applied in its grid form (the same elements, gathered).
def device_index(idx, shape, be) -> tuple:
    """The NumPy index `idx` (a tuple, as orthogonal and along make) for a matrix of the backend
    `be` and `shape`: its arrays on the device, in grid form when a slice steps backwards (only
    orthogonal's forms have one, any vector beside it 1-D)."""
    parts = idx if type(idx) is tuple else (idx,)
    for p in parts:
        if type(p) is slice and p.step is not None and p.step < 0:
            parts = _grid(parts, shape)
            break
    return tuple(be.asarray(p) if type(p) is np.ndarray else int(p) if isinstance(p, np.integer) else p
                 for p in parts)


def _add_at(be, out, idx, g):
    """out (a fresh matrix of the backend be) plus g at the NumPy index idx, where positions repeat
    (be.add_at, which takes integer arrays only: a number is a 0-d one, an index keeping trailing
    axes whole leaves them out, and one with another slice is taken as flat positions)."""
    parts = list(idx if type(idx) is tuple else (idx,))
    while parts and type(parts[-1]) is slice and parts[-1] == slice(None):
        parts.pop()
    for p in parts:
        if type(p) is slice:
            shape = tuple(out.shape)
            pos = np.arange(math.prod(shape)).reshape(shape)[idx]     # NumPy's rule, as flat positions
            flat = be.add_at(out.reshape(-1), be.asarray(pos.reshape(-1)), g.reshape(-1))
            return flat.reshape(shape)
    return be.add_at(out, tuple(be.asarray(np.asarray(p, dtype=np.intp)) if type(p) is not np.ndarray else
                                be.asarray(p) for p in parts), g)


def _index(x, idx):
    tx = type(x)
    if tx is _ND or tx not in ARRAYS:
        r = x[idx]
        t = type(r)
        if t is np.ndarray:
            return r.copy() if r.base is not None else r
        return float(r) if t is np.float64 else python_scalar(r)
    be = B.of(x)
    at = device_index(idx, tuple(x.shape), be)
    r = x[at]
    if r.ndim == 0:
        return be.item(r)
    return r.clone() if _basic(at) else r      # a basic index gives a view: a matrix of its own, as NumPy's


def _basic(idx) -> bool:
    """Only integers and slices: such an index names each element at most once."""
    parts = idx if type(idx) is tuple else (idx,)
    for i in parts:
        t = type(i)
        if t is not int and t is not slice and not isinstance(i, np.integer):
            return False
    return True


def _may_repeat(idx) -> bool:
    """Whether `idx` may name an element twice: only an integer index array with a repeated
    entry can (a grid point differs from another in some axis along which one of the arrays
    varies, so unique arrays name unique elements; masks and slices never repeat)."""
    if _basic(idx):
        return False
    for p in (idx if type(idx) is tuple else (idx,)):
        if type(p) is np.ndarray and p.dtype != np.bool_ and p.size > 1 and np.unique(p).size < p.size:
            return True
    return False


def last_writes(idx, shape):
    """For an index that names some element twice: (pos, keep), where `pos` is the flat position
    written by each point of the index grid and `keep` marks the writes that stay: the last one
    to each position, in row-major order of the grid. The one rule for the forward of `setitem`
    and its VJP. None when no element is named twice."""
    if not _may_repeat(idx):
        return None
    pos = np.arange(math.prod(shape)).reshape(shape)[idx]
    flat = np.ravel(pos)
    _, first_from_end = np.unique(flat[::-1], return_index=True)
    if first_from_end.size == flat.size:
        return None
    keep = np.zeros(flat.size, dtype=bool)
    keep[flat.size - 1 - first_from_end] = True
    return pos, keep.reshape(np.shape(pos))


def _scatter_add(g, idx, shape):
    tg = type(g)
    if tg is _ND or (tg not in ARRAYS and (len(ARRAYS) == 1 or B.current() is B.NUMPY)):   # 1: NumPy's only
        out = np.zeros(shape, dtype=g.dtype if tg is _ND else FLOAT["dtype"])
        if _basic(idx):
            out[idx] = g              # no element twice: a plain store (np.add.at is far slower)
        else:
            np.add.at(out, idx, g)
        return out
    be = B.of(g) if tg in ARRAYS else B.current()
    out = be.xp.zeros(shape, dtype=g.dtype if tg in ARRAYS else be.float_dtype(), device=be.device)
    if not _may_repeat(idx):
        out[device_index(idx, shape, be)] = g       # no element twice: a plain store
        return out
    return _add_at(be, out, idx, g)


index = primitive("index", _index,
                  lambda g, ans, saved, tracked, x, idx: (scatter_add(g, idx=idx, shape=shape_of(x)),), arity=1)
scatter_add = primitive("scatter_add", _scatter_add,
                        lambda g, ans, saved, tracked, gg, idx, shape: (index(g, idx=idx),))


def _setitem(x, v, idx):
    x = bools_as_floats(x)
    if type(x) is not _ND and type(x) in ARRAYS:
        return _setitem_on(B.of(x), x, v, idx)
    if type(v) is not _ND and type(v) in ARRAYS:          # a number (or NumPy array) written with a tensor
        be = B.of(v)
        return _setitem_on(be, be.asarray(x), v, idx)
    out = np.array(x, dtype=np.result_type(x, bools_as_floats(v)), copy=True)
    repeats = last_writes(idx, out.shape)
    if repeats is None:
        out[idx] = v
        return out
    # an element named twice keeps the last write (row-major order of the index grid); NumPy
    # does not promise an order, so the writes that stay are stored once each
    pos, keep = repeats
    grid = np.empty(np.shape(pos), dtype=out.dtype)
    grid[...] = v                 # the broadcast (and its errors) of a plain store
    np.put(out, pos[keep], grid[keep])      # flat positions in row-major order, as `pos` counts
    return out


def _setitem_on(be, x, v, idx):
    """_setitem on another backend's matrix x: the same rule (the last write to an element stays),
    its shape errors those of NumPy's store (ValueError)."""
    v = bools_as_floats(v)
    if type(v) is _ND:
        v = be.asarray(v)
    xp = be.xp
    out = xp.astype(x, xp.result_type(x, v), copy=True)
    v = B.held(v, out.dtype)        # a number past a float32 matrix's range is inf, as NumPy stores it
    shape = tuple(out.shape)
    repeats = last_writes(idx, shape)
    try:
        if repeats is None:
            out[device_index(idx, shape, be)] = v
            return out
        pos, keep = repeats
        grid = xp.empty(pos.shape, dtype=out.dtype, device=be.device)
        grid[...] = v                 # the broadcast (and its errors) of a plain store
        kept = np.unravel_index(pos[keep], shape)       # each element once: any store order will do
        out[tuple(be.asarray(k) for k in kept)] = grid[be.asarray(keep)]
        return out
    except RecursionError:
        raise
    except be.shape_errors as e:
        raise ValueError(str(e)) from e


def _vjp_setitem(g, ans, saved, tracked, x, v, idx):
    gv = None
    if tracked[1]:
        gv = index(g, idx=idx)
        repeats = last_writes(idx, shape_of(x))
        if repeats is not None:       # a write that a later one overwrote has no effect: gradient 0
            keep = repeats[1]
            r = raw(gv)
            if type(r) is not _ND and type(r) in ARRAYS:
                keep = B.of(r).asarray(keep)
            gv = zmul(gv, keep)
        vshape, extra = shape_of(v), len(shape_of(v)) - len(shape_of(gv))
        if extra > 0:                 # a store drops a value's leading axes of length 1 (NumPy's rule)
            gv = reshape(unbroadcast(gv, vshape[extra:]), shape=vshape)
        else:
            gv = unbroadcast(gv, vshape)
    return (setitem(g, 0.0, idx=idx) if tracked[0] else None, gv)


setitem = primitive("setitem", _setitem, _vjp_setitem)
