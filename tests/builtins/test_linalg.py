"""The Linear algebra builtins (builtins/linalg.py, primitives in lang/array/linalg_ops.py).

- finite differences for every differentiable builtin, batched inputs where they are supported,
  and the kinks (norm at 0, p = 1 at 0, p = inf ties);
- second order (grad of grad through inv, solve, det, against finite differences of the tape's gradient);
- PyTorch autograd: the fixture tests/reference/linalg.npz (make_linalg_reference.py) always, and the
  same cases regenerated live with another seed when torch is importable;
- values against NumPy, and the errors (singular, non-square, not positive definite, complex eig).

Inputs go to the session's backend (`dev`, fd.on_device) and results come back with `host`, so
`pytest --device torch:cpu` runs these on tensors; on NumPy nothing is converted.
"""
import importlib.util
import math
import os

import numpy as np
import pytest

from tapeml.array import backend as BE
from tapeml.array import ops
from tapeml.builtins import REGISTRY
from tapeml.array.tape import raw

from support import REFERENCE, run_ml
from fd import builtin as B, check_grads, fd_grad, grad, on_device as dev

REF = REFERENCE


rng = np.random.default_rng(0)


def host(v):
    """A result (a number, a matrix of any backend, or a tuple of them) on the host: NumPy."""
    r = raw(v)
    return tuple(host(x) for x in r) if isinstance(r, tuple) else BE.to_numpy(r)


def D(name):
    """The builtin `name` on the session's backend: NumPy arguments go there, results come back."""
    f = B(name)
    return lambda *args, **kw: host(f(*[dev(a) for a in args], **kw))


def wc(*shape):
    n = shape[-1]
    return rng.standard_normal(shape) + n * np.eye(n)


def spd(*shape):
    m = rng.standard_normal(shape)
    return m @ np.swapaxes(m, -1, -2) + shape[-1] * np.eye(shape[-1])


def sym(n):
    m = rng.standard_normal((n, n))
    return (m + m.T) / 2


def rn(*shape):
    return rng.standard_normal(shape)


