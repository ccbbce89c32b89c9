"""Before/after timing of tapeml changes on a shared, noisy machine.

    python tests/perf/ab.py CASES.py [--before REV] [--after DIR | --after-rev REV] [--rounds 6] [--only NAME,...]

CASES.py defines `CASES = {name: (setup, number)}`: `setup()` (run in the measuring process,
after `import tapeml`) returns a callable of no arguments, and `number` is how many calls one
timing takes. Each side is a source tree: `--before REV` exports that git revision (default
HEAD) to a temporary folder, `--after DIR` is a working tree (default this one). For every round
and every case, each side runs in a fresh process (the sides alternate, the first side swapping
each round), with one BLAS thread; a process times `number` calls in CPU time
(`time.process_time`) several times and keeps the minimum. The report gives each side's minimum
over the rounds, the ratio after/before of the minima, and the spread of each side (its largest
round over its smallest, less one). CPU time rather than wall time: other users' processes on
the machine take wall time, not this process's CPU time (they still slow it through caches).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

CHILD = r"""
import importlib.util, json, sys, time
spec = importlib.util.spec_from_file_location("cases", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
import tapeml
assert tapeml.__file__.startswith(sys.argv[2]), (tapeml.__file__, sys.argv[2])
out = {}
for name in sys.argv[4].split(","):
    setup, number = mod.CASES[name]
    fn = setup()
    for _ in range(max(1, number // 5)):
        fn()
    best = float("inf")
    for _ in range(int(sys.argv[3])):
        t0 = time.process_time()
        for _ in range(number):
            fn()
        best = min(best, (time.process_time() - t0) / number)
    out[name] = best
print(json.dumps(out))
"""


def layout(src: str, into: str) -> str:
    """A folder holding the package `tapeml` of source tree `src` (pyproject's package-dir:
    lang/ is tapeml, builtins/ and stdlib/ are its subpackages), to put first on PYTHONPATH."""
    pkg = os.path.join(into, "tapeml")
    os.makedirs(pkg)
    for name in os.listdir(os.path.join(src, "lang")):
        os.symlink(os.path.join(src, "lang", name), os.path.join(pkg, name))
    for sub in ("builtins", "stdlib"):
        os.symlink(os.path.join(src, sub), os.path.join(pkg, sub))
    return into


def export(rev: str, into: str) -> str:
    os.makedirs(into)
    archive = subprocess.run(["git", "-C", ROOT, "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    return into


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cases")
    ap.add_argument("--before", default="HEAD", help="git revision of the before side (default HEAD)")
    ap.add_argument("--after", default=ROOT, help="source tree of the after side (default this checkout)")
    ap.add_argument("--after-rev", help="git revision of the after side, exported (instead of --after): "
                    "the working tree may change while the rounds run")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=5, help="timings per process (the minimum is kept)")
    ap.add_argument("--only", help="comma-separated case names")
    args = ap.parse_args()
    cases_file = os.path.abspath(args.cases)
    import importlib.util
    spec = importlib.util.spec_from_file_location("cases", cases_file)
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(cases_file))
    names = args.only.split(",") if args.only else None
    tmp = tempfile.mkdtemp(prefix="tapeml-ab-")
    src_before = export(args.before, os.path.join(tmp, "before-src"))
    src_after = export(args.after_rev, os.path.join(tmp, "after-src")) if args.after_rev else os.path.abspath(args.after)
    sides = {"before": layout(src_before, os.path.join(tmp, "before")),
             "after": layout(src_after, os.path.join(tmp, "after"))}
    spec.loader.exec_module(mod)
    if names is None:
        names = list(mod.CASES)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    results = {s: {n: [] for n in names} for s in sides}
    order = list(sides)
    for r in range(args.rounds):
        for side in (order if r % 2 == 0 else order[::-1]):
            e = dict(env, PYTHONPATH=sides[side] + os.pathsep + HERE)
            pkg = os.path.join(sides[side], "tapeml")
            out = subprocess.run([sys.executable, "-c", CHILD, cases_file, pkg, str(args.repeat), ",".join(names)],
                                 env=e, capture_output=True, text=True)
            if out.returncode:
                sys.exit(f"{side} failed:\n{out.stderr}")
            for n, t in json.loads(out.stdout.strip().splitlines()[-1]).items():
                results[side][n].append(t)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    print(f"| case | before (min) | after (min) | after / before | spread before | spread after |")
    print("| --- | --- | --- | --- | --- | --- |")
    for n in names:
        b, a = results["before"][n], results["after"][n]
        print(f"| {n} | {fmt(min(b))} | {fmt(min(a))} | {min(a) / min(b):.3f} | "
              f"{max(b) / min(b) - 1:.1%} | {max(a) / min(a) - 1:.1%} |")
    derived = getattr(mod, "DERIVED", {})
    for label, (a_name, b_name, n) in derived.items():
        if a_name in names and b_name in names:
            vals = {}
            for side in sides:
                per_round = [(a - b) / n for a, b in zip(results[side][a_name], results[side][b_name])]
                vals[side] = (min(results[side][a_name]) - min(results[side][b_name])) / n, per_round
            (b, rb), (a, ra) = vals["before"], vals["after"]
            print(f"| {label} (difference of minima; per-round range) | {fmt(b)} ({fmt(min(rb))}-{fmt(max(rb))}) | "
                  f"{fmt(a)} ({fmt(min(ra))}-{fmt(max(ra))}) | {a / b:.3f} | | |")
    print(json.dumps(results), file=sys.stderr)
    shutil.rmtree(tmp, ignore_errors=True)


def fmt(t):
    return f"{t * 1e3:.3g} ms" if t >= 1e-3 else f"{t * 1e6:.3g} us"


if __name__ == "__main__":
    main()
