"""The cases tests/perf/ab.py times for issue 39 (the house's second step: each primitive once, a
Session behind every face): the rows of docs/performance.md that the change could move, on
NumPy and torch:cpu, float64 and float32, through the public Session API only (so the same case
file runs against trees from before and after the move of the internals).

    python tests/perf/ab.py tests/perf/ab_house.py --before REV [--only block8_f64,...]

Each setup returns a callable; `number` calls make one timing."""
import os
import textwrap

BLOCK = """
seed(0)
w = transformer_block_init(16, 2)
x = randn(8, 16)
R = randn(8, 16)
loss = fn(w) -> sum(transformer_block(x, w) * R)
fn step()
  v, g = value_and_grad(loss, w)
  return v
end
"""

PIECES = """
seed(0)
x = randn(8, 16)
g = randn(16)
b = randn(16)
q = randn(2, 8, 8)
fn step()
  a = grad(fn(x) -> sum(softmax(x) * x), x)
  c = grad(fn(x) -> sum(layer_norm(x, g, b) * x), x)
  d = grad(fn(q) -> sum(scaled_dot_product_attention(q, q, q, causal = true)), q)
  e = grad(fn(x) -> sum(rms_norm(x, g) * x) + sum(log_softmax(x)), x)
  return 0
end
"""

SMALL_OPS = """
x = [1, 2; 3, 4]
fn step()
  y = x
  for i in 1:500
    y = exp(y * 0.5 + 1) @ x - sum(y) / 10
    y = tanh(y)
  end
  return sum(y)
end
"""

SMALL_GRAD = """
x = [0.1, 0.2; 0.3, 0.4]
f = fn(w) -> sum(tanh(x @ w) * w + exp(w) / 3)
fn step()
  for i in 1:100
    g = grad(f, x)
  end
  return 0
end
"""

FIB = """
fn fib(n)
  if n < 2
    return n
  end
  return fib(n - 1) + fib(n - 2)
end
fn step() -> fib(18)
"""

LOOP = """
fn step()
  s = 0
  for i in 1:100000
    s = s + i
  end
  return s
end
"""

PRINT = """
m = [1.5, -2, 3.25, 4; 5, 6, 7, 8; 9, 10, 11, 12; 13, 14, 15, 16.125]
fn step()
  for i in 1:200
    t = "{m}"
  end
  return 0
end
"""


def _session(code, dtype="float64", device="numpy"):
    import tapeml
    s = tapeml.Session(dtype=dtype, device=device, out=open(os.devnull, "w"))
    s.run(textwrap.dedent(code), "<ab>")
    return lambda: s.call("step")


def case(code, dtype="float64", device="numpy"):
    return lambda: _session(code, dtype, device)


CASES = {}
for dev in ("numpy", "torch:cpu"):
    tag = "np" if dev == "numpy" else "torch"
    for dt in ("float64", "float32"):
        d = dt[-2:]
        CASES[f"block8_{tag}_f{d}"] = (case(BLOCK, dt, dev), 20)
        CASES[f"pieces_{tag}_f{d}"] = (case(PIECES, dt, dev), 10)
        CASES[f"small_ops_{tag}_f{d}"] = (case(SMALL_OPS, dt, dev), 3)
        CASES[f"small_grad_{tag}_f{d}"] = (case(SMALL_GRAD, dt, dev), 3)
CASES["fib18"] = (case(FIB), 3)
CASES["loop1e5"] = (case(LOOP), 3)
CASES["print4x4"] = (case(PRINT), 5)
