"""The long fuzz run (not in CI): many generated programs through the same checks as
tests/end_to_end/test_fuzz.py, with a tally by outcome.

    python tests/fuzz_long.py [N] [--seed S] [--show K] [--device torch:cpu]

N programs (default 50,000) are drawn in turn from the three generators of test_fuzz.py:
whole programs (gen_program), single expressions (gen_expr) and calls of every builtin with
odd arguments (gen_builtin_program). Each must end in a value or a LangError with a span
inside the program, no Python/NumPy wording (nor a doubled word, counted with it), no Python
warning, within 5 s. The summary gives
the count of programs, the time, the outcomes by error kind, and every failure grouped by its
first line (K examples of each shown). Exit status 0 when there is no failure. With --device the
programs run on that device (tests/cross_device.py runs the same programs on numpy and torch:cpu
and compares what they print and end with).
"""
from __future__ import annotations

import argparse
import atexit
import collections
import os
import shutil
import random
import sys
import tempfile
import time
import traceback

# the shared helpers (tests/) and the generators of tests/end_to_end/test_fuzz.py and test_differential.py,
# as pyproject's pytest pythonpath gives them to the tests
sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)), os.path.join(os.path.dirname(os.path.abspath(__file__)), "end_to_end")]

import test_fuzz as F          # noqa: E402  (the generators and the checks)


def program(k: int, seed: int) -> tuple[str, str]:
    kind = ("program", "expression", "builtins")[k % 3]
    if kind == "program":
        return kind, F.gen_program(seed)
    if kind == "expression":
        return kind, F.PRELUDE + "print(" + F.gen_expr(random.Random(seed), 4) + ")\n"
    return kind, F.gen_builtin_program(seed)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", nargs="?", type=int, default=50_000)
    ap.add_argument("--seed", type=int, default=20261130)
    ap.add_argument("--show", type=int, default=2)
    ap.add_argument("--device", default=None, help="run the programs on this device (numpy, torch:cpu, ...): "
                                                   "TAPEML_DEVICE for this run (CI runs a subset on torch:cpu)")
    args = ap.parse_args(argv)
    if args.device:
        from tapeml.array import backend
        os.environ["TAPEML_DEVICE"] = args.device
        backend.set_current(backend.from_environment())     # the process's default session
    work = tempfile.mkdtemp(prefix="tapeml_fuzz_long_")     # anything written lands here
    os.chdir(work)
    atexit.register(shutil.rmtree, work, True)
    master = random.Random(args.seed)
    outcomes: collections.Counter = collections.Counter()
    by_generator: collections.Counter = collections.Counter()
    failures: dict[str, list[str]] = collections.defaultdict(list)
    start = time.perf_counter()
    for k in range(args.n):
        kind, source = program(k, master.getrandbits(64))
        by_generator[kind] += 1
        try:
            err = F.run_program(source)
        except AssertionError as e:
            text = str(e) or ("AssertionError at " + traceback.format_exc().strip().splitlines()[-3].strip()
                              + "\nin the program:\n" + source)
            first = text.splitlines()[0]
            outcomes["FAILURE"] += 1
            failures[first[:160]].append(text)
            continue
        outcomes["ok" if err is None else err.kind] += 1
        if (k + 1) % 5000 == 0:
            print(f"  {k + 1} programs, {time.perf_counter() - start:.0f} s, {outcomes['FAILURE']} failures",
                  file=sys.stderr, flush=True)
    elapsed = time.perf_counter() - start
    print(f"programs: {args.n} ({', '.join(f'{v} {k}' for k, v in sorted(by_generator.items()))}), "
          f"seed {args.seed}, device {args.device or os.environ.get('TAPEML_DEVICE') or 'numpy'}")
    print(f"time: {elapsed:.0f} s ({elapsed / args.n * 1000:.1f} ms a program)")
    print("outcomes: " + ", ".join(f"{k} {v}" for k, v in outcomes.most_common()))
    internal = sum(len(v) for k, v in failures.items() if not k.startswith(("Python/NumPy wording",
                                                                            "a Python exception's text",
                                                                            "Python warnings")))
    wording = sum(len(v) for k, v in failures.items() if k.startswith(("Python/NumPy wording",
                                                                       "a Python exception's text",
                                                                       "Python warnings")))
    print(f"internal errors (any non-LangError, bad span, hang): {internal}; Python wording or warnings: {wording}")
    for first, texts in sorted(failures.items(), key=lambda kv: -len(kv[1])):
        print(f"\n[{len(texts)}x] {first}")
        for t in texts[:args.show]:
            print("    " + t.replace("\n", "\n    ")[:1500])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
