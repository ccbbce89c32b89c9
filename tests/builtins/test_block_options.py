"""transformer_block's options (issue 6): dropout, layer scale, norms, activations, batching,
the init helper, param_count and summary, the bo layout, and the Random builtins."""
import math

import numpy as np
import pytest

from tapeml.array import ops
from tapeml.syntax.errors import LangError

from support import output_of, run, value_of, variables_after


# ---- Random ----------------------------------------------------------------------------------
def test_seed_matches_numpy_default_rng():
    g = variables_after("seed(7)\na = rand(3)\nb = randn(2, 2)\nc = randint(0, 5, 4)\nd = rand()")
    ref = np.random.default_rng(7)
    np.testing.assert_array_equal(g["a"], ref.random(3))
    np.testing.assert_array_equal(g["b"], ref.standard_normal((2, 2)))
    np.testing.assert_array_equal(g["c"], ref.integers(0, 5, size=4).astype(float))
    assert g["d"] == ref.random()
    assert isinstance(g["d"], float)


def test_randint_hi_exclusive_and_errors():
    v = value_of("randint(2, 4, 10000)")
    assert set(np.unique(v)) == {2.0, 3.0}
    with pytest.raises(LangError, match="hi must be greater than lo"):
        value_of("randint(3, 3)")
    with pytest.raises(LangError, match="seed\\(\\): n must be >= 0"):
        value_of("seed(-1)")


# ---- dropout -----------------------------------------------------------------------------------
SETUP = "w = transformer_block_init(8, 2, seed=3)\nseed(5)\nx = randn(2, 5, 8)\n"


@pytest.mark.parametrize("opts", ["", ", norm_first=true, activation=\"gelu\"", ", causal=true, norm=\"rms_norm\""])
def test_dropout_off_in_eval_mode_is_exact(opts):
    if "rms_norm" in opts:
        setup = SETUP.replace("seed=3)", "seed=3, norm=\"rms_norm\")")
    else:
        setup = SETUP
    g = variables_after(setup + f"a = transformer_block(x, w{opts})\n"
                                f"b = transformer_block(x, w{opts}, dropout=0.4, training=false)\n"
                                f"c = transformer_block(x, w{opts}, dropout=0, training=true)\n")
    np.testing.assert_array_equal(g["a"], g["b"])
    np.testing.assert_array_equal(g["a"], g["c"])


def test_dropout_same_seed_agrees_and_differs_otherwise():
    g = variables_after(SETUP + "seed(11)\na = transformer_block(x, w, dropout=0.3, training=true)\n"
                                "seed(11)\nb = transformer_block(x, w, dropout=0.3, training=true)\n"
                                "c = transformer_block(x, w, dropout=0.3, training=true)\n"
                                "d = transformer_block(x, w)\n"
                                "seed(11)\nm1 = multi_head_attention(x, w.heads, 2, dropout=0.5, training=true)\n"
                                "seed(11)\nm2 = multi_head_attention(x, w.heads, 2, dropout=0.5, training=true)\n")
    np.testing.assert_array_equal(g["a"], g["b"])
    assert not np.array_equal(g["a"], g["c"])
    assert not np.array_equal(g["a"], g["d"])
    np.testing.assert_array_equal(g["m1"], g["m2"])


