"""Statistics & ML: one_hot, sinusoidal_positions, cosine_similarity, einsum and batch_norm.

The differentiable ones are composites over recorded primitives (DESIGN.md rule 3): einsum is a
permute/reshape/matmul program, cosine_similarity and batch_norm are arithmetic and reductions,
so grad of grad works through them with no gradient rule of their own.
"""
from __future__ import annotations

import math

import numpy as np

from tapeml.array import limits, ops
from tapeml.array.backend import ARRAYS
from tapeml.array.primitive_table import new_array
from tapeml.builtins.ml.losses import _ids
from tapeml.builtins.registry import P, builtin, non_negative, positive
from tapeml.syntax.errors import ShapeError, TypeErr, ValueErr
from tapeml.array.tape import raw
from tapeml.array.values import describe, shape_text

CAT = "Statistics & ML"


@builtin("one_hot", CAT, "One-hot rows: one_hot(ids, n)[..., i] is 1 where the id is i, else 0.",
         [P("ids", "array", shape="a number or [...]", doc="0-based class ids, whole numbers in 0..n-1"),
          P("n", "int", doc="the number of classes", check=positive, constraint="> 0")],
         returns="[n] for one id, [..., n] for a matrix of ids (float 0/1)",
         what="Turns class ids into indicator vectors: the targets of a classifier written as "
              "probabilities, or the input of a linear layer in place of an embedding lookup.",
         how="out[..., i] = 1.0 if ids[...] == i else 0.0 (PyTorch's `F.one_hot`, which returns integers and "
             "infers n when it is not given; tapeml's result is a float matrix and n is required).",
         errors=["IndexError when an id is not a whole number or lies outside 0..n-1",
                 "ValueError when n <= 0, or the result would pass the size limit (n past it too, with no ids)"],
         examples=["one_hot(2, 4)", "one_hot([0, 2, 1], 3)", "one_hot([0, 1; 1, 0], 2)[1, 0, :]"])
def one_hot(ids, n):
    n = int(n)
    idx = _ids(ids, n, "one_hot", "id", None)
    limits.check_shape(f"one_hot() of {idx.size} ids into {n} classes", idx.shape + (n,))
    out = (idx[..., None] == np.arange(n)).astype(np.float64)
    return new_array(out)       # the session's float type, on its device


@builtin("sinusoidal_positions", CAT, "The fixed sinusoidal position encodings of the Transformer, [T, d_model].",
         [P("T", "int", doc="the number of positions (0..T-1)", check=non_negative, constraint=">= 0"),
          P("d_model", "int", doc="the width of each encoding", check=positive, constraint="> 0")],
         returns="[T, d_model]",
         what="A position signal added to token embeddings, with no parameters to learn: each column "
              "pair is a sine and a cosine of the position at one frequency, the frequencies falling "
              "geometrically from 1 to 1/10000.",
         how="PE[pos, 2i] = sin(pos / 10000^(2i / d_model)) and PE[pos, 2i + 1] = cos(pos / 10000^(2i / "
             "d_model)) (Vaswani et al. 2017, section 3.5; the interleaved layout of the paper and of the "
             "PyTorch tutorial's PositionalEncoding, not the concatenated [sin..., cos...] of tensor2tensor). "
             "An odd d_model ends with a sine column.",
         errors=["ValueError when T < 0 or d_model <= 0, or the result would pass the size limit (d_model "
                 "past it too, with T = 0)"],
         examples=["round(sinusoidal_positions(3, 4), 4)",
                   "pe = sinusoidal_positions(64, 32)\nfigure(width=6, height=3)\nimshow(pe)\n"
                   'title("sinusoidal_positions(64, 32): rows are positions")'])
