"""The one cell runner (lang/faces/runner.py): running source, help, echo and `ans`, and the
classification of how a run ended; and that the four faces run their code through it."""
import ast
import io
import os

import numpy as np
import pytest

from tapeml.builtins.help import help_text
from tapeml.faces import runner

from support import ROOT, fresh


def test_echo_shows_each_final_expression_value_and_keeps_the_last_in_ans():
    interp, shown = fresh(), []
    outcome = runner.run_cell(interp, "x = 2\nx + 1\n[1, 2] * x", "<t>", show=shown.append)
    assert outcome.status == runner.OK and outcome.ok
    assert shown[0] == 3
    np.testing.assert_array_equal(np.asarray(shown[1]), np.array([1.0, 2.0]) * 2)
    assert interp.globals.vars[runner.ANS] is shown[1]
    runner.run_cell(interp, "ans + 1", "<t2>", show=shown.append)      # ans is a variable
    np.testing.assert_array_equal(np.asarray(shown[2]), np.array([3.0, 5.0]))


def test_semicolon_suppresses_the_echo_and_ans():
    interp, shown = fresh(), []
    assert runner.run_cell(interp, "x = 2\nx + 1;", "<t>", show=shown.append).status == runner.OK
    assert shown == [] and runner.ANS not in interp.globals.vars
    # ans=False echoes without keeping the value (the docs builder); no show: nothing echoed
    runner.run_cell(interp, "x + 1", "<t>", show=shown.append, ans=False)
    assert shown == [3] and runner.ANS not in interp.globals.vars
    runner.run_cell(interp, "x + 5", "<t>")
    assert shown == [3] and runner.ANS not in interp.globals.vars


@pytest.mark.parametrize("text", ["?relu", "? relu", "relu?", "  ?relu\n"])
def test_help_request_answers_with_the_help_page(text):
    interp = fresh()
    outcome = runner.run_cell(interp, text, "<t>", help=True)
    assert outcome.status == runner.HELP and outcome.text == help_text("relu", interp)


def test_help_of_an_unknown_name_and_help_off():
    interp = fresh()
    outcome = runner.run_cell(interp, "?layer_nrm", "<t>", help=True)
    assert outcome.status == runner.ERROR and outcome.ename == "NameError"
    assert outcome.text == f"NameError: {outcome.message}" and "did you mean 'layer_norm'" in outcome.text
    # without help=True, ?relu is code: a syntax error
    assert runner.run_cell(interp, "?relu", "<t>").status == runner.ERROR
    assert runner.run_cell(interp, "?relu", "<t>").ename == "SyntaxError"
    # the REPL's loose form also takes ? alone (the index) and anything after a leading ?
    assert runner.help_request("?") is None and runner.help_request("?", loose=True) == ""
    assert runner.help_request("? a b", loose=True) == "a b" and runner.help_request("x = 1") is None


def test_language_error_is_rendered_with_the_source_line_and_a_caret():
    interp = fresh()
    outcome = runner.run_cell(interp, "x = 1\ny = [1, 2] @ [1, 2, 3]", "<t>")
    assert outcome.status == runner.ERROR and not outcome.ok and outcome.ename == "ShapeError"
    lines = outcome.text.split("\n")
    assert lines[0] == f"<t>:2:12: ShapeError: {outcome.message}"
    assert lines[1] == "  2 | y = [1, 2] @ [1, 2, 3]"
    assert lines[2].index("^") == lines[1].index("@")          # the caret under the operator
    assert interp.globals.vars["x"] == 1                        # what ran before stays


def test_shown_text_is_quoted_by_the_error():
    interp = fresh()
    outcome = runner.run_cell(interp, "\ny = undefined_name", "<d>", shown="\ny = undefined_name  # shown")
    assert "  2 | y = undefined_name  # shown" in outcome.text.split("\n")


class Boom(Exception):
    pass


