"""Issue 20's syntax: `for` destructuring, format specs in interpolation, tuple concatenation.
Values are asserted; errors by kind, message and line:col; gradients through destructured loop
variables against central finite differences."""
import numpy as np
import pytest

from support import cli_error, cli_output, run_ml


# ---- for destructuring -------------------------------------------------------------------------
def test_for_enumerate_zip_and_tuples():
    src = ('for i, v in enumerate([10, 20, 30])\n    print(i, v)\nend\n'
           'for a, b in zip((1, 2), ("x", "y"))\n    print(a, b)\nend\n'
           's = 0\nfor a, b, c in ((1, 2, 3), (4, 5, 6))\n    s += a * b + c\nend\nprint(s)\n'
           'for r, c in zip([1, 2; 3, 4], (5, 6))\n    print(r, c)\nend\n')
    assert cli_output(src) == "0 10\n1 20\n2 30\n1 x\n2 y\n31\n[1, 2] 5\n[3, 4] 6\n"


def test_for_destructuring_break_continue_and_scope():
    src = ('for i, v in enumerate((5, 6, 7, 8))\n    if i == 1\n        continue\n    end\n'
           '    if v == 8\n        break\n    end\n    print(v)\nend\nprint(i, v)\n')
    assert cli_output(src) == "5\n7\n3 8\n"


def test_for_destructuring_under_progress():
    code, out = run_ml('for i, x in progress(enumerate((4, 5)), "go")\n    print(i + x)\nend\n')
    assert code == 0
    assert [line for line in out.splitlines() if not line.startswith("go:")] == ["4", "6"]


@pytest.mark.parametrize("source, message, where", [
    ("for a, b in ((1, 2), (3, 4, 5))\nend", "ValueError: cannot unpack a tuple of 3 into 2 names", "1:5"),
    ("x = 1\nfor a, b, c in zip((1, 2), (3, 4))\nend", "ValueError: cannot unpack a tuple of 2 into 3 names", "2:5"),
    ("for a, b in (1, 2)\nend", "TypeError: cannot unpack a number into 2 names; each item of the loop must be a "
                                "tuple or a vector", "1:5"),
    # a matrix's rows are vectors, unpacked as 'a, b = row' (issue 29): only a length mismatch fails
    ("for a, b in [1, 2, 3; 4, 5, 6]\nend", "ValueError: cannot unpack a vector of length 3 into 2 names", "1:5"),
    ("for (a, b), c in (1, 2)\nend", "SyntaxError: the loop variables of 'for' are names", "1:5"),
    ("for a, in (1, 2)\nend", "SyntaxError: expected a loop variable after ','", "1:8"),
    ("for a, b.c in (1, 2)\nend", "SyntaxError: expected 'in' after the loop variables", "1:9"),
    ("for a, true in ((1, 2),)\nend", "SyntaxError: expected a loop variable after ','", "1:8"),
])
def test_for_destructuring_errors(source, message, where):
    out = cli_error(source)
    assert f":{where}: {message}" in out


def test_assignment_and_loop_give_the_same_count_message():
    a = cli_error("a, b, c = (1, 2)")
    b = cli_error("for a, b, c in ((1, 2),)\nend")
    msg = "cannot unpack a tuple of 2 into 3 names"
    assert msg in a and msg in b


LOSS = """fn loss(W)
    s = 0
    for i, row in enumerate(W)
        s += (i + 1) * sum(sin(row) * row)
    end
    for r, c in zip(W, [0.5, -1, 2])
        s += c * sum(r ^ 3)
    end
    for k, pair in enumerate(zip(W, W))
        a, b = pair
        s += k * sum(a * b)
    end
    return s
end"""


def test_gradient_through_destructured_rows_matches_finite_differences():
    code, out = run_ml(LOSS + "\nW = [0.3, -1.2; 0.7, 2.0; -0.4, 1.1]\nprint(grad(loss, W))\n")
    assert code == 0, out
    g = np.array([[float(x) for x in row.split(",")] for row in out.strip()[1:-1].split(";")])

    def loss(W):
        s = 0.0
        for i, row in enumerate(W):
            s += (i + 1) * np.sum(np.sin(row) * row)
        for r, c in zip(W, [0.5, -1, 2]):
            s += c * np.sum(r ** 3)
        for k, (a, b) in enumerate(zip(W, W)):
            s += k * np.sum(a * b)
        return s

    W = np.array([[0.3, -1.2], [0.7, 2.0], [-0.4, 1.1]])
    fd = np.zeros_like(W)
    for idx in np.ndindex(W.shape):
        p, m = W.copy(), W.copy()
        p[idx] += 1e-6
        m[idx] -= 1e-6
        fd[idx] = (loss(p) - loss(m)) / 2e-6
    assert np.allclose(g, fd, rtol=1e-5, atol=1e-5)   # g printed with 7 significant digits


