"""The compiled evaluator (lang/evaluator/compiler.py) keeps every behaviour of the walker.

Each function body is compiled once, on its first call; the walker runs the top level and the
bodies the compiler declines. These tests check that bodies compile when they should, and that a
compiled body gives what the walker gives: values, errors with their line, column and call
chain, the recursion limit, gradients, scopes, loops, progress bars. The last tests run generated
programs both ways (compiling switched off by compiler.ENABLED) and compare everything printed
and raised.
"""
from __future__ import annotations

import io
import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tapeml.evaluator import compiler
from tapeml.evaluator.interpreter import Interpreter
from tapeml.syntax.errors import LangError, render

import test_fuzz as F
from conftest import examples


def run(source, compiled=True):
    """(printed text, rendered error or None) of source, compiled or walked."""
    old = compiler.ENABLED
    compiler.ENABLED = compiled
    out = io.StringIO()
    interp = Interpreter(out=out)
    try:
        interp.run(source, "<test>")
        err = None
    except LangError as e:
        err = render(e, interp.sources)
    finally:
        compiler.ENABLED = old
        interp.set_diagnostics(check_nan=False, profiler=None, recorder=None)  # (a mode a program left on)
        F._reset_session()
    return out.getvalue(), err


def both(source):
    """The walked and the compiled run agree; returns the compiled one."""
    walked, compiled = run(source, False), run(source, True)
    assert compiled == walked, f"compiled:\n{compiled}\nwalked:\n{walked}\nprogram:\n{source}"
    return compiled


def code_of(source, name):
    interp = Interpreter(out=io.StringIO())
    try:
        interp.run(source, "<test>")
    except LangError:
        pass
    fn = interp.get_variable(name)
    return compiler.code_for(fn)


FIB = "fn fib(n)\n  if n < 2\n    return n\n  end\n  return fib(n - 1) + fib(n - 2)\nend\n"


def test_fib_and_a_loop_compile_and_give_the_walkers_values():
    assert callable(code_of(FIB, "fib"))
    src = FIB + "fn total(n)\n  s = 0\n  for i in 1:n\n    s = s + i\n  end\n  return s\nend\n" \
        "print(fib(15), total(1000))"
    assert both(src) == ("610 500500\n", None)
    assert callable(code_of(src, "total"))


def test_closures_compile_in_scope_mode_and_see_later_assignments():
    src = "fn adder(k)\n  return fn(x) -> x + k\nend\nprint(adder(2)(3))\n" \
          "fn later()\n  g = fn() -> z\n  z = 1\n  return g()\nend\nprint(later())\n" \
          "fn outer(n)\n  fn inner(m) -> m + n\n  n = n * 10\n  return map(inner, 1:2)\nend\nprint(outer(1))"
    for name in ("adder", "later", "outer"):
        code = code_of(src, name)
        assert callable(code) and "L = Env(E" in code.source, name
    assert both(src) == ("5\n1\n(11, 12)\n", None)


def test_top_level_loops_run_compiled_over_the_program_scope():
    src = ("s = 0\nfor i in 1:5\n  s += i\n  last = i\nend\nk = 0\nwhile k < 3\n  k += 1\n  if k == 2\n"
           "    continue\n  end\n  s += 100\nend\nprint(s, last, k)\nfs = ()\nfor i in 1:2\n"
           "  fs = fs + (fn() -> i,)\nend\nprint(map(fn(f) -> f(), fs))\nfor j in 1:2\n  q = undefined_thing\nend")
    out, err = both(src)
    assert out == "215 5 3\n(2, 2)\n" and "<test>:21:7: NameError: undefined name 'undefined_thing'" in err
    from tapeml.syntax.parser import parse
    loop = parse("for i in 1:3\n  x = i\nend", "<t>").body[0]
    assert callable(compiler.code_for_loop(loop))


