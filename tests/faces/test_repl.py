"""The interactive session (issue 4).

Three layers, each tested with exact expected output:
- the pure functions behind the keys (enter_action, next_indent, validate, completions, :vars);
- the real prompt_toolkit application, driven through a pipe input and a DummyOutput;
- the real `tapeml` command in a pseudo-terminal (Ctrl-C during `while true`), and with piped stdin.
"""
import io
import os
import re
import subprocess
import sys
import threading
import time

import pytest

from support import PROMPT, ROOT, Terminal, fresh, run, run_cli, tapeml_command

from tapeml.syntax.parser import is_complete
from tapeml.faces import repl as R
from tapeml.builtins.help import help_text
from tapeml.syntax.errors import NameErr


# ---- pure functions ---------------------------------------------------------------------------

@pytest.mark.parametrize("text, want", [
    ("fn f(x)", "incomplete"),           # an open block
    ("while true", "incomplete"),
    ("x = [1,", "incomplete"),           # an open bracket
    ("y = 1 +", "incomplete"),           # a trailing operator
    ('print("abc', "invalid"),           # strings end on their line: an error, not '...' forever
    (")", "invalid"),                    # invalid: must submit (aiomanhole#2 was endless '...')
    ("x = 1 2", "invalid"),
    ("fn f(x)\n  return x\nend", "complete"),
    ("x = 1;", "complete"),
    ("r = [1, 2;", "incomplete"),        # a trailing ';' inside a matrix literal: the row goes on
    ("r = [1, 2;]", "complete"),         # a one-row matrix
    ("r = [1, 2;\n]", "complete"),
    ("r = [1, 2;;]", "invalid"),
])
def test_is_complete_separates_incomplete_from_invalid(text, want):
    assert is_complete(text) == want


@pytest.mark.parametrize("text, cursor, want", [
    ("fn f(x)", None, "newline"),
    ("fn f(x)\n  return x\nend", None, "submit"),
    ("x = [1, 2,", None, "newline"),
    ('print("abc', None, "submit"),      # invalid submits, so the error is reported
    (")", None, "submit"),
    ("", None, "submit"),
    ("   ", None, "submit"),
    (":vars", None, "submit"),
    ("?layer_norm", None, "submit"),
    ("layer_norm?", None, "submit"),
    # the cursor on an earlier line than the last: Enter edits, even when the whole is complete
    ("x = 1\ny = 2", 5, "newline"),
    # the cursor at the end of the last line, trailing blanks after it: the whole input decides
    ("x = 1  ", 5, "submit"),
])
def test_enter_action(text, cursor, want):
    assert R.enter_action(text, cursor) == want


def test_next_indent_and_dedent():
    assert R.next_indent("fn f(x)") == "    "
    assert R.next_indent("    if x > 0") == "        "
    assert R.next_indent("    y = 1") == "    "
    assert R.next_indent("x = [1,") == "    "
    assert R.next_indent('s = "fn (" # if') == ""
    assert R.next_indent("if x print(x) end") == ""
    assert R.dedent_line("fn f(x)\n    return x\n    end") == "fn f(x)\n    return x\nend"
    assert R.dedent_line("if a\n    1\n    else") == "if a\n    1\nelse"
    assert R.dedent_line("    end") == "    end"           # a one-line input is left alone


def test_validate_maps_the_error_to_an_index():
    assert R.validate("x = 1") is None
    assert R.validate("fn f(x)\n  y = x +") is None          # incomplete is not an error
    index, message = R.validate("x = 1\ny = 1 +* 2")
    assert index == len("x = 1\ny = 1 +")                   # at the '*'
    assert message == "SyntaxError: expected an expression, found '*'"
    index, message = R.validate('print("a\\q")')
    assert message.startswith("SyntaxError: unknown escape '\\q'")
    assert index == 8


@pytest.mark.parametrize("text", ["\x00", "\ud800", "'\\x9'", "\"\\", "[1; 2", "}", "1e", "x..y",
                                  "fn f(", '"{', '"{}"', "a[", "@", "\t\x0b"])
