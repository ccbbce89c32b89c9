"""Issue 20's syntax: `for` destructuring, format specs in interpolation, tuple concatenation.
Values are asserted; errors by kind, message and line:col; gradients through destructured loop
variables against central finite differences."""
import numpy as np
import pytest

from conftest import run_ml


def out_of(source):
    code, out = run_ml(source)
    assert code == 0, out
    return out


def error_of(source):
    code, out = run_ml(source)
    assert code == 1, out
    assert "Traceback" not in out
    return out


# ---- for destructuring -------------------------------------------------------------------------
def test_for_enumerate_zip_and_tuples():
    src = ('for i, v in enumerate([10, 20, 30])\n    print(i, v)\nend\n'
           'for a, b in zip((1, 2), ("x", "y"))\n    print(a, b)\nend\n'
           's = 0\nfor a, b, c in ((1, 2, 3), (4, 5, 6))\n    s += a * b + c\nend\nprint(s)\n'
           'for r, c in zip([1, 2; 3, 4], (5, 6))\n    print(r, c)\nend\n')
    assert out_of(src) == "0 10\n1 20\n2 30\n1 x\n2 y\n31\n[1, 2] 5\n[3, 4] 6\n"


def test_for_destructuring_break_continue_and_scope():
    src = ('for i, v in enumerate((5, 6, 7, 8))\n    if i == 1\n        continue\n    end\n'
           '    if v == 8\n        break\n    end\n    print(v)\nend\nprint(i, v)\n')
    assert out_of(src) == "5\n7\n3 8\n"


def test_for_destructuring_under_progress():
    code, out = run_ml('for i, x in progress(enumerate((4, 5)), "go")\n    print(i + x)\nend\n')
    assert code == 0
    assert [line for line in out.splitlines() if not line.startswith("go:")] == ["4", "6"]


@pytest.mark.parametrize("source, message, where", [
    ("for a, b in ((1, 2), (3, 4, 5))\nend", "ValueError: cannot unpack a tuple of 3 into 2 names", "1:5"),
    ("x = 1\nfor a, b, c in zip((1, 2), (3, 4))\nend", "ValueError: cannot unpack a tuple of 2 into 3 names", "2:5"),
    ("for a, b in (1, 2)\nend", "TypeError: cannot unpack a number into 2 names; each item of the loop must be a tuple", "1:5"),
    ("for a, b in [1, 2; 3, 4]\nend", "TypeError: cannot unpack a vector of length 2 into 2 names", "1:5"),
    ("for (a, b), c in (1, 2)\nend", "SyntaxError: the loop variables of 'for' are names", "1:5"),
    ("for a, in (1, 2)\nend", "SyntaxError: expected a loop variable after ','", "1:8"),
    ("for a, b.c in (1, 2)\nend", "SyntaxError: expected 'in' after the loop variables", "1:9"),
    ("for a, true in ((1, 2),)\nend", "SyntaxError: expected a loop variable after ','", "1:8"),
])
def test_for_destructuring_errors(source, message, where):
    out = error_of(source)
    assert f":{where}: {message}" in out


def test_assignment_and_loop_give_the_same_count_message():
    a = error_of("a, b, c = (1, 2)")
    b = error_of("for a, b, c in ((1, 2),)\nend")
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
    assert out_of(src) == '(1, 2, 3)\n()\n(1, "a", [1, 2])\n(0, 1, 4)\n(1, 2)\ntrue\n'


def test_tuple_concatenation_keeps_the_tape():
    # d/dw sum of the third item of (w, 2w) + (3w,) = 3; through a loop-built tuple: sum_i (i+1) w
    out = out_of('print(grad(fn(w) -> sum(((w, 2 * w) + (3 * w,))[2]), [1, 2]))\n'
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
    assert f":{where}: {message}" in error_of(source)
