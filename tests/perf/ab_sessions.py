"""Two tapeml installs side by side, by CPU time: before/after figures for a change.

    python tests/perf/ab_sessions.py PYTHON_A PYTHON_B [--rounds 5] [--quick]

PYTHON_A and PYTHON_B are the interpreters of two virtual environments, each with tapeml installed
(for example one from a worktree at the commit before the change). Each workload runs in a fresh
process of each side, the sides alternating round by round (A B A B ...), on one BLAS thread; a
process times its workload with time.process_time (CPU time, which a busy machine disturbs far
less than wall time) and reports the best of a few repeats. The table gives each side's minimum
over the rounds, the ratio B/A of the minima and the spread of B's rounds (max/min). Only the
public API (tapeml.Session) is used, so any two commits compare.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

FIB = "fn fib(n)\n  if n < 2\n    return n\n  end\n  return fib(n - 1) + fib(n - 2)\nend\n"
LOOP = "fn total(n)\n  s = 0\n  for i in 1:n\n    s = s + i\n  end\n  return s\nend\n"
BLOCK = """seed(0)
w = transformer_block_init({D}, {H}, mlp_ratio={M})
x = randn({T}, {D})
R = randn({T}, {D})
loss = fn(w) -> sum(transformer_block(x, w) * R)
"""
TAPE = """x = [1, 2; 3, 4]
fn f(x)
  y = x
  for i in 1:2000
    y = y * 1.0001
  end
  return sum(y)
end
"""
MIXED = FIB + LOOP + BLOCK.format(T=8, D=16, H=2, M=2)

# name -> (setup source, timed source, repeats inside one process)
WORKLOADS = {
    "recursive fib(20)": (FIB, "fib(20)", 3),
    "`s = s + i`, 200,000 iterations": (LOOP, "total(200000)", 3),
    "block fwd+bwd T=8, D=16, 2 heads (x20)": (BLOCK.format(T=8, D=16, H=2, M=2),
                                                "for i in 1:20\n  g = value_and_grad(loss, w)\nend", 5),
    "block fwd+bwd T=128, D=256, 8 heads": (BLOCK.format(T=128, D=256, H=8, M=4),
                                             "g = value_and_grad(loss, w)", 3),
    "block forward T=128, D=256, 8 heads": (BLOCK.format(T=128, D=256, H=8, M=4),
                                             "y = transformer_block(x, w)", 3),
    "tape: 2,000 recorded 2x2 ops, fwd+bwd": (TAPE, "g = grad(f, x)", 5),
    "the same 2,000 ops, nothing recorded": (TAPE, "v = f(x)", 5),
    "mixed: fib(18) + 50 block grads + a 50,000 loop": (
        MIXED, "fib(18)\nfor i in 1:50\n  g = value_and_grad(loss, w)\nend\ntotal(50000)", 3),
}

CHILD = r"""
import json, os, sys, time
import tapeml
setup, timed, repeats = json.loads(sys.argv[1])
s = tapeml.Session()
s.run(setup)
best = None
for _ in range(repeats + 1):           # the first run warms up (and compiles)
    t0 = time.process_time()
    s.run(timed)
    t = time.process_time() - t0
    best = t if best is None else min(best, t)
print(best)
"""


def one(python, work):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               TAPEML_PROGRESS="0")
    out = subprocess.run([python, "-c", CHILD, json.dumps(work)], capture_output=True, text=True,
                         env=env, cwd="/", check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", help="workloads whose name contains this text")
    args = ap.parse_args(argv)
    names = [n for n in WORKLOADS if not args.only or args.only in n]
    times = {n: ([], []) for n in names}
    for r in range(args.rounds):
        for n in names:
            for side, python in enumerate((args.a, args.b)):
                times[n][side].append(one(python, WORKLOADS[n]))
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    print("| workload | A (min CPU) | B (min CPU) | B / A | spread of B (max/min) |")
    print("| --- | --- | --- | --- | --- |")
    for n in names:
        a, b = times[n]
        print(f"| {n} | {min(a) * 1e3:.1f} ms | {min(b) * 1e3:.1f} ms | {min(b) / min(a):.2f}x | "
              f"{max(b) / min(b):.2f} |")


if __name__ == "__main__":
    main()
