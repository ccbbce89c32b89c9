"""Statistics & ML: transformer_block (encoder) and transformer_decoder_block.

Both are composites: Python code over primitives, with no gradient rule of their own; their
gradients come from the tape's ordinary reverse walk (DESIGN.md rule 3).
"""
from __future__ import annotations

from tapeml.array import ops
from tapeml.builtins.ml.activations import _ACTIVATION_NAMES, ACTIVATIONS
from tapeml.builtins.ml.attention import _TRAINING, CROSS_ATTENTION_EXAMPLE, dropout_param, mha
from tapeml.builtins.ml.layers import NORMS, apply_dropout
from tapeml.builtins.ml.schema import _shape, check_block, check_decoder_block, check_mask, check_memory
from tapeml.builtins.registry import P, builtin, one_of, positive
from tapeml.syntax.errors import ShapeError
from tapeml.array.tape import raw
from tapeml.array.values import describe

CAT = "Statistics & ML"

_NORM_FIRST = P("norm_first", "bool", False, doc="pre-norm (true) or the original post-norm (false)")
_ACTIVATION = P("activation", "string", "relu", doc="the feed-forward nonlinearity",
                check=one_of(*_ACTIVATION_NAMES), constraint="one of " + ", ".join(f'"{a}"' for a in _ACTIVATION_NAMES))


def block(x, f, norm_first=False, norm="layer_norm", causal=False, activation="relu", p=0.0,
          training=False, eps=1e-5, mask=None):
    """The block on checked fields `f`, composed from primitives (no gradient rule of its own)."""
    act = ACTIVATIONS[activation]

    def normed(h, i):
        if norm == "rms_norm":
            return ops.rms_norm(h, f[f"ln{i}_gamma"], eps=eps)
        return ops.layer_norm(h, f[f"ln{i}_gamma"], f.get(f"ln{i}_beta"), eps=eps)

    def scaled(h, name):
        return ops.mul(h, f[name]) if name in f else h

    # dropout as PyTorch's layer: on the attention weights, after the activation, and on each
    # sublayer's output before its residual add (dropout1, dropout2; nanoGPT's resid_dropout)
    def attn(h):
        out = mha(h, raw(f["heads"]), causal, p, training, f.get("bo"), mask=mask)
        return scaled(apply_dropout(out, p, training), "gamma1")

    def ffn(h):
        hidden = apply_dropout(act(ops.dense(h, f["w1"], f.get("b1"))), p, training)
        return scaled(apply_dropout(ops.dense(hidden, f["w2"], f.get("b2")), p, training), "gamma2")

    if norm_first:
        h = ops.add(x, attn(normed(x, 1)))
        return ops.add(h, ffn(normed(h, 2)))
    h = normed(ops.add(x, attn(x)), 1)
    return normed(ops.add(h, ffn(h)), 2)


# The seed page's program: the transformer_block page's first example; its output is the golden
# output (examples/seed_statistics_ml.ml, tests/golden).
SEED_PROGRAM = (
    'x = [1.0, 2.0, 3.0; 10.0, 20.0, 30.0]\n'
    'normed = layer_norm(x, [1.0, 1.0, 1.0], [0.0, 0.0, 0.0])\n'
    'print("layer_norm (scale-invariant per row): {normed}")\n'
    '\n'
    'q = [1.0, 0.5; -0.5, 1.0; 0.2, -0.3]\n'
    'k = [1.0, 0.0; 0.0, 1.0; 0.5, 0.5]\n'
    'v = [1.0, 2.0; 3.0, 4.0; 5.0, 6.0]\n'
    'attn = scaled_dot_product_attention(q, k, v)\n'
    'print("attention output: {round(attn, 3)}")\n'
    '\n'
    'eye2 = [1.0, 0.0; 0.0, 1.0]\n'
    'head = {wq = eye2, wk = eye2, wv = eye2, wo = eye2}\n'
    'mh = multi_head_attention(q, (head,), 1)\n'
    'plain = scaled_dot_product_attention(q, q, q)\n'
    'print("multi_head_attention with 1 identity head matches plain self-attention: {sum(abs(mh - plain)) < 1e-9}")\n'
    '\n'
    'weights = {heads = (head,), ln1_gamma = [1.0, 1.0], ln1_beta = [0.0, 0.0],\n'
    '           w1 = [0.2, -0.1; 0.1, 0.3], b1 = [0.0, 0.0],\n'
    '           w2 = [0.1, -0.2; 0.3, 0.1], b2 = [0.0, 0.0],\n'
    '           ln2_gamma = [1.0, 1.0], ln2_beta = [0.0, 0.0]}\n'
    'block_out = transformer_block(q, weights)\n'
    'print("transformer_block: {round(block_out, 3)}")')


