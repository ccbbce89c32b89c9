"""The same words and values on every device (issue 38, item 4): a program prints the same, ends with
the same error (kind, message, line and column) and leaves the same variables on torch:cpu as on
NumPy; a device that cannot be used is refused before anything runs, the same way wherever it is
chosen.

The generated programs (tests/cross_device.py runs them: the fuzz generators of tests/end_to_end/test_fuzz.py
as tests/fuzz_long.py draws them, in float64 and float32; the differential generators of
tests/end_to_end/test_differential.py; every builtin's documented examples, also in float32 and with every
number a 0-d matrix) run on both devices here: a small count by default, a larger one with the
slow tests (CI). The faults the comparison found are written out below with NumPy's answer."""
from __future__ import annotations

import io
import os
import subprocess
import sys

import numpy as np
import pytest

from support import ROOT, run_cli

HAS_TORCH = all(__import__("importlib").util.find_spec(m) is not None for m in ("torch", "array_api_compat"))
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch:cpu needs the extra tapeml[torch]")
DEVICES = ["numpy", pytest.param("torch:cpu", marks=needs_torch)]


def session_run(device: str, source: str):
    """(what it printed, the error as (kind, line, column, message) or None, the Session)."""
    from tapeml import LangError, Session
    out = io.StringIO()
    s = Session(device=device, out=out, seed=0)
    try:
        s.run(source)
        err = None
    except LangError as e:
        err = (e.kind, e.line, e.column, e.message)
    return out.getvalue(), err, s