@pytest.mark.parametrize("norm_first", ["false", "true"])
def test_block_dropout_is_where_pytorchs_layer_puts_it(norm_first):
    """On the attention weights, after the activation, and on each sublayer's output before its
    residual add (nn.TransformerEncoderLayer's dropout1 and dropout2; nanoGPT's resid_dropout):
    the block equals the same steps written out, drawing the same masks in the same order. The
    sublayer dropouts were missing, so a port with dropout trained another model."""
    steps = ("a = dropout(multi_head_attention({hin}, w.heads, 2, dropout = 0.3, training = true, bo = w.bo), 0.3)\n"
             "h = {h}\n"
             "f = dropout(dense(dropout(relu(dense({fin}, w.w1, w.b1)), 0.3), w.w2, w.b2), 0.3)\n"
             "y2 = {y}\n")
    ln1, ln2 = "layer_norm({}, w.ln1_gamma, w.ln1_beta)", "layer_norm({}, w.ln2_gamma, w.ln2_beta)"
    if norm_first == "true":
        steps = steps.format(hin=ln1.format("x"), h="x + a", fin=ln2.format("h"), y="h + f")
    else:
        steps = steps.format(hin="x", h=ln1.format("x + a"), fin="h", y=ln2.format("h + f"))
    g = variables_after("w = transformer_block_init(8, 2, seed=0)\nseed(1)\nx = randn(2, 5, 8)\n"
                        f"seed(4)\ny = transformer_block(x, w, dropout = 0.3, training = true, norm_first = {norm_first})\n"
                        "seed(4)\n" + steps)
    np.testing.assert_allclose(g["y"], g["y2"], rtol=1e-13, atol=1e-13)
    assert not np.allclose(g["y"], value_of("transformer_block(x, w, norm_first = " + norm_first + ")",
                                            "w = transformer_block_init(8, 2, seed=0)\nseed(1)\nx = randn(2, 5, 8)"))


def test_decoder_block_drops_each_sublayers_output_too():
    g = variables_after("w = transformer_decoder_block_init(8, 2, seed=0)\nseed(1)\nx = randn(3, 8)\nm = randn(4, 8)\n"
                        "seed(6)\ny = transformer_decoder_block(x, m, w, dropout = 0.2, training = true)\n"
                        "seed(6)\n"
                        "a = dropout(multi_head_attention(x, w.self_heads, 2, causal = true, dropout = 0.2, training = true, bo = w.self_bo), 0.2)\n"
                        "h1 = layer_norm(x + a, w.ln1_gamma, w.ln1_beta)\n"
                        "c = dropout(multi_head_attention(h1, w.cross_heads, 2, memory = m, dropout = 0.2, training = true, bo = w.cross_bo), 0.2)\n"
                        "h2 = layer_norm(h1 + c, w.ln2_gamma, w.ln2_beta)\n"
                        "f = dropout(dense(dropout(relu(dense(h2, w.w1, w.b1)), 0.2), w.w2, w.b2), 0.2)\n"
                        "y2 = layer_norm(h2 + f, w.ln3_gamma, w.ln3_beta)\n")
    np.testing.assert_allclose(g["y"], g["y2"], rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5, 0.8])
def test_dropout_mask_mean_is_keep_probability(p):
    g = variables_after(f"seed(0)\nkept = mean(dropout(ones(200, 1000), {p}) > 0)\nm = mean(dropout(ones(200, 1000), {p}))")
    assert abs(g["kept"] - (1 - p)) < 0.01 * (1 - p)
    assert abs(g["m"] - 1.0) < 0.01 * 1 / (1 - p) * 2   # inverted dropout keeps the expectation


def test_dropout_values_and_gradient():
    g = variables_after("seed(2)\ny = dropout([1, 2, 3, 4, 5, 6, 7, 8], 0.25)\n"
                        "seed(2)\ngx = grad(fn(x) -> sum(dropout(x, 0.25) * [1, 1, 1, 1, 1, 1, 1, 1]), [1, 2, 3, 4, 5, 6, 7, 8])")
    y = g["y"]
    kept = y != 0
    np.testing.assert_allclose(y[kept], np.arange(1, 9)[kept] / 0.75)
    np.testing.assert_allclose(g["gx"], kept / 0.75)


