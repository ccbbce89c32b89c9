"""The primitive table itself (lang/array/ops.py gathers it): `TABLE`, `primitive()` that declares
an entry, the size guard of the primitives whose result can outgrow their operands, the float
type of new matrices, and the conversions every forward shares."""
from __future__ import annotations

import math

import numpy as np

from tapeml.array import backend as B, context
from tapeml.array.backend import ARRAYS, xp_of
from tapeml.array.tape import Box, Primitive


TABLE: dict[str, Primitive] = {}

# The float type of new matrices: float64 by default; `set_dtype("float32")` (the builtin, or
# `tapeml --dtype float32`) switches literals, ranges and constructors. Python numbers stay
# "weak" scalars, so float32 arrays stay float32 through arithmetic with them (NumPy 2 rules).
# The float type is the current session's (lang/array/context.py: per thread, a Session has its own):
# FLOAT["dtype"] reads it (FLOAT is context.LIVE; a builtin's Context reads the same value as
# ctx.dtype).
FLOAT = context.LIVE
DTYPES = {"float64": np.float64, "float32": np.float32}
context.slot("dtype", lambda: np.float64)


def set_dtype(name: str) -> None:
    if name not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {name!r}")
    FLOAT["dtype"] = DTYPES[name]


def as_float(a):
    """A new matrix in the session's float type."""
    dt = FLOAT["dtype"]
    if type(a) is np.ndarray:
        return a if a.dtype == dt else a.astype(dt)
    t = B.of(a).dtype(dt)
    return a if a.dtype == t else a.to(t)


_ND = np.ndarray


def xp1(x):
    """The namespace that computes on x: NumPy unless x is another backend's array (one type
    test on NumPy's path)."""
    t = type(x)
    if t is _ND or t is float or t is bool:
        return np
    return xp_of(x)


def size_of(a) -> int:
    """The number of elements of an array of any backend (torch's .size is a method)."""
    return a.size if type(a) is _ND else math.prod(a.shape)


def is_bool_array(a) -> bool:
    """A bool matrix of any backend."""
    t = type(a)
    if t is _ND:
        return a.dtype == np.bool_
    return t in ARRAYS and B.of(a).is_bool(a)


def is_float_array(a) -> bool:
    t = type(a)
    if t is _ND:
        return a.dtype.kind == "f"
    return t in ARRAYS and B.of(a).is_float(a)


def crossed(a, b):
    """a and b on one backend: a NumPy array beside another backend's matrix crosses to it (a
    constant a builtin or a caller made with NumPy meets the session's tensors). The binary
    primitives call it where the operation refused the pair, so NumPy's path never pays."""
    ta, tb = type(a), type(b)
    if ta is _ND and tb is not _ND and tb in ARRAYS:
        return B.of(b).asarray(a), b
    if tb is _ND and ta is not _ND and ta in ARRAYS:
        return a, B.of(a).asarray(b)
    return a, b


def mixed(a, b) -> bool:
    """One of a, b is a NumPy array and the other another backend's matrix."""
    ta, tb = type(a), type(b)
    return (ta is _ND and tb is not _ND and tb in ARRAYS) or (tb is _ND and ta is not _ND and ta in ARRAYS)


def new_array(data, dtype=None, like=None):
    """A matrix of the backend of `like` (an array), else of the session's, from Python or NumPy
    data; dtype a NumPy type, None for the session's float type."""
    be = B.current() if like is None or type(like) is _ND and B.current() is B.NUMPY else B.of(like)
    return be.asarray(data, FLOAT["dtype"] if dtype is None else dtype)


def primitive(name, impl, vjp=None, fwd=None, **options):
    """Declare a primitive in the table; returns the plain function that calls it. The options
    (arity, vjp_plain, outputs, scalar, arg_names) are tape.Primitive's, which lists them. A
    primitive named in GROWS runs behind the size guard (lang/array/limits.py)."""
    arity = options.get("arity")
    if name in GROWS and not getattr(impl, "guards_size", False):
        impl = _size_guarded(name, impl, GROWS[name], arity)
        if fwd is not None:
            fwd = _size_guarded(name, fwd, GROWS[name], None)
    prim = Primitive(name, impl, vjp, fwd, **options)
    TABLE[name] = prim
    return prim.call


# ---- the size guard: primitives whose result can be larger than each of their operands -------
def _broadcast_shape(*shapes):
    return np.broadcast_shapes(*shapes)


def _matmul_shape(sa, sb, *rest):
    if len(sa) >= 2 and len(sb) >= 2:
        return np.broadcast_shapes(sa[:-2], sb[:-2]) + (sa[-2], sb[-1])
    return sa[:-1] + sb[:-2] + sb[-1:] if len(sa) >= 1 and len(sb) >= 1 else sa + sb