@builtin("transformer_block", CAT, "One Transformer encoder block: attention and a feed-forward, each with a "
         "residual add and a normalization (post-norm by default, pre-norm with norm_first).",
         [P("x", "array", shape="[T, D] or [B, T, D]"),
          P("weights", "record", doc="a record with heads, ln1_gamma, ln1_beta, w1, b1, w2, b2, ln2_gamma, "
                                     "ln2_beta (optional bo, gamma1, gamma2); transformer_block_init makes one"),
          _NORM_FIRST,
          P("norm", "string", "layer_norm", doc="the normalization", check=one_of(*NORMS),
            constraint='one of "layer_norm", "rms_norm"'),
          P("causal", "bool", False, doc="position t attends only to positions <= t"),
          _ACTIVATION,
          dropout_param("dropout on the attention weights, after the feed-forward "
                        "activation and on each sublayer's output (training only)"),
          _TRAINING,
          P("eps", "number", 1e-5, doc="epsilon of both normalizations", check=positive, constraint="> 0"),
          P("mask", "array", None, shape="broadcasts to [T, T] or [B, T, T]",
            doc="bool, true = may attend (e.g. a [B, 1, T] padding mask); combined with causal")],
         returns="same shape as x", differentiable=True,
         what="One transformer block on a T x D input (or a batch B x T x D): multi-head self-attention "
              "plus a two-layer feed-forward network, each wrapped in a residual connection and a "
              "normalization. weights.heads is the tuple multi_head_attention takes (n_heads is its "
              "length); ln1_*/ln2_* are the two norms' gains and biases; w1, b1, w2, b2 the feed-forward "
              "layers; bo the attention output bias; gamma1/gamma2 the layer-scale gains. "
              "transformer_block_init makes such a record; param_count and summary count it.",
         how="Post-norm (default; Vaswani et al. 2017, §3.1, PyTorch's nn.TransformerEncoderLayer "
             "with norm_first=False):\n\n"
             "    h   = norm1(x + ls1 * drop(attn(x)))\n"
             "    out = norm2(h + ls2 * drop(ffn(h)))\n\n"
             "Pre-norm (norm_first = true; Xiong et al. 2020, GPT-2, ViT):\n\n"
             "    h   = x + ls1 * drop(attn(norm1(x)))\n"
             "    out = h + ls2 * drop(ffn(norm2(h)))\n\n"
             "with attn = multi_head_attention(., heads, causal, dropout, training, bo), "
             "ffn(h) = dense(drop(act(dense(h, w1, b1))), w2, b2), drop = dropout(., dropout, training), norm = layer_norm (gain ln*_gamma, bias "
             "ln*_beta) or rms_norm (gain only), and ls1, ls2 the layer-scale vectors gamma1, gamma2 "
             "when the record has them (CaiT, Touvron et al. 2021), else 1. mask is the self-attention's "
             "'may attend' matrix, as multi_head_attention's (true = may attend; PyTorch's boolean "
             "src_mask means the opposite): a T x T matrix, or B x T x T for a batch of sequences of "
             "different lengths padded to T, or any shape that broadcasts to those by PyTorch's rule "
             "(a B x 1 x T padding mask, a 1 x T x T one). Dropout acts where PyTorch's layer puts it: "
             "on the attention weights, after the activation, and on each sublayer's output before the "
             "residual add (its dropout1 and dropout2), only with training = true, drawing from "
             "seed(n)'s generator. A composite of recorded primitives: its gradient comes from the tape's "
             "ordinary reverse walk, with no rule of its own; checked against PyTorch 2.13 to 1e-10 "
             "(tests/builtins/test_parity.py).",
         errors=["ValueError naming the path of a missing or unknown field",
                 "ValueError naming the path and both shapes (weights.heads[1].wq is 4x3, expected 4x2)",
                 'ValueError when norm or activation is not one of the allowed names (they are listed)',
                 "ValueError when dropout is not in [0, 1) or eps <= 0",
                 "TypeError when mask is not a bool matrix; ShapeError when it does not broadcast to T x T (or "
                 "B x T x T)"],
         examples=[SEED_PROGRAM,
                   "w = transformer_block_init(8, 2, seed=0)\nx = reshape(0:47, 2, 3, 8) / 10\n"
                   "y = transformer_block(x, w, norm_first=true, causal=true, activation=\"gelu\")\nsize(y)",
                   "# two sequences padded to T = 4: the first has 4 tokens, the second 2\n"
                   "w = transformer_block_init(8, 2, seed=0)\nseed(1)\nx = randn(2, 4, 8)\n"
                   "lengths = [4, 2]\nkeys = (0:3) < reshape(lengths, 2, 1, 1)   # 2 x 1 x 4: which keys are real\n"
                   "y = transformer_block(x, w, mask=keys)   # broadcast over the queries, as in PyTorch\n"
                   "# the second sequence's real tokens ignore its padding:\n"
                   "alone = transformer_block(x[1, 0:1, :], w)\nmax(abs(y[1, 0:1, :] - alone)) < 1e-12"])
