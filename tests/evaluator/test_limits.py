"""Resource limits (issue 9): every one ends in a clear language error or a value, never a
crash, a Python traceback or a machine out of memory. Deep cases run the real `tapeml` command
in a subprocess, so that a segfault (exit -11) would be seen."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import slow_after
from support import TAPEML, allocates_at_most, error_of, output_of, run, run_file

from tapeml.syntax.errors import IOErr, IndexErr, LangError, LangSyntaxError, RecursionErr, ValueErr
from tapeml.syntax.parser import parse


# ---- nesting ---------------------------------------------------------------------------------
@pytest.mark.parametrize("opener, closer, n", slow_after(1, [("(", ")", 100_000), ("[", "]", 100_000), ("{a = ", "}", 20_000)]))
def test_100000_nested_brackets_in_process_is_a_syntax_error(opener, closer, n):
    source = "x = " + opener * n + "1" + closer * n
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)           # Python's default in-process (the CLI raises it)
    try:
        with pytest.raises(LangSyntaxError) as info:
            parse(source, "<deep>")
    finally:
        sys.setrecursionlimit(old)
    err = info.value
    assert "nesting too deep" in err.message
    assert err.span.line == 1 and 5 <= err.span.col <= len(source)


@pytest.mark.parametrize("opener, closer", slow_after(1, [("(", ")"), ("[", "]")]))
def test_100000_nested_brackets_in_the_cli(tmp_path, opener, closer):
    proc = run_file(tmp_path, "x = " + opener * 100_000 + "1" + closer * 100_000 + "\nprint(x)\n")
    assert proc.returncode == 1, proc.stderr[:500]
    first = proc.stderr.splitlines()[0]
    assert "prog.ml:1:" in first and "SyntaxError: nesting too deep" in first
    assert "Traceback" not in proc.stderr


def test_deeply_nested_operators_and_postfix_in_the_cli(tmp_path):
    source = ("a = " + "-" * 100_000 + "1\n")
    proc = run_file(tmp_path, source)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "prog.ml:1:1: RecursionError: the computation nests too deeply" in proc.stderr
    assert "split it into several statements" in proc.stderr and "Python" not in proc.stderr
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)           # Python's default in-process (the CLI raises it)
    try:
        err = error_of("x = [1]\ny = x" + "[0]" * 5_000 + "\n")
    finally:
        sys.setrecursionlimit(old)
    assert isinstance(err, RecursionErr) and (err.span.line, err.span.col) == (2, 1)


def test_nested_string_interpolation_is_capped():
    source = '"{' * 60 + "1" + '}"' * 60
    with pytest.raises(LangSyntaxError) as info:
        parse(source)
    assert "nesting too deep: strings interpolated inside strings more than 50 levels" in info.value.message
    assert info.value.span.line == 1
    assert output_of("print(" + '"{' * 10 + "1" + '}"' * 10 + ")") == "1\n"


# ---- recursion -------------------------------------------------------------------------------
RECURSIVE = """fn f(n)
    if n == 0
        return 0
    end
    return {body}
