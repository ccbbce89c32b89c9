"""Training: embedding, cross_entropy, sample, tree_map, save/load, the stdlib optimizers,
schedules, tokenizer and generate, and a short minigpt run.

The optimizer fixture tests/reference/optim.npz comes from PyTorch
(tests/reference/make_optim_reference.py); PyTorch is not needed to run these tests.
"""
from __future__ import annotations

import glob
import math
import os
import re

import numpy as np
import pytest

from tapeml.syntax.errors import IOErr, IndexErr, LangError, ShapeError, ValueErr, render
from tapeml.array.printer import format_value
from tapeml.array.values import Record

from support import ROOT, error_of, on_host, run, run_example, value_of, variables_after

REF = os.path.join(ROOT, "tests", "reference", "optim.npz")


# ---- cross_entropy ----------------------------------------------------------------------------
def test_cross_entropy_huge_equal_logits_is_ln2():
    assert abs(value_of("cross_entropy([1e8, 1e8], 0)") - math.log(2)) < 1e-12


def test_cross_entropy_far_apart_logits_value_and_gradient():
    v = value_of("cross_entropy([-431, 279, 427], 0)")
    assert v == 858.0
    g = value_of("grad(fn(z) -> cross_entropy(z, 0), [-431, 279, 427])")
    assert np.all(np.isfinite(g))
    assert g[0] == -1.0 and g[2] == 1.0
    assert abs(g[1] - 5.3017187e-65) < 1e-7 * 5.3017187e-65
    assert abs(g[1] - math.exp(-148)) <= 1e-15 * math.exp(-148)


def test_cross_entropy_matches_numpy_on_a_batch():
    rng = np.random.default_rng(3)
    z = rng.standard_normal((2, 5, 7)) * 3
    t = rng.integers(0, 7, (2, 5)).astype(np.float64)
    m = z.max(-1, keepdims=True)
    lp = z - m - np.log(np.exp(z - m).sum(-1, keepdims=True))
    want = -np.mean(np.take_along_axis(lp, t.astype(int)[..., None], -1))
    got = value_of("cross_entropy(z, t)", z=z, t=t)
    assert abs(got - want) < 1e-13
    g = value_of("grad(fn(z) -> cross_entropy(z, t), z)", z=z, t=t)
    p = np.exp(lp)
    onehot = np.eye(7)[t.astype(int)]
    np.testing.assert_allclose(g, (p - onehot) / 10, rtol=1e-12, atol=1e-15)


def test_cross_entropy_errors():
    with pytest.raises(ShapeError, match="targets must be a vector of length 2"):
        run("cross_entropy([1, 2; 3, 4], [0])")
    with pytest.raises(IndexErr, match="target 3 is out of range"):
        run("cross_entropy([1, 2, 3], 3)")
    with pytest.raises(IndexErr, match="whole numbers"):
        run("cross_entropy([1, 2, 3], 0.5)")


# ---- embedding ------------------------------------------------------------------------------------
def test_embedding_gathers_rows_and_accumulates_repeated_ids():
    table = np.arange(12.0).reshape(4, 3)
    out = value_of("embedding(table, [3, 0, 3])", table=table)
    np.testing.assert_array_equal(out, table[[3, 0, 3]])
    g = value_of("grad(fn(t) -> sum(embedding(t, [3, 0, 3; 3, 1, 0]) * w), table)",
                 table=table, w=np.array([1.0, 10.0, 100.0]))
    want = np.zeros((4, 3))
    for i in [3, 0, 3, 3, 1, 0]:
        want[i] += [1.0, 10.0, 100.0]
    np.testing.assert_array_equal(g, want)
    assert value_of("size(embedding(table, 2))", table=table) == (3,)