# ---- tuple concatenation ------------------------------------------------------------------------
def test_tuple_concatenation_and_append():
    src = ('print((1, 2) + (3,))\nprint(() + ())\nprint((1,) + () + ("a", [1, 2]))\n'
           't = ()\nfor i in 0:2\n    t += (i ^ 2,)\nend\nprint(t)\n'
           'r = {items = (1,)}\nr.items += (2,)\nprint(r.items)\n'
           'print((1, 2) + (3,) == (1, 2, 3))\n')
    assert cli_output(src) == '(1, 2, 3)\n()\n(1, "a", [1, 2])\n(0, 1, 4)\n(1, 2)\ntrue\n'


def test_tuple_concatenation_keeps_the_tape():
    # d/dw sum of the third item of (w, 2w) + (3w,) = 3; through a loop-built tuple: sum_i (i+1) w
    out = cli_output('print(grad(fn(w) -> sum(((w, 2 * w) + (3 * w,))[2]), [1, 2]))\n'
                     'fn f(w)\n    t = ()\n    for i in 0:2\n        t += ((i + 1) * w,)\n    end\n'
                     '    return sum(reduce(fn(a, x) -> a + x, t, 0))\nend\nprint(grad(f, [5, 7]))\n')
    assert out == "[3, 3]\n[6, 6]\n"


@pytest.mark.parametrize("source, message, where", [
    ("t = (1, 2)\nt + 1", "TypeError: cannot apply '+' to a tuple of 2 and a number; '+' joins two tuples", "2:3"),
    ("(1, 2) * 2", "TypeError: cannot apply '*' to a tuple of 2 and a number", "1:8"),
    ("(1, 2) - (1,)", "TypeError: cannot apply '-' to a tuple of 2 and a tuple of 1", "1:8"),
    ("[1, 2] + (1, 2)", "TypeError: cannot apply '+' to a vector of length 2 and a tuple of 2", "1:8"),
    ("t = (1,)\nt *= (2,)", "TypeError: cannot apply '*' to a tuple of 1 and a tuple of 1", "2:1"),
])
def test_other_tuple_arithmetic_stays_an_error(source, message, where):
    assert f":{where}: {message}" in cli_error(source)


# ---- format specs in interpolation ----------------------------------------------------------------
TYPED = [(3.14159, ".3f"), (42, "5d"), (-42, "06d"), (42, "+d"), (1234567, ",d"), (0.25, ".1%"),
         (12345.678, "10.2e"), (12345.678, ".3g"), (255, "x"), (255, "#X"), (5, "#b"), (8, "o"),
         (1234567.891, ",.2f"), (1234567.891, "_.1f"), (-1.5, "=+10.2f"), (2.5, "*^11.3f"),
         (1e-9, "E"), (7, "<6d"), (float("inf"), "8.1f"), (-float("inf"), "e"), (3.0, ".3")]


@pytest.mark.parametrize("x, spec", TYPED)
def test_typed_number_specs_are_pythons(x, spec):
    lit = {float("inf"): "1e999", -float("inf"): "-1e999"}.get(x, repr(float(x)))
    want = format(int(x) if spec[-1] in "dboxX" else float(x), spec if spec[-1] != "3" else spec + "g")
    assert cli_output(f'print("[{{{lit}:{spec}}}]")') == f"[{want}]\n"


def test_number_without_a_type_keeps_the_printers_digits():
    src = ('x = 3.14159265\nprint("[{x}] [{x:10}] [{x:<10}] [{x:^11}] [{x:+}] [{-x:010}]")\n'
           'print("[{0:3}] [{1234567:,}] [{1e20:>6}] [{1/3:12}] [{2^60:,}] [{1e999 - 1e999:>5}]")\n')
    assert cli_output(src) == ("[3.141593] [  3.141593] [3.141593  ] [ 3.141593  ] [+3.141593] [-03.141593]\n"
                               "[  0] [1,234,567] [  1e20] [   0.3333333] [1.152922e18] [  nan]\n")


def test_strings_bools_and_none_take_alignment_width_and_precision():
    src = ('s = "tape"\nprint("[{s:>8}] [{s:<8}] [{s:*^8}] [{s:.2}] [{s:>6.3}] [{s:s}] [{s:3}]")\n'
           'print("[{true:>6}] [{false:<6}] [{none:^6}] [{"é":>3}]")\n')
    assert cli_output(src) == "[    tape] [tape    ] [**tape**] [ta] [   tap] [tape] [tape]\n[  true] [false ] [ none ] [  é]\n"


