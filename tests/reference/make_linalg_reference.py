"""Write the PyTorch reference tests/reference/linalg.npz for the Linear algebra builtins (run by hand;
torch is never a runtime dependency of tapeml).

    pip install torch==2.13.0
    python tests/reference/make_linalg_reference.py

For each case (CASES below) the fixture holds, in float64, random well-conditioned inputs
`<case>.in<i>`, one weight `<case>.R<j>` per result, PyTorch's results `<case>.out<j>` and the
gradients `<case>.grad<i>` of loss = sum_j sum(out_j * R_j). Results whose sign LAPACK chooses
(singular vectors, eigenvectors) enter through sign-free products (U diag(c) Vh, V diag(c) V');
PyTorch's Q and R are given tapeml's signs (R's diagonal >= 0).
tests/builtins/test_linalg.py compares tapeml with the fixture, and regenerates the cases live with another
seed when torch is importable (`make(seed)`).
"""
from __future__ import annotations

import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def inputs(seed):
    """name -> list of input arrays (NumPy, float64)."""
    rng = np.random.default_rng(seed)
    n = 4

    def wc(*batch):                       # well conditioned: random + n I
        return rng.standard_normal(batch + (n, n)) + n * np.eye(n)

    def spd(*batch):
        m = rng.standard_normal(batch + (n, n))
        return m @ np.swapaxes(m, -1, -2) + n * np.eye(n)

    def sym():
        m = rng.standard_normal((n, n))
        return (m + m.T) / 2

    c = rng.uniform(0.5, 1.5, n)          # fixed weights of the sign-free products
    return {
        "inv": [wc()], "inv_batched": [wc(3)],
        "solve_vec": [wc(), rng.standard_normal(n)], "solve_mat": [wc(), rng.standard_normal((n, 2))],
        "solve_batched": [wc(2), rng.standard_normal((2, n))],
        "det": [wc()], "det_batched": [wc(3)], "slogdet": [wc() * -1.0],
        "trace": [rng.standard_normal((n, n))], "diag_vec": [rng.standard_normal(n)],
        "diag_mat": [rng.standard_normal((n, n + 1))],
        "norm_vec": [rng.standard_normal(5)], "norm_fro": [rng.standard_normal((3, n))],
        "norm_2": [rng.standard_normal((3, n))], "norm_nuc": [rng.standard_normal((3, n))],
        "norm_rows": [rng.standard_normal((3, n))], "norm_1": [rng.standard_normal(5)],
        "cholesky": [spd()], "cholesky_batched": [spd(2)],
        "qr": [rng.standard_normal((5, 3))], "qr_square": [wc()],
        "svd_tall": [rng.standard_normal((5, 3)), c[:3]], "svd_wide": [rng.standard_normal((3, 5)), c[:3]],
        "eigh": [sym(), c], "pinv": [rng.standard_normal((5, 3))], "pinv_wide": [rng.standard_normal((3, 5))],
        "lstsq": [rng.standard_normal((6, 3)), rng.standard_normal(6)],
        "outer": [rng.standard_normal(3), rng.standard_normal(4)],
        "kron": [rng.standard_normal((2, 3)), rng.standard_normal((2, 2))],
    }


def torch_fns():
    import torch
    L = torch.linalg
    return {
        "inv": lambda a: (L.inv(a),), "inv_batched": lambda a: (L.inv(a),),
        "solve_vec": lambda a, b: (L.solve(a, b),), "solve_mat": lambda a, b: (L.solve(a, b),),
        "solve_batched": lambda a, b: (L.solve(a, b),),
        "det": lambda a: (L.det(a),), "det_batched": lambda a: (L.det(a),),
        "slogdet": lambda a: (L.slogdet(a)[1],),
        "trace": lambda a: (torch.trace(a),), "diag_vec": lambda v: (torch.diag(v),),
        "diag_mat": lambda a: (torch.diag(a),),
        "norm_vec": lambda v: (L.norm(v),), "norm_fro": lambda a: (L.norm(a),),
        "norm_2": lambda a: (L.matrix_norm(a, ord=2),), "norm_nuc": lambda a: (L.matrix_norm(a, ord="nuc"),),
        "norm_rows": lambda a: (L.vector_norm(a, dim=-1),), "norm_1": lambda v: (L.vector_norm(v, ord=1),),
        "cholesky": lambda a: (L.cholesky(a),), "cholesky_batched": lambda a: (L.cholesky(a),),
        "qr": _qr_torch, "qr_square": _qr_torch,
        "svd_tall": _svd_torch, "svd_wide": _svd_torch, "eigh": _eigh_torch,
        "pinv": lambda a: (L.pinv(a),), "pinv_wide": lambda a: (L.pinv(a),),
        "lstsq": lambda a, b: (L.lstsq(a, b[:, None], driver="gelsd").solution[:, 0],),
        "outer": lambda x, y: (torch.outer(x, y),), "kron": lambda a, b: (torch.kron(a, b),),
    }


def _qr_torch(a):
    import torch
    q, r = torch.linalg.qr(a)
    d = torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).detach()   # tapeml's R has a diagonal >= 0
    return q * d[..., None, :], r * d[..., :, None]


def _svd_torch(a, c):
    import torch
    u, s, vh = torch.linalg.svd(a, full_matrices=False)
    return s, u @ torch.diag(c) @ vh


def _eigh_torch(a, c):
    import torch
    # the symmetric part, as tapeml's eigh reads it (torch reads the lower triangle)
    w, v = torch.linalg.eigh((a + a.T) / 2)
    return w, v @ torch.diag(c) @ v.T


def make(seed):
    """{key: array} for every case, computed with torch autograd in float64."""
    import torch
    fns = torch_fns()
    rng = np.random.default_rng(seed + 1000)
    out = {}
    for name, ins in inputs(seed).items():
        ts = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in ins]
        res = fns[name](*ts)
        loss = 0.0
        for j, r in enumerate(res):
            R = rng.standard_normal(tuple(r.shape))
            out[f"{name}.R{j}"] = R
            out[f"{name}.out{j}"] = r.detach().numpy().copy()
            loss = loss + (r * torch.tensor(R)).sum()
        grads = torch.autograd.grad(loss, ts, allow_unused=True)
        for i, (a, g) in enumerate(zip(ins, grads)):
            out[f"{name}.in{i}"] = a
            out[f"{name}.grad{i}"] = np.zeros_like(a) if g is None else g.numpy().copy()
    return out


def main():
    import torch
    torch.set_num_threads(1)
    path = os.path.join(HERE, "linalg.npz")
    np.savez_compressed(path, **make(0))
    print("wrote", path)


if __name__ == "__main__":
    main()
