"""Write the PyTorch reference tests/reference/reductions.npz for the Reductions & sorting builtins
(run by hand; torch is never a runtime dependency of tapeml).

    pip install torch==2.13.0
    python tests/reference/make_reductions_reference.py

For each case of tests/builtins/test_reductions.py's TORCH table (and the same cases with zeros put into the
input, for prod and cumprod) the fixture holds, in float64, the input `<case>.x`, the weight `<case>.R`,
PyTorch's result `<case>.out` and its gradient `<case>.grad` of loss = sum(out * R).
tests/builtins/test_reductions.py compares tapeml with the fixture always, and with PyTorch live when torch is
importable.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from test_reductions import CASES, TORCH, ZEROS, with_zeros  # noqa: E402


def main():
    out = {}
    cases = [(name, CASES[name][1]) for name in TORCH] + [(name + "/zeros", with_zeros(CASES[name][1])) for name in ZEROS]
    for key, x in cases:
        name = key.removesuffix("/zeros")
        tx = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        ty = TORCH[name](torch, tx)
        R = np.random.default_rng(1).standard_normal(tuple(ty.shape))
        (ty * torch.tensor(R, dtype=torch.float64)).sum().backward()
        out[f"{key}.x"], out[f"{key}.R"] = x, R
        out[f"{key}.out"], out[f"{key}.grad"] = ty.detach().numpy(), tx.grad.numpy()
    np.savez_compressed(os.path.join(HERE, "reductions.npz"), **out)
    print(f"wrote {len(cases)} cases, torch {torch.__version__}")


if __name__ == "__main__":
    main()
