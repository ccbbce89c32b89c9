"""Statistics & ML: scaled_dot_product_attention and multi_head_attention.

`mha` is a composite over primitives (dense, sdpa or attention_weights/matmul with dropout, add),
with no gradient rule of its own. Heads of one shape run joined as one batched attention
(`_mha_fused`: the projections are the dense_heads and heads_dense primitives, one tape node each);
the joined weights of untracked heads are remembered in the session's joined_cache().
"""
from __future__ import annotations

import math
import weakref

import numpy as np

from tapeml.array import context, ops
from tapeml.array.primitive_table import is_bool_array
from tapeml.builtins.ml.layers import apply_dropout
from tapeml.builtins.ml.schema import (_shape, broadcasts_into, check_heads, check_mask, check_memory, dropout_range,
                                       head_mask, need_shape)
from tapeml.builtins.registry import P, builtin
from tapeml.syntax.errors import ShapeError, TypeErr, ValueErr
from tapeml.array.tape import Box, raw
from tapeml.array.values import describe, shape_text

CAT = "Statistics & ML"


@builtin("scaled_dot_product_attention", CAT,
         "softmax(q @ k' / sqrt(d_k) + bias) @ v over the keys a boolean mask allows.",
         [P("q", "array", shape="[..., L_q, d_k]", doc="queries"),
          P("k", "array", shape="[..., L_k, d_k]", doc="keys"),
          P("v", "array", shape="[..., L_k, d_v]", doc="values"),
          P("mask", "array", None, shape="broadcasts to [..., L_q, L_k]",
            doc="bool; true means 'may attend' (PyTorch SDPA's convention); [B, 1, L_k] masks keys per batch element"),
          P("bias", "array", None, shape="broadcasts to [..., L_q, L_k]", doc="added to the scores before the softmax"),
          P("causal", "bool", False, doc="query i sees keys j <= i + L_k - L_q (bottom-right aligned, as "
                                         "FlashAttention 2; PyTorch's is_causal aligns top-left when L_q < L_k)")],
         returns="[..., L_q, d_v]", differentiable=True,
         what="Each query's output is an average of the values, weighted by how well the query matches each key.",
         how="Attention(Q, K, V) = softmax(Q K' / sqrt(d_k)) V (Vaswani et al. 2017, eq. 1). Masked "
             "scores are removed with `where` before the exponential, never by adding a finite -1e9 that a "
             "large score could beat; a row with every key masked gives zeros in the forward and backward pass. "
             "Scores that leave the float range (q k' beyond 1e308: q and k of about 1e155, or 1e20 in "
             "float32) are computed again on q and k scaled by powers of 2, exactly: the weights are those of "
             "a float type with no exponent limit, so the largest true score takes the row (tied ones share "
             "it) where PyTorch gives nan, and such a row's gradient to q, k and bias is exactly 0 (v still "
             "gets its share). A +inf in bias is a true +inf: the +inf keys share the row, softmax's limit. "
             "The backward pass takes softmax's correction term rowsum(dP * P) as rowsum(dO * O), a T x d_v "
             "product instead of a T x T one (FlashAttention's identity, Dao et al. 2022), except in the rows "
             "whose weights are exactly one-hot (scores apart by more than about 745): there the identity's "
             "rounding times large q and k would be a gradient where the exact one, PyTorch's, is 0, and "
             "rowsum(dP * P) gives that 0. On torch, where the fused CPU kernel has the same identity, "
             "|k| |v| scale d_k beyond 2^20 takes the scores' path; below it such rows keep the kernel's "
             "rounding, as PyTorch's own F.scaled_dot_product_attention does. mask and bias "
             "broadcast against the scores [..., L_q, L_k] by PyTorch's rule (sizes compared from the "
             "right, a size-1 axis repeats, missing leading axes count as 1), as in PyTorch's "
             "`F.scaled_dot_product_attention`: a [B, 1, L_k] padding mask or a [1, L_q, L_k] one shared by "
             "the batch; they may not make the scores bigger.",
         errors=["ShapeError when q, k and v do not agree in d_k or L_k, or the mask or bias does not broadcast to "
                 "the scores [..., L_q, L_k]"],
         examples=["q = [1.0, 0.5; -0.5, 1.0; 0.2, -0.3]\nk = [1.0, 0.0; 0.0, 1.0; 0.5, 0.5]\n"
                   "v = [1.0, 2.0; 3.0, 4.0; 5.0, 6.0]\nscaled_dot_product_attention(q, k, v)",
                   "x = [1, 0; 0, 1; 1, 1]\nscaled_dot_product_attention(x, x, [1, 2; 3, 4; 5, 6], causal=true)",
                   "t = (0:7)'\nx = [sin(t), cos(t), sin(t / 3), cos(t / 3)]\n"
                   "# with v = eye(8) the output is the attention weights themselves\n"
                   "w = scaled_dot_product_attention(x, x, eye(8), causal=true)\nprint(round(w[7, :], 3))\n"
                   'imshow(w)\ntitle("causal self-attention weights")\nxlabel("key position")\nylabel("query position")',
                   "scaled_dot_product_attention([1e200, 0;], [1e200, 0; 2e200, 0], [1, 2; 3, 4])   # scores beyond 1e308"])
