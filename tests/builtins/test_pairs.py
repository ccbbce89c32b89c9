"""Pairs, not grids (issue 29, item 1): take_along, put_along and add_along against NumPy and
PyTorch (values, and gradients against finite differences and torch autograd), their errors with
line:col, the one-time note on standard error for P[0:n-1, ys] (printed once for the idiom, never
for P[:, ys] nor P[[0, 2], [1, 3]] on a 4x4; notes(false) and TAPEML_NOTES=0 silence it), and the
names of other libraries (gather, take_along_axis, take_along_dim, index_select) leading to them."""
from __future__ import annotations

import io
import os
import subprocess
import sys

import numpy as np
import pytest

from fd import fd_grad
from support import ROOT
from tapeml.array import backend, context
from tapeml.array.tape import raw
from tapeml.evaluator.interpreter import Interpreter
from tapeml.syntax.errors import LangError

torch = pytest.importorskip("torch")



def session(**values):
    """An interpreter given `values` as variables, NumPy arrays on the session's device (TAPEML_DEVICE,
    pytest --device: the same cases run on every backend)."""
    out, err = io.StringIO(), io.StringIO()
    interp = Interpreter(out=out)
    interp.err = err
    be = backend.current()
    for k, v in values.items():
        interp.set_variable(k, be.asarray(v) if type(v) is np.ndarray and be is not backend.NUMPY else v)
    return interp, out, err


def run(src, **values):
    interp, out, err = session(**values)
    interp.run(src, "<test>")
    return interp.variables(), out.getvalue(), err.getvalue()


def val(expr, **values):
    return run(f"RESULT = {expr}", **values)[0]["RESULT"]


def error(src, **values):
    with pytest.raises(LangError) as e:
        run(src, **values)
    return e.value


@pytest.fixture(autouse=True)
def _notes_on():
    """notes() is session state of the process default State: every test starts with notes on."""
    context.LIVE["notes"] = True
    yield
    context.LIVE["notes"] = True


RNG = np.random.default_rng(29)
X23 = RNG.standard_normal((2, 3))
X345 = RNG.standard_normal((3, 4, 5))


# ---- take_along: NumPy's take_along_axis, PyTorch's gather / take_along_dim ------------------
@pytest.mark.parametrize("x, ids, dim", [
    (X23, np.array([[2.0], [0.0]]), 1),
    (X23, np.array([[2.0, 0, 0, 1], [1, 1, 2, 0]]), 1),
    (X23, np.array([[1.0, 0, 1]]), 0),
    (X23, np.array([[1.0, 0, 1], [0, 0, 0], [1, 1, 1]]), 0),
    (X345, RNG.integers(0, 4, (3, 2, 5)).astype(float), 1),
    (X345, RNG.integers(0, 5, (3, 4, 7)).astype(float), -1),
    (X345, RNG.integers(0, 3, (1, 4, 5)).astype(float), 0),
    (X345, RNG.integers(0, 5, (3, 1, 2)).astype(float), 2),     # ids broadcast over axis 1
])
def test_take_along_same_rank_is_numpy_take_along_axis_and_torch_take_along_dim(x, ids, dim):
    got = raw(val("take_along(X, I, dim=D)", X=x, I=ids, D=float(dim)))
    want = np.take_along_axis(x, ids.astype(np.intp), axis=dim)
    np.testing.assert_array_equal(got, want)
    t = torch.take_along_dim(torch.tensor(x), torch.tensor(ids.astype(np.int64)), dim=dim).numpy()
    np.testing.assert_array_equal(got, t)


@pytest.mark.parametrize("x, ids, dim", [
    (X23, np.array([2.0, 0.0]), 1),
    (X23, np.array([1.0, 0.0, 1.0]), 0),
    (X345, RNG.integers(0, 5, (3, 4)).astype(float), -1),
    (X345, RNG.integers(0, 4, (3, 5)).astype(float), 1),
    (X345, RNG.integers(0, 3, (4, 5)).astype(float), 0),
])
def test_take_along_with_one_axis_fewer_is_numpys_pairs(x, ids, dim):
    """ids of one axis fewer: one element per position, NumPy's x[arange(n), ys] for a matrix."""
    got = raw(val("take_along(X, I, dim=D)", X=x, I=ids, D=float(dim)))
    d = dim % x.ndim
    want = np.take_along_axis(x, np.expand_dims(ids.astype(np.intp), d), axis=d).squeeze(d)
    np.testing.assert_array_equal(got, want)
    if x.ndim == 2 and d == 1:
        np.testing.assert_array_equal(got, x[np.arange(x.shape[0]), ids.astype(np.intp)])
    gathered = torch.gather(torch.tensor(x), d, torch.tensor(np.expand_dims(ids.astype(np.int64), d))).squeeze(d)
    np.testing.assert_array_equal(got, gathered.numpy())