def test_the_repl_keeps_what_a_top_level_loop_assigned_before_an_error():
    interp = Interpreter(out=io.StringIO())
    with pytest.raises(LangError):
        interp.run("for i in 1:5\n  t = i\n  if i == 3\n    oops()\n  end\nend")
    assert interp.get_variable("t") == 3.0 and interp.get_variable("i") == 3.0


def test_a_local_read_before_its_assignment_reads_the_enclosing_scope():
    src = "x = 10\nfn f()\n  y = x + 1\n  x = 5\n  return x + y\nend\nprint(f(), x)"
    assert both(src) == ("16 10\n", None)


def test_only_names_assigned_on_every_path_skip_the_enclosing_scope():
    """A local stored outside any if or loop is read directly (no test for 'not yet assigned');
    one stored only in a branch, a loop body or an index assignment inside a branch keeps the
    walker's fallback to the enclosing scope when that path was not taken."""
    source = ("y = 5\nv = [7, 8]\n"
              "fn f(c, n)\n  s = 0\n  if c\n    y = 1\n  else\n    s = 2\n  end\n  for i in 1:n\n    w = i\n"
              "  end\n  while n > 5\n    z = 3\n    n = n - 1\n  end\n  if c\n    v[0] = 9\n  end\n"
              "  return (s, y, v, n)\nend\n"
              "print(f(true, 0), f(false, 2), f(false, 7), y, v)\n"
              "fn g(n)\n  for i in 1:n\n    w = i\n  end\n  return w\nend\nprint(g(3))\nprint(g(0))\n")
    out, err = both(source)
    assert out.splitlines()[:2] == ["(0, 1, [9, 8], 0) (2, 5, [7, 8], 2) (2, 5, [7, 8], 5) 5 [7, 8]", "3"]
    assert "undefined name 'w'" in err
    code = code_of("fn h(a)\n  s = a\n  for i in 1:3\n    s = s + i\n  end\n  return s\nend\n", "h")
    assert "is _U" not in code.source          # s and i are always assigned where they are read
    code = code_of("fn h(a)\n  if a\n    s = 1\n  end\n  return s\nend\n", "h")
    assert "is _U" in code.source


def test_a_free_name_is_read_at_each_call_so_a_redefinition_is_seen():
    interp = Interpreter(out=io.StringIO())
    interp.run("fn g() -> 1\nfn f() -> g() + 1\nprint(f())")
    interp.run("fn g() -> 10\nprint(f())")
    assert interp.out.getvalue() == "2\n11\n"
    assert callable(interp.get_variable("f").code)


def test_errors_in_a_compiled_body_keep_line_column_caret_and_call_chain():
    src = "fn inner(m)\n  return m @ [1, 2, 3]\nend\nfn outer(m)\n  return inner(m) + 1\nend\nouter(ones(2, 2))"
    out, err = both(src)
    assert "<test>:2:12: ShapeError: matrix product 2x2 @ a vector of length 3" in err
    assert "  2 |   return m @ [1, 2, 3]\n    |            ^" in err
    assert "inner" in err and "outer" in err
    assert callable(code_of(src, "inner"))


def test_undefined_names_suggest_as_the_walker_does():
    out, err = both("fn f(alpha)\n  beta = 1\n  return alpah + bta\nend\nf(1)")
    assert "undefined name 'alpah'; did you mean 'alpha'?" in err


def test_the_recursion_limit_and_deep_recursion():
    deep = "fn down(n)\n  if n == 0\n    return 0\n  end\n  return down(n - 1) + 1\nend\nprint(down({}))"
    assert both(deep.format(100)) == ("100\n", None)
    # 5000 deep: the compiled form's fewer Python frames per call reach it inside pytest's own
    # stack (the walker reaches it from the command line: the golden program recursion_5000)
    assert run(deep.format(5000)) == ("5000\n", None)
    out, err = run("fn f(n) -> f(n + 1)\nf(0)")
    assert "RecursionError: more than 20000 nested calls (in f)" in err