# ---- finite differences, every D builtin ---------------------------------------------------------
FD_CASES = {
    "inv": (lambda a: B("inv")(a), [wc(3, 3)]),
    "inv/batched": (lambda a: B("inv")(a), [wc(2, 3, 3)]),
    "solve/vector": (lambda a, b: B("solve")(a, b), [wc(3, 3), rn(3)]),
    "solve/matrix": (lambda a, b: B("solve")(a, b), [wc(3, 3), rn(3, 2)]),
    "solve/batched vectors": (lambda a, b: B("solve")(a, b), [wc(2, 3, 3), rn(2, 3)]),
    "solve/batched matrices": (lambda a, b: B("solve")(a, b), [wc(2, 3, 3), rn(2, 3, 2)]),
    "solve/batch against one b": (lambda a, b: B("solve")(a, b), [wc(2, 3, 3), rn(3, 2)]),
    "det": (lambda a: B("det")(a), [wc(3, 3)]),
    "det/batched": (lambda a: B("det")(a), [wc(2, 3, 3)]),
    "det/singular": (lambda a: B("det")(a), [np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])]),
    "det/rank n-2": (lambda a: B("det")(a), [np.outer([1.0, 2, 3], [1.0, -1, 2])]),
    "slogdet": (lambda a: B("slogdet")(a)[1], [-wc(3, 3)]),
    "slogdet/batched": (lambda a: B("slogdet")(a)[1], [wc(2, 3, 3)]),
    "trace": (lambda a: B("trace")(a), [rn(3, 4)]),
    "trace/batched": (lambda a: B("trace")(a), [rn(2, 3, 3)]),
    "diag/vector": (lambda v: B("diag")(v), [rn(3)]),
    "diag/vector k=-1": (lambda v: B("diag")(v, -1), [rn(3)]),
    "diag/matrix": (lambda a: B("diag")(a), [rn(3, 4)]),
    "diag/matrix k=1": (lambda a: B("diag")(a, 1), [rn(3, 4)]),
    "norm/vector": (lambda v: B("norm")(v), [rn(5)]),
    "norm/p=1": (lambda v: B("norm")(v, 1), [rn(5)]),
    "norm/p=inf": (lambda v: B("norm")(v, math.inf), [rn(5)]),
    "norm/p=3": (lambda v: B("norm")(v, 3), [rn(5)]),
    "norm/fro": (lambda a: B("norm")(a), [rn(3, 4)]),
    "norm/spectral": (lambda a: B("norm")(a, 2), [rn(3, 4)]),
    "norm/nuc": (lambda a: B("norm")(a, "nuc"), [rn(4, 3)]),
    "norm/matrix 1": (lambda a: B("norm")(a, 1), [rn(3, 4)]),
    "norm/matrix inf": (lambda a: B("norm")(a, math.inf), [rn(3, 4)]),
    "norm/rows": (lambda a: B("norm")(a, dim=-1, keepdims=True), [rn(3, 4)]),
    "norm/3 axes": (lambda a: B("norm")(a), [rn(2, 3, 2)]),
    "cholesky": (lambda a: B("cholesky")(a), [spd(3, 3)]),
    "cholesky/batched": (lambda a: B("cholesky")(a), [spd(2, 3, 3)]),
    "qr/tall": (lambda a: B("qr")(a), [rn(5, 3)]),
    "qr/square": (lambda a: B("qr")(a), [wc(3, 3)]),
    "qr/batched": (lambda a: B("qr")(a), [rn(2, 4, 3)]),
    # an exact 0 below the diagonal, and a tridiagonal symmetric matrix: LAPACK's signs would jump here
    "qr/upper triangular": (lambda a: B("qr")(a), [np.array([[2.0, 1.0], [0.0, 3.0], [0.0, 0.0]])]),
    "eigh/tridiagonal": (lambda a: B("eigh")(a), [np.array([[4.0, 1, 0], [1, 2, 1], [0, 1, -1]])]),
    "svd/diagonal": (lambda a: B("svd")(a), [np.array([[3.0, 0, 0], [0, -2, 0], [0, 0, 1]])]),
    "svd/tall": (lambda a: B("svd")(a), [rn(5, 3)]),
    "svd/wide": (lambda a: B("svd")(a), [rn(3, 5)]),
    "svd/square": (lambda a: B("svd")(a), [rn(3, 3)]),
    "svd/batched": (lambda a: B("svd")(a), [rn(2, 4, 3)]),
    # a symmetric function of a repeated spectrum is smooth: its gradient goes through the values alone
    "svd/values of a repeated spectrum": (lambda a: ops.sum_(B("svd")(a)[1]), [np.eye(3) * 2.0]),
    "eigh": (lambda a: B("eigh")(a), [sym(4)]),
    "eigh/batched": (lambda a: B("eigh")(a), [np.stack([sym(3), sym(3)])]),
    "eigh/values of a repeated spectrum": (lambda a: ops.sum_(ops.mul(B("eigh")(a)[0], B("eigh")(a)[0])), [np.eye(3)]),
    "pinv/tall": (lambda a: B("pinv")(a), [rn(5, 3)]),
    "pinv/wide": (lambda a: B("pinv")(a), [rn(3, 5)]),
    "pinv/batched": (lambda a: B("pinv")(a), [rn(2, 4, 3)]),
    "lstsq/vector": (lambda a, b: B("lstsq")(a, b), [rn(6, 3), rn(6)]),
    "lstsq/matrix": (lambda a, b: B("lstsq")(a, b), [rn(6, 3), rn(6, 2)]),
    "outer": (lambda x, y: B("outer")(x, y), [rn(3), rn(4)]),
    "kron/matrices": (lambda a, b: B("kron")(a, b), [rn(2, 3), rn(3, 2)]),
    "kron/vectors": (lambda a, b: B("kron")(a, b), [rn(2), rn(3)]),
    "kron/vector and matrix": (lambda a, b: B("kron")(a, b), [rn(2), rn(2, 2)]),
}


@pytest.mark.parametrize("name", list(FD_CASES))
def test_finite_differences(name):
    f, inputs = FD_CASES[name]
    check_grads(f, *inputs)