def test_take_along_of_a_vector_and_one_id_is_the_number():
    assert val("take_along([10, 20, 30], 2)") == 30.0
    assert isinstance(val("take_along([10, 20, 30], 2)"), float)
    np.testing.assert_array_equal(raw(val("take_along([10, 20, 30], [2, 2, 0])")), [30, 30, 10])


def test_empty_ids_and_empty_axes():
    assert raw(val("take_along([1, 2; 3, 4], zeros(2, 0), dim=1)")).shape == (2, 0)
    assert raw(val("take_along(zeros(0, 3), zeros(0))")).shape == (0,)
    assert raw(val("put_along(zeros(0, 3), zeros(0), 1)")).shape == (0, 3)
    np.testing.assert_array_equal(raw(val("add_along([1, 2], zeros(0), 5, dim=0)")), [1, 2])


def test_take_along_broadcasts_x_where_it_has_size_1():
    x = RNG.standard_normal((1, 4))
    ids = np.array([[0.0, 3], [1, 1], [2, 0]])
    got = raw(val("take_along(X, I, dim=1)", X=x, I=ids))
    np.testing.assert_array_equal(got, np.take_along_axis(x, ids.astype(np.intp), axis=1))
    assert got.shape == (3, 2)


# ---- put_along and add_along: NumPy's put_along_axis / np.add.at, PyTorch's scatter / scatter_add
def test_put_along_is_numpy_put_along_axis_and_leaves_x_unchanged():
    x = RNG.standard_normal((3, 4))
    ids = np.array([1.0, 3, 0])
    v = np.array([5.0, 6, 7])
    g, _, _ = run("Y = put_along(X, I, V)\nZ = X", X=x, I=ids, V=v)
    want = x.copy()
    np.put_along_axis(want, ids.astype(np.intp)[:, None], v[:, None], axis=1)
    np.testing.assert_array_equal(raw(g["Y"]), want)
    np.testing.assert_array_equal(raw(g["Z"]), x)              # value semantics
    torch_want = torch.tensor(x).scatter(1, torch.tensor(ids.astype(np.int64))[:, None], torch.tensor(v)[:, None])
    np.testing.assert_array_equal(raw(g["Y"]), torch_want.numpy())


def test_put_along_repeated_id_keeps_the_last_write_and_values_broadcast():
    np.testing.assert_array_equal(raw(val("put_along(zeros(1, 3), [1, 1; ], [5, 6; ])")), [[0, 6, 0]])
    np.testing.assert_array_equal(raw(val("put_along([1, 2, 3; 4, 5, 6], [2, 0], 0)")), [[1, 2, 0], [0, 5, 6]])
    np.testing.assert_array_equal(raw(val("put_along(zeros(3, 2), [0, 2], [7, 8], dim=0)")),
                                  [[7, 0], [0, 0], [0, 8]])


def test_add_along_adds_repeats_like_torch_scatter_add():
    x = RNG.standard_normal((3, 4))
    ids = np.array([[1.0, 1, 3], [0, 2, 0], [3, 3, 3]])
    v = RNG.standard_normal((3, 3))
    got = raw(val("add_along(X, I, V)", X=x, I=ids, V=v))
    want = torch.tensor(x).scatter_add(1, torch.tensor(ids.astype(np.int64)), torch.tensor(v)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=1e-15)
    np.testing.assert_array_equal(raw(val("add_along(zeros(5), [1, 3, 1], 1, dim=0)")), [0, 2, 0, 1, 0])


def test_add_along_is_the_manual_backward_of_cross_entropy():
    """makemore's dlogits = probs; dlogits[range(n), ys] -= 1; dlogits /= n, against grad."""
    logits = RNG.standard_normal((5, 7))
    ys = np.array([3.0, 0, 6, 6, 1])
    g, _, _ = run("P = softmax(L)\nD = add_along(P, Y, -1) / 5\nG = grad(fn(z) -> cross_entropy(z, Y), L)",
                  L=logits, Y=ys)
    np.testing.assert_allclose(raw(g["D"]), raw(g["G"]), rtol=1e-12, atol=1e-15)