def sinusoidal_positions(T, d_model):
    T, d = int(T), int(d_model)
    limits.check_shape(f"sinusoidal_positions({T}, {d})", (T, d))
    pos = np.arange(T, dtype=np.float64)[:, None]
    i2 = (np.arange(d) // 2 * 2).astype(np.float64)
    angle = pos / np.power(10000.0, i2 / d)
    out = np.where(np.arange(d) % 2 == 0, np.sin(angle), np.cos(angle))
    return new_array(out)       # computed on the host in float64, then the session's float type on its device


def _axis(fname: str, dim, nd: int) -> int:
    d = int(dim)
    if not -nd <= d < nd:
        raise ShapeError(f"{fname}(): dim {d} is out of range for {nd} axes (valid: {-nd} to {nd - 1})")
    return d % nd


@builtin("cosine_similarity", CAT, "Cosine of the angle between a and b along dim: a.b / (|a| |b|).",
         [P("a", "array", shape="[..., D, ...]"), P("b", "array", shape="broadcastable with a"),
          P("dim", "int", -1, doc="the axis holding the vectors"),
          P("eps", "number", 1e-8, doc="lower bound of each norm", check=positive, constraint="> 0")],
         returns="a and b broadcast, without the axis dim", differentiable=True,
         what="1 for vectors pointing the same way, 0 for orthogonal ones, -1 for opposite ones, whatever "
              "their lengths: the similarity of embeddings.",
         how="sum(a / max(|a|, eps) * b / max(|b|, eps)) along dim, with |.| the 2-norm: PyTorch's "
             "`F.cosine_similarity` (since 1.12 each norm is clamped at eps separately), so a zero vector "
             "gives 0, not nan, and its gradient is b / (|b| eps), both as PyTorch's. For a nonzero vector "
             "shorter than eps the value agrees with PyTorch but the gradients differ: tapeml's is the "
             "derivative of the clamped formula (the norm held at eps, which finite differences confirm), "
             "PyTorch clamps outside autograd. a and b broadcast against each other first, as in PyTorch. "
             "A vector whose sum of squares would overflow or underflow (entries beyond about 1e154 or below "
             "1e-154, 1e19 and 1e-19 in float32) is scaled by a power of 2 first, with eps: "
             "cosine_similarity([1e200, 2e200], [1e200, 1e200]) is 0.949, where PyTorch gives 0.",
         errors=["ShapeError when a and b do not broadcast, or dim is out of range",
                 "ValueError when eps <= 0"],
         examples=["cosine_similarity([1, 0], [1, 1])",
                   "cosine_similarity([1, 2; 3, 4], [2, 4; -4, 3])",
                   "cosine_similarity([0, 0], [1, 1])  # a zero vector: 0",
                   "grad(fn(a) -> cosine_similarity(a, [1, 1]), [1, 0])"])
def cosine_similarity(a, b, dim, eps):
    sa, sb = ops.shape_of(a), ops.shape_of(b)
    try:
        s = np.broadcast_shapes(sa, sb)
    except ValueError:
        raise ShapeError(f"cosine_similarity(): a is {shape_text(sa)} and b is {shape_text(sb)}; they do "
                         "not broadcast") from None
    if not s:
        raise ShapeError("cosine_similarity(): a and b must be vectors (or matrices of vectors), got numbers")
    d = _axis("cosine_similarity", dim, len(s))
    a = ops.broadcast_to(a, shape=s) if sa != s else a
    b = ops.broadcast_to(b, shape=s) if sb != s else b

    def unit(v):
        squares = ops.sum_(ops.mul(v, v), dim=d, keepdims=True)
        u = ops.div(v, ops.maximum(ops.sqrt(squares), float(eps)))
        # a vector whose sum of squares overflows or underflows (1e154 in float64, 1e19 in float32):
        # v / max(|v|, eps) = v 2^-E / max(|v 2^-E|, eps 2^-E), exact for a power of 2; E is at
        # least eps's exponent, so eps 2^-E stays finite
        return ops.rescaled(lambda t, e: ops.div(t, ops.maximum(
            ops.sqrt(ops.sum_(ops.mul(t, t), dim=d, keepdims=True)),
            _scaled_number(eps, raw(u), -e))), v, d, u, squares, at_least=ops.binary_exponents(eps), degree=0)
    return ops.sum_(ops.mul(unit(a), unit(b)), dim=d)


def _scaled_number(c: float, like, e):
    """c * 2^e (e integers, an array of them), in like's float type and on its backend."""
    if type(like) is np.ndarray:
        return np.ldexp(np.asarray(c, dtype=like.dtype), e)
    return ops.ldexp(new_array(c, like.dtype, like=like), e=e)


# ---- einsum ----------------------------------------------------------------------------------

_EINSUM_FORM = ('"ab,bc->ac" (letters a-z and A-Z, one group per operand, separated by commas; the output '
                'letters after "->", each at most once; without "->" the output is the letters found exactly '
                'once, in alphabetical order)')


def _parse_einsum(spec: str, shapes: list):
    """(the operands' letter groups, the output letters, the length of each letter); errors name the
    spec and what is wrong with it."""
    s = spec.replace(" ", "")
    if "." in s:
        raise ValueErr(f'einsum(): "{spec}" uses "...", which is not supported: name every axis with a letter, '
                       f'as in {_EINSUM_FORM}')
    if s.count("->") > 1:
        raise ValueErr(f'einsum(): "{spec}" has more than one "->"; einsum takes {_EINSUM_FORM}')
    lhs, arrow, out = s.partition("->")
    ins = lhs.split(",")
    for part in ins + [out]:
        if not all(c.isascii() and c.isalpha() for c in part):
            raise ValueErr(f'einsum(): "{spec}" is not supported: einsum takes {_EINSUM_FORM}')
    if len(ins) != len(shapes):
        raise ValueErr(f'einsum(): "{spec}" names {len(ins)} operand{"s" * (len(ins) != 1)} but '
                       f'{len(shapes)} {"are" if len(shapes) != 1 else "is"} given')
    if not arrow:       # the implicit form: the letters found exactly once, in alphabetical order (NumPy, PyTorch)
        every = "".join(ins)
        out = "".join(sorted(c for c in set(every) if every.count(c) == 1))
    if len(set(out)) != len(out):
        raise ValueErr(f'einsum(): the output "{out}" of "{spec}" repeats a letter; each output letter is one axis')
    for c in out:
        if not any(c in part for part in ins):
            raise ValueErr(f'einsum(): the output letter "{c}" of "{spec}" is in no operand')
    size = {}
    for i, (idx, sh) in enumerate(zip(ins, shapes)):
        name = "ab"[i] if len(ins) == 2 else "the operand" if len(ins) == 1 else f"operand {i}"
        if len(idx) != len(sh):
            raise ShapeError(f'einsum(): "{idx}" names {len(idx)} ax{"is" if len(idx) == 1 else "es"} but {name} '
                             f'has {len(sh)} ({name} is {shape_text(sh)})')
        for c, n in zip(idx, sh):
            if c not in size:
                size[c] = (n, name)
            elif size[c][0] != n and size[c][1] == name:
                raise ShapeError(f'einsum(): the letter "{c}" is repeated in "{idx}" (a diagonal), but those axes '
                                 f'of {name} are {size[c][0]} and {n} long ({name} is {shape_text(sh)})')
            elif size[c][0] != n:
                raise ShapeError(f'einsum(): the letter "{c}" of "{spec}" is {size[c][0]} long in {size[c][1]} '
                                 f'but {n} long in {name}')
    return ins, out, {c: n for c, (n, _) in size.items()}


def _diagonal(x, idx: str, size: dict):
    """x with the axes of a repeated letter joined into one (its diagonal, as "ii->i" takes): an
    `index` gather with one grid per distinct letter, so its gradient is the scatter of that index.
    Returns (the gathered value, its letters, each once, in order of first appearance)."""
    letters = "".join(dict.fromkeys(idx))
    m = len(letters)
    grids = tuple(np.arange(size[c]).reshape([1] * letters.index(c) + [-1] + [1] * (m - letters.index(c) - 1))
                  for c in idx)
    return ops.index(x, idx=grids), letters


def _sum_away(v, idx: str, keep):
    """Sum v over its letters that are not in keep; returns (v, the letters left)."""
    gone = [k for k, c in enumerate(idx) if c not in keep]
    if not gone:
        return v, idx
    v = ops.sum_(v, dim=tuple(gone)) if len(gone) < len(idx) else ops.sum_(v)
    return v, "".join(c for c in idx if c in keep)


def _contract(spec, a, ia: str, b, ib: str, keep, size: dict):
    """The product of two operands, summed over their letters not in keep: one batched matmul
    between permutes and reshapes. Returns (value, its letters: batch, a's free, b's free)."""
    a, ia = _sum_away(a, ia, set(ib) | keep)
    b, ib = _sum_away(b, ib, set(ia) | keep)
    batch = [c for c in ia if c in ib and c in keep]
    contr = [c for c in ia if c in ib and c not in keep]
    fa = [c for c in ia if c not in ib]
    fb = [c for c in ib if c not in ia]

    def arrange(v, idx, order, shape):
        perm = tuple(idx.index(c) for c in order)
        if perm != tuple(range(len(idx))):
            v = ops.permute(v, axes=perm)
        return ops.reshape(v, shape=shape)
    nbat = math.prod(size[c] for c in batch)
    m, k, n = (math.prod(size[c] for c in grp) for grp in (fa, contr, fb))
    limits.check_elements(f'einsum("{spec}")', (nbat, m, n))
    am = arrange(a, ia, batch + fa + contr, (nbat, m, k))
    bm = arrange(b, ib, batch + contr + fb, (nbat, k, n))
    have = batch + fa + fb
    return ops.reshape(ops.matmul(am, bm), shape=tuple(size[c] for c in have)), "".join(have)


@builtin("einsum", CAT, 'Einstein summation: einsum("ij,jk->ik", a, b), einsum("ii", a), einsum("ij,jk,kl->il", a, b, c).',
         [P("spec", "string", doc='one group of letters per operand, separated by commas, then "->" and the '
                                  'output letters (optional)'),
          P("xs", variadic=True, doc="the operands, one or more: numbers or matrices, one per group of letters")],
         returns="the shape the output letters name", differentiable=True,
         what="One notation for many products: each letter names an axis; letters shared by operands are "
              "multiplied along, letters missing from the output are summed over. \"ij,jk->ik\" is a @ b, "
              "\"bij,bjk->bik\" a batch of products, \"i,i->\" a dot product, \"i,j->ij\" an outer product, "
              "\"bhqd,bhkd->bhqk\" attention scores. With one operand: \"ii\" is the trace, \"ii->i\" the "
              "diagonal, \"ij->ji\" a transpose, \"ij->i\" row sums; with three or more, a chain such as "
              "\"ij,jk,kl->il\" (a @ b @ c).",
         how="NumPy's and PyTorch's `einsum`: out[o] = sum over the other letters of the product of the "
             "operands' entries. Without \"->\" (the implicit form) the output is the letters that appear "
             "exactly once, in alphabetical order, as in NumPy and PyTorch (\"ij,jk\" is \"ij,jk->ik\", "
             "\"ii\" the trace). A letter repeated within one operand takes its diagonal first (an index "
             "gather, whose gradient scatters back onto the diagonal). The operands are then contracted "
             "left to right, as PyTorch does without opt_einsum: letters that no later operand and not the "
             "output need are summed away, each pair is one batched matmul between permutes and reshapes, "
             "so the gradient is that of matmul. \"...\" (broadcast axes) is refused: name every axis.",
         errors=["ValueError for a spec that is not of that form (the error states the form), names another "
                 "number of operands than given, or uses \"...\"",
                 "ShapeError when an operand's rank differs from its letters, or a letter has two lengths"],
         examples=['einsum("ij,jk->ik", [1, 2; 3, 4], [5, 6; 7, 8])',
                   'einsum("i,i->", [1, 2, 3], [4, 5, 6])',
                   'einsum("i,j->ij", [1, 2], [1, 10, 100])',
                   'einsum("ij,ij->i", [1, 2; 3, 4], [1, 1; 0, 1])',
                   'a = [1, 2; 3, 4]\nprint(einsum("ii", a), einsum("ii->i", a), einsum("ij->ji", a))',
                   'einsum("iij->ij", reshape(0:7, 2, 2, 2))',
                   'einsum("ij,jk,kl->il", [1, 2; 3, 4], [0, 1; 1, 0], [1, 0; 0, 2])',
                   'grad(fn(a) -> einsum("ij,jk->", a, [1, 2; 3, 4]), [1, 1; 1, 1])',
                   'grad(fn(a) -> einsum("ii", a), [1, 2; 3, 4])'])
def einsum(spec, xs):
    if not xs:
        raise TypeErr("einsum() needs at least one operand after the spec")
    for x in xs:
        r = raw(x)
        if isinstance(r, bool) or not (isinstance(r, (float, int)) or type(r) in ARRAYS):
            raise TypeErr(f"einsum(): the operands must be numbers or matrices, got {describe(x)}")
    ins, out, size = _parse_einsum(spec, [ops.shape_of(x) for x in xs])
    vs = list(xs)
    for i, idx in enumerate(ins):
        if len(set(idx)) < len(idx):
            vs[i], ins[i] = _diagonal(vs[i], idx, size)
    v, iv = vs[0], ins[0]
    for i in range(1, len(vs)):
        keep = set(out).union(*ins[i + 1:])
        v, iv = _contract(spec, v, iv, vs[i], ins[i], keep, size)
    v, iv = _sum_away(v, iv, set(out))
    perm = tuple(iv.index(c) for c in out)
    if perm != tuple(range(len(iv))):
        v = ops.permute(v, axes=perm)
    return v


# ---- batch_norm ------------------------------------------------------------------------------

@builtin("batch_norm", CAT, "Batch normalization over all axes but the last: (y, new running mean, new running var).",
         [P("x", "array", shape="[N, C] or [..., C]", doc="the batch; features (channels) on the last axis"),
          P("gamma", "array", shape="[C]", doc="gain"), P("beta", "array", shape="[C]", doc="bias"),
          P("running_mean", "array", shape="[C]", doc="the running mean so far"),
          P("running_var", "array", shape="[C]", doc="the running (unbiased) variance so far"),
          P("training", "bool", True, doc="true: normalize with the batch statistics and update the running "
                                          "ones; false: normalize with the running statistics"),
          P("momentum", "number", 0.1, doc="weight of the batch in the running statistics",
            check=lambda v: None if 0 <= v <= 1 else "must be in [0, 1]", constraint="in [0, 1]"),
          P("eps", "number", 1e-5, doc="added to the variance inside the square root", check=non_negative,
            constraint=">= 0")],
         returns="tuple (y [..., C], new_running_mean [C], new_running_var [C])", differentiable=True,
         what="Normalizes each feature (column) to mean 0 and variance 1 across the batch, then scales by "
              "gamma and shifts by beta. Unlike layer_norm, which normalizes each row with its own "
              "statistics, a row's result depends on the rest of the batch in training, so evaluation "
              "uses the running statistics gathered during training instead. A functional API cannot "
              "update state, so batch_norm returns the new running statistics with y: "
              "y, rm, rv = batch_norm(x, g, b, rm, rv).",
         how="Training: mu and var (population form, divides by M) are taken over all axes but the last "
             "(M = numel / C rows), y = (x - mu) / sqrt(var + eps) * gamma + beta, and the running "
             "statistics become (1 - momentum) * running + momentum * batch, where the variance fed to "
             "the running average is the unbiased one (times M / (M - 1)): exactly PyTorch's "
             "`F.batch_norm(x, rm, rv, gamma, beta, training=True)` for x of shape [N, C] (Ioffe & Szegedy "
             "2015). For [B, T, C] it matches PyTorch's BatchNorm1d on x permuted to [B, C, T] (PyTorch "
             "puts channels on axis 1; tapeml on the last axis, as layer_norm). Evaluation: y uses the "
             "running statistics, which come back unchanged. Everything is recorded on the tape: y is "
             "differentiable in x, gamma and beta (and, in evaluation, the running statistics), and so are "
             "the new running statistics (PyTorch updates its buffers outside autograd; a loss computed from "
             "y alone gets the same gradients either way). A feature whose variance would overflow or "
             "underflow (1e20 in float32) is normalized on x scaled by a power of 2 (with eps scaled too, as "
             "layer_norm does), so y stays right; the running variance is then inf or 0, as in PyTorch. An empty "
             "batch (no rows, x [0, C]) gives an empty y and the running statistics unchanged, in training too, "
             "as PyTorch.",
         errors=["ShapeError when gamma, beta or a running statistic is not a vector of length C",
                 "ValueError in training when the batch has a single row (M = 1: no unbiased variance)",
                 "ValueError when momentum is outside [0, 1] or eps < 0"],
         examples=["x = [1, 2; 3, 6; 5, 10]\ny, rm, rv = batch_norm(x, [1, 1], [0, 0], [0, 0], [1, 1])\n"
                   "print(y)\nprint(rm, rv)",
                   "batch_norm([1, 2; 3, 6], [1, 1], [0, 0], [2, 4], [1, 4], training=false)[0]",
                   "grad(fn(x) -> sum(batch_norm(x, [1, 2], [0, 0], [0, 0], [1, 1])[0] * [1, 0; 0, 1; 1, 1]), "
                   "[1, 2; 3, 6; 5, 10])"])
def batch_norm(x, gamma, beta, running_mean, running_var, training, momentum, eps):
    s = ops.shape_of(x)
    if not s:
        raise ShapeError("batch_norm(): x must be a matrix with features on the last axis, got a number")
    c = s[-1]
    for name, v in (("gamma", gamma), ("beta", beta), ("running_mean", running_mean),
                    ("running_var", running_var)):
        if ops.shape_of(v) != (c,):
            raise ShapeError(f"batch_norm(): x has {c} features (last axis), so {name} must be a vector of "
                             f"length {c}, got {describe(v)}")
    axes = tuple(range(len(s) - 1))
    m = int(np.prod(s[:-1])) if axes else 1
    if training and m == 0:     # an empty batch: nothing to normalize, no statistics to update (PyTorch's rule)
        return (ops.add(ops.mul(x, gamma), beta), running_mean, running_var)
    if training:
        if m < 2:
            raise ValueErr(f"batch_norm(): training needs at least 2 rows per feature to estimate the "
                           f"variance, but x is {shape_text(s)}; use training=false to normalize with the "
                           "running statistics")
        mu = ops.mean(x, dim=axes, keepdims=True)
        xc = ops.sub(x, mu)
        var = ops.mean(ops.mul(xc, xc), dim=axes, keepdims=True)
        xhat = ops.div(xc, ops.sqrt(ops.add(var, float(eps))))
        # a feature whose variance overflows or underflows (1e20 in float32): xhat does not change
        # when x and sqrt(eps) are scaled together, so such features are normalized on x 2^-E with
        # eps 2^-2E (E at least sqrt(eps)'s exponent, as layer_norm); the running statistics keep
        # the plain ones (a variance past the float range is inf there, as in PyTorch)
        floor = ops.binary_exponents(math.sqrt(eps)) if eps > 0 else None
        xhat = ops.rescaled(lambda t, e: ops.div(
            ops.sub(t, ops.mean(t, dim=axes, keepdims=True)),
            ops.sqrt(ops.add(_feature_var(t, axes), _scaled_number(eps, raw(xhat), -2 * e)))),
            x, axes, xhat, ops.add(var, float(eps)), at_least=floor, degree=0)
        y = ops.add(ops.mul(xhat, gamma), beta)
        mom = float(momentum)
        new_m = ops.add(ops.mul(1.0 - mom, running_mean), ops.mul(mom, ops.reshape(mu, shape=(c,))))
        unbiased = ops.mul(ops.reshape(var, shape=(c,)), m / (m - 1))
        new_v = ops.add(ops.mul(1.0 - mom, running_var), ops.mul(mom, unbiased))
        return (y, new_m, new_v)
    y = ops.add(ops.mul(ops.div(ops.sub(x, running_mean), ops.sqrt(ops.add(running_var, float(eps)))), gamma), beta)
    return (y, running_mean, running_var)


def _feature_var(t, axes):
    tc = ops.sub(t, ops.mean(t, dim=axes, keepdims=True))
    return ops.mean(ops.mul(tc, tc), dim=axes, keepdims=True)
