"""Every error a user can cause: kind, message and line:col, and never a Python traceback."""
import re

import pytest

from support import error_of, run_cli, run_ml

CASES = [
    # (source, kind, message fragment, "line:col")
    ('\nx = "abc', "SyntaxError", "unterminated string", "2:5"),
    ('\nx = (1 + 2', "SyntaxError", "'(' opened at 2:5 is never closed", "2:5"),
    ('\nx = [1, 2)', "SyntaxError", "'[' opened at 2:5 is closed by ')'", "2:10"),
    ('\nx = 1)', "SyntaxError", "unmatched ')'", "2:6"),
    ('\ny = lenn([1, 2])', "NameError", "undefined name 'lenn'; did you mean 'len'?", "2:5"),
    ('\nprint(undefined_thing)', "NameError", "undefined name 'undefined_thing'", "2:7"),
    ('\nfn f(a, b) -> a + b\nf(1, 2, 3)', "TypeError", "f() takes 2 arguments (f(a, b)), got 3", "3:1"),
    ('\nfn f(a, b) -> a + b\nf(1)', "TypeError", "f() is missing the argument 'b'", "3:1"),
    ('\nfn f(a, b = 1) -> a + b\nf(1, c = 2)', "TypeError", "f() has no parameter 'c'", "3:1"),
    ('\nlayer_norm([1, 2], [1, 1], [0, 0], epsilon = 1)', "TypeError",
     "layer_norm() has no parameter 'epsilon'; did you mean 'eps'?", "2:1"),
    ('\nsoftmax()', "TypeError", "softmax() is missing the argument 'x'", "2:1"),
    ('\nsoftmax([1, 2], axis = 0)', "TypeError", "softmax() has no parameter 'axis'; did you mean 'dim'?", "2:1"),
    ('\nsqrt(1, 2)', "TypeError", "sqrt() takes at most 1 argument, got 2", "2:1"),
    ('\ny = [1, 2] @ [1, 2, 3]', "ShapeError",
     "matrix product a vector of length 2 @ a vector of length 3: the inner sizes 2 and 3 differ", "2:12"),
    ('\ny = [1, 2] + [1, 2, 3]', "ShapeError",
     "cannot add a vector of length 2 and a vector of length 3", "2:12"),
    ('\na = ones(2, 3)\nb = ones(3, 2)\nc = a * b', "ShapeError", "for the matrix product use '@'", "4:7"),
    ('\nx = [1, 2, 3]\ny = x[5]', "IndexError", "index 5 is out of range for a vector of length 3", "3:7"),
    ('\nx = [1, 2, 3]\ny = x[3]', "IndexError", "(indices start at 0; the last is 'end')", "3:7"),
    ('\nt = (1, 2)\ny = t[5]', "IndexError", "index 5 is out of range for a tuple of 2 items", "3:7"),
    ('\ny = max(zeros(0))', "ValueError", "max() of an empty matrix", "2:5"),
    ('\nf = lambda x: x + 1', "SyntaxError", "'lambda' is not tapeml: write 'fn(x) -> expression'", "2:12"),
    ('\nx = [1, 2, 3]\ny = x[1:]', "SyntaxError", "names both ends: x[1:end]", "3:9"),
    ('\nx = [1, 2, 3]\ny = x[:2]', "SyntaxError", "names both ends: x[0:2]", "3:7"),
    ('\nx = "0.1" * 0.5', "ValueError",
     'got "0.1" * 0.5; if "0.1" is meant as a number, write it without quotes', "2:11"),
    ('\nx = [1, 2, 3]\ny = x[1.5]', "IndexError", "indices must be whole numbers", "3:7"),
    ('\nx = [1, 2, 3]\nif x > 1\n  print(1)\nend', "TypeError",
     "the if condition must be a single true or false, got a bool vector of length 3; use any(...) or all(...)", "3:4"),
    ('\nwhile 1\nend', "TypeError", "the while condition must be true or false, got a number", "2:7"),
    ('\ne = [1, 0; 0, 1]\nh = {wq = e, wk = e, wv = e, wo = e}\nmulti_head_attention(e, (h,), 2)',
     "ValueError", "n_heads is 2 but heads has 1 record; they must be equal", "4:1"),
    ('\ne = [1, 0; 0, 1]\nh = {wq = e, wk = e, wo = e}\nmulti_head_attention(e, (h,), 1)',
     "ValueError", "heads[0] is missing the field 'wv'", "4:1"),
    ('\nx = [1 -2]', "SyntaxError", "matrix elements need commas", "2:8"),
    ('\nx = 3 > 2 > 1', "SyntaxError", "comparisons do not chain: write 'a > b and b > c'", "2:11"),
    ('\nfn f(x)\n  y = x +\nend', "SyntaxError",
     "line 3 ends with '+', so an operand must follow, but the next line starts with 'end'", "3:9"),
    ('\nif 1 >\nelse\nend', "SyntaxError",
     "line 2 ends with '>', so an operand must follow, but the next line starts with 'else'", "2:6"),
    ('\nx = 1 \u2212 2', "SyntaxError", "U+2212 MINUS SIGN", "2:7"),
    ('\nx = 1 \uff03 comment', "SyntaxError", "U+FF03", "2:7"),
    ("\nx = 'abc'", "SyntaxError", "strings use double quotes", "2:5"),
    ('\nx = [1 2]', "SyntaxError", "matrix elements need commas", "2:8"),
    ('\nbreak', "SyntaxError", "'break' belongs inside a loop (for ... end or while ... end)", "2:1"),
    ('\nreturn 1', "SyntaxError", "'return' belongs inside a function (fn name(...) ... end)", "2:1"),
    ('\nif true\n  x = 1\n', "SyntaxError", "the 'if' block opened at 2:1 is missing 'end'", "2:1"),
    ('\nx = {a = 1}\ny = x.b', "NameError", "the record has no field 'b'", "3:5"),
    ('\nx = 5\nx(1)', "TypeError", "cannot call a number", "3:1"),
    ('\nx = "a" + 1', "TypeError", "cannot apply '+' to a string and a number", "2:9"),
    ('\nfn f(n) -> f(n + 1)\nf(0)', "RecursionError", "nested calls", "2:12"),
    ('\nzeros(1e6, 1e6)', "ValueError", "would need 8000 GB of float64; the limit is", "2:1"),
    ('\nx = nan + 1', "NameError", "undefined name 'nan'; tapeml has no nan literal: write 0 / 0", "2:5"),
    ('\nx = 2 * inf', "NameError", "undefined name 'inf'; tapeml has no inf literal: write 1 / 0", "2:9"),
    ('\none_hot([0.5], 3)', "IndexError", "one_hot(): ids must be whole numbers, got 0.5", "2:1"),
    ('\none_hot([0, 5], 3)', "IndexError", "one_hot(): id 5 is out of range: with 3 classes, ids go from 0 to 2", "2:1"),
    ('\nembedding(ones(3, 2), [4])', "IndexError", "id 4 is out of range: the table has 3 entries, so ids go from 0 to 2", "2:1"),
    ('\nr = range(1e12)', "ValueError", "the range would have 1000000000000 elements; the limit is 100000000", "2:5"),
    ('\nreshape([1, 2], "a", 2)', "ValueError", "sizes must be whole numbers (or -1), got a string", "2:1"),
    ('\nx = import("no_such_file.ml")', "IOError", "no_such_file.ml", "2:5"),
    ('\na, b = (1, 2, 3)', "ValueError", "cannot unpack a tuple of 3 into 2 names", "2:1"),
    ('\n1 = x', "SyntaxError", "the left side of '=' must be a name, a field or an index, not this expression (use '==' to compare)", "2:1"),
    ('\ntrue = 1', "SyntaxError", "'true' is a value, not a name: it cannot be assigned to (pick another name, such as true_)", "2:1"),
    ('\nx, none = (1, 2)', "SyntaxError", "'none' is a value, not a name", "2:4"),
    ('\n(a, 1) = (1, 2)', "SyntaxError", "the left side of '=' must be a name, a field or an index", "2:5"),
    ('\n(a, b) = (1, 2, 3)', "ValueError", "cannot unpack a tuple of 3 into 2 names", "2:1"),
    ('\n((a, b), c) = ((1, 2), 3)', "SyntaxError", "a tuple on the left of '=' unpacks one level into names, "
     "fields or indexes: nested tuples are not unpacked (write the inner one out: a, b = pair)", "2:2"),
    ('\na = 1\nb = 2\n(a, b) += (1, 2)', "SyntaxError", "'+=' updates one name, field or index; a tuple of them "
     "takes '='", "4:1"),
    ('\nx = 2x', "SyntaxError", "did you mean 2 * x", "2:6"),
    ('\nx = [1, 2] ** 2', "SyntaxError", "'**' is not a tapeml operator; write '^'", "2:12"),
    ('\nx = grad(fn(v) -> v, [1, 2])', "ValueError",
     "grad needs f to return a number, but it returned a vector of length 2", "2:5"),
    ('\nw = {a = [1, 2], name = "x"}\ng = grad(fn(w) -> sum(w.a), w)', "TypeError", "w.name is a string", "3:5"),
    # habits from other languages (a newcomer's list)
    ('\nif 1 > 0:\n  print(1)\nend', "SyntaxError", "a ':' at the end of a line: tapeml blocks take no ':'", "2:9"),
    ('\nfor i in range(3):\n  print(i)\nend', "SyntaxError", "blocks take no ':'", "2:18"),
    ('\n% a MATLAB comment', "SyntaxError", "comments start with '#'", "2:1"),
    ('\nx = 7 // 2', "SyntaxError", "floor division is floor(a / b)", "2:7"),
    ('\nx = True', "NameError", "undefined name 'True'; tapeml writes 'true'", "2:5"),
    ('\ndef f(x)', "SyntaxError", "'def' is not a tapeml keyword; tapeml writes 'fn name(args) ... end'", "2:1"),
    ('\nx = [1, 2]\ny = x(1)', "TypeError", "to index a matrix write x[i]", "3:5"),
    ('\nfn f(x)\n  if x > 0\n    return 1\n  return 0\nend', "SyntaxError",
     "the 'end' at 6:1 closed the 'if' at 3:3 (indented differently): is that 'if' missing its own 'end'?", "2:1"),
    ('\nx = 1:5\ny = x[x > 2 and 3]', "TypeError", "'and' combines a bool matrix with bools or bool matrices", "3:17"),
    ('\nfn f(x)\n  y = x\nend\ng = value_and_grad(f, 1)', "ValueError",
     "value_and_grad needs f to return a number, but it returned none; is a 'return' missing?", "5:5"),
    ('\nmax([1, 2], 3, dim=0)', "ValueError", "give either y (elementwise) or dim/keepdims (a reduction), not both", "2:1"),
    ('\nlayer_norm([], [], [])', "ShapeError", "needs at least one feature", "2:1"),
    ('\ntransformer_block(ones(3, 4), transformer_block_init(8, 2))', "ShapeError",
     "x has 4 features (its last axis) but the weights are for d_model 8", "2:1"),
    ('\nw = transformer_block_init(8, 2, norm = "rms_norm")\ntransformer_block(ones(3, 8), w)', "ValueError",
     'these look like rms_norm weights; pass norm="rms_norm"', "3:1"),
    ('\nplot([1, 2])\nsavefig("figure.jpg")', "ValueError", "figures are written as PNG", "3:1"),
    # calls and parameters in tapeml's words, not Python's (issue 25)
    ('\nf = fn(x, dim=0) -> x\nf(dim=1, 2)', "SyntaxError",
     "this argument has no name but comes after 'dim=': the arguments by position come first, then those by "
     "name, as in f(x, 2, dim=0)", "3:10"),
    ('\nsum([1, 2], dim=0, dim=0)', "SyntaxError", "'dim=' is given twice in this call", "2:20"),
    ('\nfn f(a, b=1, c) -> a', "SyntaxError",
     "'c' has no default but comes after a parameter with one: the parameters with defaults go last", "2:14"),
    ('\nfn f(a, a) -> a', "SyntaxError", "two parameters are named 'a'", "2:9"),
    ('\nwhile false\nend\ncontinue', "SyntaxError", "'continue' belongs inside a loop", "4:1"),
    # a size refusal names the builtin the user called and its result, never an internal step (issue 25)
    ('\nk = kron(ones(1000, 1000), ones(1000, 1000))', "ValueError",
     "kron() of 1000x1000 and 1000x1000 (a result of 1000000x1000000) would need 8000 GB of float64", "2:5"),
    ('\nk = kron(ones(1e5), ones(1e5))', "ValueError",
     "kron() of a vector of length 100000 and a vector of length 100000 (a result of a vector of length "
     "10000000000) would need 80 GB", "2:5"),
    ('\no = outer(ones(1e5), ones(1e5))', "ValueError",
     "outer() of a vector of length 100000 and a vector of length 100000 (a result of 100000x100000) would need",
     "2:5"),
    ('\nx = lstsq(ones(1, 1e5), ones(1, 1e5))', "ValueError",
     "lstsq() of 1x100000 and 1x100000 (a result of 100000x100000) would need 80 GB", "2:5"),
    ('\nt = tile(ones(1e5), 1e5)', "ValueError",
     "tile() of a vector of length 100000 (a result of a vector of length 10000000000) would need", "2:5"),
    ('\nr = repeat(ones(1e5, 2), 1e5)', "ValueError",
     "repeat() of 100000x2 (a result of a vector of length 20000000000) would need", "2:5"),
    ('\np = pad(ones(10), (1e10, 0))', "ValueError",
     "pad() of a vector of length 10 (a result of a vector of length 10000000010) would need", "2:5"),
    ('\nm = max(ones(1e5), ones(1e5, 1))', "ValueError",
     "max() of a vector of length 100000 and 100000x1 (a result of 100000x100000) would need", "2:5"),
    ('\nc = cosine_similarity(ones(1e5), ones(1e5, 1))', "ValueError",
     "cosine_similarity() of a vector of length 100000 and 100000x1 (an intermediate result of 100000x100000) "
     "would need", "2:5"),
    ('\nj = jacobian(fn(x) -> x * 2, ones(1e5))', "ValueError",
     "jacobian() with output a vector of length 100000 and input a vector of length 100000 (a result of "
     "100000x100000) would need 80 GB", "2:5"),
    ('\nm = max(zeros(0, 2), dim=0)', "ValueError",
     "max(): axis 0 of a 0x2 matrix is empty: its slices have no largest or smallest element", "2:5"),
]


