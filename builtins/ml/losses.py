"""Statistics & ML: embedding and cross_entropy.

Both are *composites* over recorded primitives (`index`, `log_softmax`, `sum`, ...): they have
no gradient rule of their own (DESIGN.md rule 3). `embedding` is a gather through the `index`
primitive, whose VJP is `scatter_add`, so the gradient rows of repeated ids add up.
`cross_entropy` picks the target entries of `log_softmax` (the log-sum-exp trick), so huge
logits never overflow.
"""
from __future__ import annotations

import numpy as np

from tapeml.array import backend as B, ops
from tapeml.array.backend import ARRAYS
from tapeml.array.primitive_table import is_bool_array, new_array
from tapeml.builtins.registry import P, builtin
from tapeml.syntax.errors import IndexErr, ShapeError, TypeErr, ValueErr
from tapeml.array.tape import raw
from tapeml.array.values import describe, shape_text
from tapeml.array.printer import format_value, not_whole_text

CAT = "Statistics & ML"


def _ids(ids, n: int, fname: str, what: str, bound_name: str) -> np.ndarray:
    """Validate a number or matrix of 0-based ids below n; return them as intp. `what` names one
    id ("id", "target"); `bound_name` what has n entries ("the table"), or None for n classes."""
    r = raw(ids)
    if isinstance(r, bool) or not (isinstance(r, (float, int)) or type(r) in ARRAYS):
        raise TypeErr(f"{fname}(): {what} must be a number or a matrix of whole numbers, got {describe(ids)}")
    # checked and used on the host: the ids index the logits or the table with NumPy integer arrays
    a = np.asarray(B.to_numpy(r), dtype=np.float64) if not is_bool_array(r) else None
    if a is None:
        raise TypeErr(f"{fname}(): {what}s must be whole numbers, got {describe(ids)}")
    if a.size:
        if not np.all(np.isfinite(a)) or np.any(a != np.floor(a)):
            bad = a[~np.isfinite(a) | (a != np.floor(a))].flat[0]
            raise IndexErr(f"{fname}(): {what}s must be whole numbers, got {not_whole_text(bad)}")
        if a.min() < 0 or a.max() > n - 1:
            bad = a[(a < 0) | (a > n - 1)].flat[0]
            where = f"with {n} classes," if bound_name is None else f"{bound_name} has {n} entries, so"
            raise IndexErr(f"{fname}(): {what} {format_value(bad)} is out of range: {where} "
                           f"{what}s go from 0 to {n - 1}")
    return a.astype(np.intp)


@builtin("embedding", CAT, "Look up rows of a table by 0-based id: embedding(table, ids) is table[ids, :].",
         [P("table", "array", shape="[V, D]", doc="one row per token id"),
          P("ids", "array", shape="a number or [...]", doc="0-based ids, whole numbers in 0..V-1")],
         returns="[D] for one id, or [..., D] (one row per id)", differentiable=True,
         what="The token (or position) embedding of a transformer: each id picks its row of the table. "
              "With a matrix of ids (a batch of sequences) the result has one more axis.",
         how="A gather through the `index` primitive: out[i, :] = table[ids[i], :]. Its VJP is "
             "`scatter_add`, so when an id appears several times the gradients of its rows add up "
             "(as PyTorch's `nn.Embedding`). A composite with no gradient rule of its own.",
         errors=["IndexError when an id is not a whole number or lies outside 0..V-1",
                 "ShapeError when table is not a matrix"],
         examples=["table = [0.1, 0.2; 1.0, 2.0; 10.0, 20.0]\nembedding(table, [2, 0, 2])",
                   "table = [0.1, 0.2; 1.0, 2.0; 10.0, 20.0]\n"
                   "grad(fn(t) -> sum(embedding(t, [2, 0, 2])), table)"])
def embedding(table, ids):
    s = ops.shape_of(table)
    if len(s) != 2:
        raise ShapeError(f"embedding(): table must be a V x D matrix, got {describe(table)}")
    idx = _ids(ids, s[0], "embedding", "id", "the table")
    from tapeml.array import limits
    limits.check_elements(f"embedding() of {idx.size} ids into a {s[0]}x{s[1]} table", idx.shape + (s[1],))
    if idx.ndim == 0:
        return ops.index(table, idx=(int(idx),))
    return ops.index(table, idx=(idx,))