def test_every_linalg_builtin_is_covered():
    linalg = {n for n, b in REGISTRY.items() if b.category == "Linear algebra"}
    assert linalg == {"inv", "solve", "det", "slogdet", "trace", "diag", "norm", "cholesky", "qr", "svd", "eigh",
                      "eig", "pinv", "lstsq", "outer", "kron"}
    differentiable = {n for n in linalg if REGISTRY[n].differentiable}
    assert differentiable == linalg - {"eig"}
    assert differentiable <= {k.split("/")[0] for k in FD_CASES}


# ---- kinks ------------------------------------------------------------------------------------
def test_norm_gradient_at_zero_is_zero():
    for p in (None, 1, 2, 3, math.inf):
        g = host(grad(lambda v, p=p: B("norm")(v, p), dev(np.zeros(3))))
        assert g.tolist() == [0.0, 0.0, 0.0], p
    assert np.array_equal(host(grad(lambda a: B("norm")(a), dev(np.zeros((2, 2))))), np.zeros((2, 2)))
    # one zero row among vector norms per row: that row's gradient is 0, the other is x / |x|
    x = np.array([[0.0, 0.0], [3.0, 4.0]])
    g = host(grad(lambda a: ops.sum_(B("norm")(a, dim=1)), dev(x)))
    assert g[0].tolist() == [0.0, 0.0] and np.allclose(g[1], [0.6, 0.8])


def test_norm_inf_ties_split_evenly():
    g = host(grad(lambda v: B("norm")(v, math.inf), dev(np.array([3.0, -3.0, 1.0]))))
    assert g.tolist() == [0.5, -0.5, 0.0]


def test_det_gradient_at_singular_matrices_is_the_adjugate():
    a = np.array([[1.0, 2.0], [2.0, 4.0]])
    assert np.allclose(host(grad(lambda m: B("det")(m), dev(a))), [[4.0, -2.0], [-2.0, 1.0]])
    assert np.allclose(host(grad(lambda m: B("det")(m), dev(np.zeros((3, 3))))), 0.0)


# ---- second order ------------------------------------------------------------------------------
SECOND = {
    "inv": (lambda a: ops.sum_(ops.mul(B("inv")(a), dev(np.arange(9.0).reshape(3, 3)))), wc(3, 3)),
    "solve/A": (lambda a: ops.sum_(ops.mul(B("solve")(a, dev(np.array([1.0, -2.0, 0.5]))), dev(np.array([1.0, 2.0, 3.0])))),
                wc(3, 3)),
    "solve/b": (lambda b, A=wc(3, 3): ops.sum_(ops.mul(B("solve")(dev(A), ops.mul(b, b)), dev(np.array([1.0, 2.0, 3.0])))),
                rn(3)),
    "det": (lambda a: B("det")(a), wc(3, 3)),
    "slogdet": (lambda a: B("slogdet")(a)[1], wc(3, 3)),
    "cholesky": (lambda a: ops.sum_(ops.mul(B("cholesky")(a), dev(np.arange(9.0).reshape(3, 3)))), spd(3, 3)),
    "pinv": (lambda a: ops.sum_(ops.mul(B("pinv")(a), dev(np.arange(6.0).reshape(2, 3)))), rn(3, 2)),
    "norm": (lambda v: B("norm")(v), rn(4)),
}


@pytest.mark.parametrize("name", list(SECOND))
def test_grad_of_grad(name):
    f, x = SECOND[name]
    w = np.random.default_rng(3).standard_normal(x.shape)

    def inner(t):       # a scalar of the first gradient: sum(grad f(t) * w)
        return ops.sum_(ops.mul(grad(f, t), dev(w)))
    tape = host(grad(inner, dev(x)))
    fd = fd_grad(lambda t: inner(t), x, h=1e-5)
    err = np.max(np.abs(tape - fd) / np.maximum(1.0, np.abs(fd)))
    assert err < 1e-5, (err, tape, fd)