def test_embedding_checks_ids():
    with pytest.raises(IndexErr, match="id 4 is out of range: the table has 4 entries"):
        run("embedding(zeros(4, 2), [0, 4])")
    with pytest.raises(IndexErr, match="whole numbers"):
        run("embedding(zeros(4, 2), [0.5])")
    with pytest.raises(ShapeError, match="V x D matrix"):
        run("embedding([1, 2, 3], 0)")


# ---- sample, tree_map, text ----------------------------------------------------------------------
def test_sample_follows_probabilities_and_never_picks_zero_weight():
    ids = value_of("sample(repeat)", "seed(0)", repeat=np.tile([0.2, 0.0, 0.8], (4000, 1)))
    assert set(np.unique(ids)) <= {0.0, 2.0}
    assert abs(np.mean(ids == 2.0) - 0.8) < 0.03
    a = value_of("[sample([0.3, 0.7]), sample([0.3, 0.7]), sample([0.3, 0.7])]", "seed(5)")
    b = value_of("[sample([0.3, 0.7]), sample([0.3, 0.7]), sample([0.3, 0.7])]", "seed(5)")
    np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueErr, match="positive sum"):
        run("sample([0, 0])")


def test_tree_map_over_several_trees_and_mismatch():
    r = value_of("tree_map(fn(p, g) -> p - 0.5 * g, {w = [1, 2], b = (3, 4)}, {w = [2, 2], b = (2, 0)})")
    assert format_value(r) == "{w = [0, 1], b = (2, 4)}"
    with pytest.raises(ValueErr, match=r"tree 1 differs from tree 0 at the leaf or subtree \.b"):
        run("tree_map(fn(a, b) -> a, {w = 1, b = (1, 2)}, {w = 1, b = (1,)})")
    with pytest.raises(ValueErr, match=r"differs from tree 0 at the top level: a record with fields w vs a number"):
        run("tree_map(fn(a, b) -> a, {w = 1}, 3)")
    # an error inside f names the leaf: here an optimizer given a gradient of the wrong shape
    with pytest.raises(ShapeError, match=r"length 2 and a vector of length 3.*\(in tree_map, at the leaf "
                                         r"\.layers\[1\]\.w of the trees\)$"):
        run("p = {layers = ({w = [1, 2]}, {w = [1, 2]})}\n"
            "adamw_step(p, {layers = ({w = [1, 2]}, {w = [1, 2, 3]})}, adamw_init(p))")


def test_char_tokenizer_round_trip_and_unknown_character():
    g = variables_after('v = char_vocab("the cat sat")\nids = encode(v, "a cat")\nback = decode(v, ids)')
    assert g["v"] == " acehst"
    np.testing.assert_array_equal(g["ids"], [1, 0, 2, 1, 6])
    assert g["back"] == "a cat"
    with pytest.raises(ValueErr, match='the character "z" is not in the vocabulary'):
        run('encode(char_vocab("abc"), "abz")')
    with pytest.raises(ValueErr, match=r"repeated character.*encode\(vocab, text\)"):
        run('encode("abcab", char_vocab("abcab"))')       # the arguments swapped


def test_generate_greedy_and_temperature():
    # A bigram "model": the logits of the next id are a row of a table.
    table = np.array([[0, 5, 0], [0, 0, 5], [5, 0, 4.9]], dtype=np.float64)
    ids = value_of("generate(fn(p, ids) -> p[ids, :], table, [0], 6, temperature = 0)", table=table)
    np.testing.assert_array_equal(ids, [0, 1, 2, 0, 1, 2, 0])
    tiny = value_of("generate(fn(p, ids) -> p[ids, :], table, [0], 6, temperature = 1e-9)", table=table)
    np.testing.assert_array_equal(tiny, ids)
    k1 = value_of("generate(fn(p, ids) -> p[ids, :], table, [2], 3, temperature = 5, top_k = 1)", "seed(1)",
                  table=table)
    np.testing.assert_array_equal(k1, [2, 0, 1, 2])
    assert format_value(value_of("top_k_filter([1, 5, 3, 4], 2)")) == "[-inf, 5, -inf, 4]"
    with pytest.raises(ValueErr, match="n_new is the number of tokens to add and cannot be negative, got -1"):
        run("generate(fn(p, ids) -> p[ids, :], table, [0], -1)", table=table)
    with pytest.raises(ValueErr, match="top_k must be at least 1, got 0"):
        run("top_k_filter([1, 5, 3, 4], 0)")


