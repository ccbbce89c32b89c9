"""Write the PyTorch parity fixtures tests/reference/*.npz (run by hand; torch is never a
runtime dependency of tapeml).

    /tmp/venv/bin/pip install torch==2.13.0
    /tmp/venv/bin/python tests/reference/make_torch_reference.py

Each fixture holds, in float64:
  config            a JSON string: the case's options (what test_parity.py passes to tapeml)
  x, R              the input and the cotangent; the loss is sum(out * R)
  out               PyTorch's output
  grad.x            d loss / d x
  w.<path>          the weights in tapeml's record layout, keyed by field path
                    (heads[0].wq, bo, ln1_gamma, w1, ...; see transformer_block_init's doc)
  grad.w.<path>     d loss / d weight, in the same layout

Blocks are nn.TransformerEncoderLayer(batch_first=True, dropout=0.0, dtype=float64) with every
parameter drawn at random (norm gains and biases too, so nothing is trivially 1 or 0), except
where a case says the attention biases are zero (the tape issue's post-norm relu grid). The
layout map: wq_h = in_proj_weight[h*dk:(h+1)*dk].T (wk, wv from the next D rows), bq_h =
in_proj_bias[h*dk:(h+1)*dk], wo_h = out_proj.weight[:, h*dk:(h+1)*dk].T, bo = out_proj.bias,
w1 = linear1.weight.T, b1 = linear1.bias, w2 = linear2.weight.T, b2 = linear2.bias,
ln1_gamma/ln1_beta = norm1.weight/bias, ln2_* = norm2.*.

Decoder fixtures (config kind "decoder") are nn.TransformerDecoderLayer in the same way, with
memory and grad.memory beside x and grad.x, and the layout self_heads[h].* / self_bo from
self_attn, cross_heads[h].* / cross_bo from multihead_attn, ln1_* .. ln3_* from norm1 .. norm3.
Masks are stored in tapeml's convention (true = may attend) as mask / memory_mask; PyTorch gets
their negation (its boolean masks mark what is masked out).
"""
from __future__ import annotations

import json
import os

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
DT = torch.float64

ACT = {"relu": "relu", "gelu": "gelu",
       "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
       "silu": F.silu,
       "quick_gelu": lambda t: t * torch.sigmoid(1.702 * t)}

# name -> options. T, D, heads, H (feed-forward width), B (none: an unbatched [T, D] input)
CASES = {
    # the tape issue's grid: post-norm, relu, zero attention biases (no bq/bk/bv/bo in the record)
    "post_relu_3x2x1": dict(T=3, D=2, heads=1, H=8, B=None, attn_bias=False),
    "post_relu_4x4x2": dict(T=4, D=4, heads=2, H=16, B=2, attn_bias=False),
    "post_relu_5x8x2": dict(T=5, D=8, heads=2, H=32, B=None, attn_bias=False),
    "post_relu_16x32x4": dict(T=16, D=32, heads=4, H=64, B=2, attn_bias=False),
    # the network card's options
    "pre_gelu_5x8x2": dict(T=5, D=8, heads=2, H=32, B=2, norm_first=True, activation="gelu"),
    "causal_6x8x2": dict(T=6, D=8, heads=2, H=32, B=2, causal=True),
    "pre_causal_gelu_tanh_4x4x2": dict(T=4, D=4, heads=2, H=16, B=2, norm_first=True, causal=True,
                                       activation="gelu_tanh"),
    "post_silu_4x4x2": dict(T=4, D=4, heads=2, H=8, B=None, activation="silu"),
    "post_quick_gelu_4x4x1": dict(T=4, D=4, heads=1, H=8, B=None, activation="quick_gelu"),
    "rms_block_6x8x2": dict(T=6, D=8, heads=2, H=16, B=2, norm_first=True, causal=True, norm="rms_norm",
                            activation="silu"),
}
DEFAULTS = dict(norm_first=False, activation="relu", causal=False, norm="layer_norm", attn_bias=True,
                eps=1e-5)

# nn.TransformerDecoderLayer: T target positions, S memory positions. memory_pad: per batch
# element, how many trailing memory positions are padding (cross-attention may not read them);
# self_mask: a random 'may attend' mask for self-attention (the diagonal always allowed).
DECODER_CASES = {
    "dec_post_relu_5x7x8x2": dict(T=5, S=7, D=8, heads=2, H=32, B=None, causal=True),
    "dec_post_relu_batched_4x6x8x2": dict(T=4, S=6, D=8, heads=2, H=16, B=2, causal=True, memory_pad=(0, 2)),
    "dec_pre_gelu_batched_4x5x8x2": dict(T=4, S=5, D=8, heads=2, H=16, B=2, causal=True, norm_first=True,
                                         activation="gelu", memory_pad=(1, 0)),
    "dec_pre_masked_3x4x4x1": dict(T=3, S=4, D=4, heads=1, H=8, B=None, causal=False, norm_first=True,
                                   self_mask=True),
}
DECODER_DEFAULTS = dict(norm_first=False, activation="relu", causal=True, eps=1e-5, memory_pad=None,
                        self_mask=False)