def test_grad_through_a_compiled_function():
    src = "fn loss(w)\n  s = 0\n  for i in 1:3\n    s = s + w * i\n  end\n  return s * w\nend\n" \
          "print(grad(loss, 2))\nprint(grad(fn(w) -> loss(w), 0.5))"
    assert both(src) == ("24\n6\n", None)        # d/dw (6 w^2) = 12 w


def test_loops_break_continue_return_and_destructuring():
    src = ("fn f(xs)\n  out = 0\n  for i, x in enumerate(xs)\n    if x < 0\n      continue\n    end\n"
           "    if i > 3\n      break\n    end\n    out += x\n  end\n  k = 0\n  while true\n    k += 1\n"
           "    if k == 4\n      return out + k\n    end\n  end\nend\nprint(f([1, -2, 3, 4, 5, 6]))\n"
           "fn g(t)\n  a, b = t\n  return a - b\nend\nprint(g((5, 3)))\ng(1)")
    out, err = both(src)
    assert out == "12\n2\n" and "cannot unpack a number into 2 names" in err


def test_value_semantics_index_and_field_assignment():
    src = ("fn f(m, r)\n  m[0] = 9\n  r.w = 2\n  c = m\n  c[1] += 1\n  return (m, c, r)\nend\n"
           "m = [1, 2]\nr = {w = 1}\nprint(f(m, r))\nprint(m, r)")
    assert both(src) == ("([9, 2], [9, 3], {w = 2})\n[1, 2] {w = 1}\n", None)


def test_logical_masks_strings_matrices_and_ranges_inside_a_function():
    src = ('fn f(x)\n  m = x > 1 and x < 4\n  s = "n={len(x)} {x[end]:.1f}"\n  return (x[m], s, [x; x][1, :], '
           'sum(0:2:6), not (x[0] > 0 or false))\nend\nprint(f([1, 2, 3, 4]))')
    assert both(src) == ('([2, 3], "n=4 4.0", [1, 2, 3, 4], 12, false)\n', None)


def test_conditions_and_operands_are_checked_as_the_walker_checks_them():
    for body in ("if x\n    return 1\n  end", "while [true, false]\n  end", "return x and true",
                 "return not x", "return -\"s\"", "return \"s\"'", "return x.w", "return \"a\" + 1"):
        out, err = both(f"fn f(x)\n  {body}\nend\nf(2)")
        assert err is not None and "<test>:" in err


def test_progress_loops_in_a_compiled_function_draw_and_close_their_bar():
    src = ('fn f(n)\n  t = 0\n  for i in progress(1:n, desc="p")\n    t += i\n    if i == 3\n      return t\n'
           '    end\n  end\nend\nprint(f(10))')
    assert both(src) == ("6\n", None)
    assert callable(code_of(src, "f"))


def test_keywords_defaults_and_too_many_arguments():
    src = "fn f(a, b=2, c=a + 1)\n  return a * 100 + b * 10 + c\nend\nprint(f(1), f(1, c=5), f(b=3, a=2))\nf(1, 2, 3, 4)"
    out, err = both(src)
    assert out == "122 125 233\n" and "f() takes 3 arguments (f(a, b=2, c=a + 1.0)), got 4" in err


def test_help_of_a_compiled_function_is_its_signature_and_comments():
    src = "# adds one\nfn inc(x) -> x + 1\ninc(1)\nhelp(inc)"
    out, err = both(src)
    assert "inc(x)" in out and "adds one" in out


def _wrapped(seed):
    """A generated program's statements inside a function (so they are compiled), called once;
    drawn again (up to 10 times) when they define a function, which the compiler declines."""
    for k in range(10):
        rng = random.Random(seed + k)
        lines = [line for _ in range(rng.randint(1, 3)) for line in F.gen_statement(rng, 2)]
        if not any("fn " in line for line in lines):
            break
    body = "\n".join("    " + line for line in lines)
    return F.PRELUDE + "fn main()\n" + body + "\n    return none\nend\nmain()\n"


