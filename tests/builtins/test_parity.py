"""PyTorch parity: transformer_block (post-norm relu grid, pre-norm gelu, causal, other
activations, an rms_norm block) and rms_norm against nn.TransformerEncoderLayer / nn.RMSNorm;
transformer_decoder_block (post- and pre-norm, batched and not, causal, with self-attention and
memory masks) against nn.TransformerDecoderLayer, including the gradient with respect to memory.

The fixtures tests/reference/*.npz are written by tests/reference/make_torch_reference.py (torch
2.13, float64). Forward output and the gradient of sum(out * R) with respect to x and every
weight, all computed by tapeml's `grad` through the interpreter, must agree to 1e-10 relative.
The second test regenerates cases live when torch is importable.
"""
import glob
import json
import os
import re

import numpy as np
import pytest

from tapeml.array.values import Record

from support import REFERENCE, fresh, variables_after

REF = REFERENCE


def _is_parity_fixture(path) -> bool:
    """The fixtures of make_torch_reference.py (other reference files share the folder)."""
    with np.load(path) as data:
        return "config" in data.files and "grad.x" in data.files


FIXTURES = sorted(p for p in glob.glob(os.path.join(REF, "*.npz")) if _is_parity_fixture(p))
TOL = 1e-10

_PART = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\])*)")


def record_from_paths(flat: dict) -> Record:
    """{"heads[0].wq": a, "w1": b, ...} -> the nested Record/tuple value."""
    root: dict = {}
    for path, value in flat.items():
        node = root
        parts = path.split(".")
        for j, part in enumerate(parts):
            name, idx = _PART.fullmatch(part).groups()
            keys = [name] + [int(i) for i in re.findall(r"\d+", idx)]
            for n, key in enumerate(keys):
                last = j == len(parts) - 1 and n == len(keys) - 1
                if last:
                    node[key] = value
                else:
                    node = node.setdefault(key, {})
    return _build(root)


def _build(node):
    if not isinstance(node, dict):
        return node
    if node and all(isinstance(k, int) for k in node):
        return tuple(_build(node[i]) for i in range(len(node)))
    return Record({k: _build(v) for k, v in node.items()})


def flatten(value, path=""):
    if isinstance(value, Record):
        out = {}
        for k, v in value.fields.items():
            out.update(flatten(v, f"{path}.{k}" if path else k))
        return out
    if isinstance(value, tuple):
        out = {}
        for i, v in enumerate(value):
            out.update(flatten(v, f"{path}[{i}]"))
        return out
    return {path: np.asarray(value, dtype=np.float64)}