@pytest.mark.parametrize("exc, status, ename, text", [
    (RuntimeError("boom"), runner.INTERNAL, "InternalError", "InternalError: RuntimeError: boom"),
    (BrokenPipeError(32, "Broken pipe"), runner.BROKEN_PIPE, "InternalError",
     "InternalError: BrokenPipeError: [Errno 32] Broken pipe"),
    (RecursionError("deep"), runner.RECURSION, "RecursionError", "RecursionError: the program nests too deeply: split a long expression into several statements, "
     "or give a recursion a base case"),
    (MemoryError(), runner.MEMORY, "MemoryError", "MemoryError: the computation ran out of memory"),
    (KeyboardInterrupt(), runner.INTERRUPTED, "KeyboardInterrupt", ""),
    (runner.Terminated(1), runner.TERMINATED, "Terminated", ""),
])
def test_each_way_a_run_ends_is_classified(exc, status, ename, text):
    """The Python exception that ends a run (the evaluator turns a RecursionError or a MemoryError
    inside a call into a language error; one raised elsewhere, by the parser, reaches the runner)."""
    class Raising:
        sources = {}

        def run(self, source, filename, echo=None):
            raise exc
    outcome = runner.run_cell(Raising(), "a = 1", "<t>")
    assert (outcome.status, outcome.ename, outcome.text) == (status, ename, text)
    assert outcome.exception is exc and not outcome.ok
    if status == runner.TERMINATED:
        assert outcome.message == "SIGHUP"


@pytest.mark.parametrize("exc, status", [(RuntimeError("boom"), runner.INTERNAL),
                                         (KeyboardInterrupt(), runner.INTERRUPTED)])
def test_a_builtin_raising_mid_program_keeps_the_variables_set_before(exc, status):
    from tapeml.builtins.registry import REGISTRY
    from dataclasses import replace

    def raiser(*args):
        raise exc
    interp = fresh()
    interp.base.vars["sqrt"] = replace(REGISTRY["sqrt"], fn=raiser)
    outcome = runner.run_cell(interp, "a = 1\nb = sqrt(4)", "<t>")
    assert outcome.status == status and outcome.exception is exc
    assert interp.globals.vars["a"] == 1 and "b" not in interp.globals.vars


def test_raise_internal_lets_a_bug_raise(monkeypatch):
    from tapeml.builtins.registry import REGISTRY
    from dataclasses import replace

    def raiser(*args):
        raise Boom("x")
    interp = fresh()
    interp.base.vars["sqrt"] = replace(REGISTRY["sqrt"], fn=raiser)
    with pytest.raises(Boom):
        runner.run_cell(interp, "sqrt(4)", "<t>", raise_internal=True)
    # a language error is still an outcome
    assert runner.run_cell(interp, "1 +", "<t>", raise_internal=True).status == runner.ERROR


# ---- the faces run code through the runner -----------------------------------------------------

FACES = ["lang/faces/cli.py", "lang/faces/repl.py", "lang/faces/kernel.py", "lang/faces/docs/run.py"]


@pytest.mark.parametrize("path", FACES)
def test_each_face_imports_the_runner_and_runs_no_program_itself(path):
    tree = ast.parse(open(os.path.join(ROOT, path), encoding="utf-8").read())
    imports = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "tapeml.faces"
               for a in n.names}
    assert "runner" in imports
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
    assert any(c.func.attr == "run_cell" for c in calls)
    # no interp.run(...) of its own, and so no `except LangError` around one
    assert not [c for c in calls if c.func.attr == "run" and ast.unparse(c.func.value).endswith("interp")]


def test_the_faces_call_the_runner(monkeypatch, capsys):
    """cli.run_source, the REPL's execute and the docs' run_code show what the runner reports."""
    from tapeml.faces import cli, repl
    from tapeml.faces.docs import run as docs_run
    seen = []
    real = runner.run_cell

    def spy(interp, source, filename, **kw):
        seen.append(filename)
        return real(interp, source, filename, **kw)
    monkeypatch.setattr(runner, "run_cell", spy)
    assert cli.run_source(fresh(), "[1, 2] @ [1, 2, 3]", "<cli>") == 1
    assert "^" in capsys.readouterr().err
    out, err = io.StringIO(), io.StringIO()
    r = repl.Repl(fresh(), session=None, out=out, err=err)
    r.execute("x = 4\nx", "REPL[1]")
    assert out.getvalue() == "4\n" and r.interp.globals.vars["ans"] == 4
    res = docs_run.run_code("1 +", "<docs>")
    assert res.error.startswith("<docs>:1:") and "SyntaxError" in res.error
    assert seen == ["<cli>", "REPL[1]", "<docs>"]
