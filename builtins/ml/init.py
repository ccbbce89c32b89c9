"""Statistics & ML: transformer_block_init and transformer_decoder_block_init, weights records
initialised as PyTorch's nn.TransformerEncoderLayer / nn.TransformerDecoderLayer."""
from __future__ import annotations

import math

import numpy as np

from tapeml.array.primitive_table import new_array
from tapeml.builtins.ml.layers import NORMS
from tapeml.builtins.ml.schema import at_least_one
from tapeml.builtins.registry import P, builtin, non_negative, one_of, positive
from tapeml.syntax.errors import ValueErr
from tapeml.array.values import Record

CAT = "Statistics & ML"

_D_MODEL = P("d_model", "int", doc="model width D", check=positive, constraint="> 0")
_MLP_RATIO = P("mlp_ratio", "int", 4, doc="feed-forward width as a multiple of D", check=at_least_one,
               constraint=">= 1")
_SEED = P("seed", "int", None, doc="seed of a private generator; none draws from seed(n)'s generator",
          check=non_negative, constraint=">= 0")


def _uniform(gen, bound, shape):
    from tapeml.array import limits
    limits.check_elements(f"transformer_block_init(): a weight of {' x '.join(map(str, shape))}", shape)
    return gen.uniform(-bound, bound, shape)


def _check_total(fname, d, n_heads, mlp_ratio, attentions):
    """The whole record against the size guard before the first weight is drawn (each weight
    alone may pass while all of them together would not fit): per attention 4 D^2 + 4 D, then
    2 D H + H + D for the feed-forward and 2 D per norm (an upper bound, biases counted)."""
    from tapeml.array import limits
    hidden = mlp_ratio * d
    for shape in ((3 * d, d), (d, d), (hidden, d), (d, hidden)):       # each weight, in the order drawn
        limits.check_elements(f"{fname}(): a weight of {' x '.join(map(str, shape))}", shape)
    total = attentions * (4 * d * d + 4 * d) + 2 * d * hidden + hidden + d + 2 * d * (attentions + 1)
    limits.check_elements(f"{fname}({d}, {n_heads}, mlp_ratio={mlp_ratio}): its {limits.g3(total)} numbers",
                          (total,))


def _init_generator(seed):
    from tapeml.builtins.random import rng
    return np.random.default_rng(seed) if seed is not None else rng()


def _init_heads(gen, d, n_heads, bias):
    """One nn.MultiheadAttention(d, n_heads) as head records: the packed in_proj_weight [3D, D]
    xavier_uniform, out_proj.weight [D, D] kaiming_uniform(a = sqrt(5)), drawn in that order,
    split by rows and heads and transposed; in_proj_bias zeros (bq, bk, bv when bias)."""
    dk = d // n_heads
    in_proj = _uniform(gen, math.sqrt(6.0 / (d + 3 * d)), (3 * d, d))      # xavier_uniform_
    out_proj = _uniform(gen, 1.0 / math.sqrt(d), (d, d))                  # kaiming_uniform_(a=sqrt(5))
    heads = []
    for h in range(n_heads):
        rows = slice(h * dk, (h + 1) * dk)
        head = {"wq": in_proj[:d][rows].T.copy(), "wk": in_proj[d:2 * d][rows].T.copy(),
                "wv": in_proj[2 * d:][rows].T.copy(), "wo": out_proj[:, rows].T.copy()}
        if bias:
            head.update(bq=np.zeros(dk), bk=np.zeros(dk), bv=np.zeros(dk))
        heads.append(Record(head))
    return heads


def _init_ffn(gen, d, hidden):
    """linear1 (D -> hidden) and linear2 (hidden -> D) with nn.Linear's default init, in
    PyTorch's shapes: weight and bias U(+-1/sqrt(fan_in))."""
    lin1_w = _uniform(gen, 1.0 / math.sqrt(d), (hidden, d))
    lin1_b = _uniform(gen, 1.0 / math.sqrt(d), (hidden,))
    lin2_w = _uniform(gen, 1.0 / math.sqrt(hidden), (d, hidden))
    lin2_b = _uniform(gen, 1.0 / math.sqrt(hidden), (d,))
    return lin1_w, lin1_b, lin2_w, lin2_b


def _start(fname, d, n_heads, mlp_ratio, seed, n_attention):
    """What both inits begin with: n_heads divides d_model, the record's size is checked before
    the first draw (n_attention attentions), the generator. Returns (generator, feed-forward width)."""
    if d % n_heads:
        raise ValueErr(f"{fname}(): n_heads must divide d_model, got n_heads = {n_heads} "
                       f"and d_model = {d} ({d} / {n_heads} is not a whole number)")
    _check_total(fname, d, n_heads, mlp_ratio, n_attention)
    return _init_generator(seed), mlp_ratio * d


