"""progress(...) loops (issue 22): the loop is the bare loop (items, side effects, gradients,
break/continue/errors); the bar is tqdm's live bar in a terminal, plain lines in a pipe, nothing
with TAPEML_PROGRESS=0 or in the docs build; Ctrl-C closes the bar's line and keeps the session."""
import io
import os
import re
import subprocess
import time

import numpy as np
import pytest

from support import PROMPT, Terminal, error_of, fresh, run, tapeml_command

from tapeml.evaluator import progress as PG
from tapeml.syntax.errors import LangError
from tapeml.array.printer import format_value


def logging_bars():
    """A fresh interpreter whose bars write log lines to a StringIO: (the interpreter, the StringIO)."""
    interp, bars = fresh(), io.StringIO()
    interp.progress_out = bars
    return interp, bars


def run_logged(src):
    """Run src with its bars logging: (the interpreter, what the program printed, what the bars wrote)."""
    interp, bars = logging_bars()
    run(src, interp)
    return interp, interp.out.getvalue(), bars.getvalue()


# Everything a for loop walks: the loop over progress(it) must see the very same items.
ITERABLES = ["1:5", "0:0.25:1", "5:-2:1", "1:0", "[3, 1, 2]", "[1, 2; 3, 4; 5, 6]", "[true, false]",
             "(1, \"a\", [1, 2], {k = 1})", "\"héllo\"", "7", "zeros(2, 2, 3)", "zeros(0, 3)"]


@pytest.mark.parametrize("it", ITERABLES)
def test_items_and_side_effects_equal_the_bare_loop(it):
    body = ("seen = ()\nn = 0\nx = \"unset\"\nfor x in {0}\n    seen = append(seen, x)\n    n = n + 1\n    print(type(x), x)\n"
            "end\nlast = x\n")
    bare, out_bare, _ = run_logged(body.format(it))
    prog, out_prog, bar = run_logged(body.format(f"progress({it}, desc=\"t\")"))
    assert out_prog == out_bare
    for name in ("seen", "n", "last"):
        a, b = bare.globals.vars[name], prog.globals.vars[name]
        assert type(a) is type(b) and format_value(a) == format_value(b), name
    n = int(bare.globals.vars["n"])
    assert bar.splitlines()[-1].startswith(f"t: 100% {n}/{n} [") if n else bar == "t: 0/0\n"


def test_break_continue_and_an_error_behave_as_in_the_bare_loop():
    src = ("s = 0\nfor i in {0}\n    if i == 2\n        continue\n    end\n    if i == 6\n        break\n    end\n"
           "    s = s + i\nend\n")
    bare, _, _ = run_logged(src.format("1:10"))
    prog, _, bar = run_logged(src.format("progress(1:10)"))
    assert bare.globals.vars["s"] == prog.globals.vars["s"] == 1 + 3 + 4 + 5
    assert bar.splitlines()[-1].startswith("50% 5/10 [")     # five steps done when the loop broke
    interp, err = logging_bars()
    e = error_of("k = 0\nfor i in progress(1:10, desc=\"e\")\n    k = i\n    y = [1, 2] + [1, 2, 3]\nend\n", interp)
    assert e.kind == "ShapeError" and interp.globals.vars["k"] == 1
    assert err.getvalue().endswith("e:   0% 0/10 [00:00<?, ?it/s]\n")    # the line closed at the count
    assert interp.progress_bars == []


