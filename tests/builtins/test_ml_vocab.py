"""Issue 20's ML vocabulary, autodiff products and axis controls.

- PyTorch: the fixture tests/reference/ml.npz (make_ml_reference.py) for every loss, einsum and
  batch_norm, values and gradients, always; the same cases regenerated live with another seed
  when torch is importable;
- finite differences for every differentiable builtin (batched inputs, the kink of
  binary_cross_entropy_with_logits at 0, zero vectors of cosine_similarity, 0 log 0 in kl_div);
- jacobian, hessian, vjp, jvp against finite differences and (live) torch.autograd.functional;
- the errors, as the user sees them.
"""
import importlib.util
import os

import numpy as np
import pytest

from tapeml.array import backend as _backend, ops
from tapeml.array.tape import raw

from support import REFERENCE, run_ml

REF = REFERENCE
HAVE_TORCH = importlib.util.find_spec("torch") is not None

import sys  # noqa: E402
sys.path.insert(0, REF)
import make_ml_reference as mk  # noqa: E402
from fd import builtin, fd_jacobian, grad as _grad  # noqa: E402


def dev(v):
    """NumPy arrays (in tuples) as matrices of the session's device (TAPEML_DEVICE, pytest
    --device): the same cases run on every backend."""
    be = _backend.current()
    if be is _backend.NUMPY:
        return v
    if type(v) is np.ndarray:
        return be.asarray(v, np.float64 if v.dtype.kind in "iu" else None)
    if type(v) is tuple:
        return tuple(dev(x) for x in v)
    return v


def B(name):
    """The builtin `name` as a Python function, its matrix arguments on the session's device."""
    f = builtin(name)
    return lambda *args, **kw: f(*[dev(a) for a in args], **{k: dev(v) for k, v in kw.items()})


def grad(f, x):
    return _grad(f, dev(x))


def tapeml_outputs(name, a):
    """tapeml's results for the fixture case `name` (a tuple, as torch_outputs)."""
    if name == "mse":
        return (B("mse_loss")(a[0], a[1]),)
    if name == "bce":
        return (B("binary_cross_entropy")(a[0], a[1]),)
    if name == "bce_logits":
        return (B("binary_cross_entropy_with_logits")(a[0], a[1]),)
    if name in ("kl_mat", "kl_vec"):
        return (B("kl_div")(a[0], a[1]),)
    if name in ("ce_ls", "ce_ls_vec"):
        return (B("cross_entropy")(a[0], a[1], label_smoothing=0.1),)
    if name == "cos":
        return (B("cosine_similarity")(a[0], a[1]),)
    if name == "cos_dim0":
        return (B("cosine_similarity")(a[0], a[1], dim=0),)
    if name.startswith("bn_"):
        return B("batch_norm")(*a, training=name != "bn_eval")
    if name in mk.EINSUMS:
        return (B("einsum")(mk.EINSUMS[name][0], a[0], a[1]),)
    raise KeyError(name)


def grad_outputs(name):
    """The results PyTorch's loss weighs: its running statistics are buffers without gradient."""
    return [0] if name.startswith("bn_") else None


def compare(fix, name, diff):
    ins = [fix[f"{name}.in{i}"] for i in range(len([k for k in fix if k.startswith(name + ".in")]))]
    ins = [float(v) if v.ndim == 0 else v for v in ins]
    outs = tapeml_outputs(name, ins)
    for j, o in enumerate(outs):
        np.testing.assert_allclose(_backend.to_numpy(raw(o)), fix[f"{name}.out{j}"], rtol=1e-10, atol=1e-12,
                                   err_msg=f"{name} output {j}")
    keep = grad_outputs(name) or range(len(outs))
    for i in diff:
        def loss(xi, i=i):
            args = list(ins)
            args[i] = xi
            res = tapeml_outputs(name, args)
            tot = 0.0
            for j in keep:
                tot = ops.add(tot, ops.sum_(ops.mul(res[j], dev(fix[f"{name}.R{j}"]))))
            return tot
        g = grad(loss, ins[i])
        np.testing.assert_allclose(_backend.to_numpy(raw(g)), fix[f"{name}.grad{i}"], rtol=1e-9, atol=1e-11,
                                   err_msg=f"{name} gradient of input {i}")