def scaled_dot_product_attention(q, k, v, mask, bias, causal):
    sq, sk, sv = _shape(q), _shape(k), _shape(v)
    for name, s in (("q", sq), ("k", sk), ("v", sv)):
        if len(s) < 2:
            raise ShapeError(f"scaled_dot_product_attention(): {name} must be a matrix "
                             f"[L, d] (or batched [..., L, d]), got {shape_text(s)}")
    if sq[-1] != sk[-1]:
        raise ShapeError(f"scaled_dot_product_attention(): q is {shape_text(sq)} and k is {shape_text(sk)}: "
                         f"queries and keys need the same width d_k")
    if sk[-2] != sv[-2]:
        raise ShapeError(f"scaled_dot_product_attention(): k is {shape_text(sk)} and v is {shape_text(sv)}: "
                         f"keys and values need the same length L_k")
    lq, lk = sq[-2], sk[-2]
    try:
        scores = np.broadcast_shapes(sq[:-2], sk[:-2]) + (lq, lk)
    except ValueError:
        raise ShapeError(f"scaled_dot_product_attention(): q is {shape_text(sq)} and k is {shape_text(sk)}: their "
                         f"leading (batch) axes do not broadcast") from None
    if mask is not None:
        m = raw(mask)
        if not is_bool_array(m):
            raise TypeErr(f"scaled_dot_product_attention(): mask must be a bool matrix (true = may attend), "
                          f"got {describe(m)}; pass an additive float matrix as bias=")
    for name, t in (("mask", mask), ("bias", bias)):
        if t is not None and not broadcasts_into(_shape(t), scores):
            raise ShapeError(f"scaled_dot_product_attention(): {name} is {shape_text(_shape(t))}, which does not "
                             f"broadcast to the scores {'x'.join(map(str, scores))} ([..., L_q, L_k], queries x keys; "
                             f"by PyTorch's rule a size-1 axis repeats and missing leading axes count as 1)")
    return attention(q, k, v, mask, bias, causal)


def score_scale(q) -> float:
    """1/sqrt(d_k); 1 for d_k = 0, where every score is an empty sum, 0 whatever the scale (the
    weights are uniform and the output the mean of the values, as PyTorch gives)."""
    d_k = _shape(q)[-1]
    return 1.0 / math.sqrt(d_k) if d_k else 1.0


def attention(q, k, v, mask=None, bias=None, causal=False):
    """The sdpa primitive with the 1/sqrt(d_k) scale."""
    return ops.sdpa(q, k, v, bias, mask=mask, causal=causal, scale=score_scale(q))