def _scores_shape(sq, sk, *rest):       # attention: the [.., Tq, Tk] weights come first
    return sq[:-1] + sk[-2:-1]


GROWS = {name: _broadcast_shape for name in
         ("add", "sub", "mul", "div", "mod", "pow", "zmul", "eq", "ne", "lt", "le", "gt", "ge",
          "logical", "maximum", "minimum", "where", "clip", "layer_norm", "rms_norm")}
GROWS.update({"matmul": _matmul_shape, "zmatmul": _matmul_shape, "dense": _matmul_shape, "scaled_dot_product_attention": _scores_shape,
              "attention_weights": _scores_shape})


def size_refusal(name):
    """The size guard's two halves for a primitive in GROWS: the element limit `big`, and
    `refuse(args)`, called when the operands' sizes multiply past it (or to 0: an empty operand
    bounds nothing, [m, 0] @ [0, n] is m x n), which works out the
    result's shape and raises if it is past the limit. `_size_guarded` puts them around an impl;
    an impl that makes the test itself (one Python call less on the commonest operators:
    arith_ops._arith) says so with `impl.guards_size = True`."""
    from tapeml.array import limits
    out_shape = GROWS[name]
    def refuse(args):
        shapes = [tuple(a.shape) for a in args if type(a) in ARRAYS]
        try:
            out = out_shape(*shapes)
        except (ValueError, TypeError, IndexError):
            return                      # operands that do not fit: impl says so
        limits.check_operands(name, out, *shapes)
    return limits.MAX_ELEMENTS, refuse


def device_limit() -> int:
    """The element limit of the session's device (limits.max_elements: a GPU's memory, not the
    host's), for the guard's test on another backend's matrices; NumPy's path keeps the host's
    limit read once."""
    from tapeml.array import limits
    return limits.max_elements()


_NO_DEVICE_BELOW = 1 << 24      # no device's limit is lower (half of 256 MB in float64): no need to ask


def _size_guarded(name, impl, out_shape, arity):
    """`impl` behind the size guard: when the operands' sizes multiply past the element limit
    (a bound on any broadcast or product result), the result's shape is worked out and refused
    before anything is allocated."""
    big, refuse = size_refusal(name)
    nd = np.ndarray
    arrays = ARRAYS

    if arity == 2:
        def guarded2(a, b):
            ta, tb = type(a), type(b)
            # an empty operand bounds nothing: [m, 0] @ [0, n] is an m x n matrix of zeros
            if ta is nd and tb is nd:
                n = a.size * b.size
                if n > big or n == 0:
                    refuse((a, b))
            elif ta in arrays and tb in arrays and ((n := size_of(a) * size_of(b)) == 0 or
                                                    n > _NO_DEVICE_BELOW and n > device_limit()):
                refuse((a, b))
            return impl(a, b)
        return guarded2

    def guarded(*args, **kw):
        n = 1
        other = False       # another backend's matrix among them: its device's limit applies
        for a in args:
            t = type(a)
            if t is nd:
                n *= a.size
            elif t in arrays:
                n *= size_of(a)
                other = True
        if n > big or n == 0 or (other and n > _NO_DEVICE_BELOW and n > device_limit()):
            refuse(args)
        return impl(*args, **kw)
    return guarded


def shape_of(v) -> tuple:
    while type(v) is Box:
        v = v.value
    t = type(v)
    if t is np.ndarray:
        return v.shape
    return tuple(v.shape) if t in ARRAYS else ()


def bools_as_floats(a):
    """Booleans take part in arithmetic as 0 and 1."""
    t = type(a)
    if t is bool:
        return float(a)
    if t is np.ndarray:
        return a.astype(FLOAT["dtype"]) if a.dtype == np.bool_ else a
    if t in ARRAYS:
        be = B.of(a)
        if be.is_bool(a):
            return a.to(be.dtype(FLOAT["dtype"]))
    return a


def python_scalar(r):
    """Scalars come out as Python floats (0-d arrays and NumPy scalars alike): a Python float is
    a "weak" scalar in NumPy 2, so arithmetic with it keeps a float32 matrix float32, where an
    np.float64 would promote it to float64."""
    t = type(r)
    if t is np.ndarray:
        if r.ndim:
            return r
        r = r[()]
        t = type(r)
    if t is float:
        return r
    if t is np.float64:
        return float(r)
    if t is np.bool_:
        return bool(r)
    if isinstance(r, np.generic):
        return float(r)
    if t in ARRAYS:     # another backend's array: a 0-d one is a number
        return r if r.ndim else B.of(r).item(r)
    return r