@pytest.mark.parametrize("source,kind,fragment,place", CASES, ids=[c[2][:40] for c in CASES])
def test_error(source, kind, fragment, place):
    code, out = run_ml(source)
    assert code == 1, out
    first = out.splitlines()[0]
    assert first.startswith(f"<string>:{place}: {kind}: "), out
    assert fragment in first, out
    assert "Traceback" not in out
    # the source line and a caret follow
    lines = out.splitlines()
    assert "|" in lines[1] and "^" in lines[2], out


def test_numbers_in_messages_go_through_the_printer():
    """A size or index in a message is written as print writes it: -2, not Python's -2.0."""
    for source, end in [("\nreshape([1, 2], -2, 2)", "got -2"), ("\nzeros(2.5)", "got 2.5"),
                        ("\nx = [1, 2]\nx[18915328]", "index 18915328 is out of range for a vector of length 2")]:
        code, out = run_ml(source)
        assert code == 1 and out.splitlines()[0].endswith(end), out


def test_caret_points_at_operator():
    code, out = run_ml("\ny = [1, 2] @ [1, 2, 3]")
    lines = out.splitlines()
    assert lines[1] == "  2 | y = [1, 2] @ [1, 2, 3]"
    assert lines[2] == "    |            ^"


def test_an_error_inside_the_stdlib_blames_the_users_call():
    code, out = run_ml('fn f(n)\n  return script_arg(n, "2")\nend\nprint(f(1))')
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == ("<string>:2:10: ValueError: script_arg(): name is the option's name as a string, "
                        'such as "steps"; got a number')
    assert lines[1] == '  2 |   return script_arg(n, "2")'
    assert lines[2] == "    |          ^^^^^^^^^^^^^^^^^^"
    assert lines[3].startswith("  raised inside the standard library at <stdlib>/text.ml:")
    assert lines[4] == "  called from <string>:4:7 in f"
    code, out = run_ml('clip_grad_norm("x", 1)')
    assert out.splitlines()[0].startswith("<string>:1:1: TypeError in clip_grad_norm(): ")
    assert out.splitlines()[3].endswith(" in grad_norm")     # the stdlib function that raised it


