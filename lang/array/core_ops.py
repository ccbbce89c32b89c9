"""The core primitives' old home, split by family into shape_ops.py (shapes, sum, unbroadcast),
arith_ops.py (arithmetic, zmul, comparisons, where, max and min), elementwise_ops.py (exp ...
gelu, clip, pow), matmul_ops.py (matmul, zmatmul) and scale_ops.py (ldexp and the power-of-two
rescaling helpers). These names are re-exported for nn_ops.py until it imports them from their
modules (issue 39); nothing else imports this module.
"""
from __future__ import annotations

from tapeml.array.arith_ops import _zmul, add, div, mul, sub, where, zmul  # noqa: F401
from tapeml.array.elementwise_ops import exp, sqrt  # noqa: F401
from tapeml.array.matmul_ops import _matmul, _rows, _vjp_matmul, _vjp_matmul_plain, matmul, zmatmul  # noqa: F401
from tapeml.array.scale_ops import binary_exponents, safe_floor  # noqa: F401
from tapeml.array.shape_ops import permute, reshape, sum_, transpose, unbroadcast  # noqa: F401