CASES = mk.inputs(0)


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_pytorch_fixture(name):
    fix = dict(np.load(os.path.join(REF, "ml.npz")))
    compare(fix, name, CASES[name][1])


@pytest.mark.skipif(not HAVE_TORCH, reason="torch not installed (the fixture test still runs)")
def test_against_pytorch_live_other_seed():
    fix = mk.make(7)
    for name, (_, diff) in mk.inputs(7).items():
        compare(fix, name, diff)


# ---- finite differences -----------------------------------------------------------------------

def fd_check(f, x, h=1e-6, tol=1e-6):
    """grad of f at x (a float or an array) against central differences."""
    x = np.asarray(x, dtype=np.float64)
    g = np.asarray(_backend.to_numpy(raw(grad(f, x if x.ndim else float(x)))), dtype=np.float64)
    num = np.zeros_like(x)
    for i in range(x.size):
        xp, xm = x.copy(), x.copy()
        xp.flat[i] += h
        xm.flat[i] -= h
        fp = f(xp if x.ndim else float(xp))
        fm = f(xm if x.ndim else float(xm))
        num.flat[i] = (float(raw(fp)) - float(raw(fm))) / (2 * h)
    err = np.max(np.abs(g - num) / np.maximum(np.maximum(np.abs(g), np.abs(num)), 1.0)) if x.size else 0.0
    assert err < tol, (g, num)


def weighted(res, seed=3):
    """sum(out * R) over every result, with fixed weights R (every element seen)."""
    rng = np.random.default_rng(seed)
    outs = res if isinstance(res, tuple) else (res,)
    tot = 0.0
    for o in outs:
        s = ops.shape_of(o)
        R = rng.standard_normal(s) if s else float(rng.standard_normal())
        tot = ops.add(tot, ops.sum_(ops.mul(o, dev(R))))
    return tot


