"""The float32 mode (set_dtype / tapeml --dtype float32): every constructor follows it, and no
number, optimizer or gradient promotes a float32 matrix back to float64."""
import subprocess

import numpy as np
import pytest

from tapeml.array import ops
from tapeml.array.backend import to_numpy
from tapeml.syntax.errors import LangError

from support import fresh, output_of, run, tapeml_command, variables_after


def test_constructors_follow_the_setting(f32):
    g = variables_after("seed(0)\na = [1, 2; 3, 4]\nb = zeros(2)\nc = ones(2, 2)\nd = eye(3)\ne = fill(7, 2)\n"
                        "f = linspace(0, 1, 5)\nh = 1:4\nr = rand(3)\nn = randn(2, 2)\n", f32)
    for name in "abcdefhrn":
        assert to_numpy(g[name]).dtype == np.float32, name
    assert g["h"].tolist() == [1, 2, 3, 4]


def test_rand_and_randn_draw_the_same_numbers_in_both_types(f32):
    g32 = variables_after("seed(5)\nr = rand(4)\nn = randn(4)", f32)
    ops.set_dtype("float64")
    g64 = variables_after("seed(5)\nr = rand(4)\nn = randn(4)")
    for name in "rn":
        assert to_numpy(g64[name]).dtype == np.float64
        np.testing.assert_array_equal(to_numpy(g32[name]), to_numpy(g64[name]).astype(np.float32))


def test_numbers_never_promote_a_float32_matrix(f32):
    # results of sqrt/exp/sum/mean/indexing on numbers are Python floats (weak scalars), not np.float64
    g = variables_after("x = [1, 2, 3]\na = x / sqrt(2)\nb = x * exp(1)\nc = x + sum(x)\nd = x * mean(x)\n"
                        "e = x * x[2]\nf = x * max(x)\ns = sqrt(2)", f32)
    for name in "abcdef":
        assert to_numpy(g[name]).dtype == np.float32, name
    assert type(g["s"]) is float
    np.testing.assert_allclose(g["a"], np.array([1, 2, 3]) / np.sqrt(2), rtol=1e-6)