def transformer_block(x, weights, norm_first, norm, causal, activation, dropout, training, eps, mask):
    s = _shape(x)
    if len(s) < 2:
        raise ShapeError(f"transformer_block(): x must be T x D (or B x T x D), got {describe(x)}")
    if mask is not None:
        check_mask(mask, s, s[-2], "transformer_block()")
    f = check_block(weights, s[-1], norm)
    return block(x, f, norm_first, norm, causal, activation, dropout, training, eps, mask)


def decoder_block(x, memory, f, norm_first=False, causal=True, activation="relu", p=0.0, training=False,
                  eps=1e-5, mask=None, memory_mask=None):
    """The decoder block on checked fields `f`, composed from primitives (no gradient rule of its own)."""
    act = ACTIVATIONS[activation]

    def normed(h, i):
        return ops.layer_norm(h, f[f"ln{i}_gamma"], f.get(f"ln{i}_beta"), eps=eps)

    def self_attn(h):      # each sublayer's output dropped before its residual add (dropout1..3)
        return apply_dropout(mha(h, raw(f["self_heads"]), causal, p, training, f.get("self_bo"), mask=mask),
                             p, training)

    def cross_attn(h):
        return apply_dropout(mha(h, raw(f["cross_heads"]), False, p, training, f.get("cross_bo"), memory=memory,
                                 mask=memory_mask), p, training)

    def ffn(h):
        hidden = apply_dropout(act(ops.dense(h, f["w1"], f.get("b1"))), p, training)
        return apply_dropout(ops.dense(hidden, f["w2"], f.get("b2")), p, training)

    if norm_first:
        h = ops.add(x, self_attn(normed(x, 1)))
        h = ops.add(h, cross_attn(normed(h, 2)))
        return ops.add(h, ffn(normed(h, 3)))
    h = normed(ops.add(x, self_attn(x)), 1)
    h = normed(ops.add(h, cross_attn(h)), 2)
    return normed(ops.add(h, ffn(h)), 3)