rng0 = np.random.default_rng(11)
FD = {
    "mse_loss": lambda x: B("mse_loss")(x, np.ones((2, 3, 2))),
    "mse_loss_target": lambda t: B("mse_loss")(np.arange(6.0).reshape(2, 3), t),
    "bce": lambda p: B("binary_cross_entropy")(p, np.array([[1, 0, 0.3], [0, 1, 1]])),
    "bce_targets": lambda t: B("binary_cross_entropy")(np.array([0.2, 0.7, 0.5]), t),
    "bce_logits": lambda z: B("binary_cross_entropy_with_logits")(z, np.array([[1, 0, 0.3], [0, 1, 1]])),
    "bce_logits_targets": lambda t: B("binary_cross_entropy_with_logits")(np.array([-3.0, 0.0, 40.0]), t),
    "kl_div_logq": lambda lq: B("kl_div")(lq, np.array([[0.2, 0.0, 0.8], [0.5, 0.25, 0.25]])),
    "kl_div_p": lambda p: B("kl_div")(np.log(np.array([[0.3, 0.3, 0.4], [0.1, 0.6, 0.3]])), p),
    "kl_div_3d": lambda lq: B("kl_div")(lq, np.full((2, 2, 3), 1 / 3)),
    "ce_ls": lambda z: B("cross_entropy")(z, np.array([[0.0, 2.0], [1.0, 1.0]]), label_smoothing=0.3),
    "cos": lambda a: weighted(B("cosine_similarity")(a, np.array([[1.0, 2, 3], [-1, 0, 2]]))),
    "cos_batched": lambda a: weighted(B("cosine_similarity")(a, np.array([1.0, -2, 0.5]))),
    "cos_dim0": lambda a: weighted(B("cosine_similarity")(a, np.ones((2, 1)), dim=0)),
    "einsum_a": lambda a: weighted(B("einsum")("bij,bjk->bik", a, np.arange(12.0).reshape(2, 3, 2))),
    "einsum_b": lambda b: weighted(B("einsum")("ij,kj->ik", np.arange(6.0).reshape(2, 3), b)),
    "einsum_perm": lambda a: weighted(B("einsum")("ijk,k->ji", a, np.array([1.0, -1, 2]))),
    "einsum_dot": lambda a: B("einsum")("i,i->", a, np.array([1.0, -1, 2])),
    "bn_train": lambda x: weighted(B("batch_norm")(x, np.array([1.0, 2, 0.5]), np.zeros(3), np.zeros(3),
                                                   np.ones(3))),
    "bn_train_gamma": lambda g: weighted(B("batch_norm")(np.arange(12.0).reshape(4, 3) ** 1.5, g, np.zeros(3),
                                                         np.zeros(3), np.ones(3))),
    "bn_eval_stats": lambda rv: weighted(B("batch_norm")(np.ones((2, 3)), np.ones(3), np.zeros(3), np.zeros(3),
                                                         rv, training=False)),
}
FD_AT = {
    "mse_loss": rng0.standard_normal((2, 3, 2)), "mse_loss_target": rng0.standard_normal((2, 3)),
    "bce": rng0.uniform(0.1, 0.9, (2, 3)), "bce_targets": np.array([0.1, 0.9, 0.4]),
    "bce_logits": np.array([[0.0, -2.0, 5.0], [30.0, -30.0, 0.5]]),  # 0: no kink; +-30: saturated
    "bce_logits_targets": np.array([0.1, 0.5, 0.9]),
    "kl_div_logq": np.log(np.array([[0.3, 0.3, 0.4], [0.1, 0.6, 0.3]])),
    "kl_div_p": np.array([[0.2, 0.1, 0.7], [0.5, 0.25, 0.25]]),
    "kl_div_3d": rng0.standard_normal((2, 2, 3)),
    "ce_ls": rng0.standard_normal((2, 2, 4)),
    "cos": rng0.standard_normal((2, 3)), "cos_batched": rng0.standard_normal((4, 3)),
    "cos_dim0": rng0.standard_normal((2, 3)),
    "einsum_a": rng0.standard_normal((2, 2, 3)), "einsum_b": rng0.standard_normal((4, 3)),
    "einsum_perm": rng0.standard_normal((2, 4, 3)), "einsum_dot": rng0.standard_normal(3),
    "bn_train": rng0.standard_normal((5, 3)), "bn_train_gamma": rng0.standard_normal(3),
    "bn_eval_stats": rng0.uniform(0.5, 2, 3),
}


@pytest.mark.parametrize("case", sorted(FD))
def test_finite_differences(case):
    fd_check(FD[case], FD_AT[case])


def test_bce_with_logits_is_sigmoid_minus_target_at_zero_and_stable_far_out():
    g = grad(lambda z: B("binary_cross_entropy_with_logits")(z, np.array([1.0, 0.0])), np.zeros(2))
    np.testing.assert_allclose(raw(g), [(0.5 - 1) / 2, 0.5 / 2], rtol=1e-15)
    assert float(raw(B("binary_cross_entropy_with_logits")(np.array([1000.0, -1000.0]), np.array([0.0, 1.0])))) == 1000.0
    assert float(raw(B("binary_cross_entropy")(np.array([0.0, 1.0]), np.array([1.0, 0.0])))) == 100.0


def test_kl_div_zero_log_zero_and_cosine_zero_vector():
    assert float(raw(B("kl_div")(np.log(np.array([1.0, 0.0])), np.array([1.0, 0.0])))) == 0.0
    g = grad(lambda lq: B("kl_div")(lq, np.array([1.0, 0.0])), np.array([0.0, -np.inf]))
    np.testing.assert_array_equal(raw(g), [-1.0, 0.0])
    assert float(raw(B("cosine_similarity")(np.zeros(3), np.ones(3)))) == 0.0
    g = grad(lambda a: B("cosine_similarity")(a, np.array([1.0, 1.0])), np.zeros(2))
    np.testing.assert_allclose(raw(g), np.array([1.0, 1.0]) / np.sqrt(2) / 1e-8)   # PyTorch's: b/|b| / eps


