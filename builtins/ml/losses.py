"""Statistics & ML: embedding and cross_entropy.

Both are *composites* over recorded primitives (`index`, `log_softmax`, `sum`, ...): they have
no gradient rule of their own (DESIGN.md rule 3). `embedding` is a gather through the `index`
primitive, whose VJP is `scatter_add`, so the gradient rows of repeated ids add up.
`cross_entropy` picks the target entries of `log_softmax` (the log-sum-exp trick), so huge
logits never overflow.
"""
from __future__ import annotations

import numpy as np

from tapeml import ops
from tapeml.builtins.registry import P, builtin
from tapeml.errors import IndexErr, ShapeError, TypeErr
from tapeml.tape import raw
from tapeml.values import describe, format_value, shape_text

CAT = "Statistics & ML"


def _ids(ids, n: int, fname: str, what: str, bound_name: str) -> np.ndarray:
    """Validate a number or matrix of 0-based ids below n; return them as intp."""
    r = raw(ids)
    if isinstance(r, bool) or not isinstance(r, (float, int, np.ndarray)):
        raise TypeErr(f"{fname}(): {what} must be a number or a matrix of whole numbers, got {describe(ids)}")
    a = np.asarray(r, dtype=np.float64) if not (isinstance(r, np.ndarray) and r.dtype == np.bool_) else None
    if a is None:
        raise TypeErr(f"{fname}(): {what} must be whole numbers, got {describe(ids)}")
    if a.size:
        if not np.all(np.isfinite(a)) or np.any(a != np.floor(a)):
            bad = a[~np.isfinite(a) | (a != np.floor(a))].flat[0]
            raise IndexErr(f"{fname}(): {what} must be whole numbers, got {format_value(bad)}")
        if a.min() < 0 or a.max() > n - 1:
            bad = a[(a < 0) | (a > n - 1)].flat[0]
            raise IndexErr(f"{fname}(): {what} {format_value(bad)} is out of range: {bound_name} has {n} "
                           f"entries, so ids go from 0 to {n - 1}")
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
    from tapeml import limits
    limits.check_elements(f"embedding() of {idx.size} ids into a {s[0]}x{s[1]} table", idx.shape + (s[1],))
    if idx.ndim == 0:
        return ops.index(table, idx=(int(idx),))
    return ops.index(table, idx=(idx,))


@builtin("cross_entropy", CAT, "Mean next-token loss: -log softmax(logits)[target], averaged over positions.",
         [P("logits", "array", shape="[V] or [..., V]", doc="raw scores, one per class, per position"),
          P("targets", "array", shape="a number or [...]",
            doc="0-based class ids, one per position (logits without its last axis)")],
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
             "logits changes the row).",
         errors=["ShapeError when targets do not match the logits without their last axis",
                 "IndexError when a target is not a whole number in 0..V-1"],
         examples=["cross_entropy([2.0, 1.0, 0.1], 0)",
                   "cross_entropy([1e8, 1e8], 0)",
                   "cross_entropy([1, 2, 3; 3, 2, 1], [2, 0])",
                   "cross_entropy([1 / 0, 1 / 0, 1], 0)\ncross_entropy([1 / 0, 1 / 0, 1], 2)",
                   "grad(fn(z) -> cross_entropy(z, 0), [-431, 279, 427])"])
def cross_entropy(logits, targets):
    s = ops.shape_of(logits)
    if not s:
        raise ShapeError("cross_entropy(): logits must be a vector of class scores or a matrix with one row "
                         "per position, got a number")
    t_shape = np.shape(raw(targets))
    if t_shape != s[:-1]:
        want = "a number" if len(s) == 1 else shape_text(s[:-1])
        raise ShapeError(f"cross_entropy(): logits are {shape_text(s)}, so targets must be {want} "
                         f"(one class id per position), got {describe(targets)}")
    v = s[-1]
    t = _ids(targets, v, "cross_entropy", "target", "the last axis of logits")
    lp = ops.log_softmax(logits, dim=-1)
    if len(s) == 1:
        return ops.neg(ops.index(lp, idx=(int(t),)))
    n = int(np.prod(s[:-1]))
    flat = ops.reshape(lp, shape=(n, v))
    picked = ops.index(flat, idx=(np.arange(n), t.reshape(-1)))
    return ops.div(ops.neg(ops.sum_(picked)), float(n))