@settings(max_examples=examples(150), deadline=None)
@given(st.integers(0, 2 ** 64 - 1))
def test_generated_programs_give_the_same_output_and_errors_compiled_and_walked(seed):
    both(F.gen_program(seed))
    both(_wrapped(seed))


def test_compiled_bodies_are_cached_per_body():
    interp = Interpreter(out=io.StringIO())
    interp.run("fn mk() -> 1\nfns = map(fn(i) -> i, 1:3)\nfn f(x) -> x\na = f(1)\nb = f(2)")
    f = interp.get_variable("f")
    assert callable(f.code) and compiler.code_for(f) is f.code
    assert "def tapeml_f(I, E, v0)" in f.code.source


def test_diagnostics_walk_the_bodies_they_watch():
    """check_nan sees every operation of a compiled function: while a mode is on the walker runs
    it (its nodes pass the diagnostics' wrappers), and compiled code runs again afterwards."""
    src = "fn f(a, b)\n  return a * b\nend\nf(1, 2)\ncheck_nan(true)\nf(1e200, 1e200)"
    out, err = run(src)
    assert "<test>:2:12: NaNError" in err and "inf" in err, err
    interp = Interpreter(out=io.StringIO())
    interp.run("fn f(a, b) -> a * b\ncheck_nan(true)\nf(1, 2)\ncheck_nan(false)")
    assert interp.compiled and callable(interp.get_variable("f").code)


def test_blocks_of_constants_only_compile():
    """Found by the long fuzz run: a branch holding only a constant (`3.0;`) emitted no Python
    line, and the compiled source did not parse."""
    src = "k = 0\nwhile k < 2\n  k += 1\n  if k == 1\n    3.0;\n  else\n    \"s\"\n  end\nend\nfn f()\n  if true\n    none\n  end\nend\nprint(k, f())"
    assert both(src) == ("2 none\n", None)


def test_what_cpythons_compiler_refuses_is_walked():
    """Twelve nested loops are more statically nested blocks than CPython compiles (20): the body
    is walked, with the same answer."""
    depth = 12
    body = "".join("  " * i + f"for i{i} in 1:1\n" for i in range(1, depth + 1))
    body += "  " * (depth + 1) + "n += 1\n" + "".join("  " * i + "end\n" for i in range(depth, 0, -1))
    src = "fn f()\n  n = 0\n" + "\n".join("  " + line for line in body.splitlines()) + "\n  return n\nend\nprint(f())"
    assert both(src) == ("1\n", None)
    assert code_of(src, "f") is None
    deep = "fn g(x) -> " + "(" * 60 + "x" + " + 1)" * 60 + "\nprint(g(0))"
    assert both(deep) == ("60\n", None)


# ---- a mode turned on or off while a compiled body runs (issue 38, item 1) ----------------------
# check_nan(true) inside a compiled loop or function applies to the rest of that body, as it does
# when the body is walked: the compiled code checks after each statement that calls something and
# hands the rest of the body to the walker (compiler._resume). Each program is run walked
# (TAPEML_COMPILE=0, compiler.ENABLED false) and compiled; both give the text written here.
ON = "fn on(v)\n  check_nan(true)\n  return v\nend\n"
OVERFLOW = "NaNError: '*' made inf from finite operands: the result is inf, where the left operand is {} " \
           "and the right operand is {}"