def _np(t):
    return t.detach().numpy().astype(np.float64).copy()


def attention_layout(attn, D, heads, attn_bias, get, name="heads", bo="bo"):
    """An nn.MultiheadAttention's parameters as {tapeml field path: array}: the heads and bo."""
    dk = D // heads
    W = get(attn.in_proj_weight)
    b = get(attn.in_proj_bias)
    Wo = get(attn.out_proj.weight)
    out = {}
    for h in range(heads):
        rows = slice(h * dk, (h + 1) * dk)
        out[f"{name}[{h}].wq"] = W[:D][rows].T.copy()
        out[f"{name}[{h}].wk"] = W[D:2 * D][rows].T.copy()
        out[f"{name}[{h}].wv"] = W[2 * D:][rows].T.copy()
        out[f"{name}[{h}].wo"] = Wo[:, rows].T.copy()
        if attn_bias:
            out[f"{name}[{h}].bq"] = b[:D][rows].copy()
            out[f"{name}[{h}].bk"] = b[D:2 * D][rows].copy()
            out[f"{name}[{h}].bv"] = b[2 * D:][rows].copy()
    if attn_bias:
        out[bo] = get(attn.out_proj.bias)
    return out


def layout(layer, D, heads, attn_bias, norm, grad=False):
    """The layer's parameters (or their .grad) as {tapeml field path: array}."""
    get = (lambda p: _np(p.grad)) if grad else _np
    out = attention_layout(layer.self_attn, D, heads, attn_bias, get)
    out["ln1_gamma"] = get(layer.norm1.weight)
    if norm == "layer_norm":
        out["ln1_beta"] = get(layer.norm1.bias)
    out["w1"] = get(layer.linear1.weight).T.copy()
    out["b1"] = get(layer.linear1.bias)
    out["w2"] = get(layer.linear2.weight).T.copy()
    out["b2"] = get(layer.linear2.bias)
    out["ln2_gamma"] = get(layer.norm2.weight)
    if norm == "layer_norm":
        out["ln2_beta"] = get(layer.norm2.bias)
    return out


def make_block_case(opts: dict, seed: int) -> dict:
    o = {**DEFAULTS, **opts}
    T, D, heads, H, B = o["T"], o["D"], o["heads"], o["H"], o["B"]
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(D, heads, dim_feedforward=H, dropout=0.0, activation=ACT[o["activation"]],
                                       layer_norm_eps=o["eps"], batch_first=True, norm_first=o["norm_first"],
                                       dtype=DT)
    if o["norm"] == "rms_norm":
        layer.norm1 = nn.RMSNorm(D, eps=o["eps"], dtype=DT)
        layer.norm2 = nn.RMSNorm(D, eps=o["eps"], dtype=DT)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in layer.named_parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=DT) * (0.5 if p.ndim > 1 else 0.3))
            if name.startswith("norm") and name.endswith("weight"):
                p.add_(1.0)
        if not o["attn_bias"]:
            layer.self_attn.in_proj_bias.zero_()
            layer.self_attn.out_proj.bias.zero_()
    layer.train()
    shape = (T, D) if B is None else (B, T, D)
    x = torch.randn(shape, generator=g, dtype=DT, requires_grad=True)
    R = torch.randn(shape, generator=g, dtype=DT)
    if o["causal"]:
        mask = nn.Transformer.generate_square_subsequent_mask(T, dtype=DT)
        out = layer(x, src_mask=mask, is_causal=True)
    else:
        out = layer(x)
    (out * R).sum().backward()
    config = {k: o[k] for k in ("norm_first", "activation", "causal", "norm", "eps")}
    config["kind"] = "block"
    arrays = {"config": np.array(json.dumps(config)), "x": _np(x), "R": _np(R), "out": _np(out),
              "grad.x": _np(x.grad)}
    for k, v in layout(layer, D, heads, o["attn_bias"], o["norm"]).items():
        arrays[f"w.{k}"] = v
    for k, v in layout(layer, D, heads, o["attn_bias"], o["norm"], grad=True).items():
        arrays[f"grad.w.{k}"] = v
    return arrays


def decoder_layout(layer, D, heads, grad=False):
    """An nn.TransformerDecoderLayer's parameters (or their .grad) in transformer_decoder_block's layout."""
    get = (lambda p: _np(p.grad)) if grad else _np
    out = attention_layout(layer.self_attn, D, heads, True, get, "self_heads", "self_bo")
    out.update(attention_layout(layer.multihead_attn, D, heads, True, get, "cross_heads", "cross_bo"))
    for i in (1, 2, 3):
        norm = getattr(layer, f"norm{i}")
        out[f"ln{i}_gamma"] = get(norm.weight)
        out[f"ln{i}_beta"] = get(norm.bias)
    out["w1"] = get(layer.linear1.weight).T.copy()
    out["b1"] = get(layer.linear1.bias)
    out["w2"] = get(layer.linear2.weight).T.copy()
    out["b2"] = get(layer.linear2.bias)
    return out


