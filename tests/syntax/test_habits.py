"""Issue 29 item 4: other languages' habits (NumPy, PyTorch, MATLAB, Python, Lua) are answered at
the caret with what tapeml writes: exact messages and line:col. Each snippet starts with a blank
line, so every place is on line 2 or later."""
import pytest

from support import error_of, output_of
from tapeml.syntax.errors import close_names

M = "\nx = [1, 2; 3, 4]\n"

CASES = [
    # (source, kind, the whole message, "line:col")
    (M + "y = x.T", "TypeError", "cannot read field 'T' of a 2x2 matrix; for x.T tapeml writes x' (the transpose)",
     "3:5"),
    (M + "y = x.shape", "TypeError", "cannot read field 'shape' of a 2x2 matrix; for x.shape tapeml writes "
     "size(x) (a tuple; size(x, d) for one axis)", "3:5"),
    (M + "y = x.sum()", "TypeError", "cannot read field 'sum' of a 2x2 matrix; tapeml has no methods: x.sum() "
     "is sum(x), x.sum(d) is sum(x, dim=d)", "3:5"),
    (M + "y = x.mean(1)", "TypeError", "cannot read field 'mean' of a 2x2 matrix; tapeml has no methods: "
     "x.mean() is mean(x), x.mean(d) is mean(x, dim=d)", "3:5"),
    (M + "y = x.reshape(4)", "TypeError", "cannot read field 'reshape' of a 2x2 matrix; tapeml has no methods: "
     "x.reshape(...) is reshape(x, ...)", "3:5"),
    (M + "y = x.item()", "TypeError", "cannot read field 'item' of a 2x2 matrix; for x.item tapeml writes x itself "
     "(a 1-element result is a number already)", "3:5"),
    (M + "y = x.foo", "TypeError", "cannot read field 'foo' of a 2x2 matrix; only records have fields", "3:5"),
    (M + "y = x.append(3)", "TypeError", "cannot read field 'append' of a 2x2 matrix; tapeml has no methods: "
     "x.append(...) is append(x, ...)", "3:5"),
    (M + "y = x.concat([3])", "TypeError", "cannot read field 'concat' of a 2x2 matrix; tapeml has no methods: "
     "x.concat(...) is concat(x, ...)", "3:5"),
    (M + "y = x[..., 0]", "SyntaxError", "expected an expression, found '.'; tapeml has no '...' (Ellipsis): "
     "write every axis, x[:, :, 0]", "3:7"),
    (M + "y = x[:, :, none]", "IndexError", "3 indices for a 2x2 matrix; none is not an index: NumPy's x[:, None] "
     "(a new axis of length 1) is expand_dims(x, dim)", "3:5"),
    (M + "y = 1 if true else 2", "SyntaxError", "expected the end of the statement (a new line or ';'), found 'if'"
     "; tapeml has no conditional expression (Python's 'a if c else b'): write where(c, a, b), or an if statement that assigns in each branch", "3:7"),
    (M + "y = (1 if true else 2)", "SyntaxError", "expected ',' or ')' in the parentheses, found 'if'; tapeml has no conditional expression (Python's 'a if c else b'): write where(c, a, b), or an if statement that assigns in each branch", "3:8"),
    (M + "y = [1 if true else 2]", "SyntaxError", "matrix elements need commas: expected ',', ';' or ']', found "
     "'if'; tapeml has no conditional expression (Python's 'a if c else b'): write where(c, a, b), or an if statement that assigns in each branch", "3:8"),
    (M + "y = if true 1 end", "SyntaxError", "expected an expression, found 'if'; tapeml has no conditional expression (Python's 'a if c else b'): write where(c, a, b), or an if statement that assigns in each branch", "3:5"),
    ('\nd = {"a": 1}\nk = d.keys()', "TypeError", "cannot read field 'keys' of a dict of 1 key; tapeml has "
     "no methods: x.keys() is keys(x)", "3:5"),
    ("\nc = true\nif c then\n  print(1)\nend", "SyntaxError", "'then' is not tapeml: 'if' needs nothing after its "
     "condition; the block starts on the next line and closes with 'end'", "3:6"),
    ("\nc = false\nif c\n  print(0)\nelif not c then\n  print(1)\nend", "SyntaxError", "'then' is not tapeml: "
     "'elif' needs nothing after its condition; the block starts on the next line and closes with 'end'", "5:12"),
    ("\ni = 0\nwhile i < 3 do\n  i += 1\nend", "SyntaxError", "'do' is not tapeml: 'while' needs nothing after its "
     "condition; the block starts on the next line and closes with 'end'", "3:13"),
    ("\nfor i in 0:2 do\n  print(i)\nend", "SyntaxError", "'do' is not tapeml: 'for' needs nothing after its range; "
     "the block starts on the next line and closes with 'end'", "2:14"),
    ('\nx = 3\nprint(f"x is {x}")', "SyntaxError", "tapeml strings take no prefix: write \"...\" without the 'f'; "
     "every string interpolates: \"{x}\" (and \"{{\" for a brace)", "3:7"),
    ('\np = r"C:\\path"', "SyntaxError", "tapeml strings take no prefix: write \"...\" without the 'r'", "2:5"),
    ("\nm = [true, false]\ny = ~m", "SyntaxError", "'~' is not a tapeml operator; write 'not' (on bool matrices it "
     "works elementwise: not mask)", "3:5"),
    ("\nm = [true, false]\ny = m & m", "SyntaxError", "'&' is not a tapeml operator; write 'and' (on bool matrices "
     "it works elementwise: a and b)", "3:7"),
    ("\nx = [1, 2, 3]\ny = x[-1]", "IndexError", "index -1 is out of range for a vector of length 3 (indices start at "
     "0 and do not count from the end: Python's [-1] is [end] here)", "3:7"),
    ("\nx = [1, 2, 3]\ny = x[-2:end]", "IndexError", "index -2 is out of range for a vector of length 3 (indices "
     "start at 0 and do not count from the end: Python's [-2] is [end-1] here)", "3:7"),
    ("\nx = [1, 2, 3, 4]\ny = x[1:-1]", "IndexError", "the range 1:-1 is empty: tapeml does not count from the end; "
     "Python's [1:-1] is [1:end-1] here (a:b includes b)", "3:7"),
    (M + "y = x[-1, :]", "IndexError", "index -1 is out of range for axis 0 of length 2 (a 2x2 matrix) (indices "
     "start at 0 and do not count from the end: Python's [-1] is [end] here)", "3:7"),
    ("\na = [1, 2, 3, 4, 5]\nb = a[1:3] + [10, 20]", "ShapeError", "cannot add a vector of length 3 and a vector "
     "of length 2: the shapes do not broadcast; tapeml's ranges include their end: 1:3 picks 3 elements "
     "(Python's [1:3] is [1:2] here)", "3:12"),
    ("\na = [1, 2, 3, 4, 5]\na[1:3] = [10, 20]", "ShapeError", "cannot assign a vector of length 2 to a part that "
     "is a vector of length 3; tapeml's ranges include their end: 1:3 picks 3 elements (Python's [1:3] is [1:2] "
     "here)", "3:1"),
    ("\nfn f(a, i)\n  return a[i:i+2] * [1, 2]\nend\nf([1, 2, 3, 4], 1)", "ShapeError", "cannot multiply "
     "elementwise a vector of length 3 and a vector of length 2: the shapes do not broadcast; tapeml's ranges "
     "include their end: a:b picks b too (Python's [a:b] is [a:b-1] here)", "3:19"),
    ("\ny = matmul([1, 2], [3, 4])", "NameError", "undefined name 'matmul'; tapeml writes a @ b (the matrix "
     "product)", "2:5"),
    ("\ny = dot([1, 2], [3, 4])", "NameError", "undefined name 'dot'; tapeml writes a @ b (the matrix product; for "
     "two vectors, their dot product), or sum(a * b)", "2:5"),
    ("\ny = clamp([1, 5], 0, 2)", "NameError", "undefined name 'clamp'; tapeml writes clip(x, lo, hi) (PyTorch's "
     "clamp(x, min, max))", "2:5"),
    ("\ny = multinomial([0.5, 0.5], 2)", "NameError", "undefined name 'multinomial'; tapeml writes sample(p, n) "
     "(PyTorch's multinomial(p, n, replacement=True))", "2:5"),
    ("\ny = masked_fill([1, 2], [true, false], 0)", "NameError", "undefined name 'masked_fill'; tapeml writes "
     "where(mask, value, x) (PyTorch's x.masked_fill(mask, value))", "2:5"),
    ("\ny = hstack([1], [2])", "NameError", "undefined name 'hstack'; tapeml writes concat(a, b, dim=1) for "
     "matrices, concat(a, b) for vectors (NumPy's hstack)", "2:5"),
    ("\ny = vstack([1], [2])", "NameError", "undefined name 'vstack'; tapeml writes concat(a, b) (along axis 0; "
     "stack(a, b) makes a new axis)", "2:5"),
    ("\ny = cat([1], [2])", "NameError", "undefined name 'cat'; tapeml writes concat(xs..., dim=0) (PyTorch's "
     "cat(xs, dim))", "2:5"),
    ("\ny = arange(5)", "NameError", "undefined name 'arange'; tapeml writes a range: 0:n-1, or range(n) (both are "
     "0, 1, ..., n-1; a:b includes b)", "2:5"),
    ("\ny = int(2.5)", "NameError", "undefined name 'int'; tapeml writes floor(x) or round(x) (every number is a "
     "float); num(s) reads a number from a string", "2:5"),
    ("\ny = float(2)", "NameError", "undefined name 'float'; tapeml writes x itself (every number is a float); "
     "num(s) reads a number from a string", "2:5"),
    ("\ny = attention(1, 2, 3)", "NameError", "undefined name 'attention'; tapeml writes "
     "scaled_dot_product_attention(q, k, v) (one head), or multi_head_attention(x, heads, n_heads) (a layer)", "2:5"),
    ("\ny = var([1, 2, 3], ddof=0)", "TypeError", "var() has no parameter 'ddof'; did you mean 'correction'? "
     "(parameters: x, dim, correction, keepdims)", "2:5"),
    ("\ny = foo(1)", "NameError", "undefined name 'foo'", "2:5"),
    ("\ny = sofmax([1, 2])", "NameError", "undefined name 'sofmax'; did you mean 'softmax'?", "2:5"),
]