@builtin("cross_entropy", CAT, "Mean next-token loss: -log softmax(logits)[target], averaged over positions.",
         [P("logits", "array", shape="[V] or [..., V]", doc="raw scores, one per class, per position"),
          P("targets", "array", shape="a number or [...]",
            doc="0-based class ids, one per position (logits without its last axis)"),
          P("label_smoothing", "number", 0.0, doc="the weight eps moved from the target to a uniform distribution",
            check=lambda v: None if 0 <= v <= 1 else "must be in [0, 1]", constraint="in [0, 1]"),
          P("ignore_index", "int", None, doc="a target value that counts for nothing: those positions are left out "
                                             "of the sum and of the count (padding); none: every target counts")],
         returns="a number", differentiable=True,
         what="The classification and language-model loss: small when the model gives the true class a "
              "high probability at every position. A row of logits with target t costs "
              "-log(softmax(row)[t]); the rows are averaged.",
         how="L = -(1/N) sum_i log_softmax(z_i)[t_i], PyTorch's `F.cross_entropy(reduction=\"mean\")`. "
             "Composed from the `log_softmax` primitive (x - max(x) - log(sum(exp(x - max(x))))) and an "
             "`index` gather, so huge logits neither overflow nor give NaN: cross_entropy([1e8, 1e8], 0) is "
             "ln 2, and the gradient is (softmax(z) - onehot(t)) / N. A row holding +inf logits follows "
             "softmax's limit: its loss is ln k (k the number of +inf logits) when the target is one of "
             "them and +inf when it is not, and in both cases its gradient is 0 (no finite change of its "
             "logits changes the row). With label_smoothing = eps the target is the mixture "
             "(1 - eps) onehot(t) + eps / V: each row costs (1 - eps) (-log_softmax(z)[t]) + "
             "eps mean_c(-log_softmax(z)[c]), PyTorch's `label_smoothing=` definition (Szegedy et al. 2016), "
             "and the gradient is (softmax(z) - (1 - eps) onehot(t) - eps / V) / N. With ignore_index = k the "
             "positions whose target is k are left out: the mean is over the other positions only (N counts "
             "them), their rows get gradient 0, and with label_smoothing the uniform part is taken over the "
             "counted rows too, as PyTorch's `ignore_index=`; when every target is ignored the loss is nan "
             "(0 / 0) with gradient 0, as PyTorch's. PyTorch's default ignore_index is -100, so a target of "
             "-100 is silently skipped there; here nothing is skipped unless ignore_index is given.",
         errors=["ShapeError when targets do not match the logits without their last axis",
                 "IndexError when a target (other than ignore_index) is not a whole number in 0..V-1"],
         examples=["cross_entropy([2.0, 1.0, 0.1], 0)",
                   "cross_entropy([1e8, 1e8], 0)",
                   "cross_entropy([1, 2, 3; 3, 2, 1], [2, 0])",
                   "cross_entropy([1 / 0, 1 / 0, 1], 0)\ncross_entropy([1 / 0, 1 / 0, 1], 2)",
                   "grad(fn(z) -> cross_entropy(z, 0), [-431, 279, 427])",
                   "cross_entropy([2.0, 1.0, 0.1], 0, label_smoothing=0.1)",
                   "z = [1, 2, 3; 3, 2, 1; 0, 1, 0]\n"
                   "cross_entropy(z, [2, -1, 1], ignore_index=-1)   # the mean of rows 0 and 2\n"
                   "(cross_entropy(z[0, :], 2) + cross_entropy(z[2, :], 1)) / 2",
                   "grad(fn(z) -> cross_entropy(z, [0, 0], ignore_index=0), [1, 2; 3, 4])   # all ignored"])