def test_call_chain_is_shown():
    code, out = run_ml("\nfn inner(m) -> m @ [1, 2, 3]\nfn outer(m) -> inner(m) + 1\nouter([1, 2])")
    assert code == 1
    assert "called from <string>:3:16 in inner" in out
    assert "called from <string>:4:1 in outer" in out


def test_usage_errors_exit_2(tmp_path):
    assert run_cli([str(tmp_path / "missing.ml")])[0] == 2
    assert run_cli(["--no-such-flag"])[0] == 2
    assert run_cli(["-c"])[0] == 2


def test_keyboard_interrupt_in_script_is_one_line(monkeypatch):
    from tapeml.builtins.registry import REGISTRY

    def boom():
        raise KeyboardInterrupt
    monkeypatch.setattr(REGISTRY["clock"], "fn", boom)    # Ctrl-C arriving inside the loop's body
    code, out = run_cli(["-c", "while true\n  clock()\nend"])
    assert code == 130
    assert out == "Interrupted (Ctrl-C)\n"


def test_ctrl_c_while_an_error_is_printed_is_one_line_too(monkeypatch, capsys):
    """Outside the program run (here the error's rendering), Ctrl-C ends the command the same
    way: exit status 130 and one line, no Python traceback."""
    import signal
    import sys
    from tapeml.faces import cli
    from tapeml.syntax import errors

    def interrupted(*args):
        raise KeyboardInterrupt
    monkeypatch.setattr(errors, "render", interrupted)
    monkeypatch.setattr(sys, "argv", ["tapeml", "-c", "undefined_name"])
    old = signal.getsignal(signal.SIGTERM)          # entry() installs its SIGTERM handler
    try:
        with pytest.raises(SystemExit) as e:
            cli.entry()
    finally:
        signal.signal(signal.SIGTERM, old)
    assert e.value.code == 130
    assert capsys.readouterr().err == "Interrupted (Ctrl-C)\n"


