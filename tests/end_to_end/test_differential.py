"""Differential test: random differentiable tapeml programs against PyTorch autograd (issue 16).

Each case is drawn once, from a seeded random generator, as ONE tree of choices that is written
out twice: as tapeml source and as Python on float64 torch tensors (every generator step emits
both texts, so the two cannot drift). Both programs compute

    OUT = f(X0, X1, ...)                      f: a scalar function of the inputs
    G   = grad(f) at the inputs               (tuple or record of inputs)
    H   = grad(x -> <grad(f)(x), V>)          a Hessian-vector product (second order), in some
    EV  = the unreduced expression            (expression cases: the elementwise values)

tapeml runs in-process (Interpreter.run); the Python side runs torch autograd with
create_graph=True, so nested `grad` is mirrored by nested torch.autograd.grad. Every leaf of
every result must agree to RTOL relative (plus RTOL of the quantity's largest element).

Two families of programs:
- expressions: broadcasting, elementwise functions, reductions with dim, matmul (batched),
  transpose, indexing of every sort (scalars, `end`, ranges with steps, `:`, index vectors,
  1-D masks on an axis, full masks, omitted trailing axes; rank up to 4), softmax,
  log_softmax, layer_norm (over the last axis or the last two), scaled_dot_product_attention
  (mask, broadcast masks, causal, bias), concat, stack, reshape, where, comparisons as 0/1
  operands of + - *, take_along (the pairs
  and NumPy's take_along_axis), einsum (one operand with diagonals, three operands), and grad
  inside the expression;
- statements: for over vectors, rows, rank-3 slices, tuples, tuples of functions, ranges,
  strings and numbers; while with break/continue; if/else; named functions
  with defaults and keywords, recursion, closures (late binding, as Python), index and
  augmented index assignment (dynamic indices in loops), field and tuple-item assignment,
  value semantics, destructuring (and `for` destructuring over zip/enumerate), value_and_grad
  and nested grad.

KNOWN_BUGS lists the patterns tapeml gets wrong while a fix is pending: a case that contains a
listed pattern is redrawn. It is empty today (the bugs of issues 15 and 16 are fixed, and every
pattern is drawn); a pattern found wrong again is listed there until its fix is merged.

Options (environment):
    TAPEML_DIFF_N       number of programs of each family (default 30 + 30; 300 + 300 under
                        `pytest --slow` or TAPEML_SLOW=1, as in CI)
    TAPEML_DIFF_SEED    the seed (default 16)
    TAPEML_DIFF_KNOWN   comma-separated known bugs to skip (default: KNOWN_BUGS)
    TAPEML_DIFF_SHOW    how many failures to print in full (default 5)
    TAPEML_DIFF_CASES   run only these case numbers, e.g. "171,223" (to reproduce a failure)
The long run:  TAPEML_DIFF_N=10000 pytest tests/end_to_end/test_differential.py -s
"""
from __future__ import annotations

import math
import os
import random
import time
from collections import Counter

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from tapeml.syntax.errors import LangError, render  # noqa: E402
from tapeml.array.values import Record  # noqa: E402

from conftest import run_slow  # noqa: E402
from support import fresh, run  # noqa: E402


# Patterns tapeml got wrong (fixed; kept as named patterns that the generator draws and the
# regression test below runs); a case containing a listed one is redrawn.
#   rank3_mixed_index     a scalar and exactly one index vector or mask with a range or ':'
#                         between them, in rank >= 3 (NumPy moves the vector's axis first)
#   for_over_number       `for v in s` with s a number or 0-d value: the loop drops the tape
#                         (a refusal with a TypeError is accepted too, as the issue allows)
#   repeated_index_write  x[[0, 0]] = v: the gradient credits every write, not the last one
KNOWN_BUGS: frozenset = frozenset()      # the three of issues 15 and 16 are fixed: all patterns are drawn

_known = os.environ.get("TAPEML_DIFF_KNOWN")
SKIP = KNOWN_BUGS if _known is None else frozenset(s.strip() for s in _known.split(",") if s.strip())
N = int(os.environ.get("TAPEML_DIFF_N", "300" if run_slow() else "30"))
SEED = int(os.environ.get("TAPEML_DIFF_SEED", "16"))
SHOW = int(os.environ.get("TAPEML_DIFF_SHOW", "5"))
CASES = [int(c) for c in os.environ.get("TAPEML_DIFF_CASES", "").split(",") if c.strip()]
RTOL = 1e-9
LN_EPS = 1e-5


class Redraw(Exception):
    """The draw hit a skipped pattern or an impossible shape: draw the case again."""


# ---- the Python side: helpers the generated Python calls (as T.name) -------------------------
def _t(x):
    if torch.is_tensor(x):
        return x
    return torch.tensor(x, dtype=torch.float64)


class Rec(dict):
    """A record on the Python side: r.name reads, with_field builds a new one."""
    __getattr__ = dict.__getitem__


def _leaves(x):
    if isinstance(x, tuple):
        return [leaf for item in x for leaf in _leaves(item)]
    if isinstance(x, dict):
        return [leaf for v in x.values() for leaf in _leaves(v)]
    return [x]


def _rebuild(x, it):
    if isinstance(x, tuple):
        return tuple(_rebuild(item, it) for item in x)
    if isinstance(x, dict):
        return Rec((k, _rebuild(v, it)) for k, v in x.items())
    return next(it)


def _value_and_grad(f, x):
    """tapeml's grad on torch: a fresh node per leaf (so an outer value captured by f stays a
    constant of this level, as tapeml's tape levels keep it), graph kept for nested grads."""
    leaves = _leaves(x)
    xs = [_t(v).clone() if _t(v).requires_grad else _t(v).detach().clone().requires_grad_(True)
          for v in leaves]
    out = _t(f(_rebuild(x, iter(xs))))
    if out.requires_grad:
        gs = torch.autograd.grad(out, xs, create_graph=True, allow_unused=True)
    else:
        gs = [None] * len(xs)
    gs = [torch.zeros_like(v) if g is None else g for g, v in zip(gs, xs)]
    return out, _rebuild(x, iter(gs))


def _grad(f, x):
    return _value_and_grad(f, x)[1]


def _grid(x, spec):
    """Orthogonal index of `x` by spec (one entry per leading axis): ('i', k) drops the axis,
    ('p', [positions]) keeps it. Returns (index tensors for index_put/gather, grid shape, kept
    shape): every combination of the axes' positions, as the guide's indexing rule says."""
    pos, keep = [], []
    for kind, v in spec:
        if kind == "i":
            pos.append([int(v)])
            keep.append(False)
        else:
            pos.append([int(p) for p in v])
            keep.append(True)
    grids = torch.meshgrid(*[torch.tensor(p, dtype=torch.long) for p in pos], indexing="ij")
    gshape = tuple(len(p) for p in pos)
    rest = tuple(x.shape[len(spec):])
    kept = tuple(n for n, k in zip(gshape, keep) if k) + rest
    return grids, gshape, rest, kept


def _index(x, spec):
    x = _t(x)
    if spec and spec[0][0] == "m":
        return x[torch.tensor(spec[0][1])]
    grids, gshape, rest, kept = _grid(x, spec)
    return x[tuple(grids)].reshape(kept)


def _setindex(x, spec, v):
    """x with the indexed part replaced by v (broadcast to it); on a repeated position the last
    write in row-major order of the index grid wins (issue 15's rule)."""
    x, v = _t(x), _t(v)
    if spec and spec[0][0] == "m":
        mask = torch.tensor(spec[0][1])
        n = int(mask.sum())
        return x.index_put((mask,), v.expand(n).clone() if v.dim() == 0 else v.expand(n))
    grids, gshape, rest, kept = _grid(x, spec)
    vfull = v.expand(kept).reshape(gshape + rest)
    flat = np.ravel_multi_index([g.numpy().ravel() for g in grids], x.shape[:len(spec)]) \
        if grids else np.zeros(1, dtype=np.int64)
    last = {}
    for j, p in enumerate(flat.tolist()):
        last[p] = j                       # the later write in row-major grid order wins
    sel = torch.tensor(sorted(last.values()), dtype=torch.long)
    idx = tuple(g.reshape(-1)[sel] for g in grids)
    vals = vfull.reshape((-1,) + rest)[sel]
    return x.index_put(idx, vals)


def _settuple(t, i, v):
    return t[:i] + (v,) + t[i + 1:]


def _setfield(r, name, v):
    out = Rec(r)
    out[name] = v
    return out


def _items(s):
    """What tapeml's `for` walks: a number or 0-d value once, the items of a vector, the rows
    (slices along axis 0) of an array, the items of a tuple, the characters of a string."""
    if isinstance(s, (tuple, str, list)):
        return s
    s = _t(s)
    if s.dim() == 0:
        return [s]
    return list(s.unbind(0))


def _sdpa(q, k, v, allowed, bias):
    q, k, v = _t(q), _t(k), _t(v)
    batch = q.shape[:-2]
    k = k.expand(batch + k.shape[-2:])
    v = v.expand(batch + v.shape[-2:])
    mask = None
    if bias is not None:
        mask = _t(bias).expand(q.shape[:-1] + (k.shape[-2],))
        if allowed is not None:
            mask = mask.masked_fill(~torch.tensor(allowed), float("-inf"))
    elif allowed is not None:
        mask = torch.tensor(allowed)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _layer_norm(x, g, b, eps):
    x, g = _t(x), _t(g)
    return F.layer_norm(x, tuple(g.shape), g, _t(b), eps=eps)


def _layer_norm_composite(x, g, b, eps):
    """layer_norm from primitives, for use inside a nested grad: PyTorch's fused layer_norm
    gives silently wrong derivatives from the third order on (pytorch/pytorch#175754: its
    double backward treats the saved mean and 1/std as constants)."""
    x, g = _t(x), _t(g)
    axes = tuple(range(-g.dim(), 0))
    m = x.mean(axes, keepdim=True)
    v = ((x - m) ** 2).mean(axes, keepdim=True)
    return (x - m) / torch.sqrt(v + eps) * g + _t(b)