def _add_ffn(fields, ffn, bias):
    """The feed-forward's w1 [D, H], b1, w2 [H, D], b2 (the biases only with bias) into fields, in
    the record's order, from _init_ffn's PyTorch-shaped draws."""
    lin1_w, lin1_b, lin2_w, lin2_b = ffn
    fields["w1"] = lin1_w.T.copy()
    if bias:
        fields["b1"] = lin1_b
    fields["w2"] = lin2_w.T.copy()
    if bias:
        fields["b2"] = lin2_b


def _session_record(fields):
    """The weights record: drawn on the host from the session's generator (the same numbers on
    every device), then made matrices of the session's float type on its device, heads and all."""
    def as_session(v):
        if isinstance(v, tuple):
            return tuple(Record({k: new_array(a) for k, a in h.fields.items()}) for h in v)
        return new_array(v)
    return Record({k: as_session(v) for k, v in fields.items()})


@builtin("transformer_block_init", CAT, "A transformer_block weights record, initialised as PyTorch's "
         "nn.TransformerEncoderLayer.",
         [_D_MODEL,
          P("n_heads", "int", doc="number of heads", check=positive,
            constraint="> 0, divides d_model"),
          _MLP_RATIO,
          P("norm", "string", "layer_norm", check=one_of(*NORMS), constraint='one of "layer_norm", "rms_norm"'),
          P("bias", "bool", True, doc="attention biases bq, bk, bv, bo, feed-forward biases b1, b2 and "
                                      "layer_norm biases (false: none of them, PyTorch's bias=False)"),
          P("layer_scale", "bool", False, doc="add layer-scale gains gamma1, gamma2"),
          P("layer_scale_init", "number", 1e-5, doc="the value the gains start at", check=non_negative,
            constraint=">= 0"),
          _SEED],
         returns="a weights record for transformer_block",
         what="Makes the record transformer_block takes, for d_model D, n_heads heads of width D / n_heads "
              "and a feed-forward of width H = mlp_ratio * D:\n\n"
              "    {heads = ({wq, wk, wv: DxD/h, wo: D/hxD, bq, bk, bv: D/h}, ...), bo: D,\n"
              "     ln1_gamma, ln1_beta: D, w1: DxH, b1: H, w2: HxD, b2: D, ln2_gamma, ln2_beta: D,\n"
              "     gamma1, gamma2: D (layer_scale only)}\n\n"
              "rms_norm records have no ln*_beta; bias = false drops every bias. The default bias = true "
              "keeps all four attention projections biased and both norms affine with a bias, as PyTorch's "
              "nn.TransformerEncoderLayer does: one block of D = 32, 4 heads, mlp_ratio 4 has 12,704 numbers "
              "(4*32*32 + 4*32 attention, 2*2*32 norms, 32*128 + 128 + 128*32 + 32 feed-forward).",
         how="PyTorch 2.13's nn.TransformerEncoderLayer initialisation (torch/nn/modules/activation.py "
             "MultiheadAttention._reset_parameters and torch/nn/modules/linear.py Linear.reset_parameters): "
             "the packed in_proj_weight [3D, D] is xavier_uniform, U(+-sqrt(6 / (D + 3D))), and is split "
             "by rows into wq, wk, wv and by heads; in_proj_bias and out_proj.bias are zeros; out_proj."
             "weight [D, D] and linear1/linear2 use nn.Linear's default kaiming_uniform(a = sqrt(5)), "
             "U(+-1/sqrt(fan_in)), and their biases U(+-1/sqrt(fan_in)); LayerNorm and RMSNorm gains are "
             "ones and LayerNorm biases zeros. The matrices are drawn in PyTorch's shapes in that order "
             "and transposed into this layout. Layer scale (Touvron et al. 2021, CaiT) fills gamma1 and "
             "gamma2 with layer_scale_init.",
         errors=["ValueError when n_heads does not divide d_model",
                 "ValueError when mlp_ratio < 1, d_model or n_heads < 1, or norm is unknown",
                 "ValueError when one weight or the whole record would pass the size limit (checked before "
                 "the first draw)"],
         examples=["w = transformer_block_init(32, 4, seed=0)\nparam_count(w)",
                   "w = transformer_block_init(16, 2, norm=\"rms_norm\", seed=0)\nsize(w.heads[0].wq)",
                   "param_count(transformer_block_init(16, 2, mlp_ratio=2, layer_scale=true, seed=0))"])