def test_masks_combine_with_and_or_not():
    code, out = run_ml("x = 1:6\nprint(x[x > 2 and x < 5], x[x < 2 or x > 5], x[not (x > 2)], max(3, 5), min([1, 5], [4, 4]))\n"
                       "m = (x > 2) * (x < 5)\nprint(m, x[m], sum(m), (x > 2) + (x > 3), true * 2)")
    assert (code, out) == (0, "[3, 4] [1, 6] [1, 2] 5 [1, 4]\n"
                              "[false, false, true, true, false, false] [3, 4] 2 [0, 0, 1, 2, 2, 2] 2\n")


def test_errors_in_functions_run_by_grad_name_the_grad_call():
    code, out = run_ml("\nfn bad(x)\n  return sum(x @ [1, 2, 3])\nend\ng = grad(bad, [1, 2])")
    assert code == 1
    assert out.splitlines()[-1] == "  called from <string>:5:5 in bad (called by grad)"
    assert "None" not in out


def test_a_byte_order_mark_is_ignored(tmp_path):
    f = tmp_path / "bom.ml"
    f.write_bytes(b"\xef\xbb\xbfprint(1)\n")
    assert run_cli([str(f)]) == (0, "1\n")


def test_tapeml_options_after_the_script_are_named_in_a_warning(tmp_path):
    script = tmp_path / "dt.ml"
    script.write_text("print(dtype(ones(1)))\nprint(ARGS)\n", encoding="utf-8")
    code, out = run_cli([str(script), "--dtype", "float32"])
    assert code == 0
    assert "tapeml: warning: '--dtype' comes after the script, so it is passed to the script in ARGS" in out
    assert 'float64\n("--dtype", "float32")' in out        # still the script's arguments, as documented