def _take_along(x, ids, dim, fewer):
    """tapeml's take_along: PyTorch's gather on x and ids broadcast against each other (the ids
    given an axis at dim when they have one fewer than x: one element per position, that axis
    dropped again). gather, not take_along_dim: the latter's double backward writes into
    autograd's immutable zero tensors (a RuntimeError from torch, not a wrong number)."""
    x = _t(x)
    idx = torch.tensor(np.asarray(ids, dtype=np.int64))
    if fewer:
        idx = idx.unsqueeze(dim)
    shape = [idx.shape[a] if a == dim else max(x.shape[a], idx.shape[a]) for a in range(x.dim())]
    xs = [x.shape[a] if a == dim else shape[a] for a in range(x.dim())]
    out = torch.gather(x.expand(xs), dim, idx.expand(shape))
    return out.squeeze(dim) if fewer else out


class _T:
    c = staticmethod(_t)
    grad = staticmethod(_grad)
    value_and_grad = staticmethod(_value_and_grad)
    index = staticmethod(_index)
    setindex = staticmethod(_setindex)
    settuple = staticmethod(_settuple)
    setfield = staticmethod(_setfield)
    items = staticmethod(_items)
    sdpa = staticmethod(_sdpa)
    layer_norm = staticmethod(_layer_norm)
    layer_norm_composite = staticmethod(_layer_norm_composite)
    take_along = staticmethod(_take_along)
    Rec = Rec

    @staticmethod
    def tr(x):
        x = _t(x)
        return x.reshape(-1, 1) if x.dim() == 1 else x.transpose(-1, -2)

    @staticmethod
    def sum(x, dim=None):
        x = _t(x)
        return x.sum() if dim is None else x.sum(dim)

    @staticmethod
    def mean(x, dim=None):
        x = _t(x)
        return x.mean() if dim is None else x.mean(dim)

    @staticmethod
    def max(x, dim=None):      # tapeml splits the gradient between ties evenly, as amax does
        x = _t(x)
        return x.amax() if dim is None else x.amax(dim)

    @staticmethod
    def min(x, dim=None):
        x = _t(x)
        return x.amin() if dim is None else x.amin(dim)

    @staticmethod
    def stop(x):
        return _t(x).detach()


for _name, _f in {
        "sin": torch.sin, "cos": torch.cos, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
        "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "abs": torch.abs,
        "relu": torch.relu, "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
        "silu": F.silu, "quick_gelu": lambda x: x * torch.sigmoid(1.702 * x)}.items():
    setattr(_T, _name, staticmethod(lambda x, _f=_f: _f(_t(x))))
T = _T()


# ---- literals --------------------------------------------------------------------------------
def num(v) -> str:
    s = repr(float(v))
    return f"({s})" if s.startswith("-") else s


def ml_literal(a: np.ndarray) -> str:
    """tapeml source for an array: a number, [..] for a vector, [..; ..] for a matrix with more
    than one row, reshape([...], dims) for the rest (a 1xn matrix, rank 3 and 4)."""
    a = np.asarray(a)
    if a.dtype == np.bool_:
        item = lambda v: "true" if v else "false"  # noqa: E731
    else:
        item = lambda v: repr(float(v))  # noqa: E731
    if a.ndim == 0:
        return num(a) if a.dtype != np.bool_ else item(a)
    if a.ndim == 1:
        return "[" + ", ".join(item(v) for v in a) + "]"
    if a.ndim == 2 and a.shape[0] > 1:
        return "[" + "; ".join(", ".join(item(v) for v in row) for row in a) + "]"
    flat = "[" + ", ".join(item(v) for v in a.ravel()) + "]"
    return f"reshape({flat}, {', '.join(str(d) for d in a.shape)})"


def broadcast_shape(a, b):
    """The broadcast shape of a and b, or None when they do not broadcast."""
    try:
        return tuple(np.broadcast_shapes(a, b))
    except ValueError:
        return None


# ---- the generator ---------------------------------------------------------------------------
class E:
    """One generated expression: its tapeml text, its Python text, its shape."""
    __slots__ = ("ml", "py", "shape")

    def __init__(self, ml, py, shape):
        self.ml, self.py, self.shape = ml, py, tuple(shape)


