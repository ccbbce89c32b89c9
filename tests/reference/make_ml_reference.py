"""Write the PyTorch reference tests/reference/ml.npz for the issue-20 losses, einsum and batch_norm
(run by hand; torch is never a runtime dependency of tapeml).

    pip install torch==2.13.0
    python tests/reference/make_ml_reference.py

For each case (CASES below) the fixture holds, in float64, the inputs `<case>.in<i>`, one weight
`<case>.R<j>` per result, PyTorch's results `<case>.out<j>` and the gradients `<case>.grad<i>` of
loss = sum_j sum(out_j * R_j) for the inputs listed as differentiable. tests/builtins/test_ml_vocab.py
compares tapeml with the fixture, and regenerates the cases live with another seed when torch is
importable (`make(seed)`).
"""
from __future__ import annotations

import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

EINSUMS = {"ein_mm": ("ij,jk->ik", (3, 4), (4, 2)), "ein_bmm": ("bij,bjk->bik", (2, 3, 4), (2, 4, 5)),
           "ein_dot": ("i,i->", (5,), (5,)), "ein_outer": ("i,j->ij", (3,), (4,)),
           "ein_attn": ("bhqd,bhkd->bhqk", (2, 2, 3, 4), (2, 2, 5, 4)), "ein_nt": ("ij,kj->ik", (3, 4), (2, 4)),
           "ein_perm": ("ijk,k->ji", (2, 3, 4), (4,)), "ein_all": ("ij,jk->", (3, 4), (4, 2)),
           "ein_sumonly": ("ij,k->i", (3, 4), (5,)), "ein_rowdot": ("ij,ij->i", (3, 4), (3, 4))}


def inputs(seed):
    """name -> (list of input arrays, indices of the differentiable inputs)."""
    rng = np.random.default_rng(seed)
    u = rng.uniform
    n = rng.standard_normal

    def softmax(z):
        e = np.exp(z - z.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    cases = {
        "mse": ([n((3, 4)), n((3, 4))], [0, 1]),
        "bce": ([u(0.05, 0.95, (3, 4)), u(0, 1, (3, 4))], [0, 1]),
        "bce_logits": ([n((3, 4)) * 5, u(0, 1, (3, 4))], [0, 1]),
        "kl_mat": ([np.log(softmax(n((3, 5)))), softmax(n((3, 5)))], [0, 1]),
        "kl_vec": ([np.log(softmax(n(5))), softmax(n(5))], [0, 1]),
        "ce_ls": ([n((4, 5)), rng.integers(0, 5, 4).astype(np.float64)], [0]),
        "ce_ls_vec": ([n(5), np.float64(rng.integers(0, 5))], [0]),
        "cos": ([n((3, 4)), n((3, 4))], [0, 1]),
        "cos_dim0": ([n((3, 4)), n((3, 1))], [0, 1]),
        "bn_train": ([n((6, 3)) * 2 + 1, u(0.5, 1.5, 3), n(3), n(3), u(0.5, 2, 3)], [0, 1, 2]),
        "bn_eval": ([n((6, 3)), u(0.5, 1.5, 3), n(3), n(3), u(0.5, 2, 3)], [0, 1, 2]),
        "bn_3d": ([n((2, 5, 3)), u(0.5, 1.5, 3), n(3), n(3), u(0.5, 2, 3)], [0, 1, 2]),
    }
    for name, (_, sa, sb) in EINSUMS.items():
        cases[name] = ([n(sa), n(sb)], [0, 1])
    return cases


def torch_outputs(name, t):
    """PyTorch's results for case `name` on the tensors t (a tuple of outputs)."""
    import torch
    import torch.nn.functional as F
    if name == "mse":
        return (F.mse_loss(t[0], t[1]),)
    if name == "bce":
        return (F.binary_cross_entropy(t[0], t[1]),)
    if name == "bce_logits":
        return (F.binary_cross_entropy_with_logits(t[0], t[1]),)
    if name == "kl_mat":
        return (F.kl_div(t[0], t[1], reduction="batchmean"),)
    if name == "kl_vec":
        return (F.kl_div(t[0], t[1], reduction="sum"),)
    if name in ("ce_ls", "ce_ls_vec"):
        return (F.cross_entropy(t[0], t[1].long(), label_smoothing=0.1),)
    if name == "cos":
        return (F.cosine_similarity(t[0], t[1], dim=-1),)
    if name == "cos_dim0":
        return (F.cosine_similarity(t[0], t[1], dim=0),)
    if name.startswith("bn_"):
        x, g, b, rm, rv = t
        rm, rv = rm.detach().clone(), rv.detach().clone()
        training = name != "bn_eval"
        if name == "bn_3d":
            y = F.batch_norm(x.permute(0, 2, 1), rm, rv, g, b, training=True, momentum=0.1, eps=1e-5)
            y = y.permute(0, 2, 1)
        else:
            y = F.batch_norm(x, rm, rv, g, b, training=training, momentum=0.1, eps=1e-5)
        return (y, rm, rv)
    if name in EINSUMS:
        return (torch.einsum(EINSUMS[name][0], t[0], t[1]),)
    raise KeyError(name)


def make(seed):
    """{key: array} of the fixture for one seed."""
    import torch
    out = {}
    rng = np.random.default_rng(seed + 1000)
    for name, (ins, diff) in inputs(seed).items():
        ts = [torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=(i in diff)) for i, a in enumerate(ins)]
        res = torch_outputs(name, ts)
        loss = 0
        for j, r in enumerate(res):
            R = rng.standard_normal(tuple(r.shape))
            out[f"{name}.R{j}"] = R
            out[f"{name}.out{j}"] = r.detach().numpy()
            if r.requires_grad:
                loss = loss + (r * torch.tensor(R)).sum()
        gs = torch.autograd.grad(loss, [ts[i] for i in diff])
        for i, a in enumerate(ins):
            out[f"{name}.in{i}"] = np.asarray(a, dtype=np.float64)
        for i, g in zip(diff, gs):
            out[f"{name}.grad{i}"] = g.numpy()
    return out


if __name__ == "__main__":
    np.savez(os.path.join(HERE, "ml.npz"), **make(0))
    print("wrote", os.path.join(HERE, "ml.npz"))