def test_validate_never_raises(text):
    result = R.validate(text)
    assert result is None or (isinstance(result[0], int) and 0 <= result[0] <= len(text))


@pytest.fixture
def session_interp():
    return run('weights = {alpha = 1, beta = [1, 2], inner = {gain = 2.5}}\nwhich = 3\n'
               'fn whistle(a, b=2)\n  return a\nend')


def names(cands):
    return [c.text for c in cands]


def test_completions_of_record_fields(session_interp):
    cands = R.completions("y = weights.", session_interp)
    assert names(cands) == ["alpha", "beta", "inner"]
    assert [c.replace for c in cands] == [0, 0, 0]
    assert [c.meta for c in cands] == ["a number", "a vector of length 2", "a record"]
    cands = R.completions("f(weights.inner.g", session_interp)
    assert [(c.text, c.replace) for c in cands] == [("gain", 1)]
    assert R.completions("which.", session_interp) == []          # not a record
    assert R.completions("nothing_here.", session_interp) == []


def test_completions_of_names(session_interp):
    cands = {c.text: c for c in R.completions("x = wh", session_interp)}
    assert list(cands) == ["where", "which", "while", "whistle"]
    assert cands["which"].meta == "a number"
    assert cands["while"].meta == "keyword"
    assert cands["whistle"].meta == "whistle(a, b=2)"
    assert cands["where"].meta.startswith("where(")                # the one-line signature ...
    from tapeml.builtins import REGISTRY
    assert cands["where"].meta == f"{REGISTRY['where'].signature()}  {REGISTRY['where'].summary}"
    assert cands["where"].replace == 2
    ln = {c.text: c for c in R.completions("layer_n")}
    assert ln["layer_norm"].meta.startswith("layer_norm(x, gamma, beta, eps=1e-5)  Normalize")


def test_completions_context(session_interp):
    assert R.completions('print("wh', session_interp) == []         # inside a string's text
    assert names(R.completions('print("{wei', session_interp)) == ["weights"]  # inside {...}
    assert "layer_norm" in names(R.completions('help("layer_', session_interp))
    assert names(R.completions(":va")) == [":vars"]
    assert names(R.completions("x = 1.")) == []
    assert R.completions("x = ") == []
    assert "while" not in names(R.completions("while"))              # nothing to add


def test_vars_table(session_interp):
    session_interp.run("m = [1, 2; 3, 4]\nt = (1, \"a\")\nb = [1, 2] > 1\ns = \"hey\"", "<t>")
    assert R.format_vars(session_interp) == (
        "name     kind         shape     value\n"
        "weights  record       3 fields  {alpha = 1, beta = [1, 2], inner = {gain = 2.5}}\n"
        "which    number                 3\n"
        "whistle  function               whistle(a, b=2)\n"
        "m        matrix       2x2       [1, 2; 3, 4]\n"
        "t        tuple        2 items   (1, \"a\")\n"
        "b        bool matrix  2         [false, true]\n"
        "s        string       3 chars   \"hey\"")
    assert R.format_vars(fresh()) == "(no variables)"


def test_history_path_env(monkeypatch, tmp_path):
    monkeypatch.setenv("TAPEML_HISTORY", str(tmp_path / "h"))
    assert R.history_path() == str(tmp_path / "h")
    monkeypatch.delenv("TAPEML_HISTORY")
    assert R.history_path() == os.path.join(os.path.expanduser("~"), ".tapeml_history")


# ---- help -------------------------------------------------------------------------------------

def help_in_a_session(name):
    """help_text as a session shows it: the example run in a fresh interpreter, with its result."""
    return help_text(name, fresh())