@builtin("transformer_decoder_block", CAT, "One Transformer decoder block: causal self-attention, "
         "cross-attention to an encoder's output, and a feed-forward, each with a residual add and a "
         "layer_norm (PyTorch's nn.TransformerDecoderLayer).",
         [P("x", "array", shape="[T, D] or [B, T, D]", doc="the decoder's sequence (the target so far)"),
          P("memory", "array", shape="[S, D] or [B, S, D]",
            doc="what cross-attention reads: the encoder's output, with x's width D"),
          P("weights", "record", doc="a record with self_heads, cross_heads, ln1_gamma, ln1_beta, ln2_gamma, "
                                     "ln2_beta, ln3_gamma, ln3_beta, w1, b1, w2, b2 (optional self_bo, "
                                     "cross_bo); transformer_decoder_block_init makes one"),
          _NORM_FIRST,
          P("causal", "bool", True, doc="self-attention: position t attends only to positions <= t"),
          _ACTIVATION,
          dropout_param("dropout on both attentions' weights, after the feed-forward "
                        "activation and on each sublayer's output (training only)"),
          _TRAINING,
          P("eps", "number", 1e-5, doc="epsilon of the three layer norms", check=positive, constraint="> 0"),
          P("mask", "array", None, shape="broadcasts to [T, T] or [B, T, T]",
            doc="self-attention's bool 'may attend' mask, combined with causal"),
          P("memory_mask", "array", None, shape="broadcasts to [T, S] or [B, T, S]",
            doc="cross-attention's bool 'may attend' mask (e.g. the source's padding)")],
         returns="same shape as x", differentiable=True,
         what="The block of the decoder in an encoder-decoder Transformer (the 2017 translation model): "
              "the target sequence x attends to itself (causally, so that position t sees only the "
              "tokens before it), then to the encoder's output memory through cross-attention, then "
              "goes through a two-layer feed-forward network. Each of the three sublayers is wrapped "
              "in a residual connection and a layer_norm. transformer_decoder_block_init makes the "
              "weights; param_count and summary count them.",
         how="Post-norm (default; Vaswani et al. 2017, §3.1; PyTorch's nn.TransformerDecoderLayer with "
             "norm_first=False):\n\n"
             "    h1  = ln1(x + drop(self_attn(x)))\n"
             "    h2  = ln2(h1 + drop(cross_attn(h1, memory)))\n"
             "    out = ln3(h2 + drop(ffn(h2)))\n\n"
             "Pre-norm (norm_first = true):\n\n"
             "    h1  = x + drop(self_attn(ln1(x)))\n"
             "    h2  = h1 + drop(cross_attn(ln2(h1), memory))\n"
             "    out = h2 + drop(ffn(ln3(h2)))\n\n"
             "with self_attn(h) = multi_head_attention(h, self_heads, causal=causal, mask=mask, bo=self_bo), "
             "cross_attn(h, m) = multi_head_attention(h, cross_heads, memory=m, mask=memory_mask, "
             "bo=cross_bo) (never causal: every target position may read the whole source), "
             "ffn(h) = dense(drop(act(dense(h, w1, b1))), w2, b2), and lnI = layer_norm(., lnI_gamma, "
             "lnI_beta, eps). The memory is not normalized here, in either layout: in PyTorch's "
             "nn.Transformer the encoder's final norm does that. Masks are bool with true = may attend "
             "(PyTorch's boolean tgt_mask and memory_mask mean the opposite); they broadcast by PyTorch's rule "
             "(a B x 1 x S padding mask of the source serves every target position). Dropout acts on both "
             "attentions' weights, after the activation and on each sublayer's output before its residual "
             "add (PyTorch's dropout1, dropout2, dropout3), as in transformer_block. A composite of "
             "recorded primitives: its gradient comes from the tape's ordinary reverse walk, with no "
             "rule of its own; checked against PyTorch 2.13's nn.TransformerDecoderLayer to 1e-10, "
             "output and every gradient (tests/builtins/test_parity.py).",
         errors=["ShapeError when memory's width differs from x's (or its batch size does)",
                 "ValueError naming the path of a missing or unknown field",
                 "ValueError naming the path and both shapes (weights.cross_heads[1].wk is 8x3, expected 8x4)",
                 "ValueError when activation is not one of the allowed names, dropout is not in [0, 1) "
                 "or eps <= 0",
                 "TypeError when a mask is not a bool matrix; ShapeError when it does not broadcast to T x T "
                 "(mask) or T x S (memory_mask), batched with B first"],
         examples=["w = transformer_decoder_block_init(8, 2, seed=0)\nseed(1)\n"
                   "memory = randn(5, 8)    # an encoder's output: 5 source positions\n"
                   "x = randn(3, 8)         # 3 target positions\n"
                   "y = transformer_decoder_block(x, memory, w)\nsize(y)",
                   "# causal: changing the last target position leaves the earlier outputs alone\n"
                   "w = transformer_decoder_block_init(8, 2, seed=0)\nseed(1)\nmemory = randn(5, 8)\n"
                   "x = randn(3, 8)\nx2 = x\nx2[2, :] = randn(1, 8)\n"
                   "a = transformer_decoder_block(x, memory, w, norm_first=true)\n"
                   "b = transformer_decoder_block(x2, memory, w, norm_first=true)\n"
                   "round(max(abs(a - b), dim=1), 6)",
                   CROSS_ATTENTION_EXAMPLE.replace(
                       "print(size(y), size(w))\n",
                       "# the same head as a decoder block's cross-attention: only self and cross differ\n"
                       "blk = transformer_decoder_block_init(4, 1, seed=0)\nblk.cross_heads = (head,)\n"
                       "print(size(transformer_decoder_block(x, memory, blk)))\n")])
def transformer_decoder_block(x, memory, weights, norm_first, causal, activation, dropout, training, eps,
                              mask, memory_mask):
    s = _shape(x)
    if len(s) not in (2, 3):
        raise ShapeError(f"transformer_decoder_block(): x must be T x D (or B x T x D), got {describe(x)}")
    check_memory(memory, s, "transformer_decoder_block()")
    if mask is not None:
        check_mask(mask, s, s[-2], "transformer_decoder_block()")
    if memory_mask is not None:
        check_mask(memory_mask, s, _shape(memory)[-2], "transformer_decoder_block()", "memory_mask")
    f = check_decoder_block(weights, s[-1])
    return decoder_block(x, memory, f, norm_first, causal, activation, dropout, training, eps, mask, memory_mask)