# ---- schedules ---------------------------------------------------------------------------------------
def test_noam_lr_matches_the_formula_and_the_card():
    g = variables_after("a = noam_lr(1, 512, 4000)\nb = noam_lr(4000, 512, 4000)\nc = noam_lr(16000, 512, 4000)\n"
                        "z = noam_lr(0, 512, 4000)")
    assert g["a"] == pytest.approx(512 ** -0.5 * 4000 ** -1.5, rel=1e-14)
    assert g["b"] == pytest.approx(512 ** -0.5 * 4000 ** -0.5, rel=1e-14)
    assert g["c"] == pytest.approx(512 ** -0.5 * 16000 ** -0.5, rel=1e-14)
    assert round(g["b"], 4) == 7e-4
    assert g["c"] / g["b"] == pytest.approx(0.5, rel=1e-14)
    assert g["z"] == g["a"]
    for args in ("10, 0, 4000", "10, 512, -1"):
        with pytest.raises(ValueErr, match="d_model and warmup must be positive"):
            run(f"noam_lr({args})")


def test_cosine_lr():
    g = variables_after("w = cosine_lr(5, 110, 1, 0.1, 10)\np = cosine_lr(10, 110, 1, 0.1, 10)\n"
                        "m = cosine_lr(60, 110, 1, 0.1, 10)\ne = cosine_lr(110, 110, 1, 0.1, 10)\n"
                        "after = cosine_lr(500, 110, 1, 0.1, 10)")
    assert (g["w"], g["p"]) == (0.5, 1.0)
    assert g["m"] == pytest.approx(0.55, abs=1e-15)
    assert g["e"] == pytest.approx(0.1, abs=1e-15) and g["after"] == pytest.approx(0.1, abs=1e-15)


# ---- optimizers against PyTorch ------------------------------------------------------------------
OPT_CALLS = {
    "sgd": ("sgd", "lr = 0.1"),
    "sgd_momentum": ("sgd", "lr = 0.1, momentum = 0.9"),
    "sgd_nesterov_wd": ("sgd", "lr = 0.05, momentum = 0.8, nesterov = true, weight_decay = 0.1"),
    "sgd_dampening": ("sgd", "lr = 0.05, momentum = 0.8, dampening = 0.3"),
    "adam": ("adam", "lr = 0.1"),
    "adam_wd": ("adam", "lr = 0.05, betas = (0.8, 0.99), eps = 1e-6, weight_decay = 0.1"),
    "adamw": ("adamw", "lr = 0.1"),
    "adamw_custom": ("adamw", "lr = 0.05, betas = (0.85, 0.995), eps = 1e-7, weight_decay = 0.3"),
}


@pytest.fixture(scope="module")
def ref():
    with np.load(REF, allow_pickle=False) as d:
        return {k: d[k] for k in d.files}