def test_help_text_of_layer_norm():
    text = help_in_a_session("layer_norm")
    lines = text.split("\n")
    assert lines[0] == "layer_norm(x, gamma, beta, eps=1e-5)    [Statistics & ML]"
    assert lines[1] == "  Normalize each row (last axis) to mean 0 and variance 1, then scale and shift."
    assert "  x      [..., D]         the input; each position is normalized on its own" in lines
    assert "  gamma  [D] or [..., D]  gain, shaped like the trailing axes to normalize over" in lines
    assert "Returns  [..., D]" in lines
    i = lines.index("Example")
    assert lines[i + 1:] == ["  ml> layer_norm([1, 2, 3, 4], [1, 1, 1, 1], [0, 0, 0, 0])",
                             "  [-1.341635, -0.4472118, 0.4472118, 1.341635]"]


def test_help_builtin_forms(ml):
    code, out = ml('help(layer_norm)')
    assert code == 0 and out == help_in_a_session("layer_norm") + "\n"
    code, out = ml('help("softmax")')
    assert code == 0 and out.startswith("softmax(x, dim=-1)    [Statistics & ML]\n")
    code, out = ml("help()")
    assert code == 0 and out.startswith("Builtins by category")
    assert "\nStatistics & ML\n" in out and "layer_norm" in out and "\nCore\n" in out
    code, out = ml('help("layer_nrm")')
    assert code == 1
    assert "NameError: help: no builtin or function named 'layer_nrm'; did you mean 'layer_norm'?" in out
    code, out = ml("help(1)")
    assert code == 1 and "TypeError: help() needs a name (a string) or a function, got a number" in out


def test_help_of_a_user_function_shows_its_comment():
    interp = run("# Squares its argument.\n# Works on matrices too.\nfn sq(x)\n  return x^2\nend", filename="my.ml")
    assert help_text("sq", interp) == ("sq(x)\n  Squares its argument.\n  Works on matrices too.\n"
                                       "  a tapeml function defined in my.ml:3:1")
    with pytest.raises(NameErr):
        help_text("no_such_thing", interp)


# ---- the prompt_toolkit application through a pipe --------------------------------------------

def until(predicate, timeout=5.0):
    """A feed step: wait until predicate(session) holds (e.g. a completion was inserted)."""
    return ("wait", predicate, timeout)


def drive(*chunks, interp=None, history="memory"):
    """Run the real REPL application on a pipe input and a DummyOutput. Each chunk is sent as
    typed keys (\\r is Enter); `until(...)` steps wait for the application. ':quit' ends it.
    Returns (exit code, everything printed: echo, program output and errors, in order)."""
    from prompt_toolkit.history import InMemoryHistory
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput
    buf = io.StringIO()
    interp = interp or fresh()
    interp.out = buf
    with create_pipe_input() as inp:
        session = R.make_session(interp, input=inp, output=DummyOutput(),
                                 history=InMemoryHistory() if history == "memory" else history)
        repl = R.Repl(interp, session, out=buf, err=buf)
        failure = []

        def feed():
            try:
                for c in chunks:
                    if isinstance(c, tuple):
                        _, predicate, timeout = c
                        end = time.monotonic() + timeout
                        while not predicate(session):
                            if time.monotonic() > end:
                                failure.append(f"timed out waiting; buffer {session.default_buffer.text!r}")
                                break
                            time.sleep(0.01)
                    else:
                        inp.send_text(c)
                        time.sleep(0.02)
                time.sleep(10)
                failure.append("the session did not end")
                inp.close()
            except Exception as e:  # noqa: BLE001 - the pipe closes when the session ends
                return

        threading.Thread(target=feed, daemon=True).start()
        code = repl.loop()
    assert not failure, failure
    return code, buf.getvalue()


def test_multiline_function_then_call():
    code, out = drive("fn sq(x)\r", "y = x ^ 2\r", "return y\r", "end\r", "sq(3)\r", ":quit\r")
    assert code == 0
    assert out == "9\n"


def test_pasted_program_runs_as_a_unit():
    paste = "\x1b[200~fn cube(x)\n  return x^3\nend\ncube(2)\ncube(3)\x1b[201~"
    code, out = drive(paste, "\r", ":quit\r")
    assert out == "8\n27\n"


