"""Re-entering the evaluator (issue 25): a builtin that calls a function value back (map, grad,
sort_by, ...) counts toward the one limit of 20,000 nested calls and ends in the documented
RecursionError, never a crash (a segfault used to kill the process and the notebook kernel);
the Python API reaches the same depth, keeps Ctrl-C, refuses Python values tapeml has no form
for with a language error, and two Sessions in two threads never see each other's state.

Deep cases run the real `tapeml` command in a subprocess, so that a segfault would be seen."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from kernel_support import execute, installed_kernelspec, running_kernel
from conftest import slow_after
from support import ROOT, TAPEML, error_of, fresh, output_of, run, run_file

import tapeml
from tapeml.array import context, ops
from tapeml.session import session
from tapeml.evaluator import stack
from tapeml.builtins import random as trandom
from tapeml.builtins.registry import REGISTRY, Builtin
from tapeml.syntax.errors import LangError
from tapeml.evaluator.interpreter import Interpreter
from tapeml.evaluator.scope import MAX_DEPTH

def documented_limit_error(fn: str) -> str:
    """The RecursionError the docs show for a runaway recursion (tests/golden/recursion_runaway.out,
    docs/language.md), for the function `fn`."""
    with open(os.path.join(ROOT, "tests", "golden", "recursion_runaway.out"), encoding="utf-8") as f:
        first = f.readline()
    m = re.search(r"RecursionError: (more than (\d+) nested calls) \(in forever\); (.+)$", first)
    assert m and int(m.group(2)) == MAX_DEPTH == 20000
    with open(os.path.join(ROOT, "docs", "language.md"), encoding="utf-8") as f:
        assert m.group(0) in f.read()
    return f"RecursionError: {m.group(1)} (in {fn}); {m.group(3)}"


def assert_limit_error(proc, col: int, fn: str = "f"):
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-2000:])     # not 139 / -11 (segfault)
    first = proc.stderr.splitlines()[0]
    assert first.startswith(f"prog.ml:1:{col}: {documented_limit_error(fn)}"), first
    assert "Traceback" not in proc.stderr and "Fatal Python error" not in proc.stderr


# ---- A. every builtin that calls back, from the registry ---------------------------------------
def calling_builtins() -> list[str]:
    """The builtins that call a function value back into the evaluator: those that receive the
    interpreter or the session context and take a parameter of kind "function"."""
    return sorted(n for n, b in REGISTRY.items()
                  if (b.interp or b.context) and any(p.kind == "function" for p in b.params))


def test_the_calling_builtins_are_the_ones_that_call_back(tmp_path, monkeypatch):
    """Every builtin's examples run with the calls into user functions watched: the builtins that
    called a function back are exactly the enumerated ones, and a builtin with a function
    parameter can reach the evaluator (it is declared interp=True or context=True)."""
    names = calling_builtins()
    assert {"map", "filter", "reduce", "sort_by", "tree_map", "grad", "jacobian", "hessian"} <= set(names)
    for n, b in REGISTRY.items():
        if any(p.kind == "function" for p in b.params):
            assert b.interp or b.context, n
    running, seen = [], set()
    real_call, real_function = Builtin.call, Interpreter.call_function

    def call(self, interp, args, kwargs, span, **lazy):
        running.append(self.name)
        try:
            return real_call(self, interp, args, kwargs, span, **lazy)
        finally:
            running.pop()

    def call_function(self, fn, args, kwargs, span):
        if span is None and running:            # a call made by a builtin, not by the program
            seen.add(running[-1])
        return real_function(self, fn, args, kwargs, span)
    monkeypatch.setattr(Builtin, "call", call)
    monkeypatch.setattr(Interpreter, "call_function", call_function)
    monkeypatch.chdir(tmp_path)                 # examples that write files write them here
    for b in REGISTRY.values():
        if not (b.interp or b.context):         # a builtin without either cannot reach the evaluator
            continue
        for example in b.examples:
            try:
                run(example)
            except LangError:
                pass
    assert seen == set(names)


def runaway_through(name: str) -> tuple[str, int]:
    """A program whose f calls itself through the builtin `name` forever, and the column of the
    innermost call site, f(n + 1)."""
    b = REGISTRY[name]
    args = []
    for p in b.params:
        if p.kind == "function":
            args.append("fn(a, b=0) -> f(n + 1)")
        elif p.required or p.variadic:
            args.append("[1]" if p.kind == "any" else "1")
    line = f"fn f(n) -> {name}({', '.join(args)})"
    return line + "\nf(0)\n", line.index("f(n + 1)") + 1


@pytest.mark.parametrize("name", slow_after(2, calling_builtins()))
def test_runaway_recursion_through_each_calling_builtin_is_the_documented_error(tmp_path, name):
    source, col = runaway_through(name)
    assert_limit_error(run_file(tmp_path, source), col)


# The shapes of issue 25, each of which used to end in a segfault (exit 139): the error is at
# the call that passes the limit, `at`, in the function named (the 20,001st call is a lambda's
# when two calls make one level and the lambda's call site is a builtin's).
VARIANTS = [
    ("fn f(n) -> map(fn(x) -> f(x + 1), [n])", "f", "f(x"),                         # over a vector
    ("fn f(n) -> map(fn(x) -> f(x + 1), (n,))", "f", "f(x"),                        # over a tuple
    ('fn f(n) -> map(fn(c) -> f(n + 1), "a")', "f", "f(n + 1"),                     # over a string
    ("fn f(n) -> map(fn(p) -> f(n + 1), zip([n], [n]))", "f", "f(n + 1"),           # zip's output
    ("fn f(n) -> map(fn(p) -> f(n + 1), enumerate([n]))", "f", "f(n + 1"),          # enumerate's output
    ("fn f(n) -> map(fn(x) -> map(fn(y) -> f(y + 1), [x]), [n])", "<anonymous>", "map(fn(y"),   # nested
    ('fn f(n) -> "{map(fn(x) -> f(x + 1), [n])}"', "f", "f(x"),                     # in an interpolation
    ("fn f(n, d = map(fn(x) -> f(x + 1), [n])) -> d", "<anonymous>", "map("),       # in a default argument
]


@pytest.mark.parametrize("line, fn, at", slow_after(2, VARIANTS))
def test_runaway_recursion_through_map_in_every_shape(tmp_path, line, fn, at):
    assert_limit_error(run_file(tmp_path, line + "\nf(0)\n"), line.index(at) + 1, fn)


def test_a_9900_deep_recursion_through_map_works(tmp_path):
    source = ("fn f(n)\n    if n == 0\n        return 0\n    end\n"
              "    return map(fn(x) -> f(x - 1), [n])[0] + 1\nend\nprint(f(9900))\n")
    proc = run_file(tmp_path, source)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "9900\n", "")


@pytest.mark.parametrize("sig, code, said", [("SIGINT", 130, "Interrupted (Ctrl-C)\n"),
                                             ("SIGTERM", 143, "Terminated (SIGTERM)\n")])
def test_ctrl_c_and_sigterm_stop_a_computation_on_the_deep_thread(tmp_path, sig, code, said):
    import signal
    path = tmp_path / "prog.ml"
    path.write_text('fn h(n)\n    if n == 0\n        print("at the bottom")\n        while true\n        end\n'
                    '    end\n    return map(fn(x) -> h(x - 1), [n])[0]\nend\nh(3000)\n')
    proc = subprocess.Popen(TAPEML + [str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "at the bottom\n"     # 6000 calls deep: on the deep thread
        proc.send_signal(getattr(signal, sig))
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert (proc.returncode, err) == (code, said)


def test_hand_over_keeps_values_errors_and_traces_in_process():
    """In-process (the test's thread): a recursion past the hand-over depth returns the right
    value, and an error deep down keeps its place and its call chain."""
    interp = fresh()
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(stack.SHALLOW_LIMIT)
    bad = "    return [1, 2] @ [1]"
    try:
        out = output_of("fn f(n)\n  if n == 0\n    return [1, 2]\n  end\n  return f(n - 1) + 1\nend\n"
                        f"print(f(3 * {stack.HOP_DEPTH}))\n", interp)
        assert out == f"[{3 * stack.HOP_DEPTH + 1}, {3 * stack.HOP_DEPTH + 2}]\n"
        e = error_of(f"fn g(n)\n  if n == 0\n{bad}\n  end\n  return g(n - 1)\nend\ng(2500)\n", interp)
    finally:
        sys.setrecursionlimit(old)
    assert (e.kind, e.span.line, e.span.col) == ("ShapeError", 3, bad.index("@") + 1)
    assert e.trace[0][0] == "g" and len(e.trace) == 1000 and e.trace_truncated      # the cap of the chain
    assert interp.depth == 0


# ---- A. the notebook kernel survives -----------------------------------------------------------
@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    pytest.importorskip("jupyter_client", reason="the kernel tests need the jupyter extra")
    pytest.importorskip("ipykernel", reason="the kernel tests need the jupyter extra")
    with installed_kernelspec(tmp_path_factory.mktemp("prefix")), running_kernel() as kernel:
        yield kernel


def test_the_kernel_survives_runaway_recursion_through_map_and_keeps_variables(kernel):
    km, kc = kernel
    execute(kc, "kept = 41")
    reply, _ = execute(kc, "fn f(n) -> map(fn(x) -> f(x + 1), [n])\nf(0)")
    assert reply["status"] == "error" and reply["ename"] == "RecursionError"
    assert reply["evalue"].startswith(documented_limit_error("f").split(": ", 1)[1])
    assert reply["traceback"][0].startswith("In[")
    reply, out = execute(kc, 'fn g(n)\n  if n == 0\n    print("bottom")\n    return 0\n  end\n'
                             "  return map(fn(x) -> g(x - 1), [n])[0] + 1\nend\ng(9900)")
    assert reply["status"] == "ok"
    assert out == [("stream", {"name": "stdout", "text": "bottom\n"}),
                   ("execute_result", {"execution_count": reply["execution_count"],
                                       "data": {"text/plain": "9900"}, "metadata": {}})]
    reply, out = execute(kc, "kept + 1")
    assert out[0][1]["data"]["text/plain"] == "42"


def test_the_kernel_interrupts_a_computation_on_the_deep_thread(kernel):
    km, kc = kernel
    execute(kc, "kept2 = 7")
    msg_id = kc.execute('fn h(n)\n  if n == 0\n    print("deep")\n    while true\n    end\n  end\n'
                        "  return map(fn(x) -> h(x - 1), [n])[0]\nend\nh(3000)")
    while True:                                   # wait until it is 6000 calls deep
        m = kc.get_iopub_msg(timeout=120)
        if m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "stream":
            assert m["content"]["text"] == "deep\n"
            break
    km.interrupt_kernel()
    reply = kc.get_shell_msg(timeout=60)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=60)
    assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "KeyboardInterrupt"
    reply, out = execute(kc, "[kept2, 1]")
    assert reply["status"] == "ok" and out[0][1]["data"]["text/plain"] == "[7, 1]"


# ---- B. the Python API reaches the same depth --------------------------------------------------
RUNAWAY = "fn f(n) -> map(fn(x) -> f(x + 1), [n])\nf(0)\n"
DEEP = "fn d(n)\n  if n == 0\n    return 0\n  end\n  return d(n - 1) + 1\nend\n"


def test_a_session_reaches_the_documented_limit_and_puts_pythons_limit_back():
    before = sys.getrecursionlimit()
    s = tapeml.Session()
    with pytest.raises(tapeml.LangError) as info:
        s.run(RUNAWAY)
    e = info.value
    assert e.kind == "RecursionError" and (e.line, e.column) == (1, 25)
    assert f"{e.kind}: {e.message}".startswith(documented_limit_error("f"))
    s.run(DEEP)
    assert s.call("d", 19_000) == 19_000.0                      # plain calls, 19,000 deep
    assert s.eval("map(fn(x) -> d(x), [19000])") == (19_000.0,)
    s.run("fn m(n)\n  if n == 0\n    return 0\n  end\n  return map(fn(x) -> m(x - 1), [n])[0] + 1\nend\n")
    assert s.eval("m(9900)") == 9900.0                          # 19,800 calls through map
    with pytest.raises(tapeml.LangError) as info:
        s.eval("d(20000)")
    assert f"{info.value.kind}: {info.value.message}".startswith(documented_limit_error("d"))
    assert sys.getrecursionlimit() == before
    assert s.interp.depth == 0


def test_the_deep_thread_runs_in_the_sessions_state():
    s = tapeml.Session(dtype="float32", seed=3)
    s.run("fn r(n)\n  if n == 0\n    return rand(2)\n  end\n  return r(n - 1)\nend\nx = r(1500)")
    x = s["x"]
    assert x.dtype == np.float32 and np.array_equal(x, np.random.default_rng(3).random(2).astype(np.float32))
    assert ops.FLOAT["dtype"] is np.float64 and context.current() is context.DEFAULT


def interrupt_soon(delay=0.5):
    import _thread
    t = threading.Timer(delay, _thread.interrupt_main)
    t.start()
    return t


@pytest.mark.parametrize("depth", [0, 1500])
def test_ctrl_c_raises_keyboard_interrupt_out_of_a_session_and_keeps_it_usable(depth):
    """Ctrl-C (here _thread.interrupt_main) while a Session runs, on this thread or 1500 calls deep
    on the deep one: KeyboardInterrupt comes out of the method, the variables set before stay."""
    s = tapeml.Session()
    s.run("kept = 5\nfn spin(n)\n  if n == 0\n    while true\n    end\n  end\n  return spin(n - 1)\nend")
    timer = interrupt_soon()
    try:
        with pytest.raises(KeyboardInterrupt):
            s.run(f"spin({depth})")
            time.sleep(5)           # (not reached: the loop never ends)
    finally:
        timer.cancel()
    assert s["kept"] == 5.0 and s.interp.depth == 0
    assert s.eval("kept + 1") == 6.0
    s.run(DEEP)
    assert s.call("d", 1200) == 1200.0          # and the deep thread still works


# ---- C. conversions: a language error for what has no tapeml form -------------------------------
def self_dict():
    d = {"a": 1.0}
    d["me"] = d
    return d


def self_list():
    v = [1.0]
    v.append(v)
    return v


def nested_tuple(depth):
    t = ()
    for _ in range(depth):
        t = (t,)
    return t


def nested_list(depth):
    v = [1.0]
    for _ in range(depth):
        v = [v]
    return v


class Thing:
    pass


class ArrayLike:
    def __array__(self, dtype=None, copy=None):
        return np.ones(2)


@pytest.mark.parametrize("value, kind, message", [
    ([[1, 2], [3]], "TypeError", "v is a ragged list: item [0] has 2 items and item [1] has 1 item; "
                                 "the rows of a matrix have equal lengths"),
    ([[[1, 2], [3, 4]], [[1, 2]]], "TypeError", "v is a ragged list: item [0] has the shape 2x2 and item [1] "
                                                "has the shape 1x2"),
    ([1, [2]], "TypeError", "v is a ragged list: item [0] is a number and item [1] has 1 item"),
    (10 ** 400, "ValueError", "v is an int with 401 digits, too large for a number (tapeml's numbers are "
                              "float64: at most about 1.8e308)"),
    ([1, 10 ** 400], "ValueError", "v[1] is an int with 401 digits, too large for a number"),
    ((1, {"w": 10 ** 5000}), "ValueError", "v[1]['w'] is an int with 5001 digits, too large"),
    (self_dict(), "TypeError", "v['me'] is the dict that contains it: a value that contains itself has no "
                               "tapeml form (tapeml values are trees)"),
    (self_list(), "TypeError", "v[1] is the list that contains it"),
    ({1, 2}, "TypeError", "v is a set (tapeml has no sets: a tuple of its items, tuple(sorted(s)), is the nearest)"),
    (1j, "TypeError", "v is a complex number (1j): tapeml's numbers are real"),
    (np.complex128(2), "TypeError", "v is a complex number"),
    (np.array([1j]), "TypeError", "v is a NumPy array of complex numbers (dtype complex128); a matrix holds "
                                  "real numbers"),
    ([1, 2j], "TypeError", "v[1] is a complex number (2j)"),
    # a dict with a key that is no name is a dictionary (issue 29): only keys no dictionary can have fail
    ({float("nan"): 1}, "TypeError", "v has the key nan: a dictionary key cannot be nan"),
    ({"ok": 1, True: 2}, "TypeError", "v has the key True: a dictionary key is a string, a number or a tuple "
                                      "of those, got a bool"),
    ({(1, None): 2}, "TypeError", "v has the key (1, None): a dictionary key is a string, a number or a tuple "
                                  "of those, got None"),
    (Thing(), "TypeError", "v is an object of the Python class Thing; tapeml takes numbers, bools, strings, "
                           "None, NumPy arrays and lists of numbers, tuples, dicts and functions"),
    (ArrayLike(), "TypeError", "v is a ArrayLike (convert it with numpy.asarray(...) first)"),
    (Thing, "TypeError", "v is a Python class (Thing); wrap it in a function to call it from tapeml"),
    (b"x", "TypeError", "v is bytes (decode them to a str first)"),
    (range(3), "TypeError", "v is an object of the Python class range"),
    ([1, "a"], "TypeError", "v[1] is a string ('a'); a list or array given to tapeml holds numbers"),
    ([1, None], "TypeError", "v[1] is None; a list or array given to tapeml holds numbers"),
    ([{"a": 1}], "TypeError", "v[0] is a dict; a list or array given to tapeml holds numbers"),
    (np.array([1, "a"], dtype=object), "TypeError", "v[1] is a string ('a')"),
    (np.array(["a"]), "TypeError", "v is a NumPy array of strings (dtype <U1); a matrix holds real numbers"),
    (np.array(["2020-01-01"], dtype="datetime64[D]"), "TypeError", "v is a NumPy array of dates (datetime64)"),
    (np.ma.masked_array([1, 2], mask=[0, 1]), "TypeError", "v is a masked array with masked elements"),
    (nested_list(70), "TypeError", f"v: the list is nested more than {session.MAX_AXES} deep; a matrix has at "
                                   f"most {session.MAX_AXES} axes"),
])
def test_a_python_value_without_a_tapeml_form_is_a_language_error(value, kind, message):
    s = tapeml.Session()
    with pytest.raises(tapeml.LangError) as info:
        s["v"] = value
    assert info.value.kind == kind
    assert info.value.message.startswith(message), info.value.message
    assert "v" not in s


def test_arguments_of_call_are_named_in_the_message():
    s = tapeml.Session()
    with pytest.raises(tapeml.LangError) as info:
        s.call("softmax", [[1, 2], [3]])
    assert info.value.message.startswith("argument 1 of softmax is a ragged list")
    with pytest.raises(tapeml.LangError) as info:
        s.call("softmax", x={"a": (1, 1j)})
    assert info.value.message.startswith("argument x['a'][1] of softmax is a complex number")


def test_values_that_numpy_holds_as_objects_but_are_numbers_convert():
    s = tapeml.Session()
    s["a"] = np.array([1.0, 2], dtype=object)
    s["b"] = [2 ** 70, 1]                        # past int64: NumPy makes an object array
    s["c"] = np.array(2.5, dtype=object)
    s["m"] = np.ma.masked_array([1, 2])          # nothing masked
    s["u"] = np.array([2 ** 64 - 1], dtype=np.uint64)
    assert np.array_equal(s["a"], [1.0, 2.0]) and s["a"].dtype == np.float64
    assert np.array_equal(s["b"], [float(2 ** 70), 1.0])
    assert s["c"] == 2.5 and np.array_equal(s["m"], [1.0, 2.0]) and s["u"][0] == float(2 ** 64 - 1)


def test_deep_values_cross_both_ways_without_recursion():
    """Tuples and dicts as deep as the nesting limit of every walk over a value (20000 levels) cross
    both ways under Python's own recursion limit; one level more is the limit's error."""
    from tapeml.array.values import MAX_NESTING
    s = tapeml.Session()
    old = sys.getrecursionlimit()
    try:
        sys.setrecursionlimit(1000)
        s["t"] = nested_tuple(MAX_NESTING - 1)          # MAX_NESTING tuples, the innermost empty
        back, n = s["t"], 0
        while back:
            back, n = back[0], n + 1
        assert n == MAX_NESTING - 1 and s.eval("type(t)") == "tuple" and s.eval("len(t[0][0])") == 1.0
        d = {}
        cur = d
        for _ in range(MAX_NESTING - 1):
            cur["a"] = {}
            cur = cur["a"]
        s["r"] = d
        back, n = s["r"], 0
        while back:
            back, n = back["a"], n + 1
        assert n == MAX_NESTING - 1
        with pytest.raises(tapeml.LangError, match=f"the Python value nests tuples and records more than "
                                                   f"{MAX_NESTING} deep"):
            s["t"] = nested_tuple(MAX_NESTING)
        s.run("t = (t,)")
        with pytest.raises(tapeml.LangError, match=f"the value nests tuples and records more than "
                                                   f"{MAX_NESTING} deep"):
            s["t"]
    finally:
        sys.setrecursionlimit(old)
    shared = (1.0, 2.0)
    s["twice"] = {"x": shared, "y": shared}     # the same object twice is no cycle
    assert s["twice"] == {"x": (1.0, 2.0), "y": (1.0, 2.0)}


@pytest.mark.parametrize("name, message", [
    ("é", "'é' is not a variable name (names are ASCII letters, digits and _)"),
    ("if", "'if' is not a variable name ('if' is a keyword of tapeml)"),
    ("1a", "'1a' is not a variable name"), (3, "3 is not a variable name")])
def test_variable_names_are_names_the_language_can_write(name, message):
    s = tapeml.Session()
    with pytest.raises(tapeml.LangError) as info:
        s[name] = 1
    assert (info.value.kind, info.value.message) == ("NameError", message)


@pytest.mark.parametrize("seed", [float("nan"), float("inf"), True, "3", [1], -1, 2.5])
def test_a_seed_that_is_no_whole_number_is_a_value_error_in_tapemls_words(seed):
    with pytest.raises(ValueError) as info:
        tapeml.Session(seed=seed)
    assert str(info.value) == f"seed must be a whole number >= 0 or None, got {seed!r}"


def test_a_program_that_is_not_a_string_is_a_type_error_in_tapemls_words():
    s = tapeml.Session()
    with pytest.raises(TypeError, match=r"^Session.run\(\) takes the program as a str, got int$"):
        s.run(123)
    with pytest.raises(TypeError, match=r"^Session.eval\(\) takes the program as a str, got NoneType$"):
        s.eval(None)


def test_whole_seeds_of_any_python_kind_are_taken():
    for seed in (2.0, np.int64(2), 2):
        assert tapeml.Session(seed=seed).eval("rand()") == np.random.default_rng(2).random()
    with pytest.raises(ValueError, match=r"dtype must be one of float64, float32, got \['x'\]"):
        tapeml.Session(dtype=["x"])


# ---- D. two Sessions in two threads --------------------------------------------------------------
STEP = "acc = zeros(3)\nfor i in 1:60\n    acc = acc + rand(3) / i\nend\n(dtype(acc), acc, dtype([1, 2] / 3))"


def session_steps(dtype, seed, steps, out):
    s = tapeml.Session(dtype=dtype, seed=seed)
    for _ in range(steps):
        out.append(s.eval(STEP))


def test_two_sessions_in_two_threads_produce_what_each_produces_alone():
    alone = {}
    for dtype, seed in (("float32", 1), ("float64", 2)):
        alone[dtype] = []
        session_steps(dtype, seed, 40, alone[dtype])
    assert alone["float32"][0][0] == "float32" and alone["float32"][0][1].dtype == np.float32
    ops.set_dtype("float64")
    trandom.seed(7)
    got = {"float32": [], "float64": []}
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)                  # switch threads often: inside every step
    try:
        threads = [threading.Thread(target=session_steps, args=(dtype, seed, 40, got[dtype]))
                   for dtype, seed in (("float32", 1), ("float64", 2))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    for dtype in got:
        assert len(got[dtype]) == 40
        for (d1, acc1, q1), (d2, acc2, q2) in zip(got[dtype], alone[dtype]):
            assert (d1, q1) == (d2, q2) == (dtype, dtype)
            assert acc1.dtype == acc2.dtype and np.array_equal(acc1, acc2)
    # the process default state is what it was
    assert ops.FLOAT["dtype"] is np.float64 and context.current() is context.DEFAULT
    assert trandom.rng().random() == np.random.default_rng(7).random()


def test_a_thread_starts_in_the_default_state_and_a_session_is_current_only_in_its_thread():
    s = tapeml.Session(dtype="float32")
    seen = []
    entered, done = threading.Event(), threading.Event()

    def other():
        entered.wait()
        seen.append((context.current() is context.DEFAULT, ops.FLOAT["dtype"]))
        done.set()
    t = threading.Thread(target=other)
    t.start()
    with s.state:
        assert ops.FLOAT["dtype"] is np.float32
        entered.set()
        done.wait()
    t.join()
    assert seen == [(True, np.float64)]


def test_figures_of_two_sessions_in_two_threads_stay_their_own():
    def draw(s, ys, n, out):
        for _ in range(n):
            s.run(f"plot({ys})")
        out.append([list(line.get_ydata()) for f in s.figures() for line in f.axes[0].lines])
    a, b = tapeml.Session(), tapeml.Session()
    got_a, got_b = [], []
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        threads = [threading.Thread(target=draw, args=(a, "[1, 2]", 15, got_a)),
                   threading.Thread(target=draw, args=(b, "[3, 4, 5]", 15, got_b))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert got_a == [[[1.0, 2.0]] * 15] and got_b == [[[3.0, 4.0, 5.0]] * 15]
    from tapeml.builtins import plot
    assert all(f not in plot.open_figures() for f in a.figures() + b.figures())