def cross_entropy(logits, targets, label_smoothing=0.0, ignore_index=None):
    s = ops.shape_of(logits)
    if not s:
        raise ShapeError("cross_entropy(): logits must be a vector of class scores or a matrix with one row "
                         "per position, got a number")
    t_shape = ops.shape_of(raw(targets))
    if t_shape != s[:-1]:
        want = "a number" if len(s) == 1 else shape_text(s[:-1])
        raise ShapeError(f"cross_entropy(): logits are {shape_text(s)}, so targets must be {want} "
                         f"(one class id per position), got {describe(targets)}")
    v = s[-1]
    if ignore_index is not None:
        return _cross_entropy_ignoring(logits, targets, float(label_smoothing), int(ignore_index), s)
    t = _ids(targets, v, "cross_entropy", "target", "the last axis of logits")
    lp = ops.log_softmax(logits, dim=-1)
    eps = float(label_smoothing)
    if len(s) == 1:
        nll = ops.neg(ops.index(lp, idx=(int(t),)))
        if eps == 0:
            return nll
        return ops.add(ops.mul(1.0 - eps, nll), ops.mul(eps, ops.div(ops.neg(ops.sum_(lp)), float(v))))
    n = int(np.prod(s[:-1]))
    flat = ops.reshape(lp, shape=(n, v))
    picked = ops.index(flat, idx=(np.arange(n), t.reshape(-1)))
    nll = ops.div(ops.neg(ops.sum_(picked)), float(n))
    if eps == 0:
        return nll
    smooth = ops.div(ops.neg(ops.sum_(flat)), float(n * v))
    return ops.add(ops.mul(1.0 - eps, nll), ops.mul(eps, smooth))


def _cross_entropy_ignoring(logits, targets, eps: float, ignore: int, s: tuple):
    """cross_entropy over the positions whose target is not `ignore` (PyTorch's ignore_index): the
    mean over the n counted positions; nan (0 / 0) with gradient 0 when n = 0."""
    v = s[-1]
    r = raw(targets)
    if isinstance(r, bool) or not (isinstance(r, (float, int)) or type(r) in ARRAYS) or is_bool_array(r):
        _ids(targets, v, "cross_entropy", "target", "the last axis of logits")    # its TypeError
    t = np.asarray(B.to_numpy(r), dtype=np.float64).reshape(-1)
    counted = t != ignore
    kept = _ids(t[counted], v, "cross_entropy", "target", "the last axis of logits")
    lp = ops.log_softmax(logits, dim=-1)
    rows = int(np.prod(s[:-1])) if len(s) > 1 else 1
    flat = ops.reshape(lp, shape=(rows, v))
    n = int(kept.size)
    if n == 0:      # 0 / 0, as PyTorch; nothing is counted, so nothing has a gradient
        return ops.add(ops.mul(0.0, ops.sum_(flat)), float("nan"))
    which = np.flatnonzero(counted)
    nll = ops.div(ops.neg(ops.sum_(ops.index(flat, idx=(which, kept)))), float(n))
    if eps == 0:
        return nll
    smooth = ops.div(ops.neg(ops.sum_(ops.index(flat, idx=(which,)))), float(n * v))
    return ops.add(ops.mul(1.0 - eps, nll), ops.mul(eps, smooth))


# ---- regression and binary losses, KL (issue 20) ---------------------------------------------
# Composites over primitives (mean = sum / N), so each has no gradient rule of its own.


def _same_shape(fname: str, a, b, an: str, bn: str) -> tuple:
    sa, sb = ops.shape_of(a), ops.shape_of(b)
    if sa != sb:
        raise ShapeError(f"{fname}(): {an} and {bn} must have the same shape, but {an} is {shape_text(sa)} "
                         f"and {bn} is {shape_text(sb)}")
    return sa


def _mean_all(fname: str, x, shape: tuple):
    n = int(np.prod(shape)) if shape else 1
    if n == 0:
        raise ShapeError(f"{fname}(): the mean over no elements is undefined ({shape_text(shape)})")
    return ops.mean(x) if shape else x


@builtin("mse_loss", CAT, "Mean squared error: mean((pred - target)^2) over all elements.",
         [P("pred", "array", shape="[...]", doc="predictions"),
          P("target", "array", shape="same as pred", doc="the values to match")],
         returns="a number", differentiable=True,
         what="The regression loss: the average of the squared differences. It is 0 only when every "
              "prediction equals its target.",
         how="L = (1/N) sum_i (pred_i - target_i)^2 over all N elements: PyTorch's `F.mse_loss` with "
             "its default reduction=\"mean\" (sum(...) gives reduction=\"sum\"). The gradient to pred is "
             "2 (pred - target) / N. The shapes must match exactly (PyTorch broadcasts with a warning; a "
             "[N] against [N, 1] there silently makes an N x N matrix).",
         errors=["ShapeError when pred and target differ in shape"],
         examples=["mse_loss([1, 2, 3], [1, 2, 5])",
                   "grad(fn(p) -> mse_loss(p, [0, 0; 0, 0]), [1, 2; 3, 4])"])