def test_echo_and_semicolon_suppression():
    code, out = drive("x = 2\r1 + 1\rx * 10;\rx\r\"hi\"\rprint(\"hi\")\rnone\r[1, 2; 3, 4]\r:quit\r")
    assert out == '2\n2\n"hi"\nhi\n2x2 matrix:\n 1  2\n 3  4\n'


def test_echo_of_one_row_matrices_and_whole_numbers():
    code, out = drive("r = [1, 2;\r", "]\r", "r\r", "reshape(1:3, 1, 3)\r", "zeros(1, 0)\r", "18915328\r",
                      ":quit\r")
    assert out == "[1, 2;]\n[1, 2, 3;]\nzeros(1, 0)\n18915328\n"


def test_completion_of_a_record_field_in_the_application():
    code, out = drive("weights = {alpha = 1, beta = [1, 2]}\r", "weights.al\t",
                      until(lambda s: s.default_buffer.text == "weights.alpha"), "\r", ":quit\r")
    assert out == "1\n"


def test_enter_applies_a_selected_completion():
    # two candidates: Tab opens the menu, Tab again selects the first, Enter applies it
    code, out = drive("weights = {alpha = 1, alps = 2}\r", "weights.al\t",
                      until(lambda s: s.default_buffer.complete_state is not None), "\t",
                      until(lambda s: s.default_buffer.text == "weights.alpha"), "\r",
                      until(lambda s: s.default_buffer.complete_state is None), "\r", ":quit\r")
    assert out == "1\n"


def test_help_of_layer_norm_in_the_session():
    code, out = drive("?layer_norm\r", "help(layer_norm)\r", "layer_norm?\r", ":quit\r")
    text = help_in_a_session("layer_norm") + "\n"
    assert out == text * 3


def test_an_error_then_a_successful_line():
    code, out = drive("x = 5\r", "y = x + undefined_name\r", "z = [1, 2] @ [1, 2, 3]\r",
                      "x + 1\r", ":quit\r")
    # the ShapeError's wording belongs to the interpreter; the place, caret and what follows are ours
    assert re.fullmatch(re.escape("REPL[2]:1:9: NameError: undefined name 'undefined_name'\n"
                                  "  1 | y = x + undefined_name\n"
                                  "    |         ^^^^^^^^^^^^^^\n"
                                  "REPL[3]:1:12: ShapeError: ") + r"[^\n]+\n" +
                        re.escape("  1 | z = [1, 2] @ [1, 2, 3]\n"
                                  "    |            ^\n"
                                  "6\n"), out), out


def test_an_error_inside_an_earlier_entry_shows_that_entry():
    code, out = drive("fn bad(x)\r", "return x + nope\r", "end\r", "bad(1)\r", ":quit\r")
    # the continuation line was auto-indented by 4
    assert out == ("REPL[1]:2:16: NameError: undefined name 'nope'\n"
                   "  2 |     return x + nope\n"
                   "    |                ^^^^\n"
                   "  called from REPL[2]:1:1 in bad\n")


def test_syntax_error_reported_and_session_goes_on():
    code, out = drive("x = 1 +* 2\r", "x = 3\r", "x\r", ":quit\r")
    assert out == ("REPL[1]:1:8: SyntaxError: expected an expression, found '*'\n"
                   "  1 | x = 1 +* 2\n"
                   "    |        ^\n"
                   "3\n")


def test_vars_reset_and_quit():
    code, out = drive("a = 1\r", "m = zeros(2, 3)\r", "r = {w = 1}\r", ":vars\r", ":reset\r", ":vars\r",
                      ":nope\r", ":quit\r")
    assert code == 0
    assert out == ("name  kind    shape     value\n"
                   "a     number            1\n"
                   "m     matrix  2x3       [0, 0, 0; 0, 0, 0]\n"
                   "r     record  1 fields  {w = 1}\n"
                   "cleared 3 variables\n"
                   "(no variables)\n"
                   "unknown command ':nope'; the commands are :vars, :reset, :profile, :help, :quit\n")


def test_ctrl_c_at_the_prompt_clears_the_line_and_ctrl_d_exits():
    code, out = drive("abc", "\x03", "x = 1\r", "x\r", "\x04")
    assert code == 0
    assert out == "1\n\n"


