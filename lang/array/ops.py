"""The one primitive table: every differentiable operation, its NumPy forward and its VJP.

`ops.TABLE` lists every primitive and `ops.<name>` calls one; this module gathers every entry, so
the table is whole once `tapeml.array.ops` is imported. They are declared in the modules beside
it: primitive_table.py (the table, `primitive()`, the size guard, the float type), shape_ops.py
(transpose, reshape, permute, broadcast_to, sum, unbroadcast: the bottom, whose VJPs use only
each other), arith_ops.py (arithmetic, zmul, comparisons, round, and/or/not, where, max and min),
elementwise_ops.py (the elementwise functions: exp ... gelu, clip, a^b, and the everyday
vocabulary of issue 20), matmul_ops.py (matmul and zmatmul), scale_ops.py (ldexp and the
power-of-two rescaling helpers), index_ops.py (concat, stack, indexing), the transformer
primitives by family (softmax_ops.py, norm_ops.py, dense_ops.py, attention_ops.py, with their
shared row numerics in rows.py), reduce_ops.py (prod, cumulative sums and products, logsumexp,
mean, the gather along an axis behind sort and topk) and linalg_ops.py (inverses, solves,
determinants and the factorizations). Each operation has one
forward (`impl`) and one VJP written with primitives; where a first-order VJP in NumPy saves
real time (measured) the entry declares it as `vjp_plain`, and the tape takes it only when
nothing records the backward pass (tape.Primitive.pullback).

Operators (`+`, `@`, indexing, `'`) and builtins both call these primitives; there is no
other arithmetic path. VJPs are written with primitives, so they are themselves recorded
when an outer `grad` is running (grad of grad).

Conventions at kinks, shared with docs/language.md:
- relu'(0) = 0, abs'(0) = 0 (sign(0) = 0), sqrt'(0) = inf; abs'(0) is neither side's slope, so
  against an infinite or NaN cotangent it gives NaN (PyTorch's g * sgn(x)), never a 0 that hides
  a singularity (sqrt(abs(y)) at 0);
- max/min (reductions) split the cotangent evenly among tied maxima, as PyTorch's `amax`;
- sort, topk, median and quantile (gathers, take_along) send the cotangent through the stable
  permutation: at ties, to the element the stable order put there; prod's gradient is the product
  of the others (exact at zeros, no division); logsumexp's rows of +-inf follow softmax's rule;
- in the backward pass a zero factor wins: `zmul(0, inf) = zmul(0, nan) = 0`, and `zmatmul` is the
  matrix product with the same rule (a first-order `vjp_plain` multiplies plainly, and the tape
  takes the VJPs written with zmul and zmatmul where its pass gives a cotangent that is not finite:
  tape.backward). Every VJP multiplies through them (tests/array/test_vjp_sweep.py runs
  each primitive's VJP at 0, +-inf and its kinks), so a branch that `where` did not take (cotangent 0)
  never brings a NaN or inf into the gradient, d/dx x^0 at 0 is 0, and grad(sqrt(sum(x^2))) at x = 0
  is 0 (the subgradient, like `norm`); the one exception is a^b's second derivative (pow_grad's VJP): a zero
  cotangent of the second pass against a nonzero one of the first, at a = 0 where b (b-1) a^(b-2) is
  infinite, is NaN (PyTorch's value: the second derivative of |y|^1.5 at 0), while a zero of the
  first pass (an untaken branch) still gives 0;
- softmax of a row that is all -inf (every key masked) is all zeros, forward and backward;
- a row holding +inf (softmax, log_softmax, a +inf attention bias) takes the limit: the +inf
  entries share the row equally, the rest get 0, and the row's gradient is 0;
- attention scores that overflow from finite q and k are computed again on q and k scaled by powers
  of 2 (attention_ops._overflowed): the weights of a float type without an exponent limit, the largest
  true score taking the row, and such a row's gradient is exactly 0;
- layer_norm and rms_norm rescale a row by a power of 2 where its variance would overflow or
  underflow; with eps = 0 a zero-variance row normalizes to 0 (gradient 0); a NaN makes its row NaN;
- the reductions that square (std, norm, cosine_similarity, corrcoef, batch_norm, atan2's and svd's
  VJPs) do the same per slice with the ldexp primitive (reduce_ops.rescaled), and mean divides by N
  first where a finite slice's sum overflows (reduce_ops.mean): exact values and gradients wherever
  they are representable, the plain formulas bit for bit elsewhere.
"""
from __future__ import annotations

from tapeml.array.primitive_table import (  # noqa: F401
    DTYPES, FLOAT, GROWS, TABLE, as_float, bools_as_floats, primitive, python_scalar,
    set_dtype, shape_of,
)
from tapeml.array.shape_ops import broadcast_to, permute, reshape, sum_, transpose, unbroadcast  # noqa: F401
from tapeml.array.arith_ops import (  # noqa: F401
    add, amax, amin, div, eq, floor, ge, gt, le, logical, logical_not, lt, maximum, minimum, mod, mul, ne, neg,
    round_, sign, sub, where, zmul,
)
from tapeml.array.matmul_ops import matmul, zmatmul  # noqa: F401
from tapeml.array.scale_ops import binary_exponents, ldexp, safe_floor, slice_exponents, unsafe_slices  # noqa: F401
from tapeml.array.index_ops import (  # noqa: F401
    concat, index, last_writes, orthogonal, scatter_add, setitem, stack,
)
from tapeml.array.softmax_ops import log_softmax, softmax  # noqa: F401
from tapeml.array.norm_ops import layer_norm, rms_norm  # noqa: F401
from tapeml.array.dense_ops import dense, dense_heads, heads_dense, merge_heads, split_heads  # noqa: F401
from tapeml.array.attention_ops import attention_weights, sdpa  # noqa: F401
from tapeml.array.elementwise_ops import (  # noqa: F401
    abs_, clip, cos, dsigmoid, dtanh, erf, erfc, exp, gelu, log, pow_, pow_grad, relu, sigmoid, sin, sqrt, tanh,
    acos, asin, atan, atan2, ceil, cosh, expm1, log1p, log10, log2, one_minus_sq, sinh, softplus, tan,
)
from tapeml.array.reduce_ops import (  # noqa: F401
    along, cumprod, cumsum, kept, logsumexp, mean, prod, put_along, rescaled, take_along, unkept,
)
from tapeml.array.linalg_ops import (  # noqa: F401
    adjugate, cholesky, det, eigh, inv, pinv, qr, slogdet, solve, svd,
)