end
print({call})
"""


def test_10000_deep_recursion_works_in_the_cli(tmp_path):
    proc = run_file(tmp_path, RECURSIVE.format(body="1 + f(n - 1)", call="f(10000)"))
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "10000\n", "")


@pytest.mark.parametrize("body, call, shown", [
    ("(f(n - 1), 1)", "len(f(19000))", "2\n"),           # used to segfault (C stack)
    ('"{f(n - 1)}"', "f(19000)", "0\n"),                  # used to segfault (C stack)
    ("{a = f(n - 1)}", "f(3)", "{a = {a = {a = 0}}}\n"),
])
def test_deep_recursion_through_containers_does_not_crash(tmp_path, body, call, shown):
    proc = run_file(tmp_path, RECURSIVE.format(body=body, call=call))
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, shown, "")


def test_a_19000_deep_tuple_prints_and_compares(tmp_path):
    source = RECURSIVE.format(body="(f(n - 1),)", call="1") + "x = f(19000)\nprint(x == x)\ns = str(x)\nprint(len(s))\n"
    proc = run_file(tmp_path, source)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "1\ntrue\n57001\n", "")


def test_runaway_recursion_is_a_recursion_error(tmp_path):
    proc = run_file(tmp_path, "fn f(n)\n    return f(n + 1)\nend\nf(0)\n")
    assert proc.returncode == 1
    assert "prog.ml:2:12: RecursionError: more than 20000 nested calls (in f); is a recursion missing " \
           "its base case?" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.splitlines()) < 40


def test_runaway_recursion_in_process_is_a_recursion_error():
    err = error_of("fn f(n)\n    return (f(n + 1),)\nend\nf(0)\n")
    # which limit comes first depends on the process's Python recursion limit
    assert isinstance(err, RecursionErr) and "(in f)" in err.message


# ---- sizes -----------------------------------------------------------------------------------
def test_zeros_1e6_by_1e6_is_refused_before_allocating():
    with allocates_at_most(10e6):
        err = error_of("x = zeros(1e6, 1e6)")
    assert isinstance(err, ValueErr)
    from tapeml.builtins.util import MAX_ELEMENTS
    from tapeml.array.number_text import format_number
    limit = format_number(float(f"{MAX_ELEMENTS * 8 / 1e9:.3g}"))
    assert err.message == ("zeros(1000000, 1000000) would need 8000 GB of float64; "
                           f"the limit is {limit} GB (half this machine's memory, at most 8 GB)")
    assert (err.span.line, err.span.col) == (1, 5)


@pytest.mark.parametrize("call", ["ones(1e6, 1e6)", "fill(1, 1e6, 1e6)", "eye(1e7)"])
def test_other_constructors_are_refused_too(call):
    err = error_of(call)
    assert isinstance(err, ValueErr) and "would need" in err.message and "the limit is" in err.message


def test_a_one_gigabyte_string_repetition_is_refused():
    err = error_of('s = "x" * 1e9')
    assert isinstance(err, ValueErr)
    assert err.message == "the repeated string would take 1 GB; the limit is 0.1 GB"
    assert (err.span.line, err.span.col) == (1, 9)
    assert output_of('print(len("ab" * 3), "" * 1e300 == "")') == "6 true\n"


def test_broadcasting_beyond_memory_is_a_value_error():
    err = error_of("x = zeros(1e5, 1) + zeros(1, 1e5)")
    assert isinstance(err, ValueErr)
    # refused by the size guard before allocating (lang/array/limits.py), in the constructors' words
    assert err.message.startswith("'+' of 100000x1 and 1x100000 (a result of 100000x100000) would need "
                                  "80 GB of float64; the limit is ")
    assert (err.span.line, err.span.col) == (1, 19)


def test_an_index_of_1e300():
    err = error_of("x = [1, 2]\ny = x[1e300]")
    assert isinstance(err, IndexErr)
    assert err.message == "index 1e300 is out of range for a vector of length 2"
    assert (err.span.line, err.span.col) == (2, 7)
    for src in ["x = [1, 2]\nx[1e300] = 5", "x = [1, 2]\ny = x[0:1e300]", "x = (1, 2)\ny = x[1e300]",
                "x = [1, 2]\ny = x[[0, 1e300]]", "x = [1, 2]\ny = x[1e999]", "x = \"ab\"\ny = x[1e300]"]:
        assert isinstance(error_of(src), IndexErr), src


def test_a_range_of_1e300_elements_is_refused():
    err = error_of("x = 1:1e300")
    assert isinstance(err, ValueErr) and err.message == "the range would have 1e300 elements; the limit is 100000000"


# ---- the tape of a long loop -----------------------------------------------------------------
TAPE_CHILD = r"""
import resource, sys
from tapeml.evaluator.interpreter import Interpreter
n, repeats = int(sys.argv[1]), int(sys.argv[2])
src = '''fn f(x)
    s = x
    i = 0
    while i < N
        s = s * 0.999999 + 0.000001
        i += 1
    end
    return s
end
g = 0
for k in 1:R
    g = grad(f, 2.0)
end
print(g)
'''.replace("N", str(n)).replace("R", str(repeats))
Interpreter().run(src, "<tape>")
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def peak_rss_kb(n: int, repeats: int = 1) -> tuple[str, int]:
    proc = subprocess.run([sys.executable, "-c", TAPE_CHILD, str(n), str(repeats)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    value, rss = proc.stdout.split()
    return value, int(rss)


N_TAPE = int(os.environ.get("TAPEML_TAPE_STEPS", "100000"))   # 2 tape entries per step


def test_a_long_tape_has_bounded_memory():
    """grad of a loop of N steps records 2N entries; memory grows linearly with the tape (what
    backward needs), by a bounded amount per entry, and is given back after each grad."""
    small_value, small = peak_rss_kb(N_TAPE // 10)
    value, big = peak_rss_kb(N_TAPE)
    assert float(value) == pytest.approx(0.999999 ** N_TAPE, rel=1e-6)
    per_entry = (big - small) * 1024 / (2 * (N_TAPE - N_TAPE // 10))
    assert per_entry < 1000, f"{per_entry:.0f} bytes per tape entry"
    # three grads in a row peak no higher than one: nothing of a finished tape is kept
    _, thrice = peak_rss_kb(N_TAPE, repeats=3)
    assert thrice < big * 1.15 + 10_000


# ---- Ctrl-C -----------------------------------------------------------------------------------
def test_ctrl_c_in_a_script_exits_130_with_one_line(tmp_path):
    path = tmp_path / "spin.ml"
    path.write_text('print("started")\ni = 0\nwhile true\n    i += 1\nend\n', encoding="utf-8")
    proc = subprocess.Popen(TAPEML + [str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "started\n"
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert err.splitlines() == ["Interrupted (Ctrl-C)"]


# ---- import -------------------------------------------------------------------------------------
def test_import_of_a_missing_file_names_the_resolved_path(tmp_path):
    main = tmp_path / "main.ml"
    main.write_text('m = import("lib/missing.ml")\n', encoding="utf-8")
    with pytest.raises(IOErr) as info:
        run(main.read_text(), filename=str(main))
    resolved = os.path.join(str(tmp_path), "lib", "missing.ml")
    assert info.value.message == f'import: no file at {resolved} (from "lib/missing.ml")'
    assert (info.value.span.line, info.value.span.col) == (1, 5)


def stderr_of_main_importing(tmp_path, monkeypatch, lib: str, main: str) -> list[str]:
    """Run `tapeml main.ml` in tmp_path, with lib/m.ml beside it; the lines it printed on stderr."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "m.ml").write_text(lib, encoding="utf-8")
    (tmp_path / "main.ml").write_text(main, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    tml = os.path.join(os.path.dirname(sys.executable), "tapeml")
    return subprocess.run([tml, "main.ml"], capture_output=True, text=True).stderr.splitlines()


def test_an_error_in_an_imported_file_names_it_as_the_script_is_named(tmp_path, monkeypatch):
    err = stderr_of_main_importing(tmp_path, monkeypatch, "fn bad(x)\n  return x + [1, 2, 3]\nend\n",
                                   'm = import("lib/m.ml")\nm.bad([1, 2])\n')
    assert err[0].startswith(os.path.join("lib", "m.ml") + ":2:12: ShapeError: cannot add")
    assert err[-1] == "  called from main.ml:2:1 in bad"


def test_an_error_while_importing_shows_the_import(tmp_path, monkeypatch):
    err = stderr_of_main_importing(tmp_path, monkeypatch, "a = 1\nx = nope\n", 'print(1)\nm = import("lib/m.ml")\n')
    assert err[0] == os.path.join("lib", "m.ml") + ":2:5: NameError: undefined name 'nope'"
    assert err[-1] == '  called from main.ml:2:5 in import("lib/m.ml")'


# ---- untrusted checkpoint files (save/load) ------------------------------------------------------
def load_error(tmp_path, data: bytes, name: str = "bad.npz") -> LangError:
    (tmp_path / name).write_bytes(data)
    script = tmp_path / "main.ml"
    script.write_text("# relative paths start here\n")
    return error_of(f'x = load("{name}")\n', filename=str(script))


def good_checkpoint(tmp_path) -> bytes:
    script = tmp_path / "save.ml"
    script.write_text("# relative paths start here\n")
    run('save("good.npz", {w = [1, 2; 3, 4], b = (1, [5])})\n', filename=str(script))
    return (tmp_path / "good.npz").read_bytes()


def test_load_of_a_truncated_or_foreign_file_is_a_clear_error(tmp_path):
    data = good_checkpoint(tmp_path)
    for blob in (data[:100], data[: len(data) // 2], b"hello\n", b""):
        err = load_error(tmp_path, blob)
        assert err.kind == "IOError"
        assert f"{tmp_path / 'bad.npz'} is not a checkpoint" in err.message
        assert (err.span.line, err.span.col) == (1, 5)


def test_load_never_unpickles(tmp_path):
    import numpy as np
    np.savez(tmp_path / "obj.npz", w=np.array([{"a": 1}], dtype=object))
    err = load_error(tmp_path, (tmp_path / "obj.npz").read_bytes())
    assert err.kind == "IOError" and "pickled objects" in err.message and "refuses" in err.message


def test_load_of_a_missing_file_names_the_resolved_path(tmp_path):
    (tmp_path / "main.ml").write_text("# relative paths start here\n")
    err = error_of('x = load("nope.npz")\n', filename=str(tmp_path / "main.ml"))
    assert err.kind == "IOError" and str(tmp_path / "nope.npz") in err.message
