"""Issue 20, strings owner: the Strings & collections builtins and the file formats (CSV, JSON,
.safetensors in save/load, file_exists). Values against Python/NumPy, round trips, errors with
their messages, and gradients through map/filter/reduce/zip against finite differences."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from tapeml.syntax.errors import IOErr, ShapeError, TypeErr, ValueErr
from tapeml.array.printer import format_value
from tapeml.array.values import Dict, Record

from support import run, value_of, variables_after


def shown(expr: str, **variables) -> str:
    return format_value(value_of(expr, **variables), True)


# ---- strings ------------------------------------------------------------------------------------
@pytest.mark.parametrize("s, sep", [("1,2,,3", ","), ("", ","), (",", ","), ("a->b->c", "->"),
                                    ("héllo wörld ✓", " "), ("no sep here", ";")])
def test_split_with_sep_is_pythons(s, sep):
    assert value_of("split(s, sep)", s=s, sep=sep) == tuple(s.split(sep))


@pytest.mark.parametrize("s", ["  the quick\tbrown\n fox ", "", "   ", "one", "a\u3000b\u00a0c"])
def test_split_without_sep_splits_runs_of_whitespace(s):
    assert value_of("split(s)", s=s) == tuple(s.split())


def test_join_is_the_inverse_of_split():
    for s in ["a,b,,c", "", "ü,✓"]:
        assert value_of('join(split(s, ","), ",")', s=s) == s
    assert value_of('join((), ",")') == ""
    assert value_of('join(("x",), ", ")') == "x"
    assert value_of('join(map(str, [1, 2.5, -3]), ";")') == "1;2.5;-3"
    assert value_of('join(("a", "b"))') == "ab"


def test_string_functions_match_python():
    s = "  Straße, ÀÉÎ\tmixed Case \n"
    assert value_of("upper(s)", s=s) == s.upper()          # ß -> SS: the string grows
    assert value_of("lower(s)", s=s) == s.lower()
    assert value_of("strip(s)", s=s) == s.strip()
    assert value_of('strip("--a-b--", "-")') == "a-b"
    assert value_of('strip("")') == ""
    assert value_of('replace("a-b-c", "-", " + ")') == "a + b + c"
    assert value_of('replace("aaa", "aa", "b")') == "ba"
    assert value_of('replace("héllo", "é", "e")') == "hello"
    assert value_of('replace("", "x", "y")') == ""
    assert value_of('startswith("# c", "#")') is True and value_of('startswith("ab", "abc")') is False
    assert value_of('startswith("ab", "")') is True and value_of('endswith("", "")') is True
    assert value_of('endswith("data.csv", ".csv")') is True and value_of('endswith("data.csv", ".json")') is False


def test_contains_and_index_of():
    assert value_of('contains("hello", "ell")') is True
    assert value_of('contains("hello", "")') is True
    assert value_of('contains("hello", "xyz")') is False
    assert value_of('contains((1, "a", [2, 3]), [2, 3])') is True
    assert value_of('contains((1, "a", [2, 3]), [2, 4])') is False
    assert value_of('contains((1, "a"), 1)') is True
    assert value_of('contains((1, 2), true)') is False          # true is not 1
    assert value_of('contains(((1, 2), {a = 1}), {a = 1})') is True
    assert value_of('contains([1, 2, 3], 2)') is True
    assert value_of('contains([1, 2; 3, 4], 4)') is True        # every element, as NumPy's `in`
    assert value_of('contains([1, 2, 3], "2")') is False
    assert value_of('contains([1, 0 / 0], 0 / 0)') is False         # nan == nan is false
    assert value_of('contains([], 1)') is False and value_of('contains((), 1)') is False
    assert value_of('index_of("hello", "l")') == 2.0
    assert value_of('index_of("naïve ✓ v", "v")') == 3.0       # characters, not bytes
    assert value_of('index_of("hello", "z")') is None
    assert value_of('index_of(("a", "b", "b"), "b")') == 1.0
    assert value_of('index_of([5, 7, 5], 5)') == 0.0 and value_of('index_of([5, 7], 9)') is None
    assert value_of('index_of([5, 7], 7)') == 1.0


def test_lines_reverse_sort_by_fields():
    crlf = "a\r\nb\n\nc\n"
    assert value_of("lines(s)", s=crlf) == ("a", "b", "", "c")
    assert value_of('lines("")') == () and value_of('lines("x")') == ("x",)
    assert value_of('lines("\\n")') == ("",)
    assert value_of("lines(s)", s="a\rb\u2028c") == ("a\rb\u2028c",)      # only \n and \r\n end a line
    assert value_of('reverse("stressed ✓")') == "✓ desserts"
    assert value_of('reverse(())') == () and value_of('reverse("")') == ""
    assert shown('reverse((1, "a", [2]))') == '([2], "a", 1)'
    np.testing.assert_array_equal(value_of("reverse([1, 2, 3])"), [3, 2, 1])
    np.testing.assert_array_equal(value_of("reverse([1, 2; 3, 4])"), [[3, 4], [1, 2]])
    assert value_of("reverse(5)") == 5.0
    assert value_of('sort_by(("ccc", "a", "bb", "x"), len)') == ("a", "x", "bb", "ccc")   # stable
    assert value_of("sort_by([3, -1, 2], fn(x) -> -x)") == (3.0, 2.0, -1.0)
    assert value_of('sort_by(("b", "a", "c"), fn(s) -> s)') == ("a", "b", "c")
    assert value_of("sort_by((), len)") == ()
    assert shown("sort_by(({n = 2}, {n = 1}), fn(r) -> r.n)") == "({n = 1}, {n = 2})"
    assert value_of("fields({w = [1, 2], b = 0.5})") == ("w", "b")
    assert value_of("fields({})") == ()
    assert value_of('has_field({w = 1}, "w")') is True and value_of('has_field({w = 1}, "b")') is False


# ---- collections --------------------------------------------------------------------------------
def test_map_filter_reduce_zip_enumerate_values():
    assert value_of("map(fn(x) -> x ^ 2, [1, 2, 3])") == (1.0, 4.0, 9.0)
    assert value_of("map(fn(x) -> x, ())") == () and value_of("map(fn(x) -> x, [])") == ()
    assert value_of('map(upper, "ab")') == ("A", "B")                    # a string: its characters
    assert value_of("map(fn(x) -> x + 1, 4)") == (5.0,)                  # a number: once, as for
    rows = value_of("map(fn(r) -> r, [1, 2; 3, 4])")                     # a matrix: its rows, as for
    assert len(rows) == 2 and np.array_equal(rows[1], [3, 4])
    assert value_of("map(fn(b) -> b, [true, false])") == (True, False)
    assert value_of("filter(fn(x) -> x > 0, [3, -1, 2])") == (3.0, 2.0)
    assert value_of('filter(fn(s) -> startswith(s, "a"), ("ab", "b", "ac"))') == ("ab", "ac")
    assert value_of("filter(fn(x) -> true, ())") == ()
    assert value_of("reduce(fn(a, x) -> a + x, [1, 2, 3], 0)") == 6.0
    assert value_of("reduce(fn(a, x) -> a * x, (), 7)") == 7.0
    assert value_of('reduce(fn(a, s) -> "{a}{s}", ("x", "y"), ">")') == ">xy"
    assert value_of("reduce(fn(a, x) -> a - x, [1, 2, 3], 10)") == 4.0   # a left fold: ((10-1)-2)-3
    assert value_of('zip([1, 2], ("a", "b"))') == ((1.0, "a"), (2.0, "b"))
    assert value_of("zip((), [])") == ()
    assert value_of("zip([1, 2])") == ((1.0,), (2.0,))
    assert value_of('zip("ab", (1, 2), [3, 4])') == (("a", 1.0, 3.0), ("b", 2.0, 4.0))
    assert value_of('enumerate(("a", "b"))') == ((0.0, "a"), (1.0, "b"))
    assert value_of("enumerate(())") == ()


def _fd(f, x, h=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = h
        g.flat[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


@pytest.mark.parametrize("src, ref", [
    ("grad(fn(v) -> reduce(fn(a, x) -> a * x, v, 1), x)", lambda x: np.prod(x)),
    ("grad(fn(v) -> sum(reduce(fn(a, x) -> a + sin(x) * x, map(fn(y) -> y ^ 2, v), 0)), x)",
     lambda x: np.sum(np.sin(x ** 2) * x ** 2)),
    ("grad(fn(v) -> reduce(fn(a, x) -> a + exp(x), filter(fn(x) -> x > 0, v), 0), x)",
     lambda x: np.sum(np.exp(x[x > 0]))),
    ("grad(fn(v) -> reduce(fn(a, p) -> a + p[0] * p[1] ^ 2, zip(v, reverse(v)), 0), x)",
     lambda x: np.sum(x * x[::-1] ** 2)),
    ("grad(fn(v) -> reduce(fn(a, p) -> a + p[0] * p[1], enumerate(v), 0), x)",
     lambda x: np.sum(np.arange(x.size) * x)),
    ("grad(fn(v) -> sum(map(fn(r) -> tanh(r) * 2, [v; v * 2])[1]), x)",
     lambda x: np.sum(np.tanh(2 * x) * 2)),
    ("grad(fn(v) -> reduce(fn(a, x) -> a + x, sort_by(v, fn(y) -> -y)[0], 0) * 3, x)",
     lambda x: np.max(x) * 3),
])
def test_gradients_through_collections_match_finite_differences(src, ref):
    x = np.array([0.3, -1.2, 0.7, 2.1])
    g = value_of(src, x=x)
    np.testing.assert_allclose(g, _fd(ref, x), rtol=1e-6, atol=1e-8)


def test_gradient_through_a_closure_captured_by_map():
    # the weight enters only through the function passed to map
    g = value_of("grad(fn(w) -> reduce(fn(a, v) -> a + sum(v), map(fn(x) -> [x * w, x / w], [1, 2, 3]), 0), 0.5)")
    assert g == pytest.approx(6 - 6 / 0.25)


def test_collection_errors_name_the_item():
    with pytest.raises(TypeErr, match=r"cannot apply '/'.*\(in map, at item 1\)"):
        run('map(fn(x) -> 1 / x, (1, "b"))')
    with pytest.raises(TypeErr, match=r"filter\(\): f must return true or false, got a number for item 0"):
        run("filter(fn(x) -> x, [1, 2])")
    with pytest.raises(ValueErr, match=r"zip\(\): argument 0 has 2 items and argument 1 has 3"):
        run("zip([1, 2], (1, 2, 3))")
    with pytest.raises(TypeErr, match=r"zip\(\) needs at least one sequence"):
        run("zip()")
    with pytest.raises(TypeErr, match=r"map\(\): xs must be a tuple, vector, .* got a record"):
        run("map(fn(x) -> x, {a = 1})")
    with pytest.raises(TypeErr, match=r"map\(\): f must be a function"):
        run("map(1, [1])")
    with pytest.raises(TypeErr, match=r"sort_by\(\): key gave a number for item 0 and a string for item 1"):
        run('sort_by((1, "a"), fn(x) -> x)')
    with pytest.raises(ValueErr, match=r"key of item 1 is NaN"):
        run("sort_by([1, 0 / 0], fn(x) -> x)")
    with pytest.raises(TypeErr, match=r"key must give a number or a string, got a vector"):
        run("sort_by([1, 2], fn(x) -> [x, x])")


def test_string_errors():
    cases = [('split("a", "")', ValueErr, "sep must not be empty"),
             ('split(1)', TypeErr, "s must be a string"),
             ('join(("a", 1), ",")', TypeErr, r"parts\[1\] is a number; join takes strings"),
             ('replace("a", "", "b")', ValueErr, "old must not be empty"),
             ('contains("abc", 1)', TypeErr, "item must be a string when container is a string"),
             ('contains({a = 1}, 1)', TypeErr, "container must be a dictionary, string, tuple, number or matrix, got a record; a record's fields: has_field"),
             ('index_of([1, 2; 3, 4], 1)', TypeErr, "a position in a matrix needs several indices"),
             ('reverse({a = 1})', TypeErr, "reverse\\(\\): xs must be a string, tuple, vector or matrix"),
             ('fields(1)', TypeErr, "record must be a record"),
             ('has_field({a = 1}, 1)', TypeErr, "name must be a string")]
    for src, kind, msg in cases:
        with pytest.raises(kind, match=msg):
            run(src)


def test_string_limit_guards_growth(monkeypatch):
    from tapeml.array import limits
    monkeypatch.setattr(limits, "MAX_STRING_BYTES", 100)
    with pytest.raises(ValueErr, match="replace\\(\\): the result would take"):
        run('replace(s, "a", "bbbb")', s="a" * 30)
    with pytest.raises(ValueErr, match="join\\(\\): the joined string would take"):
        run('join(t, "")', t=("x" * 60, "y" * 60))
    with pytest.raises(ValueErr, match="upper\\(\\): the result would take"):
        run("upper(s)", s="ß" * 60)


# ---- CSV ----------------------------------------------------------------------------------------
def test_write_csv_read_csv_round_trip_random_float64_bit_exact(tmp_path):
    rng = np.random.default_rng(0)
    m = rng.standard_normal((20, 5)) * 10.0 ** rng.integers(-300, 300, size=(20, 5))
    m[0, :] = [1e-300, -0.0, 0.0, 5e-324, 1.7976931348623157e308]
    m[1, :] = [np.nan, np.inf, -np.inf, 3.0, -2.0 ** 60]
    p = str(tmp_path / "m.csv")
    run("write_csv(p, m)", p=p, m=m)
    back = value_of("read_csv(p)", p=p)
    assert back.dtype == np.float64 and back.shape == m.shape
    assert back.tobytes() == m.tobytes()                     # bit for bit, -0.0 and nan included
    np.testing.assert_array_equal(np.loadtxt(p, delimiter=","), m)   # NumPy reads it too


def test_write_csv_header_vector_number_and_float32(tmp_path):
    p = str(tmp_path / "h.csv")
    run('write_csv(p, [1, 2; 3, 4.5], header=("w", "h, cm"))', p=p)
    assert open(p, encoding="utf-8").read() == 'w,"h, cm"\n1,2\n3,4.5\n'
    assert value_of("csv_header(p)", p=p) == ("w", "h, cm")
    np.testing.assert_array_equal(value_of("read_csv(p)", p=p), [[1, 2], [3, 4.5]])
    run("write_csv(p, [1, 2, 3])", p=p)                     # a vector is one column
    assert open(p).read() == "1\n2\n3\n"
    assert value_of("read_csv(p)", p=p).shape == (3, 1)
    run("write_csv(p, 0.1)", p=p)
    assert open(p).read() == "0.1\n"
    f32 = np.array([[0.1, 1e-30]], dtype=np.float32)
    run("write_csv(p, m)", p=p, m=f32)
    assert value_of("read_csv(p)", p=p).astype(np.float32).tobytes() == f32.tobytes()
    run("write_csv(p, zeros(0, 3))", p=p)
    assert open(p).read() == "" and value_of("read_csv(p)", p=p).shape == (0, 0)


def test_read_csv_header_detection(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text("\ufeffx, y\n1, 2\n\n3,4\n", encoding="utf-8")     # BOM, spaces, a blank line
    np.testing.assert_array_equal(value_of("read_csv(p)", p=str(p)), [[1, 2], [3, 4]])
    assert value_of("csv_header(p)", p=str(p)) == ("x", " y")
    p.write_text("1,2\n3,4\n")
    np.testing.assert_array_equal(value_of("read_csv(p)", p=str(p)), [[1, 2], [3, 4]])
    np.testing.assert_array_equal(value_of("read_csv(p, header=true)", p=str(p)), [[3, 4]])
    p.write_text("a,b\n")
    assert value_of("read_csv(p)", p=str(p)).shape == (0, 0)
    p.write_text("")
    assert value_of("read_csv(p)", p=str(p)).shape == (0, 0) and value_of("csv_header(p)", p=str(p)) == ()
    p.write_text("1,nan,inf,-1e-3\n")
    np.testing.assert_array_equal(value_of("read_csv(p)", p=str(p)), [[1, np.nan, np.inf, -1e-3]])
    p.write_text("1,2\r\n3,4\r\n")                                     # Windows line endings
    np.testing.assert_array_equal(value_of("read_csv(p)", p=str(p)), [[1, 2], [3, 4]])


def test_read_csv_errors_name_line_and_column(tmp_path):
    p = tmp_path / "bad.csv"
    cases = [("x,y\n1,2\n3\n", "line 3 has 1 field, but line 2 has 2"),
             ("x,y\n1,2\n3,abc\n", 'line 3, column 2: "abc", which is not a number'),
             ("1,2\n3,\n", "line 2, column 2: an empty field"),
             ("1,2\n1_000,2\n", 'line 2, column 1: "1_000", which is not a number'),
             ("a,b\n", None)]
    for text, msg in cases:
        p.write_text(text)
        if msg is None:
            continue
        with pytest.raises(IOErr, match=msg):
            run("read_csv(p)", p=str(p))
    p.write_text("x,y\n1,2\n")
    with pytest.raises(IOErr, match='line 1, column 1: "x"'):
        run("read_csv(p, header=false)", p=str(p))
    with pytest.raises(ValueErr, match='header must be "auto", true or false'):
        run('read_csv(p, header="yes")', p=str(p))
    p.write_bytes(b"1,2\n\xff,3\n")
    with pytest.raises(IOErr, match="not UTF-8 text: byte 0xFF at line 2, column 1"):
        run("read_csv(p)", p=str(p))
    p.write_text('"a,b\n1,2\n')
    with pytest.raises(IOErr, match="malformed CSV"):
        run("read_csv(p)", p=str(p))
    with pytest.raises(IOErr, match="no file"):
        run("read_csv(p)", p=str(tmp_path / "none.csv"))
    with pytest.raises(IOErr, match="is a directory"):
        run("read_csv(p)", p=str(tmp_path))
    with pytest.raises(ValueErr, match="header has 1 name but m has 2 columns"):
        run('write_csv(p, [1, 2;], header=("a",))', p=str(p))
    with pytest.raises(ValueErr, match=r"header\[0\] is a number"):
        run('write_csv(p, [1, 2;], header=(1, 2))', p=str(p))
    with pytest.raises(ShapeError, match="m must be a number, vector or matrix"):
        run("write_csv(p, zeros(2, 2, 2))", p=str(p))


def test_writers_refuse_non_regular_targets_and_missing_dirs(tmp_path):
    for call in ("write_csv(p, [1])", "write_json(p, 1)"):
        with pytest.raises(IOErr, match="not a regular file"):
            run(call, p="/dev/null")
        with pytest.raises(IOErr, match="does not exist"):
            run(call, p=str(tmp_path / "no" / "f"))
        with pytest.raises(IOErr, match="is a directory"):
            run(call, p=str(tmp_path))
    with pytest.raises(IOErr, match="not a regular file"):
        run("save(p, {a = 1})", p="/dev/null")
    assert sorted(os.listdir(tmp_path)) == []                       # no temporary file left behind


def test_readers_go_through_the_size_guard(tmp_path, monkeypatch):
    from tapeml.array import limits
    p = tmp_path / "big.csv"
    p.write_text("1,2\n" * 40)
    monkeypatch.setattr(limits, "MAX_STRING_BYTES", 100)
    for fn in ("read_csv", "csv_header", "read_json"):
        with pytest.raises(ValueErr, match=f"{fn}\\(\\): the text of .* would take"):
            run(f"{fn}(p)", p=str(p))
    monkeypatch.setattr(limits, "MAX_STRING_BYTES", 10 ** 8)
    monkeypatch.setattr(limits, "MAX_ELEMENTS", 50)
    with pytest.raises(ValueErr, match="read_csv\\(\\): .* would need"):
        run("read_csv(p)", p=str(p))
    q = tmp_path / "big.json"
    q.write_text(json.dumps({"w": [[1.0] * 10] * 10}))
    with pytest.raises(ValueErr, match="read_json\\(\\): the array at w of .* would need"):
        run("read_json(p)", p=str(q))
    st = str(tmp_path / "w.safetensors")
    monkeypatch.setattr(limits, "MAX_ELEMENTS", 10 ** 9)
    run("save(p, {w = zeros(10, 10)})", p=st)
    monkeypatch.setattr(limits, "MAX_ELEMENTS", 50)
    with pytest.raises(ValueErr, match="load\\(\\): 'w' in .* would need"):
        run("load(p)", p=st)


# ---- JSON ---------------------------------------------------------------------------------------
def test_read_json_conversions(tmp_path):
    p = tmp_path / "c.json"
    doc = {"n": 4, "x": -0.5, "s": "ü ✓", "t": True, "z": None, "v": [1, 2.5], "m": [[1, 2], [3, 4]],
           "mixed": ["a", 1], "ragged": [[1], [2, 3]], "bools": [True, False], "empty": [],
           "deep": {"k": [[[1], [2]]]}, "not-a-name": 1}
    p.write_text(json.dumps(doc), encoding="utf-8")
    r = value_of("read_json(p)", p=str(p))
    # a key that is not a name ("not-a-name") makes the object a dictionary (issue 29); its inner
    # objects with name keys stay records
    assert isinstance(r, Dict) and r.keys() == tuple(doc)
    f = dict(r.items())
    assert f["n"] == 4.0 and type(f["n"]) is float and f["x"] == -0.5 and f["s"] == "ü ✓"
    assert f["t"] is True and f["z"] is None
    np.testing.assert_array_equal(f["v"], [1, 2.5])
    assert f["m"].shape == (2, 2) and f["deep"].fields["k"].shape == (1, 2, 1)
    assert f["mixed"] == ("a", 1.0) and f["bools"] == (True, False) and f["empty"] == ()
    assert len(f["ragged"]) == 2 and np.array_equal(f["ragged"][1], [2, 3])
    assert value_of('contains(read_json(p), "not-a-name")', p=str(p)) is True
    assert isinstance(f["deep"], Record)
    del doc["not-a-name"]
    p.write_text(json.dumps(doc), encoding="utf-8")
    r = value_of("read_json(p)", p=str(p))
    assert isinstance(r, Record) and list(r.fields) == list(doc)
    assert isinstance(value_of('read_json(p, objects="dict")', p=str(p)), Dict)
    p.write_text("[1, 2, 3]")
    np.testing.assert_array_equal(value_of("read_json(p)", p=str(p)), [1, 2, 3])
    p.write_text('"just a string"')
    assert value_of("read_json(p)", p=str(p)) == "just a string"


def test_write_json_read_json_round_trip(tmp_path):
    p = str(tmp_path / "r.json")
    rng = np.random.default_rng(1)
    m = rng.standard_normal((3, 4)) * 10.0 ** rng.integers(-300, 300, size=(3, 4))
    m[0, 0] = -0.0
    src = '{name = "run ✓", loss = 0.1, step = 3, w = m, v = [1e-300, 2], tags = ("a", true, none), ' \
          'nested = {inner = ((1, "x"), {q = [5;]})}, big = 2^60}'
    v = variables_after(f"r = {src}\nwrite_json(p, r)\nback = read_json(p)\nsame = back == r", p=p, m=m)
    assert v["same"] is True
    back = v["back"]
    assert back.fields["w"].tobytes() == m.tobytes()                 # bit for bit, -0.0 included
    text = open(p, encoding="utf-8").read()
    assert '"run ✓"' in text and '"step": 3,' in text and text.endswith("\n")
    assert json.loads(text)["nested"]["inner"][1]["q"] == [[5]]
    # the cases the format cannot tell apart, documented: a tuple of numbers comes back a vector
    run("write_json(p, (1, 2))", p=p)
    np.testing.assert_array_equal(value_of("read_json(p)", p=p), [1, 2])


def test_json_errors(tmp_path):
    p = tmp_path / "e.json"
    p.write_text('{"a": 1,\n "b": }')
    with pytest.raises(IOErr, match="line 2, column 7: a value was expected"):
        run("read_json(p)", p=str(p))
    p.write_text("[" * 100000 + "]" * 100000)          # once a segfault in the C parser
    with pytest.raises(IOErr, match=r"nests arrays or objects too deeply \(up to 1000 levels are always read\)"):
        run("read_json(p)", p=str(p))
    p.write_text('{"a": "[[[[", "b": ' + "[" * 999 + "]" * 999 + "}")   # brackets in strings do not count
    assert len(value_of("read_json(p)", p=str(p)).fields) == 2
    with pytest.raises(ValueErr, match="nests tuples and records more than 1000 deep"):
        run("t = 1\nfor i in 1:2000\n    t = (t,)\nend\nwrite_json(p, t)", p=str(p))
    p.write_text("1" * 400)                 # past float64: inf, as 1e999 reads (issue 38)
    assert value_of("read_json(p)", p=str(p)) == float("1" * 400) == float("inf")
    with pytest.raises(ValueErr, match=r"write_json\(\): loss is nan, which JSON cannot hold"):
        run("write_json(p, {loss = 0 / 0})", p=str(p))
    with pytest.raises(ValueErr, match=r"write_json\(\): w\[1, 0\] is inf"):
        run("write_json(p, {w = [1, 2; 1 / 0, 3]})", p=str(p))
    with pytest.raises(TypeErr, match=r"write_json\(\): f\[0\] is a function"):
        run("write_json(p, {f = (sin,)})", p=str(p))


# ---- safetensors and file_exists ------------------------------------------------------------------
def test_safetensors_round_trip_keeps_order_dtype_and_bits(tmp_path):
    from safetensors.numpy import load_file
    p = str(tmp_path / "ckpt.safetensors")
    rng = np.random.default_rng(2)
    w = rng.standard_normal((3, 4))
    w32 = rng.standard_normal((2, 2)).astype(np.float32)
    src = "params = {zeta = w, alpha = ({wq = w32, wk = [1, 2]}, {wq = w32, wk = [3, 4]}), step = 3, on = true}"
    back = variables_after(f"{src}\nsave(p, params)\nback = load(p)\nsame = back == params", p=p, w=w, w32=w32)["back"]
    assert list(back.fields) == ["zeta", "alpha", "step", "on"]      # save order, not sorted
    assert back.fields["zeta"].tobytes() == w.tobytes()
    assert back.fields["alpha"][1].fields["wq"].dtype == np.float32
    assert back.fields["alpha"][1].fields["wq"].tobytes() == w32.tobytes()
    assert back.fields["step"] == 3.0 and type(back.fields["step"]) is float and back.fields["on"] is True
    plain = load_file(p)                                               # any safetensors reader
    assert sorted(plain) == sorted(["zeta", "alpha.0.wq", "alpha.0.wk", "alpha.1.wq", "alpha.1.wk",
                                    "step", "on"])                   # PyTorch's state-dict names
    assert plain["alpha.1.wq"].dtype == np.float32


def test_safetensors_from_hugging_face_style_names_and_errors(tmp_path):
    from safetensors.numpy import save_file
    p = str(tmp_path / "hf.safetensors")
    save_file({"model.layers.0.q.weight": np.ones((2, 2), np.float16),
               "model.layers.1.q.weight": np.zeros((2, 2), np.float16),
               "model.emb": np.arange(3, dtype=np.int64)}, p)
    r = value_of("load(p)", p=p)
    layers = r.fields["model"].fields["layers"]
    assert len(layers) == 2 and layers[0].fields["q"].fields["weight"].dtype == np.float64
    np.testing.assert_array_equal(r.fields["model"].fields["emb"], [0, 1, 2])
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":")
    with pytest.raises(IOErr, match="damaged or not a .safetensors file"):
        run("load(p)", p=str(bad))
    good = tmp_path / "g.safetensors"
    run("save(p, {a = [1, 2, 3]})", p=str(good))
    good.write_bytes(good.read_bytes()[:-4])                         # truncated
    with pytest.raises(IOErr, match="damaged"):
        run("load(p)", p=str(good))
    with pytest.raises(TypeErr, match="save\\(\\): s is a string"):
        run('save(p, {s = "x"})', p=str(good))


def test_file_exists(tmp_path):
    f = tmp_path / "f.txt"
    assert value_of("file_exists(p)", p=str(f)) is False
    f.write_text("x")
    assert value_of("file_exists(p)", p=str(f)) is True
    assert value_of("file_exists(p)", p=str(tmp_path)) is False           # a directory is not a file
    assert value_of('file_exists("/dev/null")') is False
    with pytest.raises(TypeErr, match="path must be a string"):
        run("file_exists(1)")


def test_safetensors_bfloat16_is_widened_exactly(tmp_path):
    import struct
    p = tmp_path / "bf16.safetensors"
    want = np.array([[1.0, -2.0], [0.15625, 3.0e38]], dtype=np.float32)   # bfloat16-exact values
    raw = (want.view(np.uint32) >> 16).astype("<u2").tobytes()
    header = json.dumps({"w": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, len(raw)]},
                         "b": {"dtype": "F32", "shape": [1], "data_offsets": [len(raw), len(raw) + 4]}}).encode()
    p.write_bytes(struct.pack("<Q", len(header)) + header + raw + np.float32(0.5).tobytes())
    r = value_of("load(p)", p=str(p))
    np.testing.assert_array_equal(r.fields["w"], (want.view(np.uint32) & 0xFFFF0000).view(np.float32))
    assert r.fields["w"].dtype == np.float64 and r.fields["b"].dtype == np.float32


@pytest.mark.parametrize("text, col, says", [
    ("", 1, "a value was expected (a number, a string, a list, an object, true, false or null)"),
    ("[1,]", 4, "a value was expected"),
    ('{"a" 1}', 6, "a ':' was expected after the key"),
    ("[1 2]", 4, "a ',' was expected between two items"),
    ("{a: 1}", 2, "a key in double quotes was expected"),
    ('"abc', 1, "a string starts here and is never closed"),
    ("[1] x", 5, "more text follows the end of the JSON value"),
    ('"\\q"', 2, "an escape JSON does not have"),
])
def test_read_json_syntax_errors_in_tapeml_words(tmp_path, text, col, says):
    """Python's json module's own words ("Expecting value", "Extra data") never reach a user (issue 25)."""
    from test_fuzz import python_wording
    p = tmp_path / "bad.json"
    p.write_text(text)
    with pytest.raises(IOErr) as info:
        run("read_json(p)", p=str(p))
    assert says in info.value.message and f"column {col}:" in info.value.message
    assert python_wording(info.value.message) is None


@pytest.mark.parametrize("text, says", [('"a,b\n1,2\n', "a quote is opened and never closed"),
                                        ('a,"b"c\n', "a quoted field must end at its closing quote")])
def test_read_csv_syntax_errors_in_tapeml_words(tmp_path, text, says):
    p = tmp_path / "bad.csv"
    p.write_text(text)
    with pytest.raises(IOErr) as info:
        run("read_csv(p)", p=str(p))
    assert f"malformed CSV ({says}" in info.value.message, info.value.message
    assert "expected after" not in info.value.message and "end of data" not in info.value.message