# ---- gradients: finite differences and torch autograd ------------------------------------------
def _torch_grads(fn, *arrays):
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    fn(*ts).backward()
    return [t.grad.numpy() for t in ts]


def test_take_along_gradient_matches_fd_and_torch_gather():
    x = RNG.standard_normal((3, 5))
    ids = np.array([4.0, 4, 0])        # a repeated column: the gradient adds up there
    w = RNG.standard_normal(3)
    g = raw(val("grad(fn(x) -> sum(take_along(x, I) * W), X)", X=x, I=ids, W=w))
    np.testing.assert_allclose(g, fd_grad(lambda a: val("sum(take_along(A, I) * W)", A=a, I=ids, W=w), x),
                               rtol=1e-7, atol=1e-8)
    idx = torch.tensor(ids.astype(np.int64))[:, None]
    (tg,) = _torch_grads(lambda t: (torch.gather(t, 1, idx).squeeze(1) * torch.tensor(w)).sum(), x)
    np.testing.assert_allclose(g, tg, rtol=1e-14, atol=1e-15)


def test_take_along_broadcast_gradient_sums_over_the_repeated_rows():
    x = RNG.standard_normal((1, 4))
    ids = np.array([[0.0, 3], [1, 1], [2, 0]])
    w = RNG.standard_normal((3, 2))
    g = raw(val("grad(fn(x) -> sum(take_along(x, I, dim=1) * W), X)", X=x, I=ids, W=w))
    (tg,) = _torch_grads(lambda t: (torch.take_along_dim(t, torch.tensor(ids.astype(np.int64)), dim=1)
                                    * torch.tensor(w)).sum(), x)
    np.testing.assert_allclose(g, tg, rtol=1e-14, atol=1e-15)


def test_put_along_gradients_match_fd_and_torch_scatter():
    x = RNG.standard_normal((3, 4))
    ids = np.array([2.0, 0, 3])
    v = RNG.standard_normal(3)
    w = RNG.standard_normal((3, 4))
    g, _, _ = run("GX, GV = grad(fn(p) -> sum(put_along(p[0], I, p[1]) * W), (X, V))", X=x, V=v, I=ids, W=w)
    f = "sum(put_along(A, I, B) * W)"
    np.testing.assert_allclose(raw(g["GX"]), fd_grad(lambda a: val(f, A=a, B=v, I=ids, W=w), x), atol=1e-8)
    np.testing.assert_allclose(raw(g["GV"]), fd_grad(lambda b: val(f, A=x, B=b, I=ids, W=w), v), atol=1e-8)
    idx = torch.tensor(ids.astype(np.int64))[:, None]
    tgx, tgv = _torch_grads(lambda a, b: (a.scatter(1, idx, b[:, None]) * torch.tensor(w)).sum(), x, v)
    np.testing.assert_allclose(raw(g["GX"]), tgx, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(raw(g["GV"]), tgv, rtol=1e-14, atol=1e-15)


def test_put_along_overwritten_value_gets_gradient_0():
    g = raw(val("grad(fn(v) -> sum(put_along(zeros(1, 3), [1, 1; ], v) * [1, 2, 3]), [5, 6; ])"))
    np.testing.assert_array_equal(g, [[0, 2]])


def test_add_along_gradients_match_fd_and_torch_scatter_add():
    x = RNG.standard_normal((2, 5))
    ids = np.array([[4.0, 4, 1], [0, 2, 0]])
    v = RNG.standard_normal((2, 3))
    w = RNG.standard_normal((2, 5))
    g, _, _ = run("GX, GV = grad(fn(p) -> sum(add_along(p[0], I, p[1]) * W), (X, V))", X=x, V=v, I=ids, W=w)
    f = "sum(add_along(A, I, B) * W)"
    np.testing.assert_allclose(raw(g["GX"]), fd_grad(lambda a: val(f, A=a, B=v, I=ids, W=w), x), atol=1e-8)
    np.testing.assert_allclose(raw(g["GV"]), fd_grad(lambda b: val(f, A=x, B=b, I=ids, W=w), v), atol=1e-8)
    idx = torch.tensor(ids.astype(np.int64))
    tgx, tgv = _torch_grads(lambda a, b: (a.scatter_add(1, idx, b) * torch.tensor(w)).sum(), x, v)
    np.testing.assert_allclose(raw(g["GX"]), tgx, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(raw(g["GV"]), tgv, rtol=1e-14, atol=1e-15)


def test_second_order_through_take_along():
    """grad of grad: the VJPs are written with primitives."""
    x = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]])
    h = raw(val("grad(fn(x) -> sum(grad(fn(y) -> sum(take_along(y, [2, 0]) ^ 3), x) * x), X)", X=x))
    want = np.zeros_like(x)
    want[0, 2], want[1, 0] = 9 * x[0, 2] ** 2, 9 * x[1, 0] ** 2     # d/dx (3 x^2 * x) = 9 x^2
    np.testing.assert_allclose(h, want, rtol=1e-14)