@pytest.mark.parametrize("name", list(OPT_CALLS))
def test_optimizer_matches_pytorch_for_5_steps(ref, name):
    opt, kwargs = OPT_CALLS[name]
    src = f"""
fn loss(p)
    return mean((X @ p.w + p.b - y) ^ 2)
end
p = {{w = w0, b = b0}}
state = {opt}_init(p)
history = ()
for i in 1:5
    p, state = {opt}_step(p, grad(loss, p), state, {kwargs})
    history = append(history, p)
end
"""
    v = variables_after(src, X=ref["X"], y=ref["y"], w0=ref["w0"], b0=ref["b0"])
    hist = v["history"]
    assert v["state"].fields["step"] == 5
    for k in range(5):
        np.testing.assert_allclose(hist[k].fields["w"], ref[f"{name}/w"][k], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(hist[k].fields["b"], ref[f"{name}/b"][k], rtol=1e-12, atol=1e-14)


def test_default_hyperparameters_are_pytorchs():
    # adamw's default weight decay is 0.01 and lr 1e-3; adam's weight decay 0; sgd's lr 1e-3
    v = variables_after("p = {w = [1.0, -2.0]}\ng = {w = [0.5, 0.5]}\n"
                        "a, s = adamw_step(p, g, adamw_init(p))\nb, s2 = adam_step(p, g, adam_init(p))\n"
                        "c, s3 = sgd_step(p, g, sgd_init(p))")
    w = np.array([1.0, -2.0])
    np.testing.assert_allclose(v["a"].fields["w"], w * (1 - 1e-3 * 0.01) - 1e-3 * 0.5 / (0.5 + 1e-8), rtol=1e-15)
    np.testing.assert_allclose(v["b"].fields["w"], w - 1e-3 * 0.5 / (0.5 + 1e-8), rtol=1e-15)
    np.testing.assert_allclose(v["c"].fields["w"], w - 1e-3 * 0.5, rtol=1e-15)


@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm_matches_pytorch(ref, max_norm):
    src = """
fn loss(p)
    return mean((X @ p.w + p.b - y) ^ 2)
end
g = grad(loss, {w = w0, b = b0})
clipped = clip_grad_norm(g, max_norm)
norm = grad_norm(g)
"""
    v = variables_after(src, X=ref["X"], y=ref["y"], w0=ref["w0"], b0=ref["b0"], max_norm=max_norm)
    key = f"clip{max_norm:g}"
    np.testing.assert_allclose(v["clipped"].fields["w"], ref[f"{key}/w"], rtol=1e-12)
    np.testing.assert_allclose(v["clipped"].fields["b"], ref[f"{key}/b"], rtol=1e-12)
    assert v["norm"] == pytest.approx(float(ref[f"{key}/norm"]), rel=1e-12)


BAD_HYPERPARAMETERS = [
    ("sgd_step(p, g, sgd_init(p), lr = -1)", "sgd_step(): lr must be a number >= 0, got -1"),
    ("sgd_step(p, g, sgd_init(p), lr = 0 / 0)", "sgd_step(): lr must be a number >= 0, got nan"),
    ("sgd_step(p, g, sgd_init(p), momentum = 2)", "sgd_step(): momentum must be a number >= 0 and < 1, got 2"),
    ("sgd_step(p, g, sgd_init(p), momentum = -0.1)", "sgd_step(): momentum must be a number >= 0 and < 1, got -0.1"),
    ("sgd_step(p, g, sgd_init(p), dampening = 1.5)", "sgd_step(): dampening must be a number from 0 to 1, got 1.5"),
    ("sgd_step(p, g, sgd_init(p), weight_decay = -1)", "sgd_step(): weight_decay must be a number >= 0, got -1"),
    ("sgd_step(p, g, sgd_init(p), nesterov = true)",
     "sgd_step(): nesterov = true needs momentum > 0 and dampening = 0, got momentum = 0 and dampening = 0"),
    ("sgd_step(p, g, sgd_init(p), momentum = 0.9, dampening = 0.1, nesterov = true)",
     "sgd_step(): nesterov = true needs momentum > 0 and dampening = 0, got momentum = 0.9 and dampening = 0.1"),
    ("adam_step(p, g, adam_init(p), lr = -0.1)", "adam_step(): lr must be a number >= 0, got -0.1"),
    ("adam_step(p, g, adam_init(p), betas = (0.9,))",
     "adam_step(): betas must be a tuple of two numbers (b1, b2), such as (0.9, 0.999); got (0.9,)"),
    ("adamw_step(p, g, adamw_init(p), betas = 0.9)",
     "adamw_step(): betas must be a tuple of two numbers (b1, b2), such as (0.9, 0.999); got 0.9"),
    ("adam_step(p, g, adam_init(p), betas = (0.9, 1))", "adam_step(): betas must each be >= 0 and < 1, got (0.9, 1)"),
    ("adamw_step(p, g, adamw_init(p), eps = 0)",
     "adamw_step(): eps must be a number > 0, got 0 (it keeps the step finite where a gradient's mean square is 0)"),
    ("adam_step(p, g, adam_init(p), weight_decay = -0.5)", "adam_step(): weight_decay must be a number >= 0, got -0.5"),
    ("adamw_step(p, g, adamw_init(p), weight_decay = -0.5)", "adamw_step(): weight_decay must be a number >= 0, got -0.5"),
    ("adamw_step(p, g, adamw_init(p), lr = \"x\")", "adamw_step(): lr must be a number >= 0, got x"),
    ("sgd_step(p, g, sgd_init(p), lr = [0.1])", "sgd_step(): lr must be a number >= 0, got [0.1]"),
    ("clip_grad_norm(g, true)", "clip_grad_norm(): max_norm must be a number >= 0, got true"),
    ("clip_grad_norm(g, -1)", "clip_grad_norm(): max_norm must be a number >= 0, got -1"),
    ("cosine_lr(5, 0, 1)", "cosine_lr(): total must be a number > 0 and warmup a number >= 0, got total = 0, warmup = 0"),
    ("cosine_lr(5, 10, 1, warmup = -1)", "cosine_lr(): total must be a number > 0 and warmup a number >= 0, got total = 10, warmup = -1"),
]


@pytest.mark.parametrize("call, message", BAD_HYPERPARAMETERS)
def test_hyperparameters_outside_their_documented_range_are_errors(call, message):
    """A negative rate or max_norm, or momentum of 2, silently trained the wrong way; a betas of one
    item was an IndexError inside the standard library. Each is a ValueError at the call, naming
    the argument and its range (as torch.optim's constructors do)."""
    src = f"p = {{w = [3.0, 4.0]}}\ng = {{w = [1.0, 1.0]}}\nr = {call}"
    first = render(error_of(src), src).splitlines()[0]      # blamed on the user's call, not the stdlib's line
    name, rest = message.split("(): ", 1)
    assert first in (f"<test>:3:5: ValueError: {message}", f"<test>:3:5: ValueError in {name}(): {rest}")


def test_a_zero_learning_rate_and_max_norm_are_allowed():
    """lr = 0 (a warmup's first step) leaves the parameters; max_norm = 0 clips every gradient to 0."""
    v = variables_after("p = {w = [3.0, 4.0]}\ng = {w = [1.0, 1.0]}\na, s = sgd_step(p, g, sgd_init(p), lr = 0)\n"
                        "b, s2 = adamw_step(p, g, adamw_init(p), lr = 0)\nc = clip_grad_norm(g, 0)")
    assert v["a"].fields["w"].tolist() == [3.0, 4.0] and v["b"].fields["w"].tolist() == [3.0, 4.0]
    assert v["c"].fields["w"].tolist() == [0.0, 0.0]


# ---- save and load -----------------------------------------------------------------------------------
def _tree_equal(a, b):
    if isinstance(a, Record):
        return isinstance(b, Record) and list(a.fields) == list(b.fields) and all(
            _tree_equal(a.fields[k], b.fields[k]) for k in a.fields)
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(_tree_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and \
            a.tobytes() == b.tobytes()
    return type(a) is type(b) and (a == b or (a != a and b != b))


def test_save_load_round_trip_is_exact(tmp_path):
    rng = np.random.default_rng(0)
    tree = Record({"tok": rng.standard_normal((5, 3)),
                   "heads": (Record({"wq": rng.standard_normal((3, 2)) * 1e-300, "bq": np.array([-0.0, np.inf])}),
                             Record({"wq": np.full((3, 2), np.nan), "bq": np.zeros(2)})),
                   "step": 7.0, "flag": True, "mask": np.array([[True, False]]), "cube": rng.standard_normal((2, 2, 2)),
                   "pair": (1.5, (np.ones(1),))})
    path = str(tmp_path / "ck.npz")
    v = variables_after("save(path, tree)\nresult = load(path)", path=path, tree=tree)
    assert _tree_equal(tree, v["result"])
    with np.load(path, allow_pickle=False) as d:
        assert d.files == ["tok", "heads.0.wq", "heads.0.bq", "heads.1.wq", "heads.1.bq", "step", "flag",
                           "mask", "cube", "pair.0", "pair.1.0"]        # PyTorch's state-dict names
    t = (np.arange(3.0), Record({"a": 2.0}))
    v = variables_after("save(path, t)\nresult = load(path)", path=path, t=t)
    assert _tree_equal(t, v["result"])


def test_load_converts_to_the_float_type_asked(tmp_path):
    """float64 weights in a float32 run: load(path, dtype = "float32") converts every float matrix
    (bools and numbers stay); without dtype each comes back as stored."""
    path = str(tmp_path / "w.npz")
    v = variables_after(f'save("{path}", {{w = [1.5, 2], b = (0.5, [true, false], [3.0; 4])}})\n'
                        f'a = load("{path}", dtype = "float32")\nb = load("{path}")')
    a, b = v["a"], v["b"]
    assert a.fields["w"].dtype == np.float32 and a.fields["b"][2].dtype == np.float32
    assert a.fields["b"][1].dtype == np.bool_ and a.fields["b"][0] == 0.5
    assert a.fields["w"].tolist() == [1.5, 2.0] and b.fields["w"].dtype == np.float64
    with pytest.raises(LangError, match='dtype must be one of "float32", "float64", got "float16"'):
        run(f'load("{path}", dtype = "float16")')
    # integer arrays (ids) come back float64 and stay exact: 16777217 has no float32
    ids = str(tmp_path / "ids.npz")
    np.savez(ids, ids=np.array([16777217, 100000001], dtype=np.int64), w=np.array([1.5, 2.0]))
    v = variables_after(f'c = load("{ids}", dtype = "float32")')["c"]
    assert v.fields["ids"].dtype == np.float64 and v.fields["ids"].tolist() == [16777217, 100000001]
    assert v.fields["w"].dtype == np.float32


def test_save_is_atomic(tmp_path, monkeypatch):
    path = str(tmp_path / "ck.npz")
    good = Record({"w": np.arange(4.0), "b": np.ones(2)})
    run("save(path, good)", path=path, good=good)
    before = open(path, "rb").read()
    calls = {"n": 0}
    real = np.lib.format.write_array

    def crash(*a, **k):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt("simulated crash in the middle of a save")
        return real(*a, **k)

    monkeypatch.setattr(np.lib.format, "write_array", crash)
    with pytest.raises(KeyboardInterrupt):
        run("save(path, {w = [9, 9], b = [9], c = [9]})", path=path)
    monkeypatch.undo()
    assert open(path, "rb").read() == before
    assert os.listdir(tmp_path) == ["ck.npz"]          # no temporary file left behind
    v = variables_after("result = load(path)", path=path)
    assert _tree_equal(good, v["result"])


def test_load_errors_are_clear(tmp_path):
    with pytest.raises(IOErr, match="no file at"):
        run("load(p)", p=str(tmp_path / "missing.npz"))
    text = tmp_path / "notes.npz"
    text.write_text("just some text\n")
    with pytest.raises(IOErr, match="is not a checkpoint"):
        run("load(p)", p=str(text))
    good = str(tmp_path / "good.npz")
    run("save(p, {w = ones(100, 100)})", p=good)
    cut = tmp_path / "cut.npz"
    cut.write_bytes(open(good, "rb").read()[:4000])
    with pytest.raises(IOErr, match="not a checkpoint|damaged or truncated"):
        run("load(p)", p=str(cut))
    pickled = str(tmp_path / "pickled.npz")
    np.savez(pickled, w=np.array([{"a": 1}], dtype=object))
    with pytest.raises(IOErr, match="pickled"):
        run("load(p)", p=pickled)
    with pytest.raises(LangError, match=r"save\(\): name is a string"):
        run("save(p, {name = \"x\"})", p=good)
    with pytest.raises(LangError, match="record or a tuple"):
        run("save(p, [1, 2])", p=good)


def test_read_text(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text("héllo\nworld", encoding="utf-8")
    assert value_of("read_text(p)", p=str(f)) == "héllo\nworld"
    with pytest.raises(IOErr, match="no file"):
        run("read_text(p)", p=str(tmp_path / "none.txt"))
    out = tmp_path / "out.txt"
    run('write_text(p, "a\\nb")', p=str(out))
    assert out.read_bytes() == b"a\nb" and sorted(os.listdir(tmp_path)) == ["out.txt", "t.txt"]
    assert value_of("read_text(p)", p=str(out)) == "a\nb"
    with pytest.raises(IOErr, match="does not exist"):
        run('write_text(p, "x")', p=str(tmp_path / "no" / "dir.txt"))


# ---- stdlib documentation ----------------------------------------------------------------------------
def test_every_stdlib_function_is_documented_and_its_examples_run():
    from tapeml.faces.docs.collect import stdlib_entries
    STDLIB_DOCS = {e.name: e for e in stdlib_entries()}
    defined = set()
    for f in glob.glob(os.path.join(ROOT, "stdlib", "*.ml")):
        defined |= set(re.findall(r"^fn (\w+)\(", open(f, encoding="utf-8").read(), re.M))
    assert defined == set(STDLIB_DOCS)
    for name, doc in STDLIB_DOCS.items():
        assert doc["summary"] and doc["examples"], name
        assert doc["signature"].startswith(name + "(")
        for ex in doc["examples"]:
            run(ex)


# ---- a short minigpt run --------------------------------------------------------------------------------
@pytest.mark.slow
def test_short_minigpt_run_learns_and_checkpoints(tmp_path):
    ckpt = str(tmp_path / "mini.npz")
    interp = run_example("minigpt.ml", "steps=30", "every=10", "batch=4", "context=24", "seed=0", "samples=20",
                         "lr=3e-3", "warmup=10", f"checkpoint={ckpt}", "plot=none")
    text = interp.out.getvalue()
    g = {k: on_host(v) for k, v in interp.variables().items()}
    losses = g["losses"]
    assert len(losses) == 30
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.3, losses
    assert "round-trips exactly: true" in text
    restored = value_of("load(p)", p=ckpt)
    assert _tree_equal(g["params"], restored)
    assert "--- greedy ---" in text and "--- temperature 0.8 ---" in text


# ---- the other two examples -------------------------------------------------------------------------
def test_warmup_schedule_example_prints_the_card_values():
    text = run_example("warmup_schedule.ml", "plot=none").out.getvalue()
    assert "  step 4000: 0.0006987712  (100% of the peak)" in text
    assert "  step 12000: 0.0004034358  (57.74% of the peak)" in text
    assert "  step 16000: 0.0003493856  (50% of the peak)" in text
    assert "  step 1: 1.746928e-7  (0.03% of the peak)" in text      # not "0 of the peak"


def test_pre_vs_post_ln_example_checks_the_claim():
    text = run_example("pre_vs_post_ln.ml", "plot=none").out.getvalue()
    assert "Pre-LN's top gradient shrinks with depth: true" in text
    assert "Post-LN's top gradient is larger at every depth: true" in text
    rows = [line.split() for line in text.splitlines() if re.match(r"^(2|4|8|12)\s", line)]
    assert [r[0] for r in rows] == ["2", "4", "8", "12"]