def _attend(q, k, v, causal, p, training, mask=None, weights=False):
    """sdpa, or, when attention dropout is active or the weights are wanted, the same computation
    composed from primitives with dropout applied to the attention weights (as PyTorch's
    MultiheadAttention does); with weights = true, (output, the weights the values were averaged with)."""
    if not weights and (not training or p == 0):
        return attention(q, k, v, mask, causal=causal)
    w = ops.attention_weights(q, k, None, mask=mask, causal=causal, scale=score_scale(q))
    w = apply_dropout(w, p, training)
    out = ops.matmul(w, v)
    return (out, w) if weights else out


# T x D from which the heads run joined: every size since dense_heads and heads_dense (issue 28:
# T=8 D=16 268 us joined against 283 us per head, T=32 D=32 403 against 514); tests set it
# past every size to exercise the per-head loop, which dropout and return_weights still take
FUSE_MIN_ELEMENTS = 1


def _fusable(fields) -> bool:
    """Heads of one shape and the same biases can run as one batched attention."""
    if len(fields) < 2:
        return False
    first = fields[0]
    sq, sv = _shape(first["wq"]), _shape(first["wv"])
    present = [b in first for b in ("bq", "bk", "bv")]
    for f in fields[1:]:
        if _shape(f["wq"]) != sq or _shape(f["wv"]) != sv or [b in f for b in ("bq", "bk", "bv")] != present:
            return False
    return True


# The cache of joined head weights is the current session's (lang/array/context.py): a dict
# (dim, ids of the parts) -> (weak references to the parts, joined).
context.slot("joined_heads", dict)


def joined_cache() -> dict:
    """The current session's cache of joined head weights."""
    return context.LIVE["joined_heads"]


def _joined_untracked(parts, dim):
    """concat(*parts, dim) for untracked weights, remembered: inference calls the block again and
    again with the same weight matrices (generation, evaluation), and matrices are never
    changed in place, so the same parts always join to the same matrix. An entry lives as long
    as its parts: the first of them to be freed removes it, and a hit needs every part to be the
    very object it was (an id can be reused only after its object is gone)."""
    key = (dim,) + tuple(map(id, parts))
    cache = context.LIVE["joined_heads"]
    hit = cache.get(key)
    if hit is not None and all(ref() is p for ref, p in zip(hit[0], parts)):
        return hit[1]
    out = ops.concat(*parts, dim=dim)

    def forget(_ref, key=key, cache=cache):     # this session's cache, even when another runs
        cache.pop(key, None)
    try:
        cache[key] = (tuple(weakref.ref(p, forget) for p in parts), out)
    except TypeError:       # a part that takes no weak reference: not remembered
        pass
    return out


def _mha_fused(x, fields, causal, src=None, mask=None):
    """All heads at once: one projection each for q, k, v (the heads' matrices side by side), one
    batched attention over [..., H, T, d], one output projection: the same sum over heads as the
    loop, with larger matrix products. Tracked weights go through ops.dense_heads and
    ops.heads_dense (one tape node per projection); untracked ones are joined once and
    remembered (`_joined_untracked`: inference calls the block again and again with the same
    matrices). Keys and values come from src (the memory of cross-attention; x itself by default)."""
    n = len(fields)
    src = x if src is None else src

    def projected(t, w, b):
        ps = [f[w] for f in fields] + ([f[b] for f in fields] if b in fields[0] else [])
        if any(type(p) is Box for p in ps):
            return ops.dense_heads(t, *ps, bias=len(ps) > n)
        bias = _joined_untracked(ps[n:], 0) if len(ps) > n else None
        return ops.split_heads(ops.dense(t, _joined_untracked(ps[:n], 1), bias), n)
    q = projected(x, "wq", "bq")
    k = projected(src, "wk", "bk")
    v = projected(src, "wv", "bv")
    o = attention(q, k, v, mask, causal=causal)
    wo = [f["wo"] for f in fields]
    if any(type(w) is Box for w in wo):
        return ops.heads_dense(o, *wo)
    return ops.dense(ops.merge_heads(o), _joined_untracked(wo, 0))