def test_attention_dropout_acts_on_weights():
    # v = identity: the output rows are the (dropped-out, rescaled) attention weights
    g = variables_after("seed(4)\na = randn(6, 6)\nhead = {wq = a, wk = a, wv = eye(6), wo = eye(6)}\n"
                        "p = multi_head_attention(eye(6), (head,), 1)\n"
                        "seed(9)\nd = multi_head_attention(eye(6), (head,), 1, dropout=0.5, training=true)\n")
    np.testing.assert_allclose(g["p"].sum(axis=1), np.ones(6))
    p, d = g["p"], g["d"]
    zero = d == 0
    assert zero.any() and (~zero).any()
    np.testing.assert_allclose(d[~zero], p[~zero] / 0.5, rtol=1e-12)


# ---- layer scale, norms, eps, activations -----------------------------------------------------
def test_layer_scale_zero_is_identity_in_pre_norm():
    g = variables_after("w = transformer_block_init(8, 2, layer_scale=true, layer_scale_init=0, seed=1)\n"
                        "seed(0)\nx = randn(3, 8)\ny = transformer_block(x, w, norm_first=true)")
    np.testing.assert_array_equal(g["y"], g["x"])


def test_block_matches_manual_composition():
    """Pre-norm rms block with layer scale, silu, causal, eps = 0.1, written out in tapeml."""
    src = """
seed(3)
w = transformer_block_init(8, 2, norm="rms_norm", layer_scale=true, layer_scale_init=0.5, seed=2)
w.heads = (w.heads[0], w.heads[1])
x = randn(2, 4, 8)
fn attn(h)
  out = w.bo
  for hd in w.heads
    q = dense(h, hd.wq, hd.bq)
    k = dense(h, hd.wk, hd.bk)
    v = dense(h, hd.wv, hd.bv)
    out = out + dense(scaled_dot_product_attention(q, k, v, causal=true), hd.wo)
  end
  return out
end
h = x + w.gamma1 * attn(rms_norm(x, w.ln1_gamma, eps=0.1))
f = dense(silu(dense(rms_norm(h, w.ln2_gamma, eps=0.1), w.w1, w.b1)), w.w2, w.b2)
manual = h + w.gamma2 * f
y = transformer_block(x, w, norm_first=true, norm="rms_norm", causal=true, activation="silu", eps=0.1)
"""
    g = variables_after(src)
    np.testing.assert_allclose(g["y"], g["manual"], rtol=1e-13, atol=1e-13)


def test_eps_changes_the_result():
    g = variables_after(SETUP + "a = transformer_block(x, w)\nb = transformer_block(x, w, eps=0.5)")
    assert np.max(np.abs(g["a"] - g["b"])) > 1e-3