MODE_CHANGES = {
    # the issue's loop: the check turned on in the second pass of a top-level loop
    "a top-level for loop": (
        "x = 1.0\nfor i in 1:3\n    if i == 2\n        check_nan(true)\n    end\n    x = x * 1e200\n"
        "    y = [x, 1]\n    print(y * 1e200)\nend",
        "[inf, 1e200]\n", "<test>:6:11: " + OVERFLOW.format("1e200", "1e200")),
    "a scalar x * x in a function": (
        "fn f(x)\n  check_nan(true)\n  y = x * x\n  return y\nend\nprint(f(1e200))",
        "", "<test>:3:9: " + OVERFLOW.format("1e200", "1e200") + "\n  3 |   y = x * x\n    |         ^\n"
            "  called from <test>:6:7 in f"),
    "turned on by a function the body calls": (
        ON + "fn f(x)\n  on(1)\n  y = x - x * 2\n  return x * y\nend\nprint(f(1e200))",
        "", "<test>:8:12: NaNError: '*' made -inf from finite operands: the result is -inf, where the left "
            "operand is 1e200 and the right operand is -1e200"),
    "in an if condition (the branch taken, then an elif)": (
        ON + "fn f(x)\n  if on(false)\n    print(\"no\")\n  elif x > 0\n    y = x * x\n  else\n    y = 1\n"
             "  end\n  return y\nend\nprint(f(1e200))",
        "", "<test>:9:11: " + OVERFLOW.format("1e200", "1e200")),
    "in a while condition": (
        ON + "fn f(x)\n  k = 0\n  while k < 3 and on(true)\n    k += 1\n    x = x * 1e100\n  end\n"
             "  return x\nend\nprint(f(1e100))",
        "", "<test>:9:11: " + OVERFLOW.format("1e300", "1e100")),
    "in a for loop's iterable": (
        ON + "fn f(x)\n  for k in on(1:3)\n    x = x * 1e100\n  end\n  return x\nend\nprint(f(1e100))",
        "", "<test>:7:11: " + OVERFLOW.format("1e300", "1e100")),
    "in nested loops, the inner loop's items left": (
        "fn f(x)\n  for i in 1:3\n    for j in 1:3\n      if i == 2 and j == 2\n        check_nan(true)\n"
        "      end\n      x = x * 1e50\n      print(i, j)\n    end\n  end\n  return x\nend\nprint(f(1))",
        "1 1\n1 2\n1 3\n2 1\n2 2\n2 3\n", "<test>:7:13: " + OVERFLOW.format("1e300", "1e50")),
    "break, continue and a while after the hand-over": (
        "fn f(x)\n  for i in 1:5\n    check_nan(i > 1)\n    if i == 2\n      continue\n    end\n"
        "    if i == 4\n      break\n    end\n    print(i)\n  end\n  while true\n    x = x + 1\n"
        "    if x > 3\n      break\n    end\n  end\n  return x\nend\nprint(f(1))",
        "1\n3\n4\n", None),
    "a return in the walked rest": (
        "fn f(x)\n  for i in 1:3\n    check_nan(true)\n    if i == 2\n      return i * x\n    end\n  end\n"
        "end\nprint(f(1e300))\nprint(f(1e308) * 10)",
        "2e300\n", "<test>:5:16: " + OVERFLOW.format("2", "1e308")),
    "a body that makes closures (scope mode)": (
        "fn f(x)\n  g = fn(y) -> y * x\n  check_nan(true)\n  z = g(2)\n  w = z * 1e300\n  return w\nend\n"
        "print(f(1e10))",
        "", "<test>:5:9: " + OVERFLOW.format("20000000000", "1e300")),
    "a top-level while loop": (
        "k = 0\nx = 1e100\nwhile k < 3\n  k += 1\n  check_nan(k >= 2)\n  x = x * 1e100\n  print(k)\nend",
        "1\n2\n", "<test>:6:9: " + OVERFLOW.format("1e300", "1e100")),
    "a destructuring loop": (
        "fn f(x)\n  for a, b in ((1, 2), (3, 4))\n    check_nan(a > 2)\n    c = x * b\n    print(a, b, c)\n"
        "  end\n  return x\nend\nprint(f(1e308))",
        "1 2 inf\n", "<test>:4:11: " + OVERFLOW.format("1e308", "4")),
    "a progress loop (its bar closed)": (
        "fn f()\n  s = 0\n  for i in progress(1:5)\n    check_nan(i > 2)\n    s = s + i * 1e308\n  end\n"
        "  return s\nend\nprint(f())",
        "", "<test>:5:15: " + OVERFLOW.format("3", "1e308")),
    # turned off inside a body the walker runs (it was on when the call began): the plain values
    "check_nan(false) inside": (
        "check_nan(true)\nfn f(x)\n  check_nan(false)\n  y = x * x\n  return [y, x] * x\nend\nprint(f(1e200))",
        "[inf, inf]\n", None),
    # show_tape's recorder is on only while it runs f: the body goes on compiled afterwards
    "show_tape's recorder inside": (
        "fn f(x)\n  g = show_tape(fn(w) -> sum(w * w), [1, 2])\n  y = x * x\n  return y\nend\nprint(f(1e200))",
        "inf\n", None),
    # set_dtype changes the float type of what is made after it, compiled or walked
    "set_dtype in a loop": (
        "x = 0.1\nfor i in 1:3\n  if i == 2\n    set_dtype(\"float32\")\n  end\n  y = x * 3 + i\n"
        "  z = [x, y] * 3\n  print(y, z, dtype(z), [0.1] + x)\nend\nset_dtype(\"float64\")",
        "1.3 [0.3, 3.9] float64 [0.2]\n2.3 [0.3, 6.9] float32 [0.2]\n3.3 [0.3, 9.9] float32 [0.2]\n", None),
    "set_dtype in a function": (
        "fn f(x)\n  set_dtype(\"float32\")\n  a = x / 3\n  b = [x] / 3\n  c = sum(b) + a\n  return (c, dtype(b))\n"
        "end\nprint(f(1))\nset_dtype(\"float64\")",
        "(0.6666667, \"float32\")\n", None),
    # the statement that turned the check on is not judged after its call: the check starts with
    # the next statement, walked and compiled (its operator began before the check was on)
    "the rest of the statement that turned it on": (
        ON + "fn f(x)\n  y = on(x) * x\n  z = y - x\n  return y * z\nend\nprint(f(1e200))",
        "inf\n", None),
    "a one-line function's body": (ON + "fn f(x) -> on(x) * x\nprint(f(1e200))\nprint(f(1e200))",
                                    "inf\n", "<test>:5:18: " + OVERFLOW.format("1e200", "1e200")),
}