def _ml(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    return repr(v)


def run_tapeml(arrays: dict):
    """Forward and gradients of sum(f(x, w) * R) by tapeml: (out, grad x, {path: grad w}), and for
    a decoder the gradient with respect to memory as {"memory": ...} in a fourth place."""
    config = json.loads(str(arrays["config"]))
    weights = record_from_paths({k[2:]: np.array(v) for k, v in arrays.items() if k.startswith("w.")})
    interp, inputs = fresh(), dict(X=np.array(arrays["x"]), R=np.array(arrays["R"]), W=weights)
    extra = {}
    if config["kind"] == "decoder":
        inputs.update(M=np.array(arrays["memory"]), MASK=None, MMASK=None)
        if config.get("mask"):
            inputs["MASK"] = np.array(arrays["mask"], dtype=bool)
        if config.get("memory_mask"):
            inputs["MMASK"] = np.array(arrays["memory_mask"], dtype=bool)
        opts = ", ".join(f"{k}={_ml(config[k])}" for k in ("norm_first", "causal", "activation", "eps"))
        call = "transformer_decoder_block({x}, {m}, {w}, " + opts + ", mask=MASK, memory_mask=MMASK)"
        extra["memory"] = variables_after(f"GM = grad(fn(m) -> sum({call.format(x='X', m='m', w='W')} * R), M)\n",
                                          interp, **inputs)["GM"]
        call = call.replace("{m}", "M")
    elif config["kind"] == "rms_norm":
        call = "rms_norm({x}, {w}.gamma, eps={eps})".replace("{eps}", repr(config["eps"]))
    else:
        opts = ", ".join(f"{k}={_ml(config[k])}" for k in ("norm_first", "norm", "causal", "activation", "eps"))
        call = "transformer_block({x}, {w}, " + opts + ")"
    f = call.format(x="X", w="W")
    g = variables_after(f"OUT = {f}\n"
                        f"GX = grad(fn(x) -> sum({call.format(x='x', w='W')} * R), X)\n"
                        f"GW = grad(fn(w) -> sum({call.format(x='X', w='w')} * R), W)\n", interp, **inputs)
    return g["OUT"], g["GX"], flatten(g["GW"]), extra


def rel_err(got, want) -> float:
    """max |got - want| / max |want|."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-300))


def compare(arrays: dict) -> dict:
    """{quantity: relative error}; asserts each is <= TOL.

    Every output and gradient is compared relative to its own largest element, except the key
    biases bk: their gradient is identically zero (softmax is invariant to the per-query
    constant q . bk), PyTorch and tapeml both return rounding noise there, and the check is that
    tapeml's noise is below 1e-12 of the case's largest gradient element."""
    out, gx, gw, extra = run_tapeml(arrays)
    want_w = {k[len("grad.w."):]: v for k, v in arrays.items() if k.startswith("grad.w.")}
    scale = max([np.max(np.abs(arrays["grad.x"]))] + [np.max(np.abs(v)) for v in want_w.values()])
    errs = {"out": rel_err(out, arrays["out"]), "grad.x": rel_err(gx, arrays["grad.x"])}
    assert sorted(extra) == sorted(k[len("grad."):] for k in arrays if k == "grad.memory")
    for k, v in extra.items():
        errs[f"grad.{k}"] = rel_err(v, arrays[f"grad.{k}"])
    assert sorted(gw) == sorted(want_w), "gradient record has different fields than the fixture"
    for k, v in want_w.items():
        if k.endswith(".bk"):
            assert np.max(np.abs(v)) <= 1e-12 * scale, f"PyTorch's {k} gradient should be zero"
            assert np.max(np.abs(gw[k])) <= 1e-12 * scale, f"tapeml's {k} gradient should be zero"
            continue
        errs[f"grad.w.{k}"] = rel_err(gw[k], v)
    bad = {k: e for k, e in errs.items() if not e <= TOL}
    assert not bad, f"relative errors above {TOL}: {bad}"
    return errs


def test_fixtures_exist_and_are_small():
    names = {os.path.basename(p)[:-4] for p in FIXTURES}
    for need in ("post_relu_3x2x1", "post_relu_16x32x4", "pre_gelu_5x8x2", "causal_6x8x2", "rms_norm_2x5x8",
                 "dec_post_relu_5x7x8x2", "dec_post_relu_batched_4x6x8x2", "dec_pre_gelu_batched_4x5x8x2",
                 "dec_pre_masked_3x4x4x1"):
        assert need in names
    assert sum(os.path.getsize(p) for p in FIXTURES) < 600_000


@pytest.mark.parametrize("path", FIXTURES, ids=[os.path.basename(p)[:-4] for p in FIXTURES])
def test_parity_fixture(path):
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    compare(arrays)


DECODER_FIXTURES = [p for p in FIXTURES if os.path.basename(p).startswith("dec_")]


@pytest.mark.parametrize("path", DECODER_FIXTURES, ids=[os.path.basename(p)[:-4] for p in DECODER_FIXTURES])
def test_decoder_parity_with_heads_fused(path, monkeypatch):
    """The same fixtures through the all-heads-at-once attention (used from T x D = 1024 on): the
    memory's keys and values and a batched [B, T, S] mask reach every head there too."""
    from tapeml.builtins.ml import attention as ml_attention
    monkeypatch.setattr(ml_attention, "FUSE_MIN_ELEMENTS", 1)
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    compare(arrays)


def test_decoder_fixtures_cover_the_options():
    configs = [json.loads(str(np.load(p)["config"])) for p in DECODER_FIXTURES]
    assert {c["norm_first"] for c in configs} == {False, True}
    assert {np.load(p)["x"].ndim for p in DECODER_FIXTURES} == {2, 3}
    assert any(c.get("memory_mask") for c in configs) and any(c.get("mask") for c in configs)
    for p in DECODER_FIXTURES:
        with np.load(p) as data:
            if "memory_mask" in data.files:     # the padding really removes keys
                assert not data["memory_mask"].all()


def test_record_paths_round_trip():
    rec = record_from_paths({"heads[0].wq": np.ones((2, 1)), "heads[1].wq": np.zeros((2, 1)), "bo": np.ones(2)})
    assert isinstance(rec.fields["heads"], tuple) and len(rec.fields["heads"]) == 2
    assert sorted(flatten(rec)) == ["bo", "heads[0].wq", "heads[1].wq"]


def test_parity_live():
    """Regenerate every case with a different seed and compare (skipped without torch)."""
    torch = pytest.importorskip("torch")
    import importlib.util
    spec = importlib.util.spec_from_file_location("make_torch_reference", os.path.join(REF, "make_torch_reference.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch.set_num_threads(1)
    worst = 0.0
    for name, arrays in mod.all_cases(seed=1234).items():
        worst = max(worst, max(compare(arrays).values()))
    assert worst <= TOL