def test_matrices_take_the_spec_elementwise_in_the_printers_layout():
    src = ('m = [1, 2.5; -3, 4]\nprint("{m:.2f}")\nprint("{m:6.1f}")\nprint("{[1, 2, 3]:03d}")\n'
           'print("{[1, 2] > 1:>5}")\nprint("{zeros(0):.2f} {zeros(2, 0):.1f}")\nprint("{[7;]:+.1e}")\n'
           'print("{reshape(1:8, 2, 2, 2):.1f}")\nprint("{grad(fn(w) -> sum(w ^ 2), [0.5, 1]):.3f}")\n')
    assert cli_output(src) == ("[1.00, 2.50; -3.00, 4.00]\n[   1.0,    2.5;   -3.0,    4.0]\n[001, 002, 003]\n"
                               "[false,  true]\n[] zeros(2, 0)\n[+7.0e+00;]\n"
                               "2x2x2 array\n[0, :, :] = [1.0, 2.0; 3.0, 4.0]\n[1, :, :] = [5.0, 6.0; 7.0, 8.0]\n"
                               "[1.000, 2.000]\n")


def test_a_big_matrix_is_summarized_as_without_a_spec():
    out = cli_output('print("{reshape(1:10000, 100, 100):.1f}")')
    plain = cli_output('print("{reshape(1:10000, 100, 100)}")')
    assert out.count("...") == plain.count("...") > 0 and "10000.0" in out and "1.0, 2.0, 3.0" in out


def test_a_top_level_colon_starts_the_spec_and_a_range_needs_parentheses():
    src = ('x = [5, 6, 7, 8]\nfn f(r) -> sum(r)\nprint("{(0:3)} {x[1:2]} {x[end]:4} {f(1:2)}")\n'
           'print("{0:3}|{(1:2):.1f}|{ {a = 1}.a :>3}|{"a:b":>5}|{x:}")\n')
    assert cli_output(src) == "[0, 1, 2, 3] [6, 7]    8 3\n  0|[1.0, 2.0]|  1|  a:b|[5, 6, 7, 8]\n"


@pytest.mark.parametrize("source, message, where", [
    ('"{x:q}"', "SyntaxError: unknown format type 'q' in 'q'", "1:5"),
    ('x = 1\ny = "v = {x:.3d}"', "SyntaxError: the format spec '.3d' gives a precision to the whole-number type 'd'", "2:13"),
    ('n = 3\nprint("{0:n - 1}")', "SyntaxError: the format spec 'n - 1' is not one tapeml reads; a spec is "
     "[[fill]align][sign][#][0][width][,][.precision][type], e.g. .3f, 8.2e, >10, +d; a range inside an "
     "interpolation needs parentheses, \"{(a:b)}\"", "2:11"),
    ('"{1:end}"', "SyntaxError: the format spec 'end' is not one tapeml reads", "1:5"),
    ('"{1:%%}"', "SyntaxError: the format spec '%%' is not one tapeml reads; a spec is [[fill]align]", "1:5"),
    ('"{1:.2f"', "SyntaxError: unterminated format spec in string interpolation", "1:2"),
    ('"{1:{2}}"', "SyntaxError: a format spec cannot hold '{'", "1:5"),
    ('"{:3}"', "SyntaxError: an interpolation needs an expression before its format spec", "1:2"),
    ('"{1:5000}"', "SyntaxError: the width 5000 in the format spec '5000' is past the limit of 1000", "1:5"),
    ('"{1:.2000f}"', "SyntaxError: the precision 2000", "1:5"),
    ('"{1:,x}"', "SyntaxError: the format spec ',x' groups with ',' in base 'x'; use '_'", "1:5"),
    ('"{1:+s}"', "SyntaxError: the format spec '+s' has a number's parts", "1:5"),
    ('x = 2.5\nprint("{x:d}")', "ValueError: the format type 'd' needs a whole number, got 2.5; round it first", "2:11"),
    ('print("{[1.5, 2]:5d}")', "ValueError: the format type 'd' needs a whole number, got 1.5", "1:18"),
    ('"{1e999:d}"', "ValueError: the format type 'd' needs a whole number, got inf", "1:9"),
    ('"{(1, 2):.2f}"', "TypeError: a format spec applies to a number, a string, a bool or a matrix, not a tuple of 2; format the items one by one", "1:10"),
    ('"{ {a = 1} :>4}"', "TypeError: a format spec applies to a number, a string, a bool or a matrix, not a record", "1:13"),
    ('"{print:>4}"', "TypeError: a format spec applies to a number, a string, a bool or a matrix, not", "1:9"),
    ('"{"a":.2f}"', "TypeError: the format type 'f' needs a number, got a string", "1:7"),
    ('"{"a":+5}"', "TypeError: the format spec '+5' has a number's parts (sign, #, 0, grouping or '='), which do not apply to a string", "1:7"),
    ('"{true:d}"', "TypeError: the format type 'd' needs a number, got a bool", "1:8"),
    ('"{[1, 2] > 1:.1f}"', "TypeError: the format type 'f' needs a number, got a bool matrix", "1:14"),
    ('"{1:s}"', "TypeError: the format type 's' is for strings, got a number", "1:5"),
    ('"{undefined_name:.2f}"', "NameError: undefined name 'undefined_name'", "1:3"),
])
def test_format_spec_errors(source, message, where):
    out = cli_error(source)
    assert f":{where}: {message}" in out
    assert "Invalid format specifier" not in out and "format_spec" not in out