def test_gradients_through_a_progress_loop_equal_the_bare_loop():
    src = """
W = [0.5, -1; 2, 0.25]
X = [1, 2; -3, 4; 0.5, 0.1]
fn f(w)
    h = X
    for i in {0}
        h = tanh(h @ w)
    end
    return sum(h ^ 2)
end
fn rows(x)
    s = 0
    for r in {1}
        s = s + sum(r ^ 3)
    end
    return s
end
gw = grad(f, W)
gx = grad(rows, X)
"""
    bare, _, _ = run_logged(src.format("1:3", "x"))
    prog, _, _ = run_logged(src.format("progress(1:3)", "progress(x)"))
    from tapeml.array.backend import ARRAYS, to_numpy
    for name in ("gw", "gx"):
        a, b = bare.globals.vars[name], prog.globals.vars[name]
        assert type(b) in ARRAYS and type(b) is type(a) and np.array_equal(to_numpy(a), to_numpy(b)), name
    X = np.array([[1, 2], [-3, 4], [0.5, 0.1]])
    np.testing.assert_allclose(to_numpy(prog.globals.vars["gx"]), 3 * X ** 2)     # rows stayed tracked
    # d f / d W by central differences
    W = np.array([[0.5, -1], [2, 0.25]])

    def f(w):
        h = X
        for _ in range(3):
            h = np.tanh(h @ w)
        return np.sum(h ** 2)
    fd = np.zeros_like(W)
    for idx in np.ndindex(W.shape):
        d = np.zeros_like(W)
        d[idx] = 1e-6
        fd[idx] = (f(W + d) - f(W - d)) / 2e-6
    np.testing.assert_allclose(to_numpy(prog.globals.vars["gw"]), fd, rtol=1e-6, atol=1e-8)


def test_notes_end_the_log_lines_and_do_nothing_outside_a_loop():
    _, out, bar = run_logged('progress_note("ignored")\nfor i in progress(1:4, desc="train")\n'
                             '    progress_note("loss {1 / i}")\nend\nprogress_note(3)\n')
    lines = bar.splitlines()
    assert len(lines) == 4 and lines[-1].startswith("train: 100% 4/4 [") and lines[-1].endswith(", loss 0.25]")
    assert all("\r" not in l for l in lines) and out == ""


def test_nested_loops_note_the_innermost_bar():
    _, _, bar = run_logged('for e in progress(1:2, desc="epoch")\n    for b in progress(1:2, desc="batch")\n'
                           '        progress_note("b{b}")\n    end\n    progress_note("e{e}")\nend\n')
    assert [l.split(" [")[0] + " " + l.split(", ")[-1] for l in bar.splitlines()] == [
        "batch:  50% 1/2 b1]", "batch: 100% 2/2 b2]", "epoch:  50% 1/2 e1]",
        "batch:  50% 1/2 b1]", "batch: 100% 2/2 b2]", "epoch: 100% 2/2 e2]"]


def test_log_lines_come_every_tenth_and_after_the_interval(monkeypatch):
    _, _, bar = run_logged("for i in progress(1:1000, desc=\"d\") end")
    assert [l.split(" [")[0] for l in bar.splitlines()] == [f"d: {10 * k:3d}% {100 * k}/1000" for k in range(1, 11)]
    clock = iter(range(0, 10000, 20))                   # each step takes 20 s of this clock
    monkeypatch.setattr(PG.time, "monotonic", lambda: next(clock))
    err = io.StringIO()
    b = PG.Bar(100, "slow", err)
    for _ in b.track(range(3)):
        pass
    b.close()
    assert [l.split(" [")[0] for l in err.getvalue().splitlines()] == ["slow:   2% 2/100", "slow:   3% 3/100"]


def test_the_value_prints_and_bad_items_are_refused():
    interp, out, _ = run_logged('p = progress(1:10, desc="train")\nprint(p, type(p), progress((1,)))\n')
    assert out == '<progress "train", 10 steps> progress <progress 1 step>\n'
    for bad, what in (("{a = 1}", "a record"), ("true", "a bool"), ("progress(1:3)", "a progress(...) loop"),
                      ("fn(x) -> x", "a function")):
        with pytest.raises(LangError) as e:
            run_logged(f"progress({bad})")
        assert e.value.kind == "TypeError"
        assert e.value.message == (f"progress(): cannot loop over {what}; give a range, a matrix, "
                                   f"a tuple or a string")


def test_off_by_environment_in_the_docs_build_and_in_help(monkeypatch, capsys):
    monkeypatch.setenv("TAPEML_PROGRESS", "0")
    _, _, bar = run_logged("for i in progress(1:3) end")
    assert bar == ""
    monkeypatch.delenv("TAPEML_PROGRESS")
    from tapeml.faces import docs as docgen
    res = docgen.run_code('s = 0\nfor i in progress(1:5, desc="x")\n    s = s + i\nend\ns', "<doc>")
    assert res.error is None and res.output == "15"
    from tapeml.builtins.help import help_text
    assert "  ... loss\n  0.3333333" in help_text("progress_note", fresh())   # help runs the example, bar off
    assert capsys.readouterr().err == ""