def test_ctrl_c_outside_the_computation_keeps_the_session(monkeypatch):
    """Ctrl-C while a help page is made or an error is printed (not inside the entry's run):
    one line, and the session goes on with its variables."""
    from tapeml.builtins import help as H

    def interrupted(*args):
        raise KeyboardInterrupt
    monkeypatch.setattr(H, "help_text", interrupted)
    monkeypatch.setattr(R, "render", interrupted)
    code, out = drive("x = 1\r", "?relu\r", "y = undefined_name\r", "x + 1\r", ":quit\r")
    assert code == 0
    assert out == "Interrupted (Ctrl-C); the variables set so far are kept\n" * 2 + "2\n"


def test_history_search_and_file_history(tmp_path, monkeypatch):
    path = tmp_path / "hist"
    monkeypatch.setenv("TAPEML_HISTORY", str(path))
    from prompt_toolkit.history import FileHistory
    code, out = drive("weights = 7\r", "w = 1\r", ":quit\r", history=None)
    text = path.read_text()
    assert re.findall(r"^\+(.*)$", text, re.M) == ["weights = 7", "w = 1", ":quit"]
    # a new session on the same file: 'wei' + Up finds 'weights = 7' (history search by prefix)
    code, out = drive("wei", until(lambda s: s.default_buffer.text == "wei"), "\x1b[A",
                      until(lambda s: s.default_buffer.text == "weights = 7"), "\r",
                      "weights\r", ":quit\r", history=FileHistory(str(path)))
    assert out == "7\n"


def test_i_keeps_the_file_variables(tmp_path, monkeypatch):
    script = tmp_path / "s.ml"
    script.write_text("k = 41 + 1\nprint(\"loaded\")\n")
    seen = {}

    def fake_run_repl(session):          # the command line's tapeml Session
        seen["k"] = session["k"]
        return 0
    monkeypatch.setattr(R, "run_repl", fake_run_repl)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)      # a terminal: the session opens
    code, out = run_cli(["-i", str(script)])
    assert (code, out, seen) == (0, "loaded\n", {"k": 42.0})