@pytest.mark.parametrize("name", list(MODE_CHANGES))
def test_a_mode_changed_inside_a_compiled_body_applies_to_the_rest_of_it(name):
    source, printed, error = MODE_CHANGES[name]
    walked, compiled = run(source, False), run(source, True)
    assert compiled == walked, f"compiled:\n{compiled}\nwalked:\n{walked}"
    assert walked[0] == printed
    if error is None:
        assert walked[1] is None
    else:
        assert walked[1] is not None and walked[1].startswith(error), walked[1]


def test_the_hand_over_costs_one_test_after_each_statement_that_calls():
    """The rest of the body is walked only once a mode is on; a statement with no call (fib's
    body) has no check after it, so the hot paths are what they were."""
    interp = Interpreter(out=io.StringIO())
    interp.run(FIB + "fn g(x)\n  y = x + 1\n  z = fib(y)\n  return z\nend\nprint(fib(5), g(4))")
    assert "I.compiled:" not in interp.get_variable("fib").code.source
    assert interp.get_variable("g").code.source.count("if not I.compiled:") == 1
    assert interp.out.getvalue() == "5 5\n"


def test_the_issues_loop_on_the_command_line_compiled_and_walked(tmp_path):
    """`tapeml file.ml` and TAPEML_COMPILE=0 stop at the same place with the same message."""
    import os
    import subprocess
    import sys
    path = tmp_path / "loop.ml"
    path.write_text(MODE_CHANGES["a top-level for loop"][0] + "\n")
    results = []
    for flag in ("1", "0"):
        env = dict(os.environ, TAPEML_COMPILE=flag)
        p = subprocess.run([sys.executable, "-m", "tapeml", "loop.ml"], capture_output=True, text=True,
                           env=env, cwd=tmp_path, timeout=120)
        results.append((p.returncode, p.stdout, p.stderr))
    assert results[0] == results[1]
    assert results[0][:2] == (1, "[inf, 1e200]\n")
    assert results[0][2].startswith("loop.ml:6:11: NaNError: '*' made inf from finite operands")