# ---- the real command: a pipe, a terminal, Ctrl-C ------------------------------------------------
SCRIPT = """s = 0
for step in progress(1:40, desc="train")
    s = s + step
    progress_note("loss {1 / step}")
    if step % 20 == 0
        print("step", step)
    end
end
print("sum", s)
"""


def test_piped_stderr_gets_plain_lines_and_stdout_is_unchanged(tmp_path):
    script = tmp_path / "p.ml"
    script.write_text(SCRIPT)
    bare = tmp_path / "b.ml"
    bare.write_text(SCRIPT.replace("progress(1:40, desc=\"train\")", "1:40"))
    env = dict(os.environ)
    env.pop("TAPEML_PROGRESS", None)
    res = subprocess.run(tapeml_command() + [str(script)], capture_output=True, timeout=60, env=env)
    plain = subprocess.run(tapeml_command() + [str(bare)], capture_output=True, timeout=60, env=env)
    assert res.returncode == plain.returncode == 0
    assert res.stdout == plain.stdout == b"step 20\nstep 40\nsum 820\n"
    assert b"\r" not in res.stderr and b"\x1b" not in res.stderr
    lines = res.stderr.decode().splitlines()
    assert len(lines) == 10 and lines[-1].startswith("train: 100% 40/40 [") and lines[-1].endswith(", loss 0.025]")
    off = subprocess.run(tapeml_command() + [str(script)], capture_output=True, timeout=60,
                         env=dict(env, TAPEML_PROGRESS="0"))
    assert (off.stdout, off.stderr) == (plain.stdout, b"")


BAR_END = rb"train: 100%\|[^\r\n]*\| 40/40 \[[^\r\n]*loss 0\.025\]\r\n"


def test_in_a_terminal_the_live_bar_ends_with_the_count(tmp_path):
    script = tmp_path / "p.ml"
    script.write_text(SCRIPT)
    with Terminal(tmp_path, str(script)) as p:
        p.expect(rb"\rtrain:   0%\|")                  # drawn in place from the start
        p.expect(rb"\rstep 20\r\n")                    # a printed line, whole, the bar cleared
        p.expect(rb"\rstep 40\r\n")
        p.expect(BAR_END + rb"sum 820\r\n")             # the bar's last drawing: n/n; its line ends
        assert p.exit_code() == 0


def test_ctrl_c_during_a_bar_closes_its_line_and_keeps_the_session(tmp_path):
    with Terminal(tmp_path) as p:
        p.expect(PROMPT)
        p.send(b"k = 0\r")
        p.expect(PROMPT)
        p.send(b'for i in progress(1:1000000, desc="long")\r')    # minutes of work
        p.expect(rb"\.\.\.")
        p.send(b"k = i\r")
        p.expect(rb"\.\.\.")
        p.send(b"z = sum(ones(40, 40) @ ones(40, 40))\r")
        p.expect(rb"\.\.\.")
        p.send(b"end\r")
        p.expect(rb"long:   0%")
        time.sleep(1.0)
        p.send(b"\x03")
        m = p.expect(rb"long: [^\r\n]*\| ([0-9]+)/1000000 \[[^\r\n]*\]\r\n(\x1b\[31m)?Interrupted \(Ctrl-C\)")
        reached = int(m.group(1))
        p.expect(PROMPT)
        p.send(b"k > 0\r")
        p.expect(rb"true\r\n")
        p.expect(PROMPT)
        p.send(b"k >= " + str(reached).encode() + b"\r")      # the variable has its value of when it stopped
        p.expect(rb"true\r\n")
        p.expect(PROMPT)
        p.send(b'for i in progress(1:3, desc="again") k = i end\r')
        p.expect(rb"again: 100%\|[^\r\n]*\| 3/3 \[[^\r\n]*\]\r\n")
        p.expect(PROMPT)
        p.send(b"k\r")
        p.expect(rb"(?<![0-9.])3\r\n")
        p.expect(PROMPT)
        p.send(b"\x04")
        assert p.exit_code() == 0