@pytest.mark.parametrize("source, kind, message, place", CASES)
def test_habit_is_answered_at_the_caret(source, kind, message, place):
    err = error_of(source)
    assert (err.kind, err.message, f"{err.span.line}:{err.span.col}") == (kind, message, place)


def test_the_suggester_proposes_typos_only():
    names = ["stack", "print", "floor", "inv", "det", "softmax", "linspace", "cumsum", "len", "mean"]
    for word, want in [("hstack", ["stack"]), ("int", []), ("foo", []), ("dot", []), ("sofmax", ["softmax"]),
                       ("linspcae", ["linspace"]), ("cumsun", ["cumsum"]), ("lenn", ["len"]), ("maen", ["mean"])]:
        assert close_names(word, names) == want, word


def test_help_leads_from_another_librarys_name():
    assert output_of('help("matmul")') == "'matmul' is not a tapeml name; tapeml writes a @ b (the matrix product).\n"
    out = output_of('help("hstack")')
    assert out.startswith("'hstack' is not a tapeml name; tapeml writes concat(a, b, dim=1) for matrices, "
                          "concat(a, b) for vectors (NumPy's hstack).\n\nconcat(xs..., dim=0)")
    assert "scaled_dot_product_attention(q, k, v" in output_of('help("attention")')


def test_the_hinted_forms_run():
    """What each hint says to write gives NumPy's answer."""
    out = output_of("\nx = [1, 2; 3, 4]\nprint(x', size(x), sum(x), mean(x, dim=0), clip([-1, 5], 0, 2))\n"
                    "print(where([true, false], 0, [1, 2]), concat([1, 2; 3, 4], [5; 6], dim=1))\n"
                    "print(var([1, 2, 3, 4], correction=0), x[end, :], [1, 2, 3, 4][1:end-1], range(3))\n")
    assert out == ("[1, 3; 2, 4] (2, 2) 10 [2, 3] [0, 2]\n[0, 2] [1, 2, 5; 3, 4, 6]\n"
                   "1.25 [3, 4] [2, 3] [0, 1, 2]\n")


def test_a_quote_escaped_right_after_a_brace_says_how_to_write_a_brace():
    """Found by a newcomer writing JSON text: "{\\"a\\": 1}" opened an interpolation at '{' and the
    error named only the backslash."""
    from support import error_of
    e = error_of('print("{\\"a\\": 1}")')
    assert (e.span.line, e.span.col) == (1, 9)
    assert e.message == ("unexpected character '\\'; inside a string '{' starts an interpolation: "
                         "write '{{' for a literal brace")
