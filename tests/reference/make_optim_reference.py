"""Write tests/reference/optim.npz: PyTorch's optimizers for 5 steps on a fixed problem.

The fixture for tests/builtins/test_train.py (stdlib/optim.ml against torch.optim). Run with the dev venv
that has PyTorch (a reference tool only, never a runtime dependency of tapeml):

    /tmp/venv/bin/pip install torch==2.13.0
    /tmp/venv/bin/python tests/reference/make_optim_reference.py

The problem: least squares, loss(w, b) = mean((X @ w + b - y)^2), X 8x3, w 3x2, b 2, all float64.
Each configuration starts from the same (w0, b0), takes 5 steps on the true gradient, and records
w and b after every step under "<config>/w" and "<config>/b" (shape [5, ...]). The clip entries
hold torch.nn.utils.clip_grad_norm_ applied to the gradient at (w0, b0).
"""
from __future__ import annotations

import os

import numpy as np
import torch

CONFIGS = {
    # name: (optimizer class, keyword arguments: the same ones the tapeml test passes)
    "sgd": (torch.optim.SGD, dict(lr=0.1)),
    "sgd_momentum": (torch.optim.SGD, dict(lr=0.1, momentum=0.9)),
    "sgd_nesterov_wd": (torch.optim.SGD, dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1)),
    "sgd_dampening": (torch.optim.SGD, dict(lr=0.05, momentum=0.8, dampening=0.3)),
    "adam": (torch.optim.Adam, dict(lr=0.1)),
    "adam_wd": (torch.optim.Adam, dict(lr=0.05, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    "adamw": (torch.optim.AdamW, dict(lr=0.1)),
    "adamw_custom": (torch.optim.AdamW, dict(lr=0.05, betas=(0.85, 0.995), eps=1e-7, weight_decay=0.3)),
}


def loss_fn(X, y, w, b):
    return ((X @ w + b - y) ** 2).mean()


def main():
    gen = np.random.default_rng(20260101)
    X = gen.standard_normal((8, 3))
    y = gen.standard_normal((8, 2))
    w0 = gen.standard_normal((3, 2))
    b0 = gen.standard_normal(2)
    out = {"X": X, "y": y, "w0": w0, "b0": b0, "torch_version": np.array(torch.__version__)}
    Xt, yt = torch.tensor(X), torch.tensor(y)
    for name, (cls, kw) in CONFIGS.items():
        w = torch.tensor(w0, requires_grad=True)
        b = torch.tensor(b0, requires_grad=True)
        opt = cls([w, b], **kw)
        ws, bs = [], []
        for _ in range(5):
            opt.zero_grad()
            loss_fn(Xt, yt, w, b).backward()
            opt.step()
            ws.append(w.detach().numpy().copy())
            bs.append(b.detach().numpy().copy())
        out[f"{name}/w"] = np.stack(ws)
        out[f"{name}/b"] = np.stack(bs)
    for max_norm in (0.5, 100.0):
        w = torch.tensor(w0, requires_grad=True)
        b = torch.tensor(b0, requires_grad=True)
        loss_fn(Xt, yt, w, b).backward()
        norm = torch.nn.utils.clip_grad_norm_([w, b], max_norm)
        out[f"clip{max_norm:g}/w"] = w.grad.numpy().copy()
        out[f"clip{max_norm:g}/b"] = b.grad.numpy().copy()
        out[f"clip{max_norm:g}/norm"] = np.array(float(norm))
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "optim.npz")
    np.savez(path, **out)
    print(f"wrote {path} ({len(out)} arrays, torch {torch.__version__})")


if __name__ == "__main__":
    main()