def test_i_with_piped_input_runs_it_after_the_file(tmp_path):
    script = tmp_path / "s.ml"
    script.write_text("k = 41 + 1\n")
    res = subprocess.run(tapeml_command() + ["-i", str(script)], input="print(k)\nk + 1\n",
                         capture_output=True, text=True, timeout=60)
    assert (res.returncode, res.stdout, res.stderr) == (0, "42\n", "")
    res = subprocess.run(tapeml_command() + ["-i", str(script)], input="print(nope)\n",
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and "<stdin>:1:7: NameError: undefined name 'nope'" in res.stderr


# ---- the real command: a pseudo-terminal and piped stdin ----------------------------------------

def test_ctrl_c_interrupts_a_long_loop_in_a_real_terminal(tmp_path):
    with Terminal(tmp_path) as p:
        p.expect(PROMPT)
        startup = time.monotonic() - p.started
        p.send(b"x = 42\r")
        p.expect(PROMPT)
        p.send(b"while true\r")
        p.expect(rb"\.\.\.")                       # the continuation prompt
        p.send(b'print("running")\r')
        p.expect(rb"\.\.\.")
        p.send(b"end\r")
        p.expect(rb"running\r\n")                # it is computing now (a sleep was not enough
        p.send(b"\x03")                           # on a loaded machine: the Ctrl-C came while
        p.expect(rb"Interrupted \(Ctrl-C\)")      # the prompt still read keys, and was lost)
        p.expect(PROMPT)
        p.send(b"x\r")
        p.expect(rb"(?<![0-9.])42\r\n")
        p.expect(PROMPT)
        p.send(b"abc\x03")                        # Ctrl-C at the prompt clears the line
        p.expect(PROMPT)
        p.send(b"x + 1\r")
        p.expect(rb"(?<![0-9.])43\r\n")
        p.expect(PROMPT)
        p.send(b"\x04")                           # Ctrl-D leaves with status 0
        assert p.exit_code() == 0
        history = (tmp_path / "history").read_text()
        assert re.findall(r"^\+(.*)$", history, re.M) == ["x = 42", "while true", '    print("running")', "end",
                                                           "x", "x + 1"]
        print(f"time to first prompt: {startup:.2f}s")


def test_i_opens_the_session_with_the_file_variables(tmp_path):
    script = tmp_path / "s.ml"
    script.write_text("k = 6 * 7\n")
    with Terminal(tmp_path, "-i", str(script)) as p:
        p.expect(PROMPT)
        p.send(b"k\r")
        p.expect(rb"(?<![0-9.])42\r\n")
        p.expect(PROMPT)
        p.send(b":quit\r")
        assert p.exit_code() == 0


def run_piped(stdin_bytes):
    return subprocess.run(tapeml_command(), input=stdin_bytes, capture_output=True, timeout=60,
                          cwd=ROOT, env=dict(os.environ, TERM="xterm"))


def test_piped_stdin_runs_a_script_without_prompts():
    res = run_piped(b"print(1 + 1)\n")
    assert (res.returncode, res.stdout, res.stderr) == (0, b"2\n", b"")


def test_piped_seed_program_prints_the_golden_output():
    with open(os.path.join(ROOT, "examples", "seed_statistics_ml.ml"), "rb") as f:
        program = f.read()
    with open(os.path.join(ROOT, "examples", "seed_statistics_ml.out"), "rb") as f:
        want = f.read()
    res = run_piped(program)
    assert res.stderr == b""
    assert res.stdout == want
    assert b"\x1b" not in res.stdout and b"ml>" not in res.stdout
    assert res.returncode == 0


def test_startup_imports_neither_matplotlib_nor_prompt_toolkit_for_scripts():
    code = ("import sys\nfrom tapeml.evaluator.interpreter import Interpreter\nI = Interpreter()\n"
            "I.run('x = 1 + 1')\nprint('matplotlib' in sys.modules, 'prompt_toolkit' in sys.modules)\n"
            "from prompt_toolkit.output import DummyOutput\nfrom tapeml.faces.repl import make_session\n"
            "make_session(I, output=DummyOutput())\nprint('matplotlib' in sys.modules)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.stdout == "False False\nFalse\n", res.stderr


def test_stdlib_functions_complete_and_have_help():
    from tapeml.builtins.help import stdlib_table
    table = stdlib_table()
    if "adam_step" not in table:
        pytest.skip("no stdlib documentation table")
    interp = fresh()
    cands = {c.text: c for c in R.completions("adam_s", interp)}
    assert cands["adam_step"].meta == f"{table['adam_step']['signature']}  {table['adam_step']['summary']}"
    text = help_text("adam_step", interp)
    assert text.startswith(table["adam_step"]["signature"])
    assert text.endswith("Written in tapeml: stdlib/optim.ml")
    assert "adam_step" in help_text(None, interp).split("Standard library (written in tapeml)")[1]
    # example results are echoed as the session echoes them: a string result in quotes
    assert help_text("char_vocab", interp).split("Example\n")[1].split("\n")[:2] == [
        '  ml> char_vocab("hello world")', '  " dehlorw"']


def test_reset_with_names_clears_only_those():
    """`:reset a` cleared every variable (a breaker's finding): with names it clears only those
    (MATLAB's `clear a`), and a name that is not a variable clears nothing."""
    code, out = drive("a = 1\r", "b = 2\r", "c = 3\r", ":reset a c\r", ":vars\r", ":reset b zz\r", ":vars\r",
                      ":quit\r")
    assert code == 0
    assert out == ("cleared 2 variables: a, c\n"
                   "name  kind    shape  value\n"
                   "b     number         2\n"
                   ":reset: 'zz' is not a variable; nothing was cleared (:vars lists them; :reset alone clears all)\n"
                   "name  kind    shape  value\n"
                   "b     number         2\n")