def mse_loss(pred, target):
    s = _same_shape("mse_loss", pred, target, "pred", "target")
    d = ops.sub(pred, target)
    return _mean_all("mse_loss", ops.mul(d, d), s)


def _unit_interval(fname: str, v, what: str):
    r = raw(v)
    if type(r) in ARRAYS and type(r) is not np.ndarray:      # tested on the device; read on the host only to report
        xp = B.of(r).xp
        if not bool(xp.any((r < 0) | (r > 1) | xp.isnan(r))):
            return
        r = B.to_numpy(r)
    r = np.asarray(r, dtype=np.float64)
    bad = (r < 0) | (r > 1) | np.isnan(r)
    if np.any(bad):
        raise ValueErr(f"{fname}(): {what} must lie in [0, 1], got {format_value(float(r[bad].flat[0]))}")


@builtin("binary_cross_entropy", CAT,
         "Mean binary cross-entropy of probabilities: -mean(t log p + (1 - t) log(1 - p)), logs clamped at -100.",
         [P("probs", "array", shape="[...]", doc="predicted probabilities, in [0, 1]"),
          P("targets", "array", shape="same as probs", doc="target probabilities in [0, 1] (usually 0 or 1)")],
         returns="a number", differentiable=True,
         what="The loss of a yes/no classifier whose output is already a probability (after sigmoid). "
              "Prefer binary_cross_entropy_with_logits on raw scores: it is exact where this one clamps.",
         how="L = -(1/N) sum_i [t_i max(log p_i, -100) + (1 - t_i) max(log(1 - p_i), -100)], PyTorch's "
             "`F.binary_cross_entropy` (reduction=\"mean\"), including its clamp of each log at -100 so "
             "that p = 0 or 1 gives a finite loss (at most 100 per element). Where a log is clamped its "
             "gradient is 0 (PyTorch's backward instead divides by max(p (1 - p), 1e-12)); elsewhere the "
             "gradient to p is (p - t) / (p (1 - p) N), as PyTorch's. Targets are differentiable too.",
         errors=["ShapeError when probs and targets differ in shape",
                 "ValueError when a probability or a target lies outside [0, 1]"],
         examples=["binary_cross_entropy([0.9, 0.2], [1, 0])",
                   "binary_cross_entropy([0, 1], [1, 0])  # both logs clamped: 100 per element",
                   "grad(fn(p) -> binary_cross_entropy(p, [1, 0, 1]), [0.9, 0.2, 0.5])"])
def binary_cross_entropy(probs, targets):
    s = _same_shape("binary_cross_entropy", probs, targets, "probs", "targets")
    _unit_interval("binary_cross_entropy", probs, "probabilities")
    _unit_interval("binary_cross_entropy", targets, "targets")
    lp = ops.clip(ops.log(probs), lo=-100.0)
    lq = ops.clip(ops.log(ops.sub(1.0, probs)), lo=-100.0)
    per = ops.add(ops.mul(targets, lp), ops.mul(ops.sub(1.0, targets), lq))
    return ops.neg(_mean_all("binary_cross_entropy", per, s))


@builtin("binary_cross_entropy_with_logits", CAT,
         "Mean binary cross-entropy of sigmoid(logits) against targets, computed stably at any logit.",
         [P("logits", "array", shape="[...]", doc="raw scores (any real numbers)"),
          P("targets", "array", shape="same as logits", doc="target probabilities in [0, 1] (usually 0 or 1)")],
         returns="a number", differentiable=True,
         what="The loss of a yes/no classifier on raw scores: binary_cross_entropy(sigmoid(z), t) without its "
              "overflow: a logit of 1000 with target 0 costs 1000, not the clamped 100.",
         how="Per element -(t log sigmoid(z) + (1 - t) log sigmoid(-z)), averaged over all elements: PyTorch's "
             "`F.binary_cross_entropy_with_logits` (reduction=\"mean\"). log sigmoid(z) and log sigmoid(-z) "
             "are the two entries of log_softmax of the pair (0, z), so the log-sum-exp trick "
             "keeps them finite for every finite z; the gradient to z is (sigmoid(z) - t) / N, with no kink "
             "at z = 0. A logit of +-inf gives the limit (loss 0 or inf, gradient 0).",
         errors=["ShapeError when logits and targets differ in shape",
                 "ValueError when a target lies outside [0, 1]"],
         examples=["binary_cross_entropy_with_logits([2.2, -1.4], [1, 0])",
                   "binary_cross_entropy_with_logits([1000, -1000], [0, 1])",
                   "grad(fn(z) -> binary_cross_entropy_with_logits(z, [1, 0, 1]), [0, 3, -2])"])