def test_activation_formulas():
    x = np.linspace(-4, 4, 17)
    g = variables_after("a = gelu_tanh(X)\nb = silu(X)\nc = quick_gelu(X)", X=x)
    np.testing.assert_allclose(g["a"], 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
                               rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(g["b"], x / (1 + np.exp(-x)), rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(g["c"], x / (1 + np.exp(-1.702 * x)), rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("expr", ["gelu_tanh(x)", "silu(x)", "quick_gelu(x)", "rms_norm(x, [1, 2, 3])",
                                  "dropout(x, 0.5, training=false)"])
def test_new_builtins_gradients_and_second_order(expr):
    g = variables_after(f"e1 = check_grad(fn(x) -> sum(sin({expr})), [-1.5, 0.3, 2.0])\n"
                        f"e2 = check_grad(fn(x) -> sum(grad(fn(y) -> sum(sin({expr.replace('x', 'y')})), x)), [-1.5, 0.3, 2.0])")
    assert g["e1"] < 1e-6 and g["e2"] < 1e-6


def test_rms_norm_gamma_gradient_and_batched():
    g = variables_after("seed(1)\nx = randn(2, 3, 4)\ngm = randn(4)\n"
                        "e = check_grad(fn(p) -> sum(sin(rms_norm(p.x, p.g, eps=0.01))), {x = x, g = gm})\n"
                        "y = rms_norm(x, gm)")
    assert g["e"].fields["x"] < 1e-6 and g["e"].fields["g"] < 1e-6
    x, gm = g["x"], g["gm"]
    np.testing.assert_allclose(g["y"], x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-5) * gm, rtol=1e-14)


@pytest.mark.parametrize("opts", ['norm_first=true, activation="gelu", causal=true',
                                  'norm="rms_norm", activation="quick_gelu"'])
def test_block_gradients_against_finite_differences_with_layer_scale_and_bo(opts):
    norm = '"rms_norm"' if "rms_norm" in opts else '"layer_norm"'
    g = variables_after(f"w = transformer_block_init(4, 2, mlp_ratio=2, norm={norm}, layer_scale=true, "
                        f"layer_scale_init=0.7, seed=4)\n"
                        f"seed(1)\nw.bo = randn(4)\nx = randn(2, 3, 4)\n"
                        f"e = check_grad(fn(w) -> sum(sin(transformer_block(x, w, {opts}))), w, samples=8)\n"
                        f"ex = check_grad(fn(x) -> sum(sin(transformer_block(x, w, {opts}))), x)")
    from tapeml.builtins.util import tree_leaves
    worst = max(float(v) for _, v in tree_leaves(g["e"], "w"))
    assert worst < 1e-6 and g["ex"] < 1e-6


def test_batched_equals_each_example():
    g = variables_after(SETUP + 'a = transformer_block(x, w, norm_first=true, causal=true, activation="silu")\n'
                                'b0 = transformer_block(x[0, :, :], w, norm_first=true, causal=true, activation="silu")\n'
                                'b1 = transformer_block(x[1, :, :], w, norm_first=true, causal=true, activation="silu")\n')
    np.testing.assert_allclose(g["a"][0], g["b0"], rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(g["a"][1], g["b1"], rtol=1e-13, atol=1e-14)


def test_seed_program_default_is_post_norm_relu():
    g = variables_after(SETUP + "a = transformer_block(x, w)\n"
                                "b = transformer_block(x, w, norm_first=false, norm=\"layer_norm\", causal=false, "
                                "activation=\"relu\", dropout=0, training=false, eps=1e-5)")
    np.testing.assert_array_equal(g["a"], g["b"])


def test_composites_have_no_vjp():
    for name in ("transformer_block", "multi_head_attention", "gelu_tanh", "silu", "quick_gelu", "dropout",
                 "transformer_decoder_block"):
        assert name not in ops.TABLE
    assert "rms_norm" in ops.TABLE


# ---- bo layout -----------------------------------------------------------------------------------
def test_bo_added_once_after_the_heads():
    g = variables_after(SETUP + "a = multi_head_attention(x, w.heads, 2)\nb = multi_head_attention(x, w.heads, 2, bo=[1, 2, 3, 4, 5, 6, 7, 8])")
    np.testing.assert_allclose(g["b"] - g["a"], np.broadcast_to(np.arange(1, 9.0), g["a"].shape), rtol=1e-12)
    with pytest.raises(LangError, match="bo is a vector of length 3, expected a vector of length 8"):
        value_of("multi_head_attention(x, w.heads, 2, bo=[1, 2, 3])", **variables_after(SETUP))


# ---- schema ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("edit, message", [
    ("w.gamma1 = ones(8)", "weights is missing the field 'gamma2': layer scale needs both"),
    ("w.ln2_beta = zeros(3)", "weights.ln2_beta is a vector of length 3, expected a vector of length 8"),
    ("w.w2 = zeros(8, 32)", "weights.w2 is 8x32, expected 32x8"),
    ("w.w1 = zeros(8, 3)", "weights.w1 is 8x3 and weights.w2 is 32x8: the feed-forward width must agree, "
                           "but w1 has 3 columns and w2 has 32 rows"),
    ("w.w1 = zeros(7, 32)", "weights.w1 is 7x32, expected 8xhidden"),
    ("w.heads = (w.heads[0], {wq = zeros(8, 4), wk = zeros(8, 4), wv = zeros(8, 4)})",
     "weights.heads\\[1\\] is missing the field 'wo'"),
    ("w.heads = (w.heads[0], {wq = zeros(8, 4), wk = zeros(8, 4), wv = zeros(8, 4), wo = zeros(4, 8), bq = zeros(3)})",
     "weights.heads\\[1\\].bq is a vector of length 3, expected a vector of length 4"),
    ("w.heads = (w.heads[0], {wq = zeros(8, 4), wk = zeros(8, 4), wv = zeros(8, 4), wo = zeros(4, 8), wx = 1})",
     "weights.heads\\[1\\] has an unknown field 'wx'"),
    ("w.ln1_gama = w.ln1_gamma", "weights has an unknown field 'ln1_gama'"),
])
def test_schema_errors_name_the_path_and_shapes(edit, message):
    env = variables_after(SETUP)
    with pytest.raises(LangError, match=message) as e:
        run(edit + "\ntransformer_block(x, w)", **env)
    assert type(e.value).__name__ == "ValueErr"


def test_partial_biases_are_an_error_and_bias_free_blocks_work():
    env = variables_after(SETUP)
    with pytest.raises(LangError, match="missing the field 'b2'"):
        run("v = {heads = w.heads, ln1_gamma = w.ln1_gamma, ln1_beta = w.ln1_beta, w1 = w.w1, b1 = w.b1, "
            "w2 = w.w2, ln2_gamma = w.ln2_gamma, ln2_beta = w.ln2_beta}\ntransformer_block(x, v)", **env)
    g = variables_after("v = transformer_block_init(8, 2, bias=false, seed=0)\ny = transformer_block(x, v)\n"
                        "n = param_count(v)", **env)
    assert g["n"] == 4 * 64 + 2 * 8 * 32 + 2 * 8
    assert sorted(g["v"].fields) == ["heads", "ln1_gamma", "ln2_gamma", "w1", "w2"]
    assert sorted(g["v"].fields["heads"][0].fields) == ["wk", "wo", "wq", "wv"]


# ---- init, param_count, summary ------------------------------------------------------------------
def test_card_parameter_counts():
    assert value_of("param_count(transformer_block_init(32, 4))") == 12704
    assert value_of('param_count((transformer_block_init(16, 2, norm="rms_norm"), '
                    'transformer_block_init(16, 2, norm="rms_norm")))') == 6496
    assert value_of("param_count({a = zeros(8, 16), b = zeros(16)}) + "
                    "param_count(transformer_block_init(16, 2, mlp_ratio=2, layer_scale=true)) + "
                    "param_count({a = zeros(16, 8), b = zeros(8)})") == 2536


def test_param_count_kinds():
    assert value_of('param_count((1, [1, 2], {a = "s", b = true, c = none, d = [1, 2; 3, 4]}, [1, 2] > 1))') == 7


def test_init_layout_and_distributions():
    g = variables_after("w = transformer_block_init(64, 4, mlp_ratio=2, seed=0)\nw2 = transformer_block_init(64, 4, mlp_ratio=2, seed=0)\n"
                        "seed(3)\na = transformer_block_init(8, 2)\nseed(3)\nb = transformer_block_init(8, 2)")
    w = g["w"].fields
    d, dk, hid = 64, 16, 128
    heads = w["heads"]
    assert len(heads) == 4
    wq = np.concatenate([h.fields["wq"] for h in heads], axis=1)
    wk = np.concatenate([h.fields["wk"] for h in heads], axis=1)
    wv = np.concatenate([h.fields["wv"] for h in heads], axis=1)
    assert wq.shape == (d, d) and heads[0].fields["wo"].shape == (dk, d)
    in_proj = np.concatenate([wq, wk, wv], axis=1)
    xavier = math.sqrt(6 / (d + 3 * d))
    assert np.max(np.abs(in_proj)) <= xavier and np.max(np.abs(in_proj)) > 0.95 * xavier
    assert abs(np.var(in_proj) - xavier ** 2 / 3) < 0.05 * xavier ** 2 / 3
    wo = np.concatenate([h.fields["wo"] for h in heads], axis=0)
    assert np.max(np.abs(wo)) <= 1 / math.sqrt(d)
    assert np.max(np.abs(w["w1"])) <= 1 / math.sqrt(d) and np.max(np.abs(w["b1"])) <= 1 / math.sqrt(d)
    assert np.max(np.abs(w["w2"])) <= 1 / math.sqrt(hid) and w["w2"].shape == (hid, d)
    for z in ("bo",):
        np.testing.assert_array_equal(w[z], np.zeros(d))
    for h in heads:
        for b in ("bq", "bk", "bv"):
            np.testing.assert_array_equal(h.fields[b], np.zeros(dk))
    np.testing.assert_array_equal(w["ln1_gamma"], np.ones(d))
    np.testing.assert_array_equal(w["ln2_beta"], np.zeros(d))
    # reproducible: the seed argument, or seed(n) before the call
    np.testing.assert_array_equal(w["w1"], g["w2"].fields["w1"])
    np.testing.assert_array_equal(g["a"].fields["w1"], g["b"].fields["w1"])


def test_init_loads_into_torch_layout():
    """The init's matrices are PyTorch's shapes transposed and split by heads, drawn in order."""
    g = variables_after("w = transformer_block_init(8, 2, seed=5)")
    w = g["w"].fields
    rng = np.random.default_rng(5)
    in_proj = rng.uniform(-math.sqrt(6 / 32), math.sqrt(6 / 32), (24, 8))
    np.testing.assert_array_equal(w["heads"][1].fields["wk"], in_proj[8:16][4:8].T)


def test_summary_prints_paths_shapes_and_total():
    out = output_of("summary({w = zeros(8, 16), b = zeros(16), blocks = (transformer_block_init(4, 1, mlp_ratio=1, bias=false, seed=0),)})")
    lines = out.splitlines()
    assert lines[0].split() == ["parameter", "shape", "count"]
    assert lines[1].split() == ["w", "8x16", "128"]
    assert lines[3].split() == ["blocks[0].heads[0].wq", "4x4", "16"]
    assert lines[-1].split() == ["total", f"{128 + 16 + 4 * 16 + 2 * 16 + 2 * 4:,}"]


def test_init_constraint_errors():
    with pytest.raises(LangError, match="n_heads must divide d_model, got n_heads = 3 and d_model = 8"):
        value_of("transformer_block_init(8, 3)")
    with pytest.raises(LangError, match="mlp_ratio must be >= 1"):
        value_of("transformer_block_init(8, 2, mlp_ratio=0)")
    with pytest.raises(LangError, match='norm must be one of "layer_norm", "rms_norm"'):
        value_of('transformer_block_init(8, 2, norm="rms")')


def test_fused_heads_reuse_joined_weights_only_for_the_same_matrices():
    """Untracked calls remember the joined head weights (inference calls the block again and
    again); a head with a new matrix, even of equal shape, must join anew."""
    from tapeml.builtins.ml import attention as ml_attention
    src = ("seed(3)\nx = randn(32, 32)\nw = transformer_block_init(32, 4)\n"
           "a = transformer_block(x, w)\nb = transformer_block(x, w)\n"
           "h = w.heads[1]\nh.wq = h.wq * 2\nheads = (w.heads[0], h, w.heads[2], w.heads[3])\nw2 = w\nw2.heads = heads\n"
           "c = transformer_block(x, w2)\n"
           "fn loss(w) -> sum(transformer_block(x, w))\ng = grad(loss, w2)\n")
    assert 32 * 32 >= ml_attention.FUSE_MIN_ELEMENTS          # the fused path runs
    g = variables_after(src)
    np.testing.assert_array_equal(g["a"], g["b"])
    assert np.max(np.abs(g["a"] - g["c"])) > 1e-3
    nn_min, ml_attention.FUSE_MIN_ELEMENTS = ml_attention.FUSE_MIN_ELEMENTS, 10 ** 9
    try:                                             # the same block, heads looped one by one
        ref = variables_after("c = transformer_block(x, w2)\nfn loss(w) -> sum(transformer_block(x, w))\ng = grad(loss, w2)",
                              x=g["x"], w2=g["w2"])
    finally:
        ml_attention.FUSE_MIN_ELEMENTS = nn_min
    np.testing.assert_allclose(g["c"], ref["c"], rtol=1e-12, atol=1e-12)
    for got, want in zip(g["g"].fields["heads"], ref["g"].fields["heads"]):
        for k in ("wq", "wk", "wv", "wo"):
            np.testing.assert_allclose(got.fields[k], want.fields[k], rtol=1e-10, atol=1e-12)


def test_second_order_through_the_block_is_the_same_joined_and_head_by_head(monkeypatch):
    """Issue 28: the heads run joined at every size (dense_heads, heads_dense), whose recorded VJPs
    an outer grad records. The gradient of a gradient's norm through a batched, masked block with
    attention biases equals the per-head loop's (the composite the joined primitives replace)."""
    from tapeml.builtins.ml import attention as ml_attention
    src = ("seed(3)\nw = transformer_block_init(4, 2)\nx = randn(2, 3, 4)\nR = randn(2, 3, 4)\n"
           "m = (0:2) < reshape([3, 2], 2, 1, 1)\n"
           "fn inner(w) -> sum(tanh(transformer_block(x, w, mask = m)) * R)\n"
           "fn gnorm(w)\n  g = grad(inner, w)\n"
           "  return sum(g.heads[0].wq^2) + sum(g.heads[1].wo^2) + sum(g.w1^2) + sum(g.heads[1].bv^2)\nend\n"
           "h = grad(gnorm, w)\n")
    got = {}
    for fuse in (1, 10 ** 9):
        monkeypatch.setattr(ml_attention, "FUSE_MIN_ELEMENTS", fuse)
        got[fuse] = variables_after(src)["h"]
    for name in ("heads", "ln1_gamma", "w1", "w2", "b2"):
        a, b = got[1].fields[name], got[10 ** 9].fields[name]
        pairs = ([(ha.fields[k], hb.fields[k]) for ha, hb in zip(a, b) for k in ("wq", "wk", "wv", "wo", "bq", "bv")]
                 if name == "heads" else [(a, b)])
        for u, v in pairs:
            np.testing.assert_allclose(u, v, rtol=1e-12, atol=1e-13)
    assert np.max(np.abs(got[1].fields["heads"][1].fields["wv"])) > 1.0       # not a vacuous comparison


def test_joined_weights_hit_for_every_block_and_die_with_the_weights(monkeypatch):
    import gc

    from tapeml.builtins.ml import attention as ml_attention
    before = set(ml_attention.joined_cache())
    interp = run("seed(1)\nx = randn(32, 32)\nblocks = (transformer_block_init(32, 4), transformer_block_init(32, 4), "
                 "transformer_block_init(32, 4))\nfn fwd(x)\n  for b in blocks\n    x = transformer_block(x, b)\n  end\n"
                 "  return x\nend\na = fwd(x)\n")
    joins = []
    real = ops.concat
    monkeypatch.setattr(ops, "concat", lambda *a, **k: joins.append(1) or real(*a, **k))
    run("b = fwd(x)", interp)
    assert joins == []                                   # 3 blocks x 7 joins, all remembered
    np.testing.assert_array_equal(interp.globals.vars["a"], interp.globals.vars["b"])
    assert len(set(ml_attention.joined_cache()) - before) == 21
    del interp
    gc.collect()
    assert not set(ml_attention.joined_cache()) - before                  # nothing outlives the weights