# ---- PyTorch: the fixture, and live ------------------------------------------------------------
def _spec():
    spec = importlib.util.spec_from_file_location("make_linalg_reference", os.path.join(REF, "make_linalg_reference.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _svd_tm(a, c):
    u, s, vh = B("svd")(a)
    return s, ops.matmul(ops.mul(u, c), vh)


def _eigh_tm(a, c):
    w, v = B("eigh")(a)
    return w, ops.matmul(ops.mul(v, c), ops.transpose(v))


TAPEML = {
    "inv": lambda a: (B("inv")(a),), "inv_batched": lambda a: (B("inv")(a),),
    "solve_vec": lambda a, b: (B("solve")(a, b),), "solve_mat": lambda a, b: (B("solve")(a, b),),
    "solve_batched": lambda a, b: (B("solve")(a, b),),
    "det": lambda a: (B("det")(a),), "det_batched": lambda a: (B("det")(a),),
    "slogdet": lambda a: (B("slogdet")(a)[1],),
    "trace": lambda a: (B("trace")(a),), "diag_vec": lambda v: (B("diag")(v),), "diag_mat": lambda a: (B("diag")(a),),
    "norm_vec": lambda v: (B("norm")(v),), "norm_fro": lambda a: (B("norm")(a),),
    "norm_2": lambda a: (B("norm")(a, 2),), "norm_nuc": lambda a: (B("norm")(a, "nuc"),),
    "norm_rows": lambda a: (B("norm")(a, dim=-1),), "norm_1": lambda v: (B("norm")(v, 1),),
    "cholesky": lambda a: (B("cholesky")(a),), "cholesky_batched": lambda a: (B("cholesky")(a),),
    "qr": lambda a: B("qr")(a), "qr_square": lambda a: B("qr")(a),
    "svd_tall": _svd_tm, "svd_wide": _svd_tm, "eigh": _eigh_tm,
    "pinv": lambda a: (B("pinv")(a),), "pinv_wide": lambda a: (B("pinv")(a),),
    "lstsq": lambda a, b: (B("lstsq")(a, b),),
    "outer": lambda x, y: (B("outer")(x, y),), "kron": lambda a, b: (B("kron")(a, b),),
}


def compare_with_reference(data, tol=1e-9):
    names = sorted({k.split(".")[0] for k in data})
    assert set(names) == set(TAPEML)
    for name in names:
        n_in = len([k for k in data if k.startswith(name + ".in")])
        ins = [dev(np.asarray(data[f"{name}.in{i}"])) for i in range(n_in)]
        outs = TAPEML[name](*ins)
        Rs = [dev(np.asarray(data[f"{name}.R{j}"])) for j in range(len(outs))]
        for j, y in enumerate(outs):
            want = np.asarray(data[f"{name}.out{j}"])
            assert np.allclose(host(y), want, rtol=tol, atol=tol), (name, j)
        for i in range(n_in):
            def loss(x, i=i):
                args = list(ins)
                args[i] = x
                total = 0.0
                for y, R in zip(TAPEML[name](*args), Rs):
                    total = ops.add(total, ops.sum_(ops.mul(y, R)))
                return total
            g = host(grad(loss, ins[i]))
            want = np.asarray(data[f"{name}.grad{i}"])
            assert np.allclose(g, want, rtol=tol, atol=tol), (name, i, g, want)


def test_pytorch_fixture():
    with np.load(os.path.join(REF, "linalg.npz")) as data:
        compare_with_reference(dict(data))


def test_pytorch_live():
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    compare_with_reference(_spec().make(7))


# ---- values against NumPy ---------------------------------------------------------------------
def test_values_against_numpy():
    a, b = wc(4, 4), rn(4)
    assert np.allclose(D("inv")(a), np.linalg.inv(a))
    assert np.allclose(D("solve")(a, b), np.linalg.solve(a, b))
    assert np.isclose(D("det")(a), np.linalg.det(a))
    assert np.allclose(D("slogdet")(a), np.linalg.slogdet(a))
    m = rn(5, 3)
    for p, ordv in [(None, None), ("fro", "fro"), ("nuc", "nuc"), (1, 1), (2, 2), (math.inf, np.inf)]:
        assert np.isclose(D("norm")(m, p), np.linalg.norm(m, ordv)), p
    v = rn(6)
    for p in (None, 1, 2, 3, math.inf):
        assert np.isclose(D("norm")(v, p), np.linalg.norm(v, p)), p
    assert np.allclose(D("norm")(m, dim=0), np.linalg.norm(m, axis=0))
    assert np.allclose(D("norm")(m, dim=1, keepdims=True), np.linalg.norm(m, axis=1, keepdims=True))
    q, r = D("qr")(m)
    nq, nr = np.linalg.qr(m)
    d = np.sign(np.diag(nr))                   # tapeml's R has a diagonal >= 0; NumPy's LAPACK signs
    assert np.allclose(q, nq * d) and np.allclose(r, nr * d[:, None]) and np.all(np.diag(r) >= 0)
    u, s, vh = D("svd")(m)
    assert np.allclose(s, np.linalg.svd(m, compute_uv=False))
    assert np.allclose((u * s) @ vh, m) and np.allclose(u.T @ u, np.eye(3))
    w, V = D("eigh")(sym(4))
    assert np.all(np.diff(w) > 0)
    assert np.allclose(D("pinv")(m), np.linalg.pinv(m))
    assert np.allclose(D("lstsq")(m, rn(5)) if False else D("lstsq")(m, np.arange(5.0)),
                       np.linalg.lstsq(m, np.arange(5.0), rcond=None)[0])
    assert np.allclose(D("kron")(rn(2, 3), np.ones((2, 2))).shape, (4, 6))
    x, y = rn(2, 3), rn(3, 2)
    assert np.allclose(D("kron")(x, y), np.kron(x, y))
    assert np.allclose(D("kron")(np.array([1.0, 2]), y), np.kron([1.0, 2], y))
    assert np.allclose(D("outer")(x, np.arange(3.0)), np.outer(x, np.arange(3.0)))
    assert np.allclose(D("diag")(np.arange(3.0), 2), np.diag(np.arange(3.0), 2))
    assert np.allclose(D("diag")(x, -1), np.diag(x, -1))
    assert D("trace")(x) == np.trace(x)
    L = D("cholesky")(spd(3, 3))
    assert np.allclose(L, np.tril(L))
    w, V = D("eig")(np.array([[2.0, 1.0], [0.0, 3.0]]))
    assert sorted(w.tolist()) == [2.0, 3.0]


# ---- errors, as the user sees them --------------------------------------------------------------
ERRORS = [
    ("inv([1, 2; 2, 4])", "ValueError: inv(): A is singular"),
    ("inv([1, 2; 2, 4 + 1e-15])", "singular to working precision: its condition number (largest / smallest "
                                  "singular value) is at or past 1/eps = 4.5e15 for float64"),
    ("inv(zeros(3, 3))", "ValueError: inv(): A is singular to working precision"),
    ("solve([1, 2; 2, 4], [1, 1])", "ValueError: solve(): A is singular"),
    ("solve([1, 1; 1, 1 + 4e-16], [1, 1])", "1/eps = 4.5e15 for float64"),
    ("inv([1, 2, 3; 4, 5, 6])", "ShapeError: inv(): A must be square, got 2x3 (2 rows, 3 columns)"),
    ("solve([1, 2, 3; 4, 5, 6], [1, 2])", "ShapeError: solve(): A must be a square matrix"),
    ("solve([1, 2; 3, 4], [1, 2, 3])", "ShapeError: solve(): A is 2x2 and b is a vector of length 3"),
    ("det([1, 2, 3])", "ShapeError: det(): A must be a matrix"),
    ("cholesky([1, 2; 2, 1])", "ValueError: cholesky(): A is not positive definite: its smallest eigenvalue is -1"),
    ("cholesky([1, 1; 1, 1])", "its smallest eigenvalue is 0 to working precision (all must be > 0)"),
    ("eig([0, -1; 1, 0])", "ValueError: eig(): A has complex eigenvalues (e.g. 0 + 1i)"),
    ("inv([1, 0 / 0; 0, 1])", "ValueError: inv(): A holds nan (at [0, 1])"),
    ('norm([1, 2], "fro")', 'p = "fro" is a matrix norm'),
    ("norm([1, 2], 0)", "norm(): p must be > 0"),
    ("norm([1, 2; 3, 4], 3)", "a matrix norm is none"),
    ("diag(zeros(2, 2, 2))", "ShapeError: diag(): x must be a vector or a matrix"),
    ("lstsq([1, 2; 3, 4], [1, 2, 3])", "ShapeError: lstsq(): A is 2x2 and b is a vector of length 3"),
    ("grad(fn(a) -> sum(eig(a)[0]), [2, 1; 0, 3])", "eig() is forward only"),
    ("grad(fn(a) -> sum(qr(a)[1]), [1, 2, 3; 4, 5, 6])", "the gradient of qr is implemented for m >= n"),
    ("inv(inv([1, 2; 2, 4]))", "^^^"),
    # results go through the size guard: a batch of A against a batch of b
    ("solve(ones(100000, 1, 1) + 1, ones(1, 1, 100000))", "(a result of 100000x1x100000) would need 80 GB"),
    ("outer(ones(100000), ones(100000))", "would need 80 GB"),
    ("kron(ones(1000, 1000), ones(100, 100))", "GB of float64"),
]


@pytest.mark.parametrize("src, want", ERRORS)
def test_errors(src, want):
    code, out = run_ml(src)
    assert code == 1, out
    assert want in out, out
    assert "Traceback" not in out and "LinAlgError" not in out


def test_singular_messages_print_no_rounding_noise():
    """Past 1/eps the smallest singular value is rounding noise (2.52e16 on one machine's BLAS,
    4.8e16 on another's, sometimes exactly 0): the message names the bound only, so every singular
    matrix gets the same words, on every machine. The same for a noise-level eigenvalue."""
    def message(src):
        code, out = run_ml(src)
        assert code == 1, out
        return out.split("\n")[0].split(": ", 1)[1]
    texts = {message(f"inv({a})") for a in ("[1, 2; 2, 4]", "[1, 1; 1, 1]", "zeros(2, 2)", "[1, 2; 2, 4 + 1e-15]",
                                            "[3, 6; 1, 2] / 7")}
    assert texts == {"ValueError: inv(): A is singular to working precision: its condition number (largest / "
                     "smallest singular value) is at or past 1/eps = 4.5e15 for float64, so a solution would be "
                     "meaningless. For a least-squares answer use lstsq or pinv"}
    w = np.linalg.eigvalsh(np.array([[1.0, 1.0], [1.0, 1.0]]) / 3)
    assert abs(w[0]) < 1e-15          # NumPy's smallest eigenvalue: 0 up to rounding noise
    assert {message(f"cholesky({a})") for a in ("[1, 1; 1, 1] / 3", "[1, 2; 2, 4]", "zeros(2, 2)")} == {
        "ValueError: cholesky(): A is not positive definite: its smallest eigenvalue is 0 to working precision "
        "(all must be > 0)"}


def test_float32_singular_threshold_uses_float32_eps():
    code, out = run_ml('set_dtype("float32")\ninv([1, 1; 1, 1.0000002])')
    assert code == 1 and "for float32" in out, out
    code, out = run_ml('set_dtype("float64")\ninv([1, 1; 1, 1.0000002])')       # cond 2e7: fine in float64
    assert code == 0, out


@pytest.mark.parametrize("name", ["inv", "det", "slogdet", "trace", "diag", "norm", "cholesky", "qr", "svd", "eigh",
                                  "eig", "pinv"])
def test_empty_matrices(name):
    for shape in ((0, 0), (2, 0, 0), (0, 3), (3, 0)):
        code, out = run_ml(f"print({name}(zeros({', '.join(map(str, shape))})))")
        assert "Traceback" not in out and "python" not in out.lower(), out
        assert code == 0 or "ShapeError" in out, out
    assert [np.shape(x) for x in D("svd")(np.zeros((0, 3)))] == [(0, 0), (0,), (0, 3)]
    assert [np.shape(x) for x in D("eigh")(np.zeros((2, 0, 0)))] == [(2, 0), (2, 0, 0)]


def test_norm_of_empty_arrays_is_zero():
    for p in (None, 1, 2, 3, math.inf):
        assert D("norm")(np.zeros(0), p) == 0.0
    for p in (None, "fro", "nuc", 1, 2, math.inf):
        assert D("norm")(np.zeros((0, 3)), p) == 0.0 and D("norm")(np.zeros((3, 0)), p) == 0.0
    assert D("norm")(np.zeros((3, 0)), math.inf, dim=1).tolist() == [0.0, 0.0, 0.0]
    assert D("norm")(np.zeros((0, 3)), dim=0, keepdims=True).tolist() == [[0.0, 0.0, 0.0]]
