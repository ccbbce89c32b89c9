"""The same program on two devices (issue 38, item 4): run a tapeml program on NumPy and on
torch:cpu, each in a fresh session (its own State: device, float type, a generator seeded 0), and
say where the two differ: what it printed, the error it ended with (kind, message, line and
column), and its variables when it ended (each as the one printer writes it, with its float type).
A message that came from a Python exception's text (`python_text`) or an exception that is not a
language error is reported too, on either device.

    python tests/cross_device.py [N] [--seed S] [--show K] [--families fuzz,differential]

runs N programs of each family (default 3,000): the fuzz generators of tests/end_to_end/test_fuzz.py
(whole programs, single expressions, calls of every builtin with odd arguments; tests/fuzz_long.py
draws them the same way) and the differential generators of tests/end_to_end/test_differential.py
(expressions and statements with gradients), and prints the counts and every disagreement,
grouped by its first line. tests/end_to_end/test_cross_device.py runs a small count by default and a larger
one when the slow tests run.
"""
from __future__ import annotations

import argparse
import collections
import io
import os
import random
import shutil
import sys
import time
import warnings

import numpy as np

# the shared helpers (tests/) and the generators of tests/end_to_end/test_fuzz.py and test_differential.py,
# as pyproject's pytest pythonpath gives them to the tests
sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)), os.path.join(os.path.dirname(os.path.abspath(__file__)), "end_to_end")]

from tapeml.array import backend as B, context, printer, values as V  # noqa: E402
from tapeml.array.tape import raw  # noqa: E402
from tapeml.evaluator.interpreter import Interpreter  # noqa: E402
from tapeml.syntax.errors import LangError  # noqa: E402

from support import Hang, time_limit  # noqa: E402

DEVICES = ("numpy", "torch:cpu")
SECONDS = 10.0


def _fresh_files() -> None:
    """The fuzz's file paths as the first run found them: what one device's run wrote is not
    there for the other's (a load would find it on one device only)."""
    import test_fuzz as F
    for name in os.listdir(F.FUZZ_DIR):
        if name in ("fifo", "dir"):
            continue
        path = os.path.join(F.FUZZ_DIR, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, True)
        else:
            os.remove(path)
    for name in os.listdir(os.path.join(F.FUZZ_DIR, "dir")):
        p = os.path.join(F.FUZZ_DIR, "dir", name)
        shutil.rmtree(p, True) if os.path.isdir(p) else os.remove(p)


def leaves(v, path="", depth=0) -> list:
    """A variable as (path, what, value) leaves: a matrix as ("<dtype> <shape>", its NumPy array),
    a number as ("number", float), anything else as (its kind, the printer's text)."""
    r = raw(v)
    if type(r) in B.ARRAYS:
        a = B.to_numpy(r)
        return [(path, f"{a.dtype.name} {a.shape}", a)]
    if isinstance(r, tuple) and depth < 20:
        return [x for i, item in enumerate(r) for x in leaves(item, f"{path}[{i}]", depth + 1)]
    if isinstance(r, V.Record) and depth < 20:
        return [x for k, item in r.fields.items() for x in leaves(item, f"{path}.{k}", depth + 1)]
    if type(r) is float:
        return [(path, "number", r)]
    try:
        return [(path, type(r).__name__, printer.format_value(r))]
    except Exception as e:       # noqa: BLE001 (the printer failing is itself a finding)
        return [(path, type(r).__name__, f"<the printer failed: {type(e).__name__}: {e}>")]


def close(a, b, float32=False, floor=0.0) -> bool:
    """Two numbers or NumPy arrays equal up to rounding noise: NaN where the other is NaN, the same
    infinities, and the rest within 1e-9 (float32: 1e-5) of the element plus the same of the
    largest finite element of either (a sum that is 0 in exact arithmetic is noise on both)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return False
    if not np.array_equal(np.isnan(a), np.isnan(b)) or not np.array_equal(np.isinf(a), np.isinf(b)) \
            or not np.array_equal(a[np.isinf(a)], b[np.isinf(b)]):
        return False
    fin = np.isfinite(a) & np.isfinite(b)
    if not fin.any():
        return True
    x, y = a[fin], b[fin]
    tol = 1e-5 if float32 else 1e-9
    scale = max(float(np.max(np.abs(x))), float(np.max(np.abs(y))))
    return bool(np.all(np.abs(x - y) <= tol * (np.abs(x) + scale) + floor + 1e-300))


def largest(variables: dict) -> float:
    """The largest finite magnitude among a run's numbers and float matrices."""
    top = 0.0
    for entries in variables.values():
        for _, w, x in entries:
            if w == "number" or w.startswith("float"):
                a = np.asarray(x, dtype=np.float64)
                a = a[np.isfinite(a)]
                if a.size:
                    top = max(top, float(np.max(np.abs(a))))
    return top