BOOL_WITH_NUMBERS = ["b * 2", "2 * b", "b + 1", "1 - b", "b - 1", "b / 2", "-b", "b ^ 2", "b * true",
                     "b - true", "x - true", "true - x",
                     "where(b, 1, 0)", "where(b, 1.5, b)", "exp(b)", "b @ [1; 2; 3]", "clip(b, 0, 0.5)",
                     "unique(b)", "unique(x)",
                     # a number made a matrix (reshape, stack) takes the session's type too
                     "reshape(2, 1)", "[x, 2]", "concat(x, 2)", "stack(1, 2)", "[true, 2]", "kron(x, 2)",
                     "outer(2, x)", "put_along(x, 1, 5, 0)", "quantile(x, [0.5])",
                     # and so do the gradients whose backward reshapes a number
                     "grad(fn(v) -> sum(v, 0), x)", "grad(fn(v) -> std(v), x)", "grad(fn(v) -> logsumexp(v), x)",
                     "grad(fn(v) -> median(v), x)", "grad(fn(v) -> quantile(v, 0.3), x)",
                     "grad(fn(v) -> max(v, dim = 0), x)"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_bool_matrix_with_a_number_is_a_matrix_of_the_sessions_float_type(dtype):
    """NumPy makes bool-and-number float64 and torch float32, whatever the session's type: a mask
    times a number (`(x > 0) * 2`) must not change a float32 model's type, nor lose a float64
    gradient check's digits on torch. The same for a number made a matrix (reshape, stack: the
    literal `[x, 2]`, the backward of a reduction to one number) and unique's values."""
    interp = run(f'set_dtype("{dtype}")\nb = [1, 2, 3] > 1.5\nx = [3, 1, 2]', fresh())
    for src in BOOL_WITH_NUMBERS:
        g = variables_after(f"r = {src}", interp)
        assert str(to_numpy(g["r"]).dtype) == dtype, src
    assert to_numpy(variables_after("r = where(b, true, false)", interp)["r"]).dtype == np.bool_
    assert to_numpy(variables_after("r = b * b", interp)["r"]).dtype == np.bool_      # and
    assert to_numpy(variables_after("r = [true, false]", interp)["r"]).dtype == np.bool_
    assert to_numpy(variables_after("r = reshape(true, 1)", interp)["r"]).dtype == np.bool_
    assert to_numpy(variables_after("r = x - true", interp)["r"]).tolist() == [2, 0, 1]     # (torch refused it)
    # a reduction to one value is a number (double precision), on every backend: median and
    # quantile gave a 0-d matrix on NumPy, which rounded 16777217 to float32 when added to it
    g = variables_after("m = median(b)\nq = quantile(x, 0.5)\nr = m + 16777217", interp)
    assert type(g["m"]) is float and type(g["q"]) is float and g["r"] == 16777218.0


@pytest.mark.parametrize("step", ["sgd_step(p, g, sgd_init(p), lr = 0.1, momentum = 0.9)",
                                  "adam_step(p, g, adam_init(p))",
                                  "adamw_step(p, g, adamw_init(p), weight_decay = 0.1)"])
def test_optimizers_keep_float32(f32, step):
    g = variables_after("p = {w = ones(2, 2), b = zeros(2)}\ng = {w = ones(2, 2), b = ones(2)}\n"
                        f"q, state = {step}\nq, state = {step.replace('init(p)', 'init(q)')}", f32)
    for leaf in g["q"].fields.values():
        assert to_numpy(leaf).dtype == np.float32


def test_block_gradient_in_float32_matches_float64(f32):
    src = ("seed(0)\nx = randn(6, 8)\nw = transformer_block_init(8, 2)\n"
           "loss, gw = value_and_grad(fn(w) -> sum(transformer_block(x, w, causal = true) * x), w)\n")
    g32 = variables_after(src, f32)
    ops.set_dtype("float64")
    g64 = variables_after(src)
    leaves32, leaves64 = [], []

    def flat(v, out):
        if hasattr(v, "fields"):
            for f in v.fields.values():
                flat(f, out)
        elif isinstance(v, tuple):
            for f in v:
                flat(f, out)
        else:
            out.append(v)
    flat(g32["gw"], leaves32)
    flat(g64["gw"], leaves64)
    assert len(leaves32) == len(leaves64) > 10
    for a, b in zip(leaves32, leaves64):
        assert to_numpy(a).dtype == np.float32
        np.testing.assert_allclose(to_numpy(a), to_numpy(b), rtol=2e-3, atol=2e-4)
    assert g32["loss"] == pytest.approx(g64["loss"], rel=1e-4)


def test_unknown_dtype_is_an_error():
    with pytest.raises(LangError, match='one of "float64", "float32"'):
        run('set_dtype("float16")')


def test_cli_flag_sets_float32_for_the_script(tmp_path):
    script = tmp_path / "d.ml"
    script.write_text('print(dtype(randn(2)), dtype([1, 2] / sqrt(2)))\n', encoding="utf-8")
    tml = tapeml_command()
    out = subprocess.run([*tml, "--dtype", "float32", str(script)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "float32 float32"
    out = subprocess.run([*tml, "--dtype=float32", str(script)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "float32 float32"
    out = subprocess.run([*tml, str(script)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "float64 float64"


def test_a_float32_checkpoint_loads_as_float32(f32, tmp_path):
    path = str(tmp_path / "ck.npz").replace("\\", "/")
    g = variables_after(f'w = {{a = [1, 2, 3] / 3, b = 0.5}}\nsave("{path}", w)\nv = load("{path}")', f32)
    assert to_numpy(g["v"].fields["a"]).dtype == np.float32
    np.testing.assert_array_equal(to_numpy(g["v"].fields["a"]), to_numpy(g["w"].fields["a"]))    # bit for bit
    assert g["v"].fields["b"] == 0.5


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_no_primitive_returns_a_numpy_scalar(dtype):
    """A 0-d operand (zeros()) gave np.float32 scalars in float32 mode, which no builtin took
    ('round(): x must be a number or a matrix, got a function'): every primitive of the table
    returns Python floats or arrays."""
    from tapeml.array import ops
    ops.set_dtype(dtype)
    try:
        z = np.asarray(np.zeros((), dtype=dtype) + 0.5)
        leaked = []
        for name, prim in ops.TABLE.items():
            for args in [(z,), (z, z), (z, 2.0), (2.0, z), (z, True)]:
                try:
                    r = prim(*args)
                except Exception:
                    continue
                leaked += [(name, type(x).__name__) for x in (r if isinstance(r, tuple) else (r,))
                           if isinstance(x, np.generic)]
        assert leaked == []
    finally:
        ops.set_dtype("float64")
    try:
        out = output_of('set_dtype("float32")\nx = zeros() + 2.5\n'
                        'print(type(x), round(x, 3), x / 2, -x, x ^ 2)\n')
    finally:
        ops.set_dtype("float64")
    assert out == "number 2.5 1.25 -2.5 6.25\n"