def test_a_refusal_inside_a_matrix_literal_names_the_literal(monkeypatch):
    """concat is the literal's own step: the refusal names the literal and its result."""
    from tapeml.array import limits
    monkeypatch.setattr(limits, "MAX_ELEMENTS", 100)
    for source, result in [("x = ones(60)\ny = [x, x]", "a vector of length 120"), ("x = ones(60)\ny = [x; x]", "2x60"),
                           ("x = ones(60)\ny = [x', 1 + x']", "60x2")]:
        err = error_of(source)
        assert err.message.startswith(f"the matrix literal (a result of {result}) would need"), err.message
        assert (err.span.line, err.span.col) == (2, 5)
    assert error_of("x = ones(60)\ny = stack(x, x, dim=1)").message.startswith("stack() of 2 parts (a result of 60x2) would need")


def test_parser_and_evaluator_messages_have_no_python_wording():
    """The fuzz suite's detector (Python's and NumPy's phrases, doubled words) on the messages of the
    call and block rules, which copied Python's before issue 25."""
    from test_fuzz import doubled_word, python_wording
    sources = ["f(dim=1, 2)", "f(a=1, a=2)", "fn f(a=1, b) -> a", "fn f(a, a) -> a", "break", "continue",
               "return 1", "1 = x", "f(x) = 1", "jacobian(fn(x) -> x * 2, ones(1e5))"]
    for source in sources:
        code, out = run_ml(source)
        first = out.splitlines()[0]
        assert code == 1 and python_wording(first) is None and doubled_word(first) is None, first