# ---- a 0-d matrix is a number, and a comparison of one a true or false, on every device ----------
ZERO_D = [
    # (program, what it prints): NumPy's answers (a 0-d array compares to a numpy.bool_, which `if` takes)
    ("z = zeros()\nif z == 0\n    print(\"yes\")\nend", "yes\n"),
    ("z = zeros()\nc = z == 0\nprint(c, type(c), not c, c and true, c or false)", "true bool false true true\n"),
    ("k = 0\nwhile fill(3) > k\n    k += 1\nend\nprint(k)", "3\n"),
    ("print(fill(2) > 1 and fill(1) < 2, not (fill(1) != 1))", "true true\n"),
    ("print(filter(fn(x) -> x > fill(0), [fill(3), -fill(1), fill(2)]))", "(3, 2)\n"),
    ("print(sort([3, 1, 2], descending=(fill(1) == 1)), argsort([2, 1], descending=fill(1) == 0))", "[3, 2, 1] [1, 0]\n"),
    ("print(str(fill(2) >= 2), \"{fill(1) == 1}\")", "true true\n"),
    ("x = [1, 2, 3]\nprint(x[fill(1)], x[fill(0):fill(1)], \"ab\" * fill(2), len(1:fill(3)))", "2 [1, 2] abab 3\n"),
    ("print(isclose(fill(0) / fill(0), fill(0) / fill(0), equal_nan=(fill(1) == 1)), dropout([1, 2], fill(0.5), "
     "training=(fill(1) == 0)))", "true [1, 2]\n"),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("program, want", ZERO_D, ids=[f"zero_d{i}" for i in range(len(ZERO_D))])
def test_a_0d_matrix_is_a_number_and_its_comparison_a_bool(device, program, want):
    printed, err, _ = session_run(device, program)
    numpy_printed, numpy_err, _ = session_run("numpy", program)
    assert (printed, err) == (numpy_printed, numpy_err)
    if want is not None:
        assert (printed, err) == (want, None)


def test_the_0d_answers_are_numpys():
    """The programs' answers above are NumPy's own: a comparison of a 0-d array is a numpy.bool_,
    which Python's `if` and `not` take."""
    z = np.zeros(())
    assert type(z == 0) is np.bool_ and bool(z == 0) and (not (z != 0))
    assert [v for v in np.array([3.0, -1.0, 2.0]) if v > np.zeros(())] == [3.0, 2.0]


# ---- a number past float32's range is inf in a float32 matrix, on every device ---------------------
F32 = [
    ("a = [3, 4, 5]\na[1] = 1e39", "[3, inf, 5]"),
    ("a = [3, 4, 5]\na[0:1] = 1e39", "[inf, inf, 5]"),
    ("a = [3, 4, 5]\na[[0, 2]] = -1e39", "[-inf, 4, -inf]"),
    ("a = [3, 4, 5]\na[a > 3] = 1e39", "[3, inf, inf]"),
    ("a = [1, 2]\na[0] += 1e39", "[inf, 2]"),
    ("a = zeros()\na[0] = 1e39", "inf"),
    ("a = fill(1e39, 2)", "[inf, inf]"),
    ("a = fill(-1e39)", "-inf"),
    ("a = clip([1, 2, 3], -1e39, 1e39)", "[1, 2, 3]"),
    ("a = where([true, false], [1, 2], 1e39)", "[1, inf]"),
    ("a = where([true, false], 1e39, -1e39)", "[inf, -inf]"),
    ("a = [3, 4, 1e39]", "[3, 4, inf]"),
    ("a = [1, 2] + 1e39", "[inf, inf]"),
    ("a = [1, 2]\na[0] = 3.4028235e38", "[3.402823e38, 2]"),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("program, want", F32, ids=[f"f32_{i}" for i in range(len(F32))])
def test_a_number_past_float32s_range_is_inf_in_a_float32_matrix(device, program, want):
    printed, err, s = session_run(device, 'set_dtype("float32")\n' + program + "\nprint(a, dtype(a))")
    assert (printed, err) == (f"{want} float32\n", None)


def test_the_float32_answers_are_numpys():
    a = np.array([3, 4, 5], dtype=np.float32)
    with np.errstate(over="ignore"):
        a[1] = 1e39
        b = np.full(2, 1e39, dtype=np.float32)
        c = np.where([True, False], np.float32(1e39), np.float32(-1e39))
        d = np.array([1e39], dtype=np.float32)
    assert a.tolist() == [3, np.inf, 5] and b.tolist() == [np.inf] * 2 and c.tolist() == [np.inf, -np.inf]
    assert d.tolist() == [np.inf] and float(np.float32(3.4028235e38)) == float(np.finfo(np.float32).max)


# ---- a device that cannot be used is refused before anything runs, wherever it is chosen ----------
BAD = "torch:cuda:99"       # no machine has a hundred GPUs (without torch: PyTorch is not installed)


def _why(name: str) -> str:
    from tapeml.array import backend as B
    with pytest.raises(B.DeviceError) as info:
        B.make(name)
    return str(info.value)


PROGRAM = 'print("ran")\nx = [1, 2]\nprint(x)\n'


@pytest.mark.parametrize("name", ["bogus", BAD])
def test_a_device_that_cannot_be_used_is_refused_before_anything_runs(name, monkeypatch, tmp_path):
    why = _why(name)
    if name == "bogus":
        assert why == ('device must be "numpy", "torch:cpu", "torch:cuda", "torch:cuda:N" or "torch:mps", '
                       'got "bogus"')
    else:
        assert why.startswith("device torch:cuda:99: this machine has ") or "needs PyTorch" in why
    script = tmp_path / "p.ml"
    script.write_text(PROGRAM, encoding="utf-8")
    # the command line: --device, and TAPEML_DEVICE, refused alike (exit 2, the reason, nothing run)
    monkeypatch.delenv("TAPEML_DEVICE", raising=False)
    code, text = run_cli(["--device", name, str(script)])
    assert code == 2 and text.startswith(f"tapeml: {why}\nusage: tapeml") and "ran" not in text
    monkeypatch.setenv("TAPEML_DEVICE", name)
    for args in ([str(script)], ["-c", PROGRAM], ["-i", str(script)]):
        code, text = run_cli(args)
        assert code == 2 and text.startswith(f"tapeml: TAPEML_DEVICE: {why}\nusage: tapeml"), args
        assert "ran" not in text and "InternalError" not in text
    # the Python API: Session(device=...) and a Session on TAPEML_DEVICE, a ValueError on construction
    from tapeml import Session
    with pytest.raises(ValueError) as info:
        Session()
    assert str(info.value) == f"TAPEML_DEVICE: {why}"
    monkeypatch.delenv("TAPEML_DEVICE")
    with pytest.raises(ValueError) as info:
        Session(device=name)
    assert str(info.value) == why
    # set_device in a program: a language error at the call
    _, err, _ = session_run("numpy", f'print("ran")\nset_device("{name}")')
    assert err == ("ValueError", 2, 1, f"set_device(): {why}")


def test_a_subprocess_with_a_bad_tapeml_device_says_so_and_runs_nothing(tmp_path):
    """The command line as a user starts it: no InternalError, no traceback, nothing run."""
    env = {k: v for k, v in os.environ.items() if k != "TAPEML_DEVICE"}
    env["TAPEML_DEVICE"] = BAD
    (tmp_path / "p.ml").write_text(PROGRAM, encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "tapeml", "p.ml"], env=env, capture_output=True, text=True,
                       timeout=120, cwd=tmp_path)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr.startswith(f"tapeml: TAPEML_DEVICE: {_why(BAD)}\nusage: tapeml")
    assert "Traceback" not in r.stderr and "InternalError" not in r.stderr


# ---- the generated programs, on both devices -----------------------------------------------------
def _compare_all(programs) -> tuple[int, list, list]:
    import cross_device as C
    n, found, texts = 0, [], []
    for kind, source in programs:
        if any(word in source for word in C._NOT_COMPARED):
            continue
        diffs, _noise, pytexts, _ = C.compare(source)
        n += 1
        if diffs:
            found.append(f"[{kind}]\n{source}\n  " + "\n  ".join(diffs))
        texts += [f"[{kind}] {t}\n{source}" for t in pytexts]
    return n, found, texts


def _check(programs, at_least: int):
    n, found, texts = _compare_all(programs)
    assert n >= at_least
    assert not found, f"{len(found)} of {n} programs differ between numpy and torch:cpu; the first:\n" + found[0]
    assert not texts, f"{len(texts)} messages are Python's text, not tapeml's; the first:\n" + texts[0]


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)         # a program's relative paths (savefig) land here
    monkeypatch.setenv("TAPEML_PROGRESS", "0")


@needs_torch
def test_generated_programs_agree_on_both_devices(in_tmp):
    """60 fuzz programs (float64 and float32), 6 differential programs, the examples of 15 builtins
    (as written, in float32, with 0-d numbers): a few seconds."""
    import cross_device as C
    _check(C.programs(60, 38, ("fuzz", "fuzz32")), 100)
    _check(C.programs(6, 38, ("differential",)), 6)
    _check(C.example_programs(limit=15), 40)


@needs_torch
@pytest.mark.slow
def test_many_generated_programs_agree_on_both_devices(in_tmp):
    """1,000 fuzz programs in float64 and float32, 200 differential programs, every builtin's examples."""
    import cross_device as C
    _check(C.programs(1000, 3838, ("fuzz", "fuzz32")), 1900)
    _check(C.programs(200, 3838, ("differential",)), 200)
    _check(C.example_programs(), 1500)