def test_one_hot_sinusoidal_randperm():
    np.testing.assert_array_equal(raw(B("one_hot")(np.array([2.0, 0.0]), 3)), [[0, 0, 1], [1, 0, 0]])
    pe = raw(B("sinusoidal_positions")(7, 6))
    pos, i = np.arange(7)[:, None], np.arange(3)[None, :]
    np.testing.assert_allclose(pe[:, 0::2], np.sin(pos / 10000 ** (2 * i / 6)), rtol=1e-15)
    np.testing.assert_allclose(pe[:, 1::2], np.cos(pos / 10000 ** (2 * i / 6)), rtol=1e-15)
    code, out = run_ml("seed(3)\np = randperm(50)\nprint(all(sum(one_hot(p, 50), dim=0) == 1), any(p != 0:49))\n"
                       "seed(3)\nprint(all(randperm(50) == p))")
    assert (code, out) == (0, "true true\ntrue\n")
    np.random.default_rng(3)
    code, out = run_ml("seed(3)\nprint(randperm(5))")
    assert out.strip() == "[" + ", ".join(str(int(v)) for v in np.random.default_rng(3).permutation(5)) + "]"


# ---- jacobian, hessian, vjp, jvp --------------------------------------------------------------

A = np.random.default_rng(5).standard_normal((4, 3))


def f_vec(x):                       # R^3 -> R^4
    return ops.tanh(ops.matmul(dev(A), ops.sin(x)))


def f_mat(X):                       # [2, 3] -> [2, 2]
    return ops.matmul(X, ops.transpose(ops.mul(X, X)))


def f_scalar(x):                    # R^3 -> R
    return ops.add(ops.sum_(ops.exp(ops.matmul(dev(A), x))), ops.sum_(ops.mul(ops.mul(x, x), ops.mul(x, x))))


X3 = np.array([0.3, -1.2, 0.7])
X23 = np.array([[0.5, -1.0, 2.0], [1.5, 0.2, -0.3]])


def test_jacobian_against_finite_differences_and_shapes():
    J = np.asarray(raw(B("jacobian")(f_vec, X3)))
    assert J.shape == (4, 3)
    np.testing.assert_allclose(J, fd_jacobian(f_vec, X3), rtol=1e-7, atol=1e-9)
    J = np.asarray(raw(B("jacobian")(f_mat, X23)))
    assert J.shape == (2, 2, 2, 3)                # out_shape + in_shape, as torch.autograd.functional
    np.testing.assert_allclose(J, fd_jacobian(f_mat, X23), rtol=1e-7, atol=1e-9)
    assert raw(B("jacobian")(lambda x: ops.mul(x, x), 3.0)) == 6.0