_NUMBER = __import__("re").compile(r"[-+]?(?:\d+\.?\d*(?:e[-+]?\d+)?|inf|nan)")


def close_text(a: str, b: str) -> bool:
    """Two printed texts that differ only in the last digits of their numbers (the printer's
    6 significant digits of values equal up to rounding noise)."""
    pa, pb = _NUMBER.split(a), _NUMBER.split(b)
    if pa != pb:
        return False
    na = [float(t) for t in _NUMBER.findall(a)]
    nb = [float(t) for t in _NUMBER.findall(b)]
    if len(na) != len(nb):
        return False
    x, y = np.array(na), np.array(nb)
    fin = np.isfinite(x) & np.isfinite(y)
    if not np.array_equal(x[~fin], y[~fin], equal_nan=True):
        return False
    scale = float(np.max(np.abs(np.concatenate([x[fin], y[fin]])))) if fin.any() else 0.0
    return bool(np.all(np.abs(x[fin] - y[fin]) <= 2e-6 * (np.abs(x[fin]) + scale) + 1e-300))


def outcome(source: str, device: str, filename: str = "<cross>") -> dict:
    """What running `source` on `device` gave: printed text, the error (kind, message, line,
    column, whether it is a Python exception's text) or a non-language exception, the variables."""
    _fresh_files()
    out, err = io.StringIO(), io.StringIO()
    echoed = []
    state = context.State(backend=B.make(device), rng=np.random.default_rng(0))
    result = {"device": device}
    try:
        with time_limit(SECONDS), state, warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            interp = Interpreter(out=out)
            interp.err = err
            try:
                interp.run(source, filename, echo=echoed.append)
                result["error"] = None
            except LangError as e:
                span = e.span
                result["error"] = (e.kind, e.message, span.line if span else None, span.col if span else None)
                if getattr(e, "python_text", False):
                    result["python_text"] = f"{e.kind}: {e.message}"
            result["warnings"] = sorted({f"{w.category.__name__}: {w.message}" for w in seen})
            try:
                names = interp.variables()
                result["variables"] = {k: leaves(v) for k, v in sorted(names.items())
                                       if not k.startswith("_") and k != "ans"}
                result["variables"].update({f"<echo {i}>": leaves(v) for i, v in enumerate(echoed)})
            except Exception as e:   # noqa: BLE001
                result["variables"] = {"<variables>": f"{type(e).__name__}: {e}"}
    except Hang as e:
        result["hang"] = str(e)
    except Exception as e:       # noqa: BLE001 (a Python exception reaching the user: a finding)
        import traceback
        result["crash"] = f"{type(e).__name__}: {e}"
        result["traceback"] = traceback.format_exc(limit=-4)
    finally:
        _close_figures()
    result["printed"] = out.getvalue()
    result["notes"] = err.getvalue()
    return result


def _close_figures() -> None:
    plot = sys.modules.get("tapeml.builtins.plot")
    if plot is not None:
        plot.close_all()


