"""BLAS threads against speed: the measurement behind tapeml's default of one thread (issue 28).

    python tests/perf/threads.py [--rounds 4] [--busy K] [--steps 20]

For each thread count (1, 2, ... up to one per core: NumPy's own default), in fresh processes,
alternating the order every round: the wall time of an n x n float64 matrix product (n from 16 to
1024; the minimum of repeated timings) and the time per step of `examples/minigpt.ml` (its own
"ms per step" over `--steps` steps). `--busy K` keeps K other processes spinning on the cores
meanwhile, as other users' work does on a shared machine. Wall time, not CPU time: more threads
spend more CPU time by design, and what a user waits for is the wall. Prints markdown tables with
the minimum and the largest of the rounds.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SIZES = (16, 64, 128, 256, 512, 1024)

MATMUL = r"""
import json, sys, time
import numpy as np
from tapeml.array import threads
threads.set_threads(int(sys.argv[1]))
out = {}
for n in %r:
    a = np.random.default_rng(0).standard_normal((n, n))
    reps = max(3, int(2e8 / n ** 3))
    a @ a
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            a @ a
        best = min(best, (time.perf_counter() - t0) / reps)
    out[n] = best
print(json.dumps(out))
""" % (SIZES,)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--busy", type=int, default=0, help="processes kept spinning meanwhile")
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    counts = sorted({1, 2, cores} | {c for c in (4, 8) if c < cores})
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                                            "MKL_NUM_THREADS", "TAPEML_THREADS")}
    env["TAPEML_PROGRESS"] = "0"
    tapeml = os.path.join(os.path.dirname(sys.executable), "tapeml")
    spinners = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(args.busy)]
    mm = {c: [] for c in counts}
    gpt = {c: [] for c in counts}
    loads = []
    try:
        for r in range(args.rounds):
            for c in (counts if r % 2 == 0 else counts[::-1]):
                out = subprocess.run([sys.executable, "-c", MATMUL, str(c)], env=env, capture_output=True,
                                     text=True, check=True)
                mm[c].append({int(k): v for k, v in json.loads(out.stdout).items()})
                out = subprocess.run([tapeml, "--threads", str(c), os.path.join(ROOT, "examples", "minigpt.ml"),
                                      f"steps={args.steps}", f"every={args.steps}", "checkpoint=none", "plot=none",
                                      "samples=5"], env=env, capture_output=True, text=True, check=True, cwd=HERE)
                gpt[c].append(float(re.search(r"\(([\d.]+) ms per step\)", out.stdout).group(1)))
            loads.append(os.getloadavg()[0])
            print(f"round {r + 1}/{args.rounds}: load {loads[-1]:.1f}", file=sys.stderr)
    finally:
        for p in spinners:
            p.kill()
    print(f"{cores} cores, {args.busy} spinning processes added, load average {min(loads):.1f}-{max(loads):.1f} "
          f"during the {args.rounds} rounds; wall time, the minimum (and the largest) of the rounds\n")
    print("| n x n matrix product | " + " | ".join(f"{c} thread{'s' * (c > 1)}" for c in counts) + " |")
    print("| --- |" + " --- |" * len(counts))
    for n in SIZES:
        print(f"| {n} | " + " | ".join(f"{min(x[n] for x in mm[c]) * 1e6:.4g} us ({max(x[n] for x in mm[c]) * 1e6:.4g})"
                                       for c in counts) + " |")
    print(f"| minigpt.ml, ms per step ({args.steps} steps) | "
          + " | ".join(f"{min(gpt[c]):.1f} ({max(gpt[c]):.1f})" for c in counts) + " |")


if __name__ == "__main__":
    main()