def binary_cross_entropy_with_logits(logits, targets):
    s = _same_shape("binary_cross_entropy_with_logits", logits, targets, "logits", "targets")
    _unit_interval("binary_cross_entropy_with_logits", targets, "targets")
    pair = ops.stack(new_array(np.zeros(s), like=raw(logits)), logits, dim=-1)          # [..., 2]: (0, z)
    ls = ops.log_softmax(pair, dim=-1)                      # (log sigmoid(-z), log sigmoid(z))
    nd = len(s)
    lneg = ops.index(ls, idx=(slice(None),) * nd + (0,))
    lpos = ops.index(ls, idx=(slice(None),) * nd + (1,))
    per = ops.add(ops.zmul(targets, lpos), ops.zmul(ops.sub(1.0, targets), lneg))
    return ops.neg(_mean_all("binary_cross_entropy_with_logits", per, s))


@builtin("kl_div", CAT, "KL divergence KL(p || q) from log q and p: summed over the last axis, averaged over rows.",
         [P("log_q", "array", shape="[V] or [..., V]", doc="the model's distribution, as log-probabilities"),
          P("p", "array", shape="same as log_q", doc="the target distribution (probabilities, >= 0)")],
         returns="a number", differentiable=True,
         what="How far the model's distribution q is from the target p: sum_v p_v (log p_v - log q_v), "
              "0 when they are equal. Knowledge distillation uses it with p the teacher's softmax.",
         how="PyTorch's `F.kl_div(input, target)` order and formula: the input is log q and the target p, "
             "elementwise p (log p - log q) with 0 log 0 = 0 (a zero probability adds nothing, even where "
             "log q = -inf). The sum over the last axis is averaged over the rows (all leading axes): for a "
             "matrix that is PyTorch's reduction=\"batchmean\" (the true KL per row, the one PyTorch "
             "recommends), for a vector reduction=\"sum\". PyTorch's default reduction=\"mean\" divides by "
             "the number of elements instead: multiply by rows / numel to get it. The gradient to log q is "
             "-p / rows; to p it is (log p + 1 - log q) / rows (-inf at p = 0).",
         errors=["ShapeError when log_q and p differ in shape, or log_q is a number",
                 "ValueError when a probability in p is negative"],
         examples=["p = [0.5, 0.5]\nkl_div(log([0.9, 0.1]), p)",
                   "kl_div(log_softmax([1, 2, 3; 0, 0, 0]), [0, 0, 1; 1/3, 1/3, 1/3])",
                   "kl_div(log([1, 0]), [1, 0])  # 0 log 0 = 0",
                   "grad(fn(lq) -> kl_div(lq, [0.2, 0.8]), log([0.5, 0.5]))"])
def kl_div(log_q, p):
    s = _same_shape("kl_div", log_q, p, "log_q", "p")
    if not s:
        raise ShapeError("kl_div(): log_q must be a vector (one distribution) or a matrix with one row per "
                         "distribution, got a number")
    r = raw(p)
    if type(r) in ARRAYS and type(r) is not np.ndarray:      # tested on the device; read on the host only to report
        if not bool(B.of(r).xp.any(r < 0)):
            r = 0.0
        r = B.to_numpy(r)
    r = np.asarray(r, dtype=np.float64)
    if np.any(r < 0):
        raise ValueErr(f"kl_div(): p must hold probabilities >= 0, got {format_value(float(r[r < 0].flat[0]))}")
    per = ops.sub(ops.zmul(p, ops.log(p)), ops.zmul(p, log_q))      # p log p - p log q, 0 log 0 = 0
    rows = int(np.prod(s[:-1])) if len(s) > 1 else 1
    if rows == 0 or s[-1] == 0:
        raise ShapeError(f"kl_div(): the distributions are empty ({shape_text(s)})")
    return ops.mean(per, count=rows)