def test_hessian_against_finite_differences_of_the_gradient():
    H = np.asarray(raw(B("hessian")(f_scalar, X3)))
    assert H.shape == (3, 3)
    Hn = fd_jacobian(lambda x: grad(f_scalar, x), X3)
    np.testing.assert_allclose(H, Hn, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(H, H.T, rtol=1e-12)


def test_vjp_jvp_against_the_jacobian():
    J = fd_jacobian(f_mat, X23)
    v_out = np.array([[1.0, -2.0], [0.5, 3.0]])
    v_in = np.array([[0.1, 0.2, -0.3], [1.0, 0.0, 2.0]])
    y, g = B("vjp")(f_mat, X23, v_out)
    np.testing.assert_allclose(raw(y), raw(f_mat(X23)))
    np.testing.assert_allclose(raw(g), np.tensordot(v_out, J, axes=2), rtol=1e-7, atol=1e-9)
    y, t = B("jvp")(f_mat, X23, v_in)
    np.testing.assert_allclose(raw(t), np.tensordot(J, v_in, axes=2), rtol=1e-7, atol=1e-9)
    # jvp is exact (double vjp), not a finite difference: equal to the tape's jacobian to rounding
    Jt = np.asarray(raw(B("jacobian")(f_mat, X23)))
    np.testing.assert_allclose(raw(t), np.tensordot(Jt, v_in, axes=2), rtol=1e-14, atol=1e-14)
    y, t = B("jvp")(lambda x: ops.sin(x), 0.0, 1.0)
    assert (y, t) == (0.0, 1.0)


def test_products_nest_in_grad():
    """grad through jacobian and jvp (the products are recorded on the tape)."""
    def through_jvp(x):
        return ops.sum_(B("jvp")(f_vec, x, np.array([1.0, 0.0, 2.0]))[1])
    def through_jac(x):
        return ops.sum_(B("jacobian")(f_vec, x))
    for f in (through_jvp, through_jac):
        fd_check(f, X3)


@pytest.mark.skipif(not HAVE_TORCH, reason="torch not installed")
def test_against_torch_autograd_functional():
    import torch
    import torch.autograd.functional as taf
    At = torch.tensor(A)
    tv = lambda x: torch.tanh(At @ torch.sin(x))
    tm = lambda X: X @ (X * X).T
    ts = lambda x: torch.exp(At @ x).sum() + (x ** 4).sum()
    x3, x23 = torch.tensor(X3), torch.tensor(X23)
    np.testing.assert_allclose(raw(B("jacobian")(f_vec, X3)), taf.jacobian(tv, x3).numpy(), rtol=1e-12)
    np.testing.assert_allclose(raw(B("jacobian")(f_mat, X23)), taf.jacobian(tm, x23).numpy(), rtol=1e-12)
    np.testing.assert_allclose(raw(B("hessian")(f_scalar, X3)), taf.hessian(ts, x3).numpy(), rtol=1e-12)
    v_out = np.array([[1.0, -2.0], [0.5, 3.0]])
    v_in = np.array([[0.1, 0.2, -0.3], [1.0, 0.0, 2.0]])
    np.testing.assert_allclose(raw(B("vjp")(f_mat, X23, v_out)[1]),
                               taf.vjp(tm, x23, torch.tensor(v_out))[1].numpy(), rtol=1e-12)
    np.testing.assert_allclose(raw(B("jvp")(f_mat, X23, v_in)[1]),
                               taf.jvp(tm, x23, torch.tensor(v_in))[1].numpy(), rtol=1e-12)


# ---- errors -----------------------------------------------------------------------------------

ERRORS = [
    ('einsum("i...j,jk", [1, 2; 3, 4], [1; 2])', 'ValueError: einsum(): "i...j,jk" uses "...", which is not supported'),
    ('einsum("i-j", [1, 2; 3, 4])', 'ValueError: einsum(): "i-j" is not supported: einsum takes "ab,bc->ac"'),
    ('einsum("ii->i", [1, 2; 3, 4], [1; 2])', 'ValueError: einsum(): "ii->i" names 1 operand but 2 are given'),
    ('einsum("i->ii", [1, 2])', 'ValueError: einsum(): the output "ii" of "i->ii" repeats a letter'),
    ('einsum("ii", [1, 2, 3; 4, 5, 6])', 'ShapeError: einsum(): the letter "i" is repeated in "ii" (a diagonal), but those axes of the operand are 2 and 3 long'),
    ('einsum("ij,jk,kl->il", [1, 2; 3, 4], [1; 2], [1, 2, 3; 4, 5, 6; 7, 8, 9])', 'ShapeError: einsum(): the letter "k" of "ij,jk,kl->il" is 1 long in operand 1 but 3 long in operand 2'),
    ('einsum("ij")', "TypeError: einsum() needs at least one operand after the spec"),
    ('einsum("ij,jk->ik", [1, 2; 3, 4], [1, 2, 3])', 'ShapeError: einsum(): "jk" names 2 axes but b has 1 (b is a vector of length 3)'),
    ('einsum("ij,jk->ik", [1, 2; 3, 4], [1; 2; 3])', 'ShapeError: einsum(): the letter "j" of "ij,jk->ik" is 2 long in a but 3 long in b'),
    ('einsum("ij,jk->iz", [1, 2; 3, 4], [1; 2])', 'ValueError: einsum(): the output letter "z" of "ij,jk->iz" is in no operand'),
    ("mse_loss([1, 2, 3], [1; 2; 3])", "ShapeError: mse_loss(): pred and target must have the same shape"),
    ("binary_cross_entropy([0.5, 1.5], [1, 0])", "ValueError: binary_cross_entropy(): probabilities must lie in [0, 1], got 1.5"),
    ("binary_cross_entropy_with_logits([0.5, 1.5], [1, 2])", "ValueError: binary_cross_entropy_with_logits(): targets must lie in [0, 1], got 2"),
    ("kl_div(log([0.5, 0.5]), [1.5, -0.5])", "ValueError: kl_div(): p must hold probabilities >= 0, got -0.5"),
    ("kl_div(0, 1)", "ShapeError: kl_div(): log_q must be a vector"),
    ("cross_entropy([1, 2], 0, label_smoothing=1.5)", "label_smoothing must be in [0, 1]"),
    ("one_hot([0, 3], 3)", "IndexError: one_hot(): id 3 is out of range"),
    ("cosine_similarity([1, 2], [1, 2, 3])", "ShapeError: cosine_similarity(): a is a vector of length 2 and b is a vector of length 3; they do not broadcast"),
    ("batch_norm([1, 2], [1, 1], [0, 0], [0, 0], [1, 1])", "ValueError: batch_norm(): training needs at least 2 rows"),
    ("batch_norm([1, 2; 3, 4], [1, 1, 1], [0, 0], [0, 0], [1, 1])", "ShapeError: batch_norm(): x has 2 features (last axis), so gamma must be a vector of length 2"),
    ("jvp(fn(x) -> x^2, [1, 2], [1, 2, 3])", "ShapeError: jvp(): v must have the shape of x, a vector of length 2, got a vector of length 3"),
    ("vjp(fn(x) -> sum(x), [1, 2], [1, 2])", "ShapeError: vjp(): v must have the shape of f(x), a number"),
    ('jacobian(fn(x) -> "a", [1, 2])', "ValueError: jacobian needs f to return a number or a matrix of numbers, but it returned a string"),
    ("hessian(fn(x) -> x, [1, 2])", "ValueError: hessian needs f to return a number, but it returned a vector"),
    ('jacobian(fn(x) -> x, "a")', "TypeError: jacobian(): x must be a number or a matrix, got a string"),
    ("randperm(-1)", "ValueError: randperm(): n must be >= 0"),
    ('plot([1, 2])\nylim(3, 1)', "ValueError: ylim(): lo must be less than hi, got lo = 3, hi = 1"),
    ('plot([1, 2])\nyscale("log")\nylim(0, 3)', "ValueError: ylim(): the y axis is logarithmic, so its limits must be > 0"),
    ('yscale("loglog")', 'ValueError: yscale(): kind must be one of "linear", "log", "symlog", got "loglog"'),
    ("xlim(1 / 0, 2)", "ValueError: xlim(): lo must be a finite number, got inf"),
]


@pytest.mark.parametrize("src,want", ERRORS)
def test_errors(src, want):
    code, out = run_ml(src)
    assert code != 0 and want in out, out
    assert "Traceback" not in out


def test_axis_controls_change_the_axes():
    from tapeml.builtins import plot
    code, out = run_ml('plot([1, 2, 100])\nyscale("log")\nylim(0.5, 200)\nxlim(lo=-1)\nprint("ok")')
    assert (code, out) == (0, "ok\n")
    B("plot")(np.array([1.0, 2.0, 100.0]))
    B("yscale")("symlog", linthresh=3)
    B("ylim")(-5.0, 5.0)
    B("xlim")(None, 4.0)
    ax = plot.plt().gca()
    assert ax.get_yscale() == "symlog" and ax.get_ylim() == (-5.0, 5.0) and ax.get_xlim()[1] == 4.0
    B("yscale")("linear")
    assert ax.get_yscale() == "linear"
    plot.close_all()