def test_a_refused_size_past_1e16_is_written_short():
    """No 300-digit (or 2^64) sizes in a refusal: a count past 2^53 is refused as a count (written as
    print writes numbers), and a result past the limit names its size."""
    for source, shown in [("\ntile(-1, 1e308)", "each rep must be a whole number between 0 and 2^53, got 1e308"),
                          ("\ntile([1, 2], 2^63)", "got 9.223372e18"),
                          ("\npad([1], (1e300, 1e300))", "between 0 and 2^53, got 1e300"),
                          ("\ntile([1, 2], 2^52)", "(a result of a vector of length 9007199254740992)")]:
        code, out = run_ml(source)
        first = out.splitlines()[0]
        assert code == 1 and shown in first and not re.search(r"\d{17}", first), out


def test_grad_of_a_non_number_hints_by_what_came_back():
    """'reduce it first' only for a matrix (a newcomer's string result got the sum hint)."""
    code, out = run_ml('grad(fn(x) -> "a", 1)')
    assert code == 1 and "returned a string; the function to differentiate must compute a number" in out
    code, out = run_ml("grad(fn(x) -> [x, x], 1)")
    assert code == 1 and "returned a vector of length 2; reduce it first (for example sum(...)" in out


def test_an_import_cycle_through_the_main_script_runs_it_once_and_names_the_cycle(tmp_path, monkeypatch):
    """The script run from the command line counts as being imported: importing it back (itself,
    or through other files) is the cycle error at once, not a second run of the script first."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "selfimp.ml").write_text('print("main once")\nm = import("selfimp.ml")\n')
    (tmp_path / "a.ml").write_text('print("running a")\nb = import("b.ml")\n')
    (tmp_path / "b.ml").write_text('c = import("c.ml")\n')
    (tmp_path / "c.ml").write_text('a = import("a.ml")\n')
    code, out = run_cli(["selfimp.ml"])
    assert code == 1 and out.splitlines()[:2] == [
        "main once", f"selfimp.ml:2:5: ValueError: circular import of {tmp_path / 'selfimp.ml'}: selfimp.ml imports itself"]
    code, out = run_cli(["a.ml"])
    assert code == 1 and out.splitlines()[:2] == [
        "running a", f"c.ml:1:5: ValueError: circular import of {tmp_path / 'a.ml'}: a.ml imports b.ml, which "
                     "imports c.ml, which imports a.ml"]
    assert "  called from b.ml:1:5 in import(\"c.ml\")" in out and "  called from a.ml:2:5 in import(\"b.ml\")" in out
    # through a symlink to the script (the same file by its real path)
    (tmp_path / "link.ml").symlink_to(tmp_path / "selfimp.ml")
    code, out = run_cli(["link.ml"])
    assert code == 1 and out.splitlines()[:2] == [
        "main once", f"link.ml:2:5: ValueError: circular import of {tmp_path / 'selfimp.ml'}: selfimp.ml imports itself"]
    # a module imported twice (not a cycle) runs once and is the same record
    (tmp_path / "m.ml").write_text('print("m runs")\nk = 1\n')
    (tmp_path / "twice.ml").write_text('x = import("m.ml")\ny = import("m.ml")\nprint(x.k + y.k)\n')
    assert run_cli(["twice.ml"]) == (0, "m runs\n2\n")


def test_the_caret_counts_terminal_columns_under_wide_characters():
    """A CJK character or an emoji takes two columns on screen, a combining accent none: the caret
    is placed by columns, not code points, so it lands under the '+' (the column in the message
    stays the code-point count, as editors number it)."""
    from tapeml.syntax.errors import Span, caret_lines
    for line, col in (('print("日本 {1 + "a"}")', 14), ('s = "🙂🙂" + 1', 10), ('x = "e\u0301" + 1', 10)):
        text, carets = caret_lines(Span("f", 1, col, 1, col + 1), line)
        shown = text.split(" | ", 1)[1]
        at = len(carets.split(" | ", 1)[1]) - 1          # the caret's column on screen (0-based)
        wide = sum(2 if ord(c) > 0x2E80 else 0 if c == "\u0301" else 1 for c in shown[:col - 1])
        assert at == wide and shown[col - 1] == "+", line


@pytest.mark.parametrize("use, message", [
    ("one_hot(i, 4)", "one_hot(): ids must be whole numbers, got"),
    ("x[i]", "indices must be whole numbers, got"),
    ("x[[0, i]]", "indices must be whole numbers, got"),
    ("x[0:i]", "index ranges need whole numbers, got"),
    ("zeros(i)", "zeros(): sizes must be whole numbers >= 0, got"),
    ("repeat([1, 2], i)", "repeat(): n must be a whole number, got"),
    ("reshape(1:6, i, 2)", "reshape(): sizes must be whole numbers (or -1), got"),
    ("take_along(x, [i], dim = 0)", "take_along(): ids must be whole numbers, got"),
])
def test_a_number_that_prints_whole_but_is_not_is_shown_with_every_digit(use, message):
    """0.1 * 3 * 10 is 3.0000000000000004, which the 7-digit printer shows as 3: every message
    that refuses it for not being whole shows the digits that make it so, and the cure."""
    e = error_of(f"x = [1, 2, 3, 4, 5]\ni = 0.1 * 3 * 10\ny = {use}")
    assert e.message == (f"{message} 3.0000000000000004 (not a whole number, though it prints as 3: "
                         f"round(x) makes it one)"), e.message


# ---- issue 38, item 6: messages that name the real cause ------------------------------------------
def _exact(source, kind, message, place, **variables):
    err = error_of(source, **variables)
    assert (err.kind, err.message, f"{err.span.line}:{err.span.col}") == (kind, message, place)


@pytest.mark.parametrize("source,shapes,result,need,place", [
    # the inner sizes are equal (0): the m x n result of zeros is what cannot be made
    ("x = zeros(0, 9e8)\nx = concat(x, x, x, dim=1)\ny = x' @ x", "2700000000x0 and 0x2700000000",
     "2700000000x2700000000", "58300000000 GB", "3:8"),
    ("y = zeros(0, 9e8)' @ zeros(0, 9e8)", "900000000x0 and 0x900000000", "900000000x900000000",
     "6480000000 GB", "1:20"),
])
def test_an_empty_product_too_large_to_make_is_refused_by_its_size(source, shapes, result, need, place):
    from tapeml.array import limits
    from tapeml.array.number_text import format_gb
    # 2.7e9^2 float64 = 5.83e19 bytes; 9e8^2 = 6.48e18 bytes
    _exact(source, "ValueError", f"'@' of {shapes} (a result of {result}) would need {need} of float64; the "
           f"limit is {format_gb(limits.max_elements() * 8)} (half this machine's memory, at most 8 GB)", place)


def test_the_siblings_of_an_empty_product_say_the_result_too():
    err = error_of("x = zeros(0, 9e8)\ny = dense(x', x)")
    assert err.message.startswith("dense() of 900000000x0 and 0x900000000 (a result of 900000000x900000000) "
                                  "would need 6480000000 GB of float64") and (err.span.line, err.span.col) == (2, 5)
    err = error_of("q = zeros(0, 9e8)'\ny = scaled_dot_product_attention(q, q, zeros(9e8, 1))")
    assert err.message.startswith("scaled_dot_product_attention() of 900000000x0, 900000000x0 and 900000000x1 "
                                  "(a result of 900000000x900000000) would need 6480000000 GB")
    # small empty products are still made: zeros, as NumPy's
    from support import value_of
    assert value_of("zeros(2, 0) @ zeros(0, 3)").tolist() == [[0.0] * 3] * 2
    assert value_of("size(zeros(0, 3) @ zeros(3, 4))") == (0.0, 4.0)


TREE = ("; operators do not reach into records, tuples and dictionaries: tree_map applies one leaf by leaf "
        "(p - 0.1 * g is tree_map(fn(w, d) -> w - 0.1 * d, p, g)), and sgd_step(p, g, state, lr = 0.1) "
        "takes a gradient step")


@pytest.mark.parametrize("source,message,place", [
    ("p = {w = [1, 2]}\ng = {w = [3, 4]}\np = p - 0.1 * g", "cannot apply '*' to a number and a record" + TREE, "3:13"),
    ("p = {w = [1, 2]}\np = p * 2", "cannot apply '*' to a record and a number" + TREE, "2:7"),
    ("p = {w = 1}\nq = p + p", "cannot apply '+' to a record and a record" + TREE, "2:7"),
    ("p = (1, [2])\nq = p - (1, 1)", "cannot apply '-' to a tuple of 2 and a tuple of 2" + TREE, "2:7"),
    ('d = {"a": 1}\nq = d / 2', "cannot apply '/' to a dict of 1 key and a number" + TREE, "2:7"),
    ("fn step(p, g)\n  return p - 0.1 * g\nend\nq = step({w = 1}, {w = 2})",      # compiled: the same words
     "cannot apply '*' to a number and a record" + TREE, "2:18"),
    ("p = {w = 1}\nq = -p", "unary '-' needs a number or a matrix, got a record; tree_map(fn(w) -> -w, r) "
     "applies it to each leaf of a record or tuple r", "2:5"),
    ("p = {w = 1}\nq = p'", "cannot transpose a record; tree_map(fn(w) -> w', r) transposes each leaf of a "
     "record or tuple r", "2:5"),
])
def test_arithmetic_on_records_points_to_tree_map_and_sgd_step(source, message, place):
    _exact(source, "TypeError", message, place)


@pytest.mark.parametrize("source,message,place", [
    ("x = [1, 2, 3]\ny = x[-1e300]", "index -1e300 is out of range for a vector of length 3 (indices start at 0 "
     "and do not count from the end)", "2:7"),
    ("x = [1, 2, 3]\nx[-1e300] = 1", "index -1e300 is out of range for a vector of length 3 (indices start at 0 "
     "and do not count from the end)", "2:3"),
    ("t = (1, 2)\ny = t[-1e300]", "index -1e300 is out of range for a tuple of 2 items (indices start at 0 and "
     "do not count from the end)", "2:7"),
    ("x = [1, 2, 3]\ny = x[1:-1e300]", "the range 1:-1e300 is empty: tapeml does not count from the end", "2:7"),
    # a small one keeps its translation
    ("x = [1, 2, 3]\ny = x[-3]", "index -3 is out of range for a vector of length 3 (indices start at 0 and do not "
     "count from the end: Python's [-3] is [end-2] here)", "2:7"),
])
def test_a_hint_never_prints_a_301_digit_number(source, message, place):
    _exact(source, "IndexError", message, place)


def test_a_5000_digit_format_width_is_a_syntax_error_not_pythons_digit_limit():
    digits = "9" * 5000
    _exact(f'x = 1\nprint("{{x:.{digits}f}}")', "SyntaxError", "the precision of 5000 digits in the format spec "
           "'.999999999999999999999999999999999999...' is past the limit of 1000", "2:11")
    _exact('x = 1\nprint("{x:1001}")', "SyntaxError", "the width 1001 in the format spec '1001' is past the "
           "limit of 1000", "2:11")