# ---- compiled code is owned by the functions that run it (issue 38, item 2) ---------------------
CELL = "fn f(x) -> x * 2\nt = 0\nfor j in 1:2\n  t = t + f(j)\nend"


def _rss_mb() -> float:
    import os
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def _growth_mb(cells: int, compiled: bool = True, face: bool = False) -> float:
    """How much this process's resident memory grows while a Session (or, `face`, a bare
    Interpreter run by the faces' runner with the kernel's cell names) runs `cells` cells, each
    defining and calling a small function and running a top-level loop."""
    import gc
    import tapeml
    from tapeml.faces import runner
    old = compiler.ENABLED
    compiler.ENABLED = compiled
    try:
        if face:
            interp = Interpreter(out=io.StringIO())
            step = lambda i: runner.run_cell(interp, CELL, f"In[{i}]")      # noqa: E731
        else:
            s = tapeml.Session(out=io.StringIO())
            step = lambda i: s.run(CELL)                                     # noqa: E731
        for i in range(300):
            step(i)
        gc.collect()
        before = _rss_mb()
        for i in range(300, 300 + cells):
            step(i)
        gc.collect()
        return _rss_mb() - before
    finally:
        compiler.ENABLED = old


def test_memory_stays_flat_over_5000_cells():
    """Each cell compiles its function and its loop; the code went into a module-global cache that
    never dropped a body: 15 KB a cell (75 MB here), where the walker grows by nothing."""
    assert _growth_mb(5000) < 8


@pytest.mark.slow
@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("face", [False, True])
def test_memory_stays_flat_over_20000_cells(compiled, face):
    """The same over 20,000 cells, compiled and walked, in a Session and in a bare Interpreter run
    as the kernel runs it (its cells' names In[n]: their text is kept, for the errors that quote
    a line of an earlier cell: about 3 MB here)."""
    assert _growth_mb(20000, compiled, face) < 12


def test_a_discarded_sessions_compiled_code_is_collected():
    import gc
    import weakref
    import tapeml
    s = tapeml.Session(out=io.StringIO())
    s.run("fn f(x)\n  y = x * 2\n  return y\nend\nt = f(3)\nfor i in 1:2\n  t = t + f(i)\nend")
    f = s["f"]          # (a Python callable that calls it in the Session)
    code = weakref.ref(s.interp.get_variable("f").code)
    session = weakref.ref(s)
    assert callable(code()) and f(2) == 4.0
    del s, f
    gc.collect()
    assert code() is None and session() is None


def test_code_is_shared_by_the_functions_of_one_definition_and_freed_with_the_last():
    import gc
    import weakref
    interp = Interpreter(out=io.StringIO())
    interp.run("fns = map(fn(i) -> fn(x) -> x + i, (1, 2, 3))\nys = map(fn(g) -> g(10), fns)")
    fns = interp.get_variable("fns")
    assert interp.get_variable("ys") == (11.0, 12.0, 13.0)
    assert fns[0].code is fns[1].code is fns[2].code is compiler.code_for(fns[0])
    code = weakref.ref(fns[0].code)
    interp.run("fns = 0")
    del fns
    gc.collect()
    assert code() is None


def test_functions_with_empty_bodies_and_different_parameters():
    """An empty body is one object, (), for every function: the cache keyed by the body alone
    gave g the code compiled for f's two parameters (an InternalError)."""
    src = "fn f(a, b)\nend\nfn g()\nend\nprint(f(1, 2), g())\nfn h(x, y, z)\nend\nprint(h(1, 2, 3))"
    assert both(src) == ("none none\nnone\n", None)