def mha(x, heads, causal=False, p=0.0, training=False, bo=None, memory=None, mask=None, weights=False):
    """sum over heads of attention(x wq + bq, m wk + bk, m wv + bv) wo, plus bo, with m = memory
    (cross-attention) or x (self-attention): composed from primitives (dense, sdpa or
    softmax/matmul with dropout, add); no gradient rule of its own. With weights = true,
    (output, the heads' attention weights stacked as [..., H, T, S])."""
    fields = [raw(h).fields for h in heads]
    s = _shape(x)
    src = x if memory is None else memory
    if mask is not None:        # against the weights [..., H, T, S]: a head axis (of 1, or one mask per head)
        mask = head_mask(mask, s)
    # Joining costs a few more tape nodes; it pays when the products are large enough.
    if (not weights and not (training and p > 0) and s[-2] * s[-1] >= FUSE_MIN_ELEMENTS
            and _fusable(fields)):
        out = _mha_fused(x, fields, causal, src, mask)
        return ops.add(out, bo) if bo is not None else out
    out = None
    ws = []
    for i, h in enumerate(heads):
        f = raw(h).fields
        q = ops.dense(x, f["wq"], f.get("bq"))
        k = ops.dense(src, f["wk"], f.get("bk"))
        v = ops.dense(src, f["wv"], f.get("bv"))
        m = None if mask is None else mask[..., i if mask.shape[-3] > 1 else 0, :, :]
        a = _attend(q, k, v, causal, p, training, m, weights)
        if weights:
            a, w = a
            ws.append(w)
        o = ops.dense(a, f["wo"])
        out = o if out is None else ops.add(out, o)
    out = ops.add(out, bo) if bo is not None else out
    return (out, ops.stack(*ws, dim=-3)) if weights else out


def dropout_param(doc: str):
    """The `dropout` parameter of attention and the blocks: a probability in [0, 1), 0 by default."""
    return P("dropout", "number", 0.0, doc=doc, check=dropout_range, constraint=">= 0 and < 1")


_DROPOUT = dropout_param("probability of dropping an attention weight (training only)")
_TRAINING = P("training", "bool", False, doc="apply dropout (true) or not (false, evaluation)")


# The cross-attention example of the multi_head_attention and transformer_decoder_block pages: a
# decoder whose queries are built to find the source position T - 1 - t (reversal).
CROSS_ATTENTION_EXAMPLE = (
    "S = 6\nt = (0:S - 1)'\n"
    "pos = [sin(t), cos(t), sin(t / 2), cos(t / 2)]   # 4 features per position\n"
    "memory = 3 * pos                                 # an encoder's output: source positions 0..5\n"
    "x = 3 * pos[S - 1:-1:0, :]                       # decoder position i looks like source S-1-i\n"
    "eye4 = eye(4)\nhead = {wq = eye4, wk = eye4, wv = eye4, wo = eye4}\n"
    "y, w = multi_head_attention(x, (head,), 1, memory=memory, return_weights=true)\n"
    "print(size(y), size(w))\n"
    "round(w[0, 0, :], 3)\n"
    "imshow(w[0, :, :])\n"
    'title("cross-attention weights: decoder position i reads source S-1-i")\n'
    'xlabel("source position (memory)")\nylabel("decoder position (x)")')