def differences(a: dict, b: dict, float32: bool = False) -> tuple[list[str], list[str]]:
    """Where b (another device) differs from a (NumPy), one line each: (disagreements, differences
    of rounding noise only). float32: the program computes in float32 (its numbers are float32
    results: noise at 1e-5)."""
    out, noise = [], []
    dev = b["device"]
    for key in ("crash", "hang"):
        if (key in b or key in a) and a.get(key) != b.get(key):
            out.append(f"{key}: numpy {a.get(key)!r} / {dev} {b.get(key)!r}")
    if a.get("error") != b.get("error"):
        out.append(f"error: numpy {a.get('error')!r} / {dev} {b.get('error')!r}")
    for key in ("printed", "notes"):
        la, lb = a[key].splitlines(), b[key].splitlines()
        for i in range(max(len(la), len(lb))):
            x, y = (la[i] if i < len(la) else "<end>"), (lb[i] if i < len(lb) else "<end>")
            if x != y:
                (noise if close_text(x, y) else out).append(f"{key} line {i + 1}: numpy {x[:300]!r} / {dev} {y[:300]!r}")
                break
    va, vb = a.get("variables", {}), b.get("variables", {})
    # a quantity that is 0 in exact arithmetic (a gradient through a constant) is rounding noise on
    # both devices: noise below 1e-12 (float32: 1e-6) of the run's largest number is not compared
    floor = (1e-6 if float32 else 1e-12) * largest(va)
    for k in sorted(set(va) | set(vb)):
        if k not in va or k not in vb:
            out.append(f"variable {k}: only on {'numpy' if k in va else dev}")
            continue
        la, lb = va[k], vb[k]
        if [(p, w) for p, w, _ in la] != [(p, w) for p, w, _ in lb]:
            out.append(f"variable {k}: numpy {[(p, w) for p, w, _ in la][:6]} / {dev} {[(p, w) for p, w, _ in lb][:6]}")
            continue
        for (p, w, x), (_, _, y) in zip(la, lb):
            if w == "number" or " " in w:      # a number, a matrix
                if (close(x, y, float32 or w.startswith("float32"), floor) if w.startswith(("number", "float"))
                        else np.array_equal(x, y)):
                    if not (np.array_equal(x, y, equal_nan=True)):
                        noise.append(f"variable {k}{p}: rounding")
                    continue
                out.append(f"variable {k}{p} ({w}): numpy {np.array2string(np.asarray(x), threshold=8)[:300]} / "
                           f"{dev} {np.array2string(np.asarray(y), threshold=8)[:300]}")
                break
            if x != y:
                out.append(f"variable {k}{p} ({w}): numpy {x[:300]!r} / {dev} {y[:300]!r}")
                break
    if a.get("warnings") != b.get("warnings"):
        out.append(f"warnings: numpy {a.get('warnings')} / {dev} {b.get('warnings')}")
    return out, noise


def python_texts(r: dict) -> list[str]:
    """The messages of a run that were Python's text, not tapeml's (python_text, a crash, wording)."""
    import test_fuzz as F
    found = []
    if "python_text" in r:
        found.append(f"python text on {r['device']}: {r['python_text']}")
    if "crash" in r:
        found.append(f"not a language error on {r['device']}: {r['crash']}")
    err = r.get("error")
    if err is not None:
        word = F.python_wording(err[1])
        if word:
            found.append(f"Python wording {word!r} on {r['device']}: {err[0]}: {err[1]}")
    return found


# ---- the programs -----------------------------------------------------------------------------
def fuzz_program(k: int, seed: int) -> tuple[str, str]:
    """The k-th program of tests/fuzz_long.py's rotation (whole programs, expressions, builtins)."""
    import fuzz_long
    return fuzz_long.program(k, seed)