# ---- errors, with line and column ---------------------------------------------------------------
@pytest.mark.parametrize("src, kind, message", [
    ("take_along([1, 2; 3, 4], [0, 5])", "IndexErr",
     r"take_along\(\): id 5 is out of range for axis 1 of x \(a 2x2 matrix\): ids go from 0 to 1"),
    ("take_along([1, 2; 3, 4], [0, -1])", "IndexErr", r"take_along\(\): id -1 is out of range"),
    ("take_along([1, 2; 3, 4], [0.5, 1])", "IndexErr", r"take_along\(\): ids must be whole numbers, got 0.5"),
    ("take_along([1, 2; 3, 4], [0, 1, 1])", "ShapeError",
     r"take_along\(\): ids is a vector of length 3, but x is 2x2 and dim = 1: ids must be shaped like x "
     r"without axis 1 \(a vector of length 2\)"),
    ("take_along([1, 2; 3, 4], ones(2, 2, 2))", "ShapeError", "take_along\\(\\): ids has 3 axes but x"),
    ("take_along([1, 2; 3, 4], [0, 1], dim=2)", "ValueErr", "take_along\\(\\): dim=2 is out of range"),
    ("take_along(3, 0)", "ShapeError", "take_along\\(\\): x must be a vector or a matrix, got a number"),
    ("take_along(zeros(2, 0), [0, 0])", "IndexErr",
     r"take_along\(\): id 0 is out of range for axis 1 of x \(a 2x0 matrix\): that axis has no elements"),
    ("take_along([1, 2], [true, false])", "TypeErr", "take_along\\(\\): ids must be a number or a matrix"),
    ("put_along([1, 2; 3, 4], [0, 1], [1, 2, 3])", "ShapeError",
     r"put_along\(\): values is a vector of length 3, but the positions written are a vector of length 2"),
    ("put_along(ones(1, 3), [0; 1], 5)", "ShapeError", r"put_along\(\): ids is 2x1, but x is 1x3"),
    ("add_along([1, 2; 3, 4], [0, 2], 1)", "IndexErr", "add_along\\(\\): id 2 is out of range"),
])
def test_errors_name_the_builtin_and_the_place(src, kind, message):
    e = error("\n" + src)
    assert type(e).__name__ == kind, str(e)
    assert __import__("re").search(message, e.message), e.message
    assert (e.span.line, e.span.col) == (2, 1)


# ---- the note on standard error ------------------------------------------------------------------
IDIOM = "P = reshape(0:15, 4, 4)\nys = [1, 3, 0, 2]\nn = 4\n"


def test_the_note_is_printed_once_per_source_line_and_changes_nothing():
    src = IDIOM + "for i in 1:3\n    A = P[0:n-1, ys]\nend\nB = P[0:n-1, ys]\n"
    g, out, err = run(src)
    assert out == ""
    notes = [line for line in err.splitlines() if "note:" in line]
    assert len(notes) == 2, err                     # line 5 once (three passes), line 7 once
    assert notes[0].startswith("<test>:5:9: note: this index picks the 4x4 grid, every row with every index of ys")
    assert notes[1].startswith("<test>:7:5: note:")
    assert "take_along(P, ys, dim=1)" in notes[0] and "notes(false)" in notes[0] and "TAPEML_NOTES=0" in notes[0]
    assert "P[arange(4), ys]" in notes[0]
    assert "  5 |     A = P[0:n-1, ys]" in err        # the line and a caret, as an error shows them
    P = np.arange(16.0).reshape(4, 4)
    np.testing.assert_array_equal(raw(g["A"]), P[:, [1, 3, 0, 2]])      # the grid, unchanged


@pytest.mark.parametrize("index, dim", [
    ("[0, 1, 2, 3], ys", 1),       # a vector equal to ':'
    ("0:end, ys", 1),
    ("0:3, ys", 1),
    ("ys, 0:n-1", 0),              # the other axis order: one element per column
    ("ys, [0, 1, 2, 3]", 0),
])
def test_the_idiom_in_its_forms(index, dim):
    _, _, err = run(IDIOM + f"A = P[{index}]\n")
    assert err.count("note:") == 1, err
    assert f"take_along(P, ys, dim={dim})" in err