def make_decoder_case(opts: dict, seed: int) -> dict:
    o = {**DECODER_DEFAULTS, **opts}
    T, S, D, heads, H, B = o["T"], o["S"], o["D"], o["heads"], o["H"], o["B"]
    torch.manual_seed(seed)
    layer = nn.TransformerDecoderLayer(D, heads, dim_feedforward=H, dropout=0.0, activation=ACT[o["activation"]],
                                       layer_norm_eps=o["eps"], batch_first=True, norm_first=o["norm_first"],
                                       dtype=DT)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in layer.named_parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=DT) * (0.5 if p.ndim > 1 else 0.3))
            if name.startswith("norm") and name.endswith("weight"):
                p.add_(1.0)
    layer.train()
    shape, mshape = ((T, D), (S, D)) if B is None else ((B, T, D), (B, S, D))
    x = torch.randn(shape, generator=g, dtype=DT, requires_grad=True)
    memory = torch.randn(mshape, generator=g, dtype=DT, requires_grad=True)
    R = torch.randn(shape, generator=g, dtype=DT)
    kw = {}
    allowed = torch.ones(T, T, dtype=torch.bool)
    if o["causal"]:
        allowed = torch.ones(T, T, dtype=torch.bool).tril()
        kw["tgt_is_causal"] = True
    if o["self_mask"]:
        allowed = allowed & ((torch.rand(T, T, generator=g) < 0.6) | torch.eye(T, dtype=torch.bool))
    if o["causal"] or o["self_mask"]:
        kw["tgt_mask"] = ~allowed                       # PyTorch: true = masked out
    config = {k: o[k] for k in ("norm_first", "activation", "causal", "eps")}
    config["kind"] = "decoder"
    arrays = {}
    if o["self_mask"]:
        arrays["mask"] = allowed.numpy().copy()
        config["mask"] = True
    if o["memory_pad"] is not None:
        pad = torch.zeros(B, S, dtype=torch.bool)
        for b, n in enumerate(o["memory_pad"]):
            if n:
                pad[b, S - n:] = True
        kw["memory_key_padding_mask"] = pad
        arrays["memory_mask"] = np.broadcast_to((~pad).numpy()[:, None, :], (B, T, S)).copy()
        config["memory_mask"] = True
    out = layer(x, memory, **kw)
    (out * R).sum().backward()
    arrays.update({"config": np.array(json.dumps(config)), "x": _np(x), "memory": _np(memory), "R": _np(R),
                   "out": _np(out), "grad.x": _np(x.grad), "grad.memory": _np(memory.grad)})
    for k, v in decoder_layout(layer, D, heads).items():
        arrays[f"w.{k}"] = v
    for k, v in decoder_layout(layer, D, heads, grad=True).items():
        arrays[f"grad.w.{k}"] = v
    return arrays


def make_rms_norm_case(seed: int, shape=(2, 5, 8), eps=1e-5) -> dict:
    """rms_norm(x, gamma, eps) against torch.nn.RMSNorm; the weights record is {gamma}."""
    g = torch.Generator().manual_seed(seed)
    norm = nn.RMSNorm(shape[-1], eps=eps, dtype=DT)
    with torch.no_grad():
        norm.weight.copy_(1.0 + 0.3 * torch.randn(shape[-1], generator=g, dtype=DT))
    x = (3.0 * torch.randn(shape, generator=g, dtype=DT)).requires_grad_(True)
    R = torch.randn(shape, generator=g, dtype=DT)
    out = norm(x)
    (out * R).sum().backward()
    return {"config": np.array(json.dumps({"kind": "rms_norm", "eps": eps})), "x": _np(x), "R": _np(R),
            "out": _np(out), "grad.x": _np(x.grad), "w.gamma": _np(norm.weight),
            "grad.w.gamma": _np(norm.weight.grad)}


def all_cases(seed: int = 0) -> dict:
    cases = {name: make_block_case(opts, seed + i) for i, (name, opts) in enumerate(CASES.items())}
    cases["rms_norm_2x5x8"] = make_rms_norm_case(seed + 100)
    for i, (name, opts) in enumerate(DECODER_CASES.items()):
        cases[name] = make_decoder_case(opts, seed + 200 + i)
    return cases


def main():
    assert torch.__version__.startswith("2.13"), f"fixtures are made with torch 2.13, found {torch.__version__}"
    total = 0
    for name, arrays in all_cases(0).items():
        path = os.path.join(HERE, f"{name}.npz")
        np.savez_compressed(path, **arrays)
        total += os.path.getsize(path)
        print(f"wrote {os.path.relpath(path)} ({os.path.getsize(path):,} bytes)")
    print(f"total {total:,} bytes")


if __name__ == "__main__":
    main()