@builtin("multi_head_attention", CAT, "Self-attention with several heads: sum over heads of sdpa(x wq, x wk, x wv) wo.",
         [P("x", "array", shape="[T, D] or [B, T, D]", doc="the sequence, one row per position"),
          P("heads", "tuple", doc="a tuple of records {wq, wk, wv, wo} (wq, wk: D x d_k; wv: D x d_v; "
                                  "wo: d_v x D), each optionally with biases bq, bk [d_k] and bv [d_v]"),
          P("n_heads", "int", doc="must equal len(heads)"),
          P("causal", "bool", False, doc="each position attends only to itself and earlier ones"),
          _DROPOUT, _TRAINING,
          P("bo", "array", None, shape="[D]", doc="the one output bias, added after the heads are summed"),
          P("memory", "array", None, shape="[S, D] or [B, S, D]",
            doc="keys and values come from memory instead of x (cross-attention); none: self-attention"),
          P("mask", "array", None, shape="broadcasts to [T, S] or [B, T, S]; or [B, H, T, S]",
            doc="bool, true = may attend (PyTorch's boolean attn_mask means the opposite); with one more axis "
                "than x, one mask per head"),
          P("return_weights", "bool", False,
            doc="also return the attention weights, [H, T, S] or [B, H, T, S]")],
         returns="same shape as x; with return_weights, a tuple (output, weights)", differentiable=True,
         what="Runs one scaled_dot_product_attention per head on projections of x and adds up the heads' "
              "projected outputs. With one identity head it is plain self-attention. With memory = m "
              "it is cross-attention, the encoder-decoder attention of the 2017 Transformer: the "
              "queries come from x (T positions) and the keys and values from m (S positions), so "
              "each of x's positions reads a weighted average of m's; the output still has x's shape.",
         how="MultiHead(x) = sum_h Attention(x Wq_h + bq_h, x Wk_h + bk_h, x Wv_h + bv_h) Wo_h + bo "
             "(Vaswani et al. 2017, §3.2.2; the sum over heads equals Concat(head_1..head_h) W^O with W^O "
             "split by rows). Layout against PyTorch's nn.MultiheadAttention: wq_h = in_proj_weight[h*d_k:"
             "(h+1)*d_k]' (likewise wk, wv from the next D rows), bq_h = in_proj_bias[h*d_k:(h+1)*d_k], "
             "wo_h = out_proj.weight[:, h*d_v:(h+1)*d_v]', and bo = out_proj.bias — one vector, which is "
             "why it is an argument here and the field weights.bo of a transformer_block record, not a "
             "field of each head. With training = true and dropout = p the attention weights go through "
             "inverted dropout (as PyTorch's dropout inside MultiheadAttention). A composite: built from "
             "dense and scaled_dot_product_attention, it has no gradient rule of its own. Heads of one "
             "shape run joined: each projection is one product with the heads' matrices side by side "
             "(PyTorch's in_proj_weight) and one tape node, and the attention is one batched call over "
             "[..., H, T, d].\n\n"
             "memory = m gives PyTorch's MultiheadAttention(query = x, key = m, value = m): q = x wq_h + "
             "bq_h, k = m wk_h + bk_h, v = m wv_h + bv_h. causal = true with a memory keeps the "
             "bottom-right rule of scaled_dot_product_attention: query i sees keys j <= i + S - T. "
             "mask is a bool T x S matrix (or B x T x S, one per batch element) where true means "
             "'may attend', as in scaled_dot_product_attention and PyTorch's F.scaled_dot_product_attention; "
             "like theirs it broadcasts by PyTorch's rule, so a B x 1 x S padding mask or a 1 x T x S one "
             "serves every query or every batch element, and a mask with one more axis than x, "
             "B x H x T x S (or B x 1 x T x S, the Annotated Transformer's layout), holds one per head; "
             "PyTorch's nn.MultiheadAttention and nn.Transformer* read a boolean attn_mask the other way "
             "round (true = masked out), so pass not their_mask. mask and causal combine (both must allow "
             "a pair); a query row with every key masked gives zeros. return_weights = true returns "
             "(output, weights) with the weights of every head, [H, T, S] or [B, H, T, S] (PyTorch's "
             "need_weights with average_attn_weights = False; mean(w, 0) averages the heads): each row "
             "sums to 1, or is all zeros when every key is masked. In training with dropout they are "
             "the weights after dropout, the ones the values were averaged with, as PyTorch returns.",
         errors=["ValueError when n_heads differs from len(heads)",
                 "ValueError naming the path and both shapes when a head is missing a field or a field "
                 "has the wrong shape (heads[1].wq is 4x3, expected 4x2)",
                 "ValueError when dropout is not in [0, 1)",
                 "ShapeError when memory's width differs from x's, or its batch size does",
                 "TypeError when mask is not a bool matrix; ShapeError when it does not broadcast to T x S "
                 "(B x T x S for a batch; with a head axis, B x H x T x S)"],
         examples=["eye2 = [1.0, 0.0; 0.0, 1.0]\nhead = {wq = eye2, wk = eye2, wv = eye2, wo = eye2}\n"
                   "q = [1.0, 0.5; -0.5, 1.0; 0.2, -0.3]\nmulti_head_attention(q, (head,), 1)",
                   "eye2 = [1.0, 0.0; 0.0, 1.0]\nhead = {wq = eye2, wk = eye2, wv = eye2, wo = eye2}\n"
                   "x = [1.0, 0.5; -0.5, 1.0; 0.2, -0.3]\n"
                   "round(multi_head_attention(x, (head,), 1, causal=true, bo=[0.5, 0]), 3)",
                   "t = (0:7)'\nx = [sin(t), cos(t), sin(t / 3), cos(t / 3)]\n"
                   "a = [1, 0; 0, 1; 0, 0; 0, 0]  # head 0 looks at the fast features\n"
                   "b = [0, 0; 0, 0; 1, 0; 0, 1]  # head 1 at the slow ones\n"
                   "heads = ({wq = a, wk = a, wv = a, wo = a'}, {wq = b, wk = b, wv = b, wo = b'})\n"
                   "y = multi_head_attention(x, heads, 2, causal=true)\nprint(size(y))\n"
                   "figure(width=8, height=3)\nsubplot(1, 2, 0)\n"
                   "imshow(scaled_dot_product_attention(x @ a, x @ a, eye(8), causal=true))\n"
                   'title("head 0 weights")\nsubplot(1, 2, 1)\n'
                   "imshow(scaled_dot_product_attention(x @ b, x @ b, eye(8), causal=true))\n"
                   'title("head 1 weights")',
                   CROSS_ATTENTION_EXAMPLE,
                   "heads = transformer_block_init(4, 2, seed=0).heads\nx = reshape(0:23, 2, 3, 4) / 10\n"
                   "m = reshape(0:39, 2, 5, 4) / 20\n"
                   "# memory 1 has 3 real positions and 2 of padding: its queries may not read the padding\n"
                   "mask = (0:4) < reshape([5, 3], 2, 1, 1)   # 2 x 1 x 5: broadcast over the queries\n"
                   "y, w = multi_head_attention(x, heads, 2, memory=m, mask=mask, return_weights=true)\n"
                   "print(size(y), size(w))\nround(w[1, 0, :, :], 3)   # batch element 1, head 0"])
def multi_head_attention(x, heads, n_heads, causal, dropout, training, bo, memory, mask, return_weights):
    if n_heads != len(raw(heads)):
        raise ValueErr(f"multi_head_attention(): n_heads is {n_heads} but heads has {len(raw(heads))} "
                       f"record{'s' * (len(raw(heads)) != 1)}; they must be equal")
    s = _shape(x)
    if len(s) < 2:
        raise ShapeError(f"multi_head_attention(): x must be T x D (or B x T x D), got {describe(x)}")
    if memory is not None:
        if len(s) > 3:
            raise ShapeError(f"multi_head_attention(): with a memory, x must be T x D or B x T x D, got {describe(x)}")
        check_memory(memory, s, "multi_head_attention()")
    n_keys = _shape(memory)[-2] if memory is not None else s[-2]
    if mask is not None:
        check_mask(mask, s, n_keys, "multi_head_attention()", n_heads=len(raw(heads)))
    check_heads(heads, s[-1])
    if bo is not None:
        need_shape(bo, "bo", (s[-1],), ValueErr)
    return mha(x, raw(heads), causal, dropout, training, bo, memory, mask, return_weights)