def differential_program(k: int) -> tuple[str, str]:
    """The k-th differential program (expressions and statements in turn), as tapeml source."""
    import test_differential as D
    family = ("expression", "statements")[k % 2]
    case = (D.draw_expression if k % 2 == 0 else D.draw_statements)(k // 2)
    return family, case.ml


_NOT_COMPARED = ("clock(", "device(")      # what differs by design: the time, the device's name


def examples() -> list:
    """Every builtin's documented examples, as the registry declares them."""
    import test_fuzz as F
    return [(name, ex) for name, b, _ in F._registry() for ex in b.examples]


_NUMBER_LITERAL = __import__("re").compile(r"(?<![\w.])(\d+\.?\d*(?:e[-+]?\d+)?)(?![\w.(])")
_STRING = __import__("re").compile(r'"(?:[^"\\]|\\.)*"')


def zero_d(source: str) -> str:
    """`source` with every number literal n outside strings written as a 0-d matrix, fill(n),
    and true and false as 0-d comparisons: where NumPy takes a 0-d matrix for a number, every
    device must."""
    parts, last = [], 0
    for m in _STRING.finditer(source):
        parts.append(_zero_d_code(source[last:m.start()]))
        parts.append(m.group(0))
        last = m.end()
    parts.append(_zero_d_code(source[last:]))
    return "".join(parts)


def _zero_d_code(code: str) -> str:
    code = _NUMBER_LITERAL.sub(lambda m: f"fill({m.group(1)})", code)
    code = __import__("re").sub(r"\btrue\b", "(fill(1) == 1)", code)
    return __import__("re").sub(r"\bfalse\b", "(fill(1) == 0)", code)


FLOAT32 = 'set_dtype("float32")\n'


def programs(n: int, seed: int, families=("fuzz", "differential")):
    """(generator, source) for n programs of each family (the examples: all of them, n or more)."""
    if "fuzz" in families or "fuzz32" in families:
        master = random.Random(seed)
        for k in range(n):
            kind, source = fuzz_program(k, master.getrandbits(64))
            if "fuzz" in families:
                yield kind, source
            if "fuzz32" in families:
                yield kind + " float32", FLOAT32 + source
    if "differential" in families:
        for k in range(n):
            yield differential_program(k)
    if "examples" in families:
        yield from example_programs()


# a float64 example that compares rounding noise with a bound below float32's resolution (1e-12)
_FLOAT64_BOUND = __import__("re").compile(r"<\s*1e-(1[0-9]|[2-9][0-9])\b")


def example_programs(limit: int | None = None):
    """Every builtin's examples (of the first `limit` builtins): as written, in float32 (but those
    that compare rounding noise with a float64 bound) and with every number a 0-d matrix."""
    names = []
    for name, ex in examples():
        if name not in names:
            names.append(name)
        if limit is not None and len(names) > limit:
            return
        yield "example", ex
        if not _FLOAT64_BOUND.search(ex):
            yield "example float32", FLOAT32 + ex
        yield "example 0-d", zero_d(ex)


def compare(source: str) -> tuple[list[str], list[str], list[str], dict]:
    """(disagreements, rounding-noise differences, Python-text messages, NumPy's outcome) of one
    program on the two devices."""
    a = outcome(source, DEVICES[0])
    b = outcome(source, DEVICES[1])
    return *differences(a, b, float32="float32" in source), python_texts(a) + python_texts(b), a


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", nargs="?", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=38)
    ap.add_argument("--show", type=int, default=2)
    ap.add_argument("--families", default="fuzz,fuzz32,differential,examples")
    args = ap.parse_args(argv)
    families = tuple(args.families.split(","))
    import tempfile
    os.environ["TAPEML_PROGRESS"] = "0"      # no progress bars on stderr
    work = tempfile.mkdtemp(prefix="tapeml_cross_device_")     # anything written with a relative path lands here
    os.chdir(work)
    tally: collections.Counter = collections.Counter()
    outcomes: collections.Counter = collections.Counter()
    found: dict = collections.defaultdict(list)
    rounding = 0
    texts: dict = collections.defaultdict(list)
    start = time.perf_counter()
    for count, (kind, source) in enumerate(programs(args.n, args.seed, families), 1):
        if any(word in source for word in _NOT_COMPARED):
            tally["not compared (clock, device)"] += 1
            continue
        tally[kind] += 1
        diffs, noise, pytexts, a = compare(source)
        if noise and not diffs:
            rounding += 1
        outcomes["ok" if a.get("error") is None else a["error"][0]] += 1
        if diffs:
            found[diffs[0][:140]].append(source + "\n  " + "\n  ".join(diffs))
        for t in pytexts:
            texts[t[:140]].append(source)
        if count % 500 == 0:
            print(f"  {count} programs, {time.perf_counter() - start:.0f} s, "
                  f"{sum(map(len, found.values()))} disagreements", file=sys.stderr, flush=True)
    total = sum(tally.values())
    print(f"programs: {total} ({', '.join(f'{v} {k}' for k, v in sorted(tally.items()))}), seed {args.seed}, "
          f"{time.perf_counter() - start:.0f} s")
    print("numpy outcomes: " + ", ".join(f"{k} {v}" for k, v in outcomes.most_common()))
    print(f"disagreements: {sum(map(len, found.values()))} programs in {len(found)} groups "
          f"(and {rounding} that differ only by rounding noise); "
          f"Python-text messages: {sum(map(len, texts.values()))} in {len(texts)} groups")
    for first, items in sorted(found.items(), key=lambda kv: -len(kv[1])):
        print(f"\n[{len(items)}x] {first}")
        for t in items[:args.show]:
            print("    " + t.replace("\n", "\n    ")[:2000])
    for first, items in sorted(texts.items(), key=lambda kv: -len(kv[1])):
        print(f"\n[{len(items)}x] {first}")
        for t in items[:args.show]:
            print("    " + t.replace("\n", "\n    ")[:1200])
    return 1 if found or texts else 0


if __name__ == "__main__":
    sys.exit(main())