@pytest.mark.parametrize("src", [
    "A = P[:, ys]",                     # the grid, said plainly
    "A = P[[0, 2], [1, 3]]",            # two index vectors, neither the whole range
    "A = P[0:2, [1, 3, 0]]",            # not the whole range
    "A = P[0:3, [1, 3]]",               # lengths differ
    "A = P[0:3, 1:2]",                  # no index vector
    "A = P[0:3, 2]",
    "A = P[[true, true, true, true], ys]",   # a mask, not a vector of numbers
    "A = P[ys, :]",
    "A = reshape(0:3, 1, 4)[0:0, [0]]",      # n = 1: a pair and a grid agree
    "P[:, ys] = 0",
])
def test_no_note_for_other_indexing(src):
    _, _, err = run(IDIOM + src + "\n")
    assert err == "", err


def test_the_note_for_a_write_and_for_a_read_of_the_same_line_is_printed_once():
    g, _, err = run(IDIOM + "P[0:n-1, ys] -= 1\n")
    assert err.count("note:") == 1, err
    assert "put_along or add_along" in err
    want = np.arange(16.0).reshape(4, 4) - 1          # the whole grid: every element once
    np.testing.assert_array_equal(raw(g["P"]), want)


def test_notes_false_silences_and_notes_true_restores():
    _, _, err = run(IDIOM + "notes(false)\nA = P[0:n-1, ys]\nnotes(true)\nB = P[0:n-1, ys]\n")
    assert err.count("note:") == 1 and "<test>:7:5" in err, err


def test_a_session_remembers_the_lines_it_noted():
    interp, _, err = session()
    interp.run(IDIOM + "A = P[0:n-1, ys]\n", "<a>")
    interp.run("B = P[0:n-1, ys]\n", "<a>")            # another text on line 1 of the same name
    interp.run("B = P[0:n-1, ys]\n", "<a>")            # the same line again: no second note
    assert err.getvalue().count("note:") == 2


def _cli(args, env_extra=None):
    env = dict(os.environ, **(env_extra or {}))
    env.pop("TAPEML_NOTES", None) if not env_extra else None
    return subprocess.run([sys.executable, "-m", "tapeml", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)


def test_the_note_goes_to_standard_error_and_tapeml_notes_0_silences_it():
    src = IDIOM + "print(sum(P[0:n-1, ys]))\nprint(sum(take_along(P, ys)))"
    r = _cli(["-c", src])
    assert r.returncode == 0
    assert r.stdout == "120\n30\n"                     # the grid's sum, unchanged; then the pairs'
    assert r.stderr.count("note:") == 1 and "<string>:4:11: note:" in r.stderr, r.stderr
    r = _cli(["-c", src], {"TAPEML_NOTES": "0"})
    assert r.returncode == 0 and r.stdout == "120\n30\n" and r.stderr == ""


def test_notes_rejects_a_non_bool():
    e = error("\nnotes(0)")
    assert type(e).__name__ == "TypeErr" and (e.span.line, e.span.col) == (2, 1)


# ---- other libraries' names lead to the builtins -------------------------------------------------
@pytest.mark.parametrize("name, target", [
    ("gather", "take_along"), ("take_along_axis", "take_along"), ("take_along_dim", "take_along"),
    ("index_select", "take_along"), ("put_along_axis", "put_along"),
    ("scatter_add", "add_along"),
])
def test_foreign_names_lead_to_the_builtin(name, target):
    e = error(f"\ny = {name}(P, ys, 1)", P=np.eye(2), ys=np.zeros(2))
    assert type(e).__name__ == "NameErr" and (e.span.line, e.span.col) == (2, 5)
    assert e.message.startswith(f"undefined name '{name}'; tapeml writes ") and target in e.message
    _, out, _ = run(f'help("{name}")')
    assert out.startswith(f"'{name}' is not a tapeml name; tapeml writes ")
    assert f"\n\n{target}(x, ids" in out                # then the builtin's own help


def test_no_foreign_name_shadows_a_tapeml_name():
    """scatter is a plot; a name tapeml has is never answered with another library's meaning."""
    from tapeml.builtins.help import known_names
    from tapeml.builtins.registry import FOREIGN_NAMES
    interp, _, _ = session()
    assert not set(FOREIGN_NAMES) & set(known_names(interp))
    assert all(target is None or target in known_names(interp) for _, target in FOREIGN_NAMES.values())