def transformer_block_init(d_model, n_heads, mlp_ratio, norm, bias, layer_scale, layer_scale_init, seed):
    d = d_model
    gen, hidden = _start("transformer_block_init", d, n_heads, mlp_ratio, seed, 1)
    heads = _init_heads(gen, d, n_heads, bias)
    ffn = _init_ffn(gen, d, hidden)
    fields = {"heads": tuple(heads)}
    if bias:
        fields["bo"] = np.zeros(d)
    fields["ln1_gamma"] = np.ones(d)
    if bias and norm == "layer_norm":
        fields["ln1_beta"] = np.zeros(d)
    _add_ffn(fields, ffn, bias)
    fields["ln2_gamma"] = np.ones(d)
    if bias and norm == "layer_norm":
        fields["ln2_beta"] = np.zeros(d)
    if layer_scale:
        fields["gamma1"] = np.full(d, float(layer_scale_init))
        fields["gamma2"] = np.full(d, float(layer_scale_init))
    return _session_record(fields)


@builtin("transformer_decoder_block_init", CAT, "A transformer_decoder_block weights record, initialised as "
         "PyTorch's nn.TransformerDecoderLayer.",
         [_D_MODEL,
          P("n_heads", "int", doc="number of heads of each attention", check=positive,
            constraint="> 0, divides d_model"),
          _MLP_RATIO,
          P("bias", "bool", True, doc="attention biases, feed-forward biases and layer_norm biases "
                                      "(false: none of them, PyTorch's bias=False)"),
          _SEED],
         returns="a weights record for transformer_decoder_block",
         what="Makes the record transformer_decoder_block takes, for d_model D, n_heads heads of width "
              "D / n_heads in each attention and a feed-forward of width H = mlp_ratio * D:\n\n"
              "    {self_heads = ({wq, wk, wv: DxD/h, wo: D/hxD, bq, bk, bv: D/h}, ...), self_bo: D,\n"
              "     cross_heads = (the same), cross_bo: D,\n"
              "     ln1_gamma, ln1_beta, ln2_gamma, ln2_beta, ln3_gamma, ln3_beta: D,\n"
              "     w1: DxH, b1: H, w2: HxD, b2: D}\n\n"
              "bias = false drops every bias. At PyTorch's defaults (D = 512, 8 heads, feed-forward "
              "2048) the block has 4,204,032 numbers, as nn.TransformerDecoderLayer(512, 8) has: two "
              "attentions of 4*512*512 + 4*512, a feed-forward of 2*512*2048 + 2048 + 512 and three "
              "norms of 2*512.",
         how="PyTorch 2.13's nn.TransformerDecoderLayer initialisation, as transformer_block_init's for "
             "each part: self_attn, then multihead_attn (the cross-attention), each a packed in_proj_weight "
             "[3D, D] drawn xavier_uniform, U(+-sqrt(6 / (D + 3D))), then out_proj.weight [D, D] drawn "
             "kaiming_uniform(a = sqrt(5)), U(+-1/sqrt(D)), with in_proj_bias and out_proj.bias zeros; "
             "then linear1 and linear2 with nn.Linear's default U(+-1/sqrt(fan_in)) for weights and "
             "biases; LayerNorm gains ones and biases zeros. The matrices are drawn in PyTorch's shapes "
             "in that order and transposed and split by heads into this layout.",
         errors=["ValueError when n_heads does not divide d_model",
                 "ValueError when mlp_ratio < 1 or d_model or n_heads < 1",
                 "ValueError when one weight or the whole record would pass the size limit (checked before "
                 "the first draw)"],
         examples=["w = transformer_decoder_block_init(512, 8, seed=0)\nparam_count(w)",
                   "summary(transformer_decoder_block_init(8, 2, mlp_ratio=2, seed=0))"])
def transformer_decoder_block_init(d_model, n_heads, mlp_ratio, bias, seed):
    d = d_model
    gen, hidden = _start("transformer_decoder_block_init", d, n_heads, mlp_ratio, seed, 2)
    self_heads = _init_heads(gen, d, n_heads, bias)
    cross_heads = _init_heads(gen, d, n_heads, bias)
    ffn = _init_ffn(gen, d, hidden)
    fields = {"self_heads": tuple(self_heads)}
    if bias:
        fields["self_bo"] = np.zeros(d)
    fields["cross_heads"] = tuple(cross_heads)
    if bias:
        fields["cross_bo"] = np.zeros(d)
    for i in (1, 2, 3):
        fields[f"ln{i}_gamma"] = np.ones(d)
        if bias:
            fields[f"ln{i}_beta"] = np.zeros(d)
    _add_ffn(fields, ffn, bias)
    return _session_record(fields)