class Gen:
    MAX_INPUTS = 4

    def __init__(self, rng: random.Random, family: str, skip=None):
        self.rng = rng
        self.family = family
        self.skip = SKIP if skip is None else skip
        self.inputs: list[tuple[str, np.ndarray]] = []    # X0, X1, ... (differentiated)
        self.consts: list[tuple[str, np.ndarray]] = []    # K0, K1, ... (constants)
        self.scope: list[tuple[str, tuple]] = []          # names an expression may read
        self.allow_new_inputs = True
        self.grad_depth = 0          # > 0 inside a grad within f: derivatives reach order 3
        self.tags: Counter = Counter()
        self.fresh = 0
        self.pre_ml: list[str] = []      # top-level definitions before f (named functions)
        self.pre_py: list[str] = []

    # -- random pieces
    def dim(self, lo=1):
        return self.rng.choice([n for n in (1, 2, 2, 3, 3, 4) if n >= lo] or [lo])

    def shape(self, rank):
        return tuple(self.dim() for _ in range(rank))

    def tag(self, name):
        if name in self.skip:
            raise Redraw(name)
        self.tags[name] += 1

    def name(self, prefix):
        self.fresh += 1
        return f"{prefix}{self.fresh}"

    def values(self, shape, kind="normal"):
        r = self.rng
        flat = [r.gauss(0, 1) for _ in range(int(np.prod(shape, dtype=int)))]
        if kind == "away":     # away from 0: kinks of relu/abs, and well-scaled
            flat = [math.copysign(0.3 + abs(v), v) for v in flat]
        return np.array(flat, dtype=np.float64).reshape(shape)

    def const(self, shape):
        name = f"K{len(self.consts)}"
        self.consts.append((name, self.values(shape)))
        return E(name, name, shape)

    def new_input(self, shape):
        name = f"X{len(self.inputs)}"
        self.inputs.append((name, self.values(shape, "away")))
        self.scope.append((name, tuple(shape)))
        return E(name, name, shape)

    def bshape(self, shape):
        """A shape that broadcasts to `shape`: some axes 1, some leading axes dropped."""
        s = [1 if self.rng.random() < 0.3 else n for n in shape]
        drop = self.rng.randint(0, len(s)) if self.rng.random() < 0.3 else 0
        return tuple(s[drop:])

    # -- leaves
    def leaf(self, shape):
        shape = tuple(shape)
        exact = [n for n, s in self.scope if s == shape]
        if exact and (self.rng.random() < 0.6 or not self.allow_new_inputs
                      or len(self.inputs) >= self.MAX_INPUTS):
            n = self.rng.choice(exact)
            return E(n, n, shape)
        if self.allow_new_inputs and len(self.inputs) < self.MAX_INPUTS:
            return self.new_input(shape)
        # no value of this shape: make one from a value in scope, so gradients still flow
        n, s = self.rng.choice(self.scope)
        k = self.const(shape)
        small = [m for m, t in self.scope if len(t) <= len(shape)
                 and broadcast_shape(t, shape) == shape]
        if small and self.rng.random() < 0.6:
            m = self.rng.choice(small)
            self.tags["broadcast"] += 1
            return E(f"({m} * {k.ml})", f"({m} * {k.py})", shape)
        return E(f"(sum({n}) * {k.ml})", f"(T.sum({n}) * {k.py})", shape)

    def literal_number(self):
        v = round(self.rng.uniform(-2, 2), 3) or 0.5
        return E(num(v), f"T.c({v!r})", ())

    # -- expressions
    def expr(self, shape, depth):
        shape = tuple(shape)
        if depth <= 0 or self.rng.random() < 0.15:
            return self.leaf(shape)
        r = len(shape)
        ops = ["unary"] * 4 + ["binary"] * 4 + ["positive"] * 2 + ["where", "scale", "bool"]
        ops += ["matmul"] * 2 + ["reduce"] * 2 if r <= 3 else []
        if r >= 1:
            ops += ["softmax", "layer_norm", "concat", "reshape", "stack"]
        if 1 <= r <= 3:
            ops += ["take_along"]
        if r <= 2:
            ops += ["einsum"]
        if r >= 2:
            ops += ["transpose"] * 2
            ops += ["sdpa"] * 2 if r <= 3 else []
        if r <= 3:
            ops += ["index"] * 4 + ["mask_index"] * (r == 1)
        ops += ["inner_grad"]
        op = self.rng.choice(ops)
        return getattr(self, "op_" + op)(shape, depth - 1)

    def op_unary(self, shape, d):
        f = self.rng.choice(["sin", "cos", "tanh", "sigmoid", "relu", "abs", "gelu", "gelu_tanh",
                             "silu", "quick_gelu", "neg", "square", "cube", "exp"])
        self.tag("fn_" + f)
        if f == "exp":      # bounded argument: exp(tanh(e))
            a = self.expr(shape, d)
            return E(f"exp(tanh({a.ml}))", f"T.exp(T.tanh({a.py}))", shape)
        a = self.expr(shape, d)
        if f == "neg":
            return E(f"(-{a.ml})", f"(-{a.py})", shape)
        if f == "square":
            return E(f"({a.ml} ^ 2)", f"({a.py} ** 2)", shape)
        if f == "cube":
            return E(f"({a.ml} ^ 3)", f"({a.py} ** 3)", shape)
        return E(f"{f}({a.ml})", f"T.{f}({a.py})", shape)

    def positive(self, shape, d):
        a = self.expr(shape, d)
        k = self.rng.randrange(3)
        if k == 0:
            return E(f"exp(tanh({a.ml}))", f"T.exp(T.tanh({a.py}))", shape)
        if k == 1:
            return E(f"(1 + {a.ml} ^ 2)", f"(1 + {a.py} ** 2)", shape)
        return E(f"(sigmoid({a.ml}) + 0.5)", f"(T.sigmoid({a.py}) + 0.5)", shape)

    def op_positive(self, shape, d):
        f = self.rng.choice(["log", "sqrt", "pow", "div"])
        self.tag("fn_" + f)
        if f == "div":
            a = self.expr(shape, d)
            b = self.positive(self.bshape(shape), d)
            return E(f"({a.ml} / {b.ml})", f"({a.py} / {b.py})", shape)
        p = self.positive(shape, d)
        if f == "pow":
            return E(f"({p.ml} ^ 1.5)", f"({p.py} ** 1.5)", shape)
        return E(f"{f}({p.ml})", f"T.{f}({p.py})", shape)

    def op_binary(self, shape, d):
        s1, s2 = shape, self.bshape(shape)
        if self.rng.random() < 0.5:
            s1, s2 = s2, s1
        if s1 != shape or s2 != shape:
            self.tag("broadcast")
        a, b = self.expr(s1, d), self.expr(s2, d)
        op = self.rng.choice(["+", "-", "*", "*", "max", "min"])
        if op in ("max", "min"):
            self.tag("fn_" + op + "2")
            fn = "maximum" if op == "max" else "minimum"
            return E(f"{op}({a.ml}, {b.ml})", f"torch.{fn}(T.c({a.py}), T.c({b.py}))", shape)
        return E(f"({a.ml} {op} {b.ml})", f"({a.py} {op} {b.py})", shape)

    def op_scale(self, shape, d):
        a, c = self.expr(shape, d), self.literal_number()
        return E(f"({c.ml} * {a.ml})", f"({c.py} * {a.py})", shape)

    def op_where(self, shape, d):
        self.tag("where")
        c1, c2 = self.expr(self.bshape(shape), d - 1), self.expr(self.bshape(shape), d - 1)
        a, b = self.expr(self.bshape(shape), d), self.expr(shape, d)
        return E(f"where({c1.ml} > {c2.ml}, {a.ml}, {b.ml})",
                 f"torch.where(T.c({c1.py}) > T.c({c2.py}), T.c({a.py}), T.c({b.py}))", shape)

    def op_bool(self, shape, d):
        """A comparison (a bool matrix) in arithmetic with a tracked expression: its 0s and 1s, on
        either side of + - * (a bool beside a tracked matrix once broke a plain VJP)."""
        self.tag("bool_operand")
        c1, c2 = self.expr(self.bshape(shape), d - 1), self.expr(self.bshape(shape), d - 1)
        a = self.expr(shape, d)
        op = self.rng.choice(["*", "+", "-"])
        m_ml, m_py = f"({c1.ml} > {c2.ml})", f"(T.c({c1.py}) > T.c({c2.py})).to(torch.float64)"
        if self.rng.random() < 0.5:
            return E(f"({m_ml} {op} {a.ml})", f"({m_py} {op} {a.py})", shape)
        return E(f"({a.ml} {op} {m_ml})", f"({a.py} {op} {m_py})", shape)

    def op_matmul(self, shape, d):
        r = len(shape)
        k = self.dim()
        if r == 0:
            sa, sb = (k,), (k,)
        elif r == 1:
            sa, sb = ((k,), (k, shape[0])) if self.rng.random() < 0.5 else ((shape[0], k), (k,))
        elif r == 2:
            sa, sb = (shape[0], k), (k, shape[1])
        else:
            b, m, n = shape
            sa, sb = self.rng.choice([((b, m, k), (k, n)), ((b, m, k), (k, n)), ((b, m, k), (b, k, n)),
                                      ((m, k), (b, k, n))])
        self.tag(f"matmul_{len(sa)}x{len(sb)}")
        a, bb = self.expr(sa, d), self.expr(sb, d)
        return E(f"({a.ml} @ {bb.ml})", f"({a.py} @ {bb.py})", shape)

    def op_transpose(self, shape, d):
        self.tag("transpose")
        if len(shape) == 2 and shape[1] == 1 and self.rng.random() < 0.5:
            a = self.expr((shape[0],), d)
            return E(f"{a.ml}'", f"T.tr({a.py})", shape)      # a vector's transpose: a column
        src = shape[:-2] + (shape[-1], shape[-2])
        a = self.expr(src, d)
        if self.rng.random() < 0.3:
            return E(f"transpose({a.ml})", f"T.tr({a.py})", shape)
        return E(f"{a.ml}'", f"T.tr({a.py})", shape)

    def op_reduce(self, shape, d):
        f = self.rng.choice(["sum", "sum", "mean", "max", "min"])
        if len(shape) == 0 and self.rng.random() < 0.5:
            self.tag("reduce_all")
            a = self.expr(self.shape(self.rng.randint(1, 3)), d)
            return E(f"{f}({a.ml})", f"T.{f}({a.py})", shape)
        ax = self.rng.randint(0, len(shape))
        src = shape[:ax] + (self.dim(),) + shape[ax:]
        dim = ax - len(src) if self.rng.random() < 0.3 else ax
        self.tag("reduce_dim")
        a = self.expr(src, d)
        return E(f"{f}({a.ml}, dim={dim})", f"T.{f}({a.py}, dim={dim})", shape)

    def op_softmax(self, shape, d):
        f = self.rng.choice(["softmax", "log_softmax"])
        self.tag(f)
        a = self.expr(shape, d)
        if self.rng.random() < 0.5:
            return E(f"{f}({a.ml})", f"torch.{f}(T.c({a.py}), dim=-1)", shape)
        dim = self.rng.randrange(-len(shape), len(shape))
        return E(f"{f}({a.ml}, dim={dim})", f"torch.{f}(T.c({a.py}), dim={dim})", shape)

    def op_layer_norm(self, shape, d):
        k = 2 if len(shape) >= 2 and self.rng.random() < 0.3 else 1     # PyTorch's normalized_shape
        if int(np.prod(shape[-k:])) < 2:
            return self.op_unary(shape, d)
        self.tag("layer_norm" if k == 1 else "layer_norm_2axes")
        a = self.expr(shape, d)
        g, b = self.expr(shape[-k:], d - 1), self.expr(shape[-k:], d - 1)
        ln = "T.layer_norm_composite" if self.grad_depth else "T.layer_norm"
        if self.rng.random() < 0.5:
            return E(f"layer_norm({a.ml}, {g.ml}, {b.ml})", f"{ln}({a.py}, {g.py}, {b.py}, {LN_EPS})", shape)
        return E(f"layer_norm({a.ml}, {g.ml}, {b.ml}, eps=0.01)", f"{ln}({a.py}, {g.py}, {b.py}, 0.01)", shape)

    def op_concat(self, shape, d):
        ax = self.rng.randrange(len(shape))
        if shape[ax] < 2:
            return self.op_binary(shape, d)
        self.tag("concat")
        k = self.rng.randint(1, shape[ax] - 1)
        s1 = shape[:ax] + (k,) + shape[ax + 1:]
        s2 = shape[:ax] + (shape[ax] - k,) + shape[ax + 1:]
        a, b = self.expr(s1, d), self.expr(s2, d)
        return E(f"concat({a.ml}, {b.ml}, dim={ax})", f"torch.cat([T.c({a.py}), T.c({b.py})], dim={ax})",
                 shape)

    def op_stack(self, shape, d):
        ax = self.rng.randrange(len(shape))
        if shape[ax] < 2 or shape[ax] > 3:
            return self.op_binary(shape, d)
        self.tag("stack")
        src = shape[:ax] + shape[ax + 1:]
        parts = [self.expr(src, d) for _ in range(shape[ax])]
        return E(f"stack({', '.join(p.ml for p in parts)}, dim={ax})",
                 f"torch.stack([{', '.join('T.c(' + p.py + ')' for p in parts)}], dim={ax})", shape)

    def op_reshape(self, shape, d):
        self.tag("reshape")
        n = int(np.prod(shape))
        dims = [n] if n > 1 and len(shape) > 1 else list(shape)
        if self.rng.random() < 0.5 and len(shape) == 1:
            for k in (2, 3):
                if n % k == 0 and n > k:
                    dims = [k, n // k]
        a = self.expr(tuple(dims), d)
        return E(f"reshape({a.ml}, {', '.join(map(str, shape))})",
                 f"torch.reshape(T.c({a.py}), {tuple(shape)!r})", shape)

    def op_sdpa(self, shape, d):
        *batch, lq, dv = shape
        batch = tuple(batch)
        dk = self.dim()
        causal = self.rng.random() < 0.3
        lk = self.dim(lo=lq) if causal else self.dim()
        kb = batch if (not batch or self.rng.random() < 0.7) else ()
        q = self.expr(batch + (lq, dk), d)
        k = self.expr(kb + (lk, dk), d)
        v = self.expr(kb + (lk, dv), d)
        allowed = np.ones((lq, lk), dtype=bool)
        if causal:
            allowed &= np.arange(lk)[None, :] <= np.arange(lq)[:, None] + lk - lq
        kw_ml, mask = [], None
        if self.rng.random() < 0.4 and self.rng.random() < 0.4:
            # a mask that broadcasts by PyTorch's rule: one row of keys for every query
            # ([L_k], [1, L_k], or [B.., 1, L_k]); key 0 stays allowed, as causality allows it
            keys = np.array([self.rng.random() < 0.6 for _ in range(lk)])
            keys[0] = True
            mshape = self.rng.choice([(lk,), (1, lk)] + ([tuple(batch) + (1, lk)] if batch else []))
            mask = np.broadcast_to(keys, mshape).copy()
            allowed = allowed & np.broadcast_to(keys, (lq, lk))
            kw_ml.append(f"mask={ml_literal(mask)}")
            self.tag("sdpa_mask_broadcast")
        elif self.rng.random() < 0.4:
            mask = np.array([[self.rng.random() < 0.6 for _ in range(lk)] for _ in range(lq)])
            for i in range(lq):            # every row may attend somewhere: no all-masked rows
                if not (mask[i] & allowed[i]).any():
                    mask[i, int(np.flatnonzero(allowed[i])[-1])] = True
            allowed &= mask
            kw_ml.append(f"mask={ml_literal(mask)}")
            self.tag("sdpa_mask")
        bias = None
        if self.rng.random() < 0.3:
            bias = self.expr((lq, lk), d - 1)
            kw_ml.append(f"bias={bias.ml}")
            self.tag("sdpa_bias")
        if causal:
            kw_ml.append("causal=true")
            self.tag("sdpa_causal")
        self.tag("sdpa" + ("_batched" if batch else ""))
        al = "None" if allowed.all() else repr(allowed.tolist())
        args = ", ".join([q.ml, k.ml, v.ml] + kw_ml)
        return E(f"scaled_dot_product_attention({args})",
                 f"T.sdpa({q.py}, {k.py}, {v.py}, {al}, {bias.py if bias else None})", shape)

    def op_take_along(self, shape, d):
        """take_along: one element per position (ids of one axis fewer than x) or NumPy's
        take_along_axis (ids of x's rank; x broadcast where it has size 1)."""
        r = len(shape)
        fewer = self.rng.random() < 0.5
        dim = self.rng.randrange(r + 1 if fewer else r)
        k = self.dim()
        if fewer:
            src = shape[:dim] + (k,) + shape[dim:]
            ids_shape = shape
        else:
            src = tuple(k if ax == dim else (1 if self.rng.random() < 0.2 else n) for ax, n in enumerate(shape))
            ids_shape = shape
        ids = np.array([self.rng.randrange(k) for _ in range(int(np.prod(ids_shape, dtype=int)))],
                       dtype=np.float64).reshape(ids_shape)
        self.tag("take_along_pairs" if fewer else "take_along_axis")
        a = self.expr(src, d)
        wd = dim - len(src) if self.rng.random() < 0.3 else dim
        ids_ml = ml_literal(ids) if ids.ndim else num(float(ids))
        return E(f"take_along({a.ml}, {ids_ml}, dim={wd})",
                 f"T.take_along({a.py}, {ids.tolist()!r}, {dim}, {fewer})", shape)

    def op_einsum(self, shape, d):
        """einsum with one operand (a trace, a diagonal, a transpose, a sum over a repeated letter)
        or with three (a chain, a contraction of three vectors)."""
        r = len(shape)
        n = self.dim()
        if r == 0:
            forms = [("ii", [(n, n)]), ("i,i,i->", [(n,), (n,), (n,)]), ("ij->", [(n, self.dim())])]
        elif r == 1:
            m = shape[0]
            forms = [("ii->i", [(m, m)]), ("ij,jk,k->i", [(m, n), (n, 2), (2,)]), ("iij->j", [(n, n, m)])]
        else:
            a, b = shape
            forms = [("ij->ji", [(b, a)]), ("ij,jk,kl->il", [(a, n), (n, 2), (2, b)])]
            if a == b:
                forms.append(("ii,ij->ij", [(a, a), (a, b)]))
            forms.append(("iij->ij", [(a, a, b)]))
        spec, shapes = self.rng.choice(forms)
        self.tag("einsum_one" if len(shapes) == 1 else "einsum_many")
        parts = [self.expr(s, d) for s in shapes]
        # a product of three draws is scaled down: values past ~8 saturate tanh and sigmoid, whose
        # derivatives there are rounding noise in torch's reference (1e-17 where the truth is 1e-20)
        c = "0.25 * " if len(shapes) > 1 else ""
        return E(f'({c}einsum("{spec}", {", ".join(p.ml for p in parts)}))',
                 f'({c}torch.einsum("{spec}", {", ".join("T.c(" + p.py + ")" for p in parts)}))', shape)

    def op_inner_grad(self, shape, d):
        """grad inside the expression: its outer gradient is a second derivative; the inner
        function may read outer values (a closure; they are constants of the inner level)."""
        self.tag("inner_grad")
        y = self.name("y")
        a = self.expr(shape, d)
        self.scope.append((y, shape))
        saved = self.allow_new_inputs
        self.allow_new_inputs = False
        self.grad_depth += 1
        try:
            body = self.expr(shape, max(d, 1))
        finally:
            self.allow_new_inputs = saved
            self.grad_depth -= 1
            self.scope.remove((y, shape))
        k = self.const(shape)
        return E(f"grad(fn({y}) -> sum({body.ml} * {k.ml}), {a.ml})",
                 f"T.grad(lambda {y}: T.sum({body.py} * {k.py}), {a.py})", shape)

    # -- indexing
    def index_spec(self, out_shape, write=False, max_rank=4):
        """A source shape and an index that picks `out_shape` from it: each kept axis by ':',
        a range (maybe with `end`, a step, or descending), an index vector or a 1-D mask;
        dropped axes by a number, `end` or `end-1`. Returns (src_shape, ml items, py spec)."""
        r = len(out_shape)
        rmax = min(max_rank, r + 2)
        src_rank = self.rng.randint(max(r, 1), rmax)
        dropped = set(self.rng.sample(range(src_rank), src_rank - r))
        src, ml, py, kinds = [], [], [], []
        k = 0
        for ax in range(src_rank):
            if ax in dropped:
                n = self.dim()
                i = self.rng.randrange(n)
                text = str(i)
                if i == n - 1 and self.rng.random() < 0.5:
                    text = "end"
                elif i == n - 2 and self.rng.random() < 0.3:
                    text = "end-1"
                src.append(n)
                ml.append(text)
                py.append(("i", i))
                kinds.append("scalar")
                continue
            s = out_shape[k]
            k += 1
            kind = self.rng.choice(["colon", "range", "range", "vector", "vector", "mask"])
            if kind == "colon":
                src.append(s)
                ml.append(":")
                py.append(("p", list(range(s))))
            elif kind == "range":
                step = 1 if s == 1 or self.rng.random() < 0.7 else self.rng.choice([2, -1])
                span = (s - 1) * abs(step) + 1
                n = span + self.rng.randint(0, 2)
                lo = self.rng.randint(0, n - span)
                hi = lo + span - 1
                if step > 0:
                    a_, b_ = lo, hi
                    pos = list(range(lo, hi + 1, step))
                else:
                    a_, b_ = hi, lo
                    pos = list(range(hi, lo - 1, -1))
                ta = "end" if a_ == n - 1 and self.rng.random() < 0.3 else str(a_)
                tb = "end" if b_ == n - 1 and self.rng.random() < 0.5 else str(b_)
                src.append(n)
                ml.append(f"{ta}:{tb}" if step == 1 else f"{ta}:{step}:{tb}")
                py.append(("p", pos))
                self.tags["index_step" if step != 1 else "index_range"] += 1
            elif kind == "vector":
                n = self.dim(lo=s if write else 1)
                if write and "repeated_index_write" in self.skip:
                    pos = self.rng.sample(range(n), s)
                else:
                    pos = [self.rng.randrange(n) for _ in range(s)]
                if len(set(pos)) < len(pos):
                    self.tag("repeated_index_write" if write else "repeated_index_read")
                src.append(n)
                ml.append("[" + ", ".join(map(str, pos)) + "]")
                py.append(("p", pos))
            else:
                n = s + self.rng.randint(0, 2)
                pos = sorted(self.rng.sample(range(n), s))
                mask = ["true" if i in pos else "false" for i in range(n)]
                src.append(n)
                ml.append("[" + ", ".join(mask) + "]")
                py.append(("p", pos))
            kinds.append(kind)
        if src_rank >= 3:
            arrays = [i for i, t in enumerate(kinds) if t in ("vector", "mask")]
            scalars = [i for i, t in enumerate(kinds) if t == "scalar"]
            if len(arrays) == 1 and scalars:
                v = arrays[0]
                between = any(kinds[j] in ("colon", "range")
                              for s_ in scalars for j in range(min(s_, v) + 1, max(s_, v)))
                if between:
                    self.tag("rank3_mixed_index")
        for t in set(kinds):
            self.tags["index_" + t] += 1
        self.tags[f"index_rank{src_rank}"] += 1
        # trailing ':' may be left out (m[i] is row i)
        while ml and ml[-1] == ":" and len(ml) > 1 and self.rng.random() < 0.6:
            ml.pop()
            py.pop()
            self.tags["index_implicit_axes"] += 1
        return tuple(src), ml, py

    def op_index(self, shape, d):
        src, ml, py = self.index_spec(shape)
        a = self.expr(src, d)
        return E(f"{a.ml}[{', '.join(ml)}]", f"T.index({a.py}, {py!r})", shape)

    def full_mask(self, count):
        """A bool mask of a whole array's shape with `count` trues: source shape, ml, numpy."""
        for _ in range(20):
            src = self.shape(self.rng.randint(1, 3))
            if np.prod(src) >= count:
                break
        else:
            raise Redraw("mask")
        n = int(np.prod(src))
        pos = set(self.rng.sample(range(n), count))
        mask = np.array([i in pos for i in range(n)]).reshape(src)
        self.tag("index_full_mask")
        return src, ml_literal(mask), mask

    def op_mask_index(self, shape, d):
        src, mml, mask = self.full_mask(shape[0])
        a = self.expr(src, d)
        return E(f"{a.ml}[{mml}]", f"T.index({a.py}, [('m', {mask.tolist()!r})])", shape)


# ---- statements ------------------------------------------------------------------------------
class Body:
    """Lines of f's body in both languages, indented alike (tapeml closes blocks with `end`)."""

    def __init__(self, indent=1):
        self.ml, self.py, self.ind = [], [], indent

    def line(self, ml, py):
        self.ml.append("    " * self.ind + ml)
        self.py.append("    " * self.ind + py)

    def open(self, ml, py):
        self.line(ml, py)
        self.ind += 1

    def close(self):
        self.ind -= 1
        self.ml.append("    " * self.ind + "end")


ELEMENTWISE = ["sin", "tanh", "sigmoid", "cos"]


class StmtGen(Gen):
    DEPTH = 2

    def bind(self, name, shape):
        self.scope = [(n, s) for n, s in self.scope if n != name]
        self.scope.append((name, tuple(shape)))

    def local(self, rank=None, lo=0, hi=3):
        """A name in scope (optionally of a given rank), or None."""
        c = [(n, s) for n, s in self.scope if (len(s) == rank if rank is not None else lo <= len(s) <= hi)]
        return self.rng.choice(c) if c else None

    def e(self, shape):
        return self.expr(shape, self.DEPTH)

    def any_shape(self, lo=0, hi=2):
        """Mostly the shape of a value in scope, so that statements combine the locals."""
        known = [s for _, s in self.scope if lo <= len(s) <= hi]
        if known and self.rng.random() < 0.7:
            return self.rng.choice(known)
        return self.shape(self.rng.randint(lo, hi))

    def statements(self, body: Body, count: int):
        kinds = ["assign", "aug", "for_vector", "for_rows", "for_rank3", "for_tuple", "for_fns", "for_bools",
                 "for_range", "for_string", "for_number", "while", "if", "closure", "closure_loop",
                 "call_named", "recursion", "index_write", "loop_write", "value_semantics",
                 "record", "tuple_item", "destructure", "value_and_grad", "nested_grad",
                 "stop_gradient", "for_destructure"]
        for _ in range(count):
            k = self.rng.choice(kinds)
            getattr(self, "st_" + k)(body)

    # each statement binds at least one new local that later code (and the return) can read
    def st_assign(self, b):
        s = self.any_shape()
        v = self.name("v")
        x = self.e(s)
        b.line(f"{v} = {x.ml}", f"{v} = {x.py}")
        self.bind(v, s)

    def st_aug(self, b):
        n, s = self.local()
        op = self.rng.choice(["+", "-", "*", "/"])
        x = self.positive(self.bshape(s), self.DEPTH) if op == "/" else self.expr(self.bshape(s), self.DEPTH)
        self.tag("augmented_assign")
        b.line(f"{n} {op}= {x.ml}", f"{n} = {n} {op} {x.py}")

    def loop_acc(self, b, shape):
        acc = self.name("acc")
        x = self.e(shape)
        b.line(f"{acc} = {x.ml}", f"{acc} = {x.py}")
        return acc

    def loop_body(self, b, acc, acc_shape, var, var_shape):
        self.scope.append((var, var_shape))
        x = self.e(acc_shape)
        c = self.literal_number()
        if self.rng.random() < 0.5:
            b.line(f"{acc} = {acc} * {c.ml} + {x.ml}", f"{acc} = {acc} * {c.py} + {x.py}")
        else:
            b.line(f"{acc} = {acc} + {x.ml}", f"{acc} = {acc} + {x.py}")
        self.scope.remove((var, var_shape))

    def for_over(self, b, it_ml, it_py, item_shape, tag):
        self.tag(tag)
        acc_shape = item_shape if self.rng.random() < 0.5 else ()
        acc = self.loop_acc(b, acc_shape)
        var = self.name("e")
        b.open(f"for {var} in {it_ml}", f"for {var} in T.items({it_py}):")
        self.loop_body(b, acc, acc_shape, var, item_shape)
        b.close()
        self.bind(acc, acc_shape)

    def st_for_vector(self, b):
        n = self.local(rank=1)
        x = E(n[0], n[0], n[1]) if n and self.rng.random() < 0.6 else self.e((self.dim(),))
        self.for_over(b, x.ml, x.py, (), "for_vector")

    def st_for_rows(self, b):
        n = self.local(rank=2)
        x = E(n[0], n[0], n[1]) if n and self.rng.random() < 0.6 else self.e(self.shape(2))
        self.for_over(b, x.ml, x.py, x.shape[1:], "for_rows")

    def st_for_rank3(self, b):
        x = self.e(self.shape(3))
        self.for_over(b, x.ml, x.py, x.shape[1:], "for_rank3")

    def st_for_number(self, b):
        n = self.local(rank=0)
        x = E(n[0], n[0], ()) if n and self.rng.random() < 0.6 else self.e(())
        self.for_over(b, x.ml, x.py, (), "for_over_number")

    def st_for_bools(self, b):
        """The items of a bool vector are bools: a branch per item."""
        self.tag("for_bools")
        n = self.local(rank=1)
        x = E(n[0], n[0], n[1]) if n and self.rng.random() < 0.6 else self.e((self.dim(),))
        s = self.any_shape()
        acc = self.loop_acc(b, s)
        y = self.e(s)
        c = self.name("c")
        b.open(f"for {c} in {x.ml} > 0", f"for {c} in T.items({x.py} > 0):")
        b.open(f"if {c}", f"if {c}:")
        b.line(f"{acc} = {acc} * 0.5 + {y.ml}", f"{acc} = {acc} * 0.5 + {y.py}")
        b.close()
        b.close()
        self.bind(acc, s)

    def st_for_tuple(self, b):
        self.tag("for_tuple")
        parts = [self.e(self.any_shape()) for _ in range(self.rng.randint(1, 3))]
        acc = self.loop_acc(b, ())
        var = self.name("e")
        f = self.rng.choice(ELEMENTWISE)
        tml = "(" + ", ".join(p.ml for p in parts) + ("," if len(parts) == 1 else "") + ")"
        tpy = "(" + ", ".join(p.py for p in parts) + ("," if len(parts) == 1 else "") + ")"
        b.open(f"for {var} in {tml}", f"for {var} in T.items({tpy}):")
        b.line(f"{acc} = {acc} + sum({f}({var}) * {var})", f"{acc} = {acc} + T.sum(T.{f}({var}) * {var})")
        b.close()
        self.bind(acc, ())

    def st_for_fns(self, b):
        self.tag("for_functions")
        s = self.any_shape()
        x = self.e(s)
        fns = self.rng.sample(ELEMENTWISE + ["exp", "gelu"], 3)
        acc = self.loop_acc(b, s)
        h = self.name("h")
        b.open(f"for {h} in ({', '.join(fns)})", f"for {h} in T.items(({', '.join('T.' + f for f in fns)})):")
        b.line(f"{acc} = {acc} + {h}(tanh({x.ml}))", f"{acc} = {acc} + {h}(T.tanh({x.py}))")
        b.close()
        self.bind(acc, s)

    def st_for_destructure(self, b):
        """`for a, b in zip(X, Y)` (rows or elements in step) or `for i, e in enumerate(X)`."""
        self.tag("for_destructure")
        s = (self.dim(),) + self.shape(self.rng.randint(0, 1))
        x, y = self.e(s), self.e(s)
        acc = self.loop_acc(b, ())
        f = self.rng.choice(ELEMENTWISE)
        u, v = self.name("u"), self.name("w")
        if self.rng.random() < 0.5:
            b.open(f"for {u}, {v} in zip({x.ml}, {y.ml})", f"for {u}, {v} in zip(T.items({x.py}), T.items({y.py})):")
            b.line(f"{acc} = {acc} + sum({f}({u}) * {v})", f"{acc} = {acc} + T.sum(T.{f}({u}) * {v})")
        else:
            b.open(f"for {u}, {v} in enumerate({x.ml})", f"for {u}, {v} in enumerate(T.items({x.py})):")
            b.line(f"{acc} = {acc} * 0.5 + ({u} + 1) * sum({f}({v}))",
                   f"{acc} = {acc} * 0.5 + ({u} + 1) * T.sum(T.{f}({v}))")
        b.close()
        self.bind(acc, ())

    def range_loop(self, n):
        """A loop head over indices within 0..n-1: (ml text, Python list of the values)."""
        k = self.rng.randrange(4)
        if k == 0:
            return f"0:{n - 1}", list(range(n))
        if k == 1:
            return f"range({n})", list(range(n))
        if k == 2 and n >= 3:
            return f"0:2:{n - 1}", list(range(0, n, 2))
        return f"{n - 1}:-1:0", list(range(n - 1, -1, -1))

    def st_for_range(self, b):
        self.tag("for_range")
        n = self.dim(lo=2)
        vec = self.e((n,))
        vn = self.name("v")
        b.line(f"{vn} = {vec.ml}", f"{vn} = {vec.py}")
        acc = self.loop_acc(b, ())
        head, vals = self.range_loop(n)
        i = self.name("i")
        b.open(f"for {i} in {head}", f"for {i} in {[float(v) for v in vals]!r}:")
        if self.rng.random() < 0.6:
            j = self.rng.choice(vals)
            word = self.rng.choice(["break", "continue"])
            self.tag("for_" + word)
            b.open(f"if {i} == {j}", f"if {i} == {float(j)!r}:")
            b.line(word, word)
            b.close()
        x = self.e(())
        b.line(f"{acc} = {acc} + {vn}[{i}] * {x.ml} + {i} * 0.25",
               f"{acc} = {acc} + T.index({vn}, [('i', {i})]) * {x.py} + {i} * 0.25")
        b.close()
        self.bind(vn, (n,))
        self.bind(acc, ())

    def st_for_string(self, b):
        self.tag("for_string")
        s = self.any_shape()
        acc = self.loop_acc(b, s)
        x = self.e(s)
        c = self.name("c")
        b.open(f'for {c} in "ab"', f'for {c} in "ab":')
        b.line(f"{acc} = {acc} * 0.5 + {x.ml}", f"{acc} = {acc} * 0.5 + {x.py}")
        b.close()
        self.bind(acc, s)

    def st_while(self, b):
        self.tag("while")
        s = self.any_shape()
        acc = self.loop_acc(b, s)
        k = self.name("k")
        n = self.rng.randint(1, 3)
        b.line(f"{k} = 0", f"{k} = 0.0")
        b.open(f"while {k} < {n}", f"while {k} < {n}:")
        if self.rng.random() < 0.4:
            self.tag("while_break")
            b.open(f"if {k} == {n - 1}", f"if {k} == {float(n - 1)!r}:")
            b.line("break", "break")
            b.close()
        x = self.e(s)
        b.line(f"{acc} = {acc} * 0.75 + {x.ml}", f"{acc} = {acc} * 0.75 + {x.py}")
        b.line(f"{k} += 1", f"{k} = {k} + 1")
        b.close()
        self.bind(acc, s)

    def st_if(self, b):
        self.tag("if")
        s = self.any_shape()
        c = self.e(self.any_shape())
        v = self.name("v")
        x1, x2 = self.e(s), self.e(s)
        b.open(f"if sum({c.ml}) > 0", f"if T.sum({c.py}) > 0:")
        b.line(f"{v} = {x1.ml}", f"{v} = {x1.py}")
        b.ind -= 1
        b.ml.append("    " * b.ind + "else")
        b.py.append("    " * b.ind + "else:")
        b.ind += 1
        b.line(f"{v} = {x2.ml}", f"{v} = {x2.py}")
        b.close()
        self.bind(v, s)

    def st_closure(self, b):
        """Closures see later assignments to the names they use (the guide's choice; Python's)."""
        self.tag("closure")
        s, t = self.any_shape(), self.any_shape()
        w, g, z, v = self.name("w"), self.name("g"), self.name("z"), self.name("v")
        x = self.e(s)
        b.line(f"{w} = {x.ml}", f"{w} = {x.py}")
        self.scope.append((z, t))
        body = self.e(t if self.rng.random() < 0.5 else s)
        self.scope.remove((z, t))
        b.line(f"{g} = fn({z}) -> {body.ml}", f"{g} = lambda {z}: {body.py}")
        if self.rng.random() < 0.6:
            self.tag("closure_late_binding")
            y = self.e(s)
            b.line(f"{w} = {w} * 0.5 + {y.ml}", f"{w} = {w} * 0.5 + {y.py}")
        arg = self.e(t)
        b.line(f"{v} = {g}({arg.ml})", f"{v} = {g}({arg.py})")
        self.bind(w, s)
        self.bind(v, body.shape)

    def st_closure_loop(self, b):
        self.tag("closure_loop")
        s = self.any_shape()
        hs, i, x, v = self.name("hs"), self.name("i"), self.name("x"), self.name("v")
        b.line(f"{hs} = ()", f"{hs} = ()")
        b.open(f"for {i} in 1:3", f"for {i} in [1.0, 2.0, 3.0]:")
        b.line(f"{hs} = append({hs}, fn({x}) -> {x} * {i})", f"{hs} = {hs} + ((lambda {x}: {x} * {i}),)")
        b.close()
        arg = self.e(s)
        j = self.rng.randrange(3)
        b.line(f"{v} = {hs}[{j}]({arg.ml})", f"{v} = {hs}[{j}]({arg.py})")
        self.bind(v, s)

    def isolated(self, names):
        """Generate a function body that sees only its parameters (and the global constants)."""
        saved, saved_new = self.scope, self.allow_new_inputs
        self.scope, self.allow_new_inputs = list(names), False
        return saved, saved_new

    def st_call_named(self, b):
        self.tag("named_function")
        s = self.any_shape()
        h, a, c = self.name("h"), self.name("a"), self.name("b")
        saved = self.isolated([(a, s), (c, ())])
        try:
            body = self.e(s)
        finally:
            self.scope, self.allow_new_inputs = saved
        d = self.literal_number()
        self.pre_ml += [f"fn {h}({a}, {c}={d.ml})", f"    t = {body.ml}", "    return t", "end"]
        self.pre_py += [f"def {h}({a}, {c}={d.py}):", f"    t = {body.py}", "    return t"]
        x = self.e(s)
        v = self.name("v")
        if self.rng.random() < 0.5:
            self.tag("keyword_argument")
            y = self.e(())
            b.line(f"{v} = {h}({x.ml}, {c}={y.ml})", f"{v} = {h}({x.py}, {c}={y.py})")
        else:
            b.line(f"{v} = {h}({x.ml})", f"{v} = {h}({x.py})")
        self.bind(v, s)

    def st_recursion(self, b):
        self.tag("recursion")
        h = self.name("pw")
        self.pre_ml += [f"fn {h}(x, n)", "    if n == 0", "        return 1", "    end",
                        f"    return x * {h}(x, n - 1)", "end"]
        self.pre_py += [f"def {h}(x, n):", "    if n == 0:", "        return T.c(1.0)",
                        f"    return x * {h}(x, n - 1)"]
        s = self.any_shape()
        x = self.e(s)
        v = self.name("v")
        n = self.rng.randint(1, 3)
        b.line(f"{v} = {h}(tanh({x.ml}), {n})", f"{v} = {h}(T.tanh({x.py}), {n})")
        self.bind(v, s)

    def index_write(self, b, target, src_shape, spec_ml, spec_py, sel_shape, aug):
        x = self.expr(self.bshape(sel_shape), self.DEPTH)
        if aug:
            self.tag("augmented_index_assign")
            op = self.rng.choice("+-*")
            b.line(f"{target}[{', '.join(spec_ml)}] {op}= {x.ml}",
                   f"{target} = T.setindex({target}, {spec_py!r}, T.index({target}, {spec_py!r}) {op} {x.py})")
        else:
            b.line(f"{target}[{', '.join(spec_ml)}] = {x.ml}",
                   f"{target} = T.setindex({target}, {spec_py!r}, {x.py})")

    def st_index_write(self, b):
        self.tag("index_assign")
        y = self.name("y")
        if self.rng.random() < 0.2:
            count = self.dim()
            src, mml, mask = self.full_mask(count)
            x = self.e(self.rng.choice([(), (count,)]))
            base = self.e(src)
            b.line(f"{y} = {base.ml}", f"{y} = {base.py}")
            b.line(f"{y}[{mml}] = {x.ml}", f"{y} = T.setindex({y}, [('m', {mask.tolist()!r})], {x.py})")
            self.bind(y, src)
            return
        sel = self.any_shape(0, 2)
        src, ml, py = self.index_spec(sel, write=True)
        base = self.e(src)
        b.line(f"{y} = {base.ml}", f"{y} = {base.py}")
        self.index_write(b, y, src, ml, py, sel, self.rng.random() < 0.3)
        self.bind(y, src)

    def st_loop_write(self, b):
        self.tag("loop_index_assign")
        n = self.dim(lo=2)
        s = (n,) + self.any_shape(0, 1)
        y, i = self.name("y"), self.name("i")
        base = self.e(s)
        b.line(f"{y} = {base.ml}", f"{y} = {base.py}")
        head, vals = self.range_loop(n)
        b.open(f"for {i} in {head}", f"for {i} in {[float(v) for v in vals]!r}:")
        x = self.e(s[1:])
        if self.rng.random() < 0.5 and n >= 2:
            # a write that reads another row: order matters
            b.line(f"{y}[{i}] = {y}[{i}] * {x.ml} + {y}[0] * 0.5",
                   f"{y} = T.setindex({y}, [('i', {i})], T.index({y}, [('i', {i})]) * {x.py}"
                   f" + T.index({y}, [('i', 0)]) * 0.5)")
        else:
            b.line(f"{y}[{i}] = {y}[{i}] * {x.ml}",
                   f"{y} = T.setindex({y}, [('i', {i})], T.index({y}, [('i', {i})]) * {x.py})")
        b.close()
        self.bind(y, s)

    def st_value_semantics(self, b):
        """b = a; b[...] = ...: a keeps its value."""
        self.tag("value_semantics")
        sel = self.any_shape(0, 1)
        src, ml, py = self.index_spec(sel, write=True, max_rank=3)
        a, c = self.name("a"), self.name("c")
        base = self.e(src)
        b.line(f"{a} = {base.ml}", f"{a} = {base.py}")
        b.line(f"{c} = {a}", f"{c} = {a}")
        self.index_write(b, c, src, ml, py, sel, self.rng.random() < 0.3)
        self.bind(a, src)
        self.bind(c, src)

    def st_record(self, b):
        self.tag("record_field_assign")
        s1, s2 = self.any_shape(), self.any_shape()
        r, q = self.name("r"), self.name("s")
        x1, x2 = self.e(s1), self.e(s2)
        nested = self.rng.random() < 0.4
        if nested:
            self.tag("nested_field_assign")
            b.line(f"{r} = {{p = {x1.ml}, n = {{q = {x2.ml}}}}}",
                   f"{r} = T.Rec(p={x1.py}, n=T.Rec(q={x2.py}))")
        else:
            b.line(f"{r} = {{p = {x1.ml}, q = {x2.ml}}}", f"{r} = T.Rec(p={x1.py}, q={x2.py})")
        b.line(f"{q} = {r}", f"{q} = {r}")
        y = self.e(s1)
        b.line(f"{q}.p = {q}.p * 2 + {y.ml}", f"{q} = T.setfield({q}, 'p', {q}.p * 2 + {y.py})")
        path = "n.q" if nested else "q"
        if nested:
            b.line(f"{q}.n.q = tanh({q}.n.q)", f"{q} = T.setfield({q}, 'n', T.setfield({q}.n, 'q', T.tanh({q}.n.q)))")
        names = []
        for src, field, s in ((r, "p", s1), (q, "p", s1), (r, path, s2), (q, path, s2)):
            v = self.name("v")
            b.line(f"{v} = {src}.{field}", f"{v} = {src}.{field}")
            names.append((v, s))
        for v, s in names:
            self.bind(v, s)

    def st_tuple_item(self, b):
        self.tag("tuple_item_assign")
        s1, s2 = self.any_shape(), self.any_shape()
        t, u, v, w = self.name("t"), self.name("u"), self.name("v"), self.name("w")
        x1, x2, y = self.e(s1), self.e(s2), self.e(s2)
        b.line(f"{t} = ({x1.ml}, {x2.ml})", f"{t} = ({x1.py}, {x2.py})")
        b.line(f"{u} = {t}", f"{u} = {t}")
        b.line(f"{u}[1] = {u}[1] * {y.ml}", f"{u} = T.settuple({u}, 1, {u}[1] * {y.py})")
        b.line(f"{v} = {t}[1]", f"{v} = {t}[1]")
        self.bind(v, s2)
        if broadcast_shape(s1, s2) is not None:
            b.line(f"{w} = {u}[1] + {u}[0]", f"{w} = {u}[1] + {u}[0]")
            self.bind(w, broadcast_shape(s1, s2))
        else:
            b.line(f"{w} = {u}[0]", f"{w} = {u}[0]")
            self.bind(w, s1)

    def st_destructure(self, b):
        self.tag("destructure")
        s1, s2 = self.any_shape(), self.any_shape()
        p, q = self.name("v"), self.name("v")
        x1, x2 = self.e(s1), self.e(s2)
        b.line(f"{p}, {q} = ({x1.ml}, {x2.ml})", f"{p}, {q} = ({x1.py}, {x2.py})")
        self.bind(p, s1)
        self.bind(q, s2)

    def inner_fn(self, shape):
        z = self.name("z")
        self.scope.append((z, shape))
        self.grad_depth += 1
        body = self.e(shape)
        self.grad_depth -= 1
        self.scope.remove((z, shape))
        k = self.const(shape)
        return (f"fn({z}) -> sum({body.ml} * {k.ml})", f"lambda {z}: T.sum({body.py} * {k.py})")

    def st_value_and_grad(self, b):
        self.tag("value_and_grad")
        s = self.any_shape()
        x = self.e(s)
        fml, fpy = self.inner_fn(s)
        v, g = self.name("v"), self.name("g")
        b.line(f"{v}, {g} = value_and_grad({fml}, {x.ml})", f"{v}, {g} = T.value_and_grad({fpy}, {x.py})")
        self.bind(v, ())
        self.bind(g, s)

    def st_nested_grad(self, b):
        self.tag("nested_grad")
        s = self.any_shape()
        x = self.e(s)
        fml, fpy = self.inner_fn(s)
        g = self.name("g")
        b.line(f"{g} = grad({fml}, {x.ml})", f"{g} = T.grad({fpy}, {x.py})")
        self.bind(g, s)

    def st_stop_gradient(self, b):
        self.tag("stop_gradient")
        s = self.any_shape()
        x, y = self.e(s), self.e(s)
        v = self.name("v")
        b.line(f"{v} = {x.ml} * stop_gradient({y.ml})", f"{v} = {x.py} * T.stop({y.py})")
        self.bind(v, s)



# ---- whole programs --------------------------------------------------------------------------
class Case:
    def __init__(self, family, number, ml, py, env, tags):
        self.family, self.number, self.ml, self.py, self.env, self.tags = family, number, ml, py, env, tags

    def title(self):
        return f"{self.family} case {self.number} (seed {SEED})"


def assemble(g: Gen, family, number, body_ml, body_py, ret_ml, ret_py, ev=None, hessian=False,
             record=False):
    names = [n for n, _ in g.inputs]
    params = ", ".join(names)
    vs = [(f"V{j}", g.values(a.shape)) for j, (_, a) in enumerate(g.inputs)] if hessian else []
    ml = [f"{n} = {ml_literal(a)}" for n, a in g.inputs + g.consts + vs]
    py = []
    ml += g.pre_ml
    py += g.pre_py
    ml += [f"fn f({params})"] + body_ml + [f"    return {ret_ml}", "end", f"OUT = f({params})"]
    py += [f"def f({params}):"] + body_py + [f"    return {ret_py}", f"OUT = f({params})"]
    if record:
        args = ", ".join(f"p.{n}" for n in names)
        pack_ml = "{" + ", ".join(f"{n} = {n}" for n in names) + "}"
        pack_py = "T.Rec(" + ", ".join(f"{n}={n}" for n in names) + ")"
        part = [f"g.{n}" for n in names]
    else:
        args = ", ".join(f"p[{j}]" for j in range(len(names)))
        pack_ml = pack_py = "(" + ", ".join(names) + ("," if len(names) == 1 else "") + ")"
        part = [f"g[{j}]" for j in range(len(names))]
    ml.append(f"G = grad(fn(p) -> f({args}), {pack_ml})")
    py.append(f"G = T.grad(lambda p: f({args}), {pack_py})")
    if hessian:
        g.tags["second_order"] += 1
        ml += ["fn hdot(g)", "    return " + " + ".join(f"sum({p} * {v})" for p, (v, _) in zip(part, vs)), "end"]
        py += ["def hdot(g):", "    return " + " + ".join(f"T.sum({p} * {v})" for p, (v, _) in zip(part, vs))]
        inner = args.replace("p", "q")
        ml.append(f"H = grad(fn(p) -> hdot(grad(fn(q) -> f({inner}), p)), {pack_ml})")
        py.append(f"H = T.grad(lambda p: hdot(T.grad(lambda q: f({inner}), p)), {pack_py})")
    if ev is not None:
        ml.append(f"EV = {ev.ml}")
        py.append(f"EV = {ev.py}")
    env = {n: torch.tensor(a) for n, a in g.inputs + g.consts + vs}
    return Case(family, number, "\n".join(ml) + "\n", "\n".join(py) + "\n", env, Counter(g.tags))


def draw_expression(number, skip=None):
    rng = random.Random(f"{SEED}-expr-{number}")
    for _ in range(200):
        g = Gen(rng, "expr", skip)
        try:
            shape = g.shape(rng.randint(0, 3))
            ex = g.expr(shape, rng.randint(2, 4))
            if not g.inputs:
                raise Redraw("no input")
            k = g.const(shape)
            return assemble(g, "expression", number, [], [], f"sum({ex.ml} * {k.ml})",
                            f"T.sum({ex.py} * {k.py})", ev=ex, hessian=rng.random() < 0.35,
                            record=rng.random() < 0.25)
        except Redraw:
            continue
    raise AssertionError("could not draw an expression case")


def draw_statements(number, skip=None):
    rng = random.Random(f"{SEED}-stmt-{number}")
    for _ in range(200):
        g = StmtGen(rng, "stmt", skip)
        try:
            for _ in range(rng.randint(1, 3)):
                g.new_input(g.any_shape(0, 2))
            g.allow_new_inputs = False
            body = Body()
            g.statements(body, rng.randint(2, 5))
            used = [n for n, s in g.scope][-3:]
            shapes = dict(g.scope)
            ks = [g.const(shapes[n]) for n in used]
            ret_ml = " + ".join(f"sum({n} * {k.ml})" for n, k in zip(used, ks))
            ret_py = " + ".join(f"T.sum({n} * {k.py})" for n, k in zip(used, ks))
            return assemble(g, "statements", number, body.ml, body.py, ret_ml, ret_py,
                            hessian=rng.random() < 0.25, record=rng.random() < 0.25)
        except Redraw:
            continue
    raise AssertionError("could not draw a statement case")


def from_tapeml(v):
    if isinstance(v, Record):
        return {k: from_tapeml(x) for k, x in v.fields.items()}
    if isinstance(v, tuple):
        return tuple(from_tapeml(x) for x in v)
    return np.asarray(v, dtype=np.float64)


def from_torch(v):
    if isinstance(v, dict):
        return {k: from_torch(x) for k, x in v.items()}
    if isinstance(v, tuple):
        return tuple(from_torch(x) for x in v)
    v = _t(v).detach()
    if v._is_zerotensor():       # autograd's unallocated zeros
        return np.zeros(tuple(v.shape))
    return np.array(v.tolist(), dtype=np.float64)


def largest(v) -> float:
    if isinstance(v, dict):
        return max([largest(x) for x in v.values()], default=0.0)
    if isinstance(v, tuple):
        return max([largest(x) for x in v], default=0.0)
    return float(np.max(np.abs(v))) if v.size else 0.0


def differences(got, want, path, scale, floor):
    """[(path, message)] where tapeml's `got` and torch's `want` disagree: elementwise by RTOL
    relative to the element plus RTOL of `scale`, the quantity's largest element over all its
    leaves, plus `floor` (1e-12 of the case's largest number): a gradient that is zero in exact
    arithmetic comes out as rounding noise, or as an exact 0, on either side."""
    if isinstance(want, dict) or isinstance(got, dict):
        if not (isinstance(want, dict) and isinstance(got, dict)) or list(got) != list(want):
            return [(path, f"structure {type(got).__name__} {list(got) if isinstance(got, dict) else ''} "
                           f"!= {type(want).__name__} {list(want) if isinstance(want, dict) else ''}")]
        return [d for k in want for d in differences(got[k], want[k], f"{path}.{k}", scale, floor)]
    if isinstance(want, tuple) or isinstance(got, tuple):
        if not (isinstance(want, tuple) and isinstance(got, tuple)) or len(got) != len(want):
            return [(path, "structure differs")]
        return [d for j, (a, b) in enumerate(zip(got, want))
                for d in differences(a, b, f"{path}[{j}]", scale, floor)]
    if got.shape != want.shape:
        return [(path, f"shape {got.shape} != {want.shape}")]
    bad = np.abs(got - want) > RTOL * (np.abs(want) + scale) + floor
    bad |= np.isnan(got) != np.isnan(want)
    if bad.any():
        err = float(np.max(np.abs(got - want)) / max(scale, 1e-300))
        return [(path, f"relative error {err:.3g}")]
    return []


class Magnitude(torch.overrides.TorchFunctionMode):
    """The largest finite magnitude among the intermediate values of the Python mirror's
    forward computations. A case whose intermediates grow past LARGEST is ill-conditioned for
    a 1e-9 comparison (rounding of a huge intermediate, amplified by another, reaches the
    result), so it is counted as skipped, not compared."""

    def __init__(self):
        super().__init__()
        self.largest = 0.0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if type(out) is torch.Tensor and out.dtype == torch.float64 and out.numel():
            m = float(out.detach().abs().amax())
            if m > self.largest and math.isfinite(m):
                self.largest = m
        return out


LARGEST = 1e5


def unstable(v) -> bool:
    """A result that is not finite or past LARGEST: an ill-conditioned draw, not a test."""
    if isinstance(v, dict):
        return any(unstable(x) for x in v.values())
    if isinstance(v, tuple):
        return any(unstable(x) for x in v)
    return not np.all(np.isfinite(v)) or (v.size and float(np.max(np.abs(v))) > LARGEST)


QUANTITIES = ("OUT", "G", "H", "EV")


def run_case(case: Case):
    """'ok', 'skipped' (ill-conditioned reference) or a failure text."""
    def mirror():
        ns = {"T": T, "torch": torch}
        ns.update(case.env)
        with Magnitude() as magnitude:
            exec(compile(case.py, f"<{case.family} {case.number} python>", "exec"), ns)
        return {q: from_torch(ns[q]) for q in QUANTITIES if q in ns}, magnitude
    try:
        try:
            want, magnitude = mirror()
        except RuntimeError as e:
            # torch's fused layer_norm, differentiated three times where a lower order is zero
            # (grad of abs), writes into autograd's immutable zero tensors: the composite form
            # computes the same reference
            if "ZeroTensors are immutable" not in str(e):
                raise
            fused = T.layer_norm
            T.layer_norm = T.layer_norm_composite
            try:
                want, magnitude = mirror()
            finally:
                T.layer_norm = fused
    except Exception as e:       # the generator wrote something torch cannot run: a test bug
        return f"the Python mirror failed: {type(e).__name__}: {e}"
    if magnitude.largest > LARGEST or any(unstable(v) for v in want.values()):
        return "skipped"
    interp = fresh()
    try:
        run(case.ml, interp)
    except LangError as e:
        if case.tags.get("for_over_number") and e.kind == "TypeError" and "loop" in e.message:
            return "ok"          # the refusal issue 16 allows for a loop over a number
        return "tapeml raised:\n" + render(e, interp.sources)
    got = {q: from_tapeml(interp.globals.vars[q]) for q in want}
    floor = 1e-12 * max(largest(v) for v in want.values()) + 1e-300
    diffs = [d for q in want for d in differences(got[q], want[q], q, largest(want[q]), floor)]
    if not diffs:
        return "ok"
    lines = [f"{p}: {m}" for p, m in diffs]
    for q in dict.fromkeys(p.split("[")[0].split(".")[0] for p, _ in diffs):
        with np.printoptions(precision=12, linewidth=150):
            lines.append(f"  {q} tapeml: {got[q]}\n  {q} torch:  {want[q]}")
    return "\n".join(lines)


def run_family(draw, n):
    t0 = time.perf_counter()
    counts, tags, failures = Counter(), Counter(), []
    for i in CASES or range(n):
        case = draw(i)
        result = run_case(case)
        counts["ok" if result == "ok" else "skipped" if result == "skipped" else "failed"] += 1
        if result not in ("ok", "skipped"):
            failures.append((case, result))
        for t in case.tags:
            tags[t] += 1
    return counts, tags, failures, time.perf_counter() - t0


def report(name, counts, tags, failures, seconds):
    print(f"\n{name}: {sum(counts.values())} programs in {seconds:.1f} s: {dict(counts)}; "
          f"known bugs skipped: {sorted(SKIP) or 'none'}")
    print("  patterns (programs containing each): " + ", ".join(f"{k} {v}" for k, v in sorted(tags.items())))
    failures.sort(key=lambda f: len(f[0].ml))
    for case, text in failures[:SHOW]:
        print(f"\n---- {case.title()} FAILED: tapeml program ----\n{case.ml}---- Python mirror ----\n"
              f"{case.py}---- difference ----\n{text}\n")
    if failures:
        print(f"{len(failures)} failures: " + ", ".join(str(c.number) for c, _ in failures[:50]))
        known = Counter(t for c, _ in failures for t in KNOWN_BUGS if c.tags.get(t))
        other = sum(1 for c, _ in failures if not any(c.tags.get(t) for t in KNOWN_BUGS))
        print(f"failures with a known-bug pattern: {dict(known)}; without one: {other}")


# Patterns each family must reach in the CI run, so that coverage cannot silently shrink.
EXPRESSION_PATTERNS = {
    "broadcast", "reduce_dim", "reduce_all", "softmax", "log_softmax", "layer_norm", "sdpa",
    "sdpa_batched", "sdpa_mask", "sdpa_causal", "sdpa_bias", "matmul_2x2", "matmul_3x2",
    "layer_norm_2axes", "sdpa_mask_broadcast", "take_along_pairs", "take_along_axis", "einsum_one",
    "einsum_many",
    "transpose", "concat", "stack", "reshape", "where", "bool_operand", "inner_grad", "second_order",
    "index_scalar", "index_range", "index_step", "index_colon", "index_vector", "index_mask",
    "index_full_mask", "index_implicit_axes", "index_rank3", "index_rank4", "repeated_index_read",
    "fn_exp", "fn_log", "fn_sqrt", "fn_pow", "fn_div", "fn_gelu", "fn_relu", "fn_max2"}
STATEMENT_PATTERNS = {
    "for_vector", "for_rows", "for_rank3", "for_tuple", "for_functions", "for_range", "for_string", "for_bools",
    "for_break", "for_continue", "while", "while_break", "if", "closure", "closure_late_binding",
    "closure_loop", "named_function", "keyword_argument", "recursion", "index_assign",
    "augmented_index_assign", "augmented_assign", "loop_index_assign", "value_semantics",
    "record_field_assign", "nested_field_assign", "tuple_item_assign", "destructure",
    "value_and_grad", "nested_grad", "stop_gradient", "second_order", "index_full_mask", "for_destructure"}


@pytest.mark.parametrize("family", ["expressions", "statements"])
def test_differential(family):
    draw = draw_expression if family == "expressions" else draw_statements
    counts, tags, failures, seconds = run_family(draw, N)
    report(family, counts, tags, failures, seconds)
    assert not failures, (f"{len(failures)} of {N} {family} programs disagree with PyTorch; "
                          f"the smallest:\n{failures[0][0].ml}\n{failures[0][1]}")
    assert counts["skipped"] <= N // 10, f"too many ill-conditioned draws: {dict(counts)}"
    want = EXPRESSION_PATTERNS if family == "expressions" else STATEMENT_PATTERNS
    if not CASES and (N >= 1000 or (SEED == 16 and N >= 150)):     # rarer ones need more draws
        assert want <= set(tags), f"patterns never drawn: {sorted(want - set(tags))}"


def test_known_bug_patterns_are_generated():
    """The generator draws every known-bug pattern when nothing is skipped, so switching one
    on (removing it from KNOWN_BUGS) tests it at once."""
    seen = Counter()
    for i in range(120):
        for draw in (draw_expression, draw_statements):
            seen.update(t for t in KNOWN_BUGS if draw(i, skip=frozenset()).tags.get(t))
    assert set(seen) == set(KNOWN_BUGS), f"never drawn: {sorted(set(KNOWN_BUGS) - set(seen))}"


# The smallest programs that show each known bug, in both languages (issue 16's and 15's).
R3 = np.arange(24, dtype=np.float64).reshape(2, 3, 4) / 7 - 1
KNOWN_BUG_CASES = {
    "rank3_mixed_index": (
        {"X0": R3, "K0": np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])},
        "X0 = " + ml_literal(R3) + "\nK0 = [1, 2; 3, 4; 5, 6]\n"
        "fn f(X0)\n    return sum(X0[1, :, [1, 0]] * K0)\nend\n"
        "OUT = f(X0)\nG = grad(fn(p) -> f(p[0]), (X0,))\nEV = X0[1, :, [1, 0]]\n",
        "def f(X0):\n    return T.sum(T.index(X0, [('i', 1), ('p', [0, 1, 2]), ('p', [1, 0])]) * K0)\n"
        "OUT = f(X0)\nG = T.grad(lambda p: f(p[0]), (X0,))\n"
        "EV = T.index(X0, [('i', 1), ('p', [0, 1, 2]), ('p', [1, 0])])\n"),
    "for_over_number": (
        {"X0": np.array(3.0)},
        "X0 = 3\nfn f(s)\n    t = 0\n    for v in s\n        t = t + v * 2\n    end\n    return t\nend\n"
        "OUT = f(X0)\nG = grad(fn(p) -> f(p[0]), (X0,))\n",
        "def f(s):\n    t = 0\n    for v in T.items(s):\n        t = t + v * 2\n    return t\n"
        "OUT = f(X0)\nG = T.grad(lambda p: f(p[0]), (X0,))\n"),
    "repeated_index_write": (
        {"X0": np.array([10.0, 20.0]), "K0": np.zeros(3)},
        "X0 = [10, 20]\nK0 = [0, 0, 0]\nfn f(v)\n    x = K0\n    x[[0, 0]] = v\n"
        "    return sum(x * [1, 2, 3])\nend\nOUT = f(X0)\nG = grad(fn(p) -> f(p[0]), (X0,))\n",
        "def f(v):\n    x = T.setindex(K0, [('p', [0, 0])], v)\n    return T.sum(x * T.c([1.0, 2.0, 3.0]))\n"
        "OUT = f(X0)\nG = T.grad(lambda p: f(p[0]), (X0,))\n"),
}


@pytest.mark.parametrize("bug", sorted(KNOWN_BUG_CASES))
def test_fixed_bugs_agree_and_listed_ones_disagree(bug):
    """Each known bug's smallest program disagrees with PyTorch while it is skipped; once its
    fix is merged this fails, saying to remove the name from KNOWN_BUGS (which switches the
    pattern on in the generated programs)."""
    env, ml, py = KNOWN_BUG_CASES[bug]
    case = Case("known-bug", bug, ml, py, {k: torch.tensor(v) for k, v in env.items()}, Counter({bug: 1}))
    result = run_case(case)
    if bug in SKIP:
        assert result != "ok", f"{bug} now agrees with PyTorch: remove it from KNOWN_BUGS"
    else:
        assert result == "ok", f"{bug}:\n{ml}\n{result}"
