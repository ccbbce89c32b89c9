"""The Python API (tapeml.Session) and session state: two Sessions in one process, interleaved,
never see each other's float type, random generator or figures; values cross both ways."""
from __future__ import annotations

import numpy as np
import pytest

import tapeml
from tapeml.array import context, ops
from tapeml.builtins import random as trandom
from tapeml.evaluator.interpreter import Interpreter


def test_two_sessions_interleaved_keep_their_dtype_and_seed():
    a = tapeml.Session(dtype="float32", seed=1)
    b = tapeml.Session(dtype="float64", seed=2)
    ra, rb = np.random.default_rng(1), np.random.default_rng(2)
    for _ in range(3):                       # interleaved draws: each stream continues its own
        assert a.eval("dtype(rand(2))") == "float32"
        assert b.eval("dtype(rand(2))") == "float64"
        ra.random(2), rb.random(2)           # the draws inside dtype(...) above
        ea, eb = ra.random(2), rb.random(2)
        assert np.array_equal(a.eval("rand(2)"), ea.astype(np.float32))
        assert np.array_equal(b.eval("rand(2)"), eb)
    a.run('set_dtype("float64")\nseed(5)')   # a changes its own state only
    assert b.eval("dtype([1, 2])") == "float64" and a.eval("dtype([1, 2])") == "float64"
    assert b.eval("rand()") == rb.random()
    assert a.eval("rand()") == np.random.default_rng(5).random()


def test_a_session_leaves_the_default_state_as_it_was():
    ops.set_dtype("float64")
    trandom.seed(7)
    s = tapeml.Session(dtype="float32", seed=0)
    s.run("x = rand(3)")
    assert ops.FLOAT["dtype"] is np.float64 and ops.FLOAT["dtype"] is np.float64
    assert context.current() is context.DEFAULT
    assert Interpreter(load_prelude=False).run("z = 1") is None
    assert trandom.rng().random() == np.random.default_rng(7).random()


def test_figures_belong_to_their_session():
    a, b = tapeml.Session(), tapeml.Session()
    a.run("plot([1, 2, 3])")
    b.run("plot([3, 2, 1])\nfigure()\nhist([1, 2, 2])")
    a.run('title("a")')                      # draws on a's figure, not b's current one
    fa, fb = a.figures(), b.figures()
    assert len(fa) == 1 and len(fb) == 2
    assert fa[0].axes[0].get_title() == "a" and fb[0].axes[0].get_title() == ""
    assert list(fa[0].axes[0].lines[0].get_ydata()) == [1, 2, 3]
    from tapeml.builtins import plot
    assert all(f not in plot.open_figures() for f in fa + fb)     # nor the default state's


def test_values_python_to_tapeml_and_back():
    s = tapeml.Session(dtype="float32")
    s["x"] = np.arange(6).reshape(2, 3)              # an integer array becomes the float type
    assert s.eval("dtype(x)") == "float32" and s.eval("size(x)") == (2.0, 3.0)
    s["r"] = {"w": np.eye(2), "b": [1, 2], "name": "layer", "on": True, "n": 3}
    s["t"] = (1, "a", None, np.float64(2.5))
    s.run("w2 = r.w * 2\nk = r.n + 1\nt2 = t")
    w2 = s["w2"]
    assert isinstance(w2, np.ndarray) and w2.dtype == np.float32 and np.array_equal(w2, 2 * np.eye(2))
    assert s["k"] == 4.0 and type(s["k"]) is float
    assert s["t2"] == (1.0, "a", None, 2.5)
    r = s["r"]
    assert set(r) == {"w", "b", "name", "on", "n"} and r["name"] == "layer" and r["on"] is True
    assert np.array_equal(r["b"], np.array([1, 2], dtype=np.float32))
    assert s.eval("1 < 2") is True and s.eval('"ab" + "c"') == "abc" and s.eval("x = 1") is None
    x = np.ones(3)
    s["v"] = x
    x[0] = 5                                          # the Session holds a copy
    assert s.eval("sum(v)") == 3.0
    got = s["v"]
    got[1] = 9
    assert s.eval("v[2]") == 1.0
    with pytest.raises(tapeml.LangError) as e:
        s["c"] = np.array([1j])
    assert e.value.kind == "TypeError" and "complex" in e.value.message
    with pytest.raises(tapeml.LangError) as e:
        s["for"] = 1.0
    with pytest.raises(tapeml.LangError) as e:
        s["nothing_here"]
    assert e.value.kind == "NameError"


def test_call_and_functions():
    s = tapeml.Session(seed=0)
    s.run("fn affine(x, w, b=0)\n  return x @ w + b\nend")
    x, w = np.array([[1.0, 2.0]]), np.array([[1.0], [3.0]])
    assert np.array_equal(s.call("affine", x, w, b=1), np.array([[8.0]]))
    p = s.call("softmax", np.array([[0.0, np.log(3.0)]]))
    assert np.allclose(p, [[0.25, 0.75]])
    f = s["affine"]
    assert np.array_equal(f(x, w), np.array([[7.0]]))
    with pytest.raises(tapeml.LangError) as e:
        s.call("affine", x, np.ones((3, 1)))
    assert e.value.kind == "ShapeError"
    with pytest.raises(tapeml.LangError) as e:
        s.call("nope")
    assert e.value.kind == "NameError"


def test_errors_have_kind_message_line_column(tmp_path):
    s = tapeml.Session()
    with pytest.raises(tapeml.LangError) as e:
        s.run("a = 1\nb = [1, 2] @ [1, 2, 3]")
    err = e.value
    assert (err.kind, err.line, err.column, err.file) == ("ShapeError", 2, 12, "<string>")
    assert "inner sizes 2 and 3 differ" in err.message
    with pytest.raises(tapeml.LangError) as e:
        s.eval("1 +")
    assert e.value.kind == "SyntaxError" and e.value.line == 1
    path = tmp_path / "prog.ml"
    path.write_text("y = 3\nprint(y * 2)\nz = undefined_name\n")
    with pytest.raises(tapeml.LangError) as e:
        s.run_file(path)
    assert (e.value.kind, e.value.line, e.value.column, e.value.file) == ("NameError", 3, 5, str(path))
    assert s["y"] == 3.0


def test_an_error_inside_the_standard_library_is_placed_at_the_users_call():
    """As the command line shows it: line, column, file and str(error) name the user's call of the
    stdlib function (docs/python.md: str(error) is the command line's first line), and `span`
    keeps the place inside the library."""
    from tapeml.syntax.errors import render
    s = tapeml.Session()
    for code, first in (('x = 1\ny = script_arg(1, "2")', "<string>:2:5: ValueError: script_arg(): name is"),
                        ("v = char_vocab(\"ab\")\ndecode([1, 2], v)", "<string>:2:1: TypeError in decode(): ")):
        with pytest.raises(tapeml.LangError) as e:
            s.run(code)
        err = e.value
        assert str(err).startswith(first) and err.file == "<string>" and err.line == 2
        assert str(err.span.file).startswith("<stdlib>")
        assert render(err, code).split("\n")[0] == str(err)


def test_run_file_and_print_go_to_the_session_stream(tmp_path, capsys):
    path = tmp_path / "p.ml"
    path.write_text("x = [1, 2] * 2\nprint(x)\n")
    s = tapeml.Session()
    s.run_file(path)
    assert capsys.readouterr().out == "[2, 4]\n"
    import io
    buf = io.StringIO()
    t = tapeml.Session(out=buf)
    t.run("print(1 + 1)")
    assert buf.getvalue() == "2\n"


def test_bad_arguments():
    with pytest.raises(ValueError, match="dtype must be one of"):
        tapeml.Session(dtype="float16")
    with pytest.raises(ValueError, match="seed"):
        tapeml.Session(seed=-1)


def test_a_builtin_with_context_gets_the_narrow_context():
    from tapeml.builtins.registry import REGISTRY
    s = tapeml.Session(dtype="float32")
    assert REGISTRY["print"].context and not REGISTRY["print"].interp
    ctx = s.interp.context
    with s.state:
        assert ctx.dtype is np.float32 and ctx.out is s.interp.out
        assert ctx.call(REGISTRY["max"], 2.0, 5.0) == 5.0
        assert isinstance(ctx.rng(), np.random.Generator)


def test_import_tapeml_stays_light():
    import subprocess
    import sys
    code = "import sys, tapeml; print('numpy' in sys.modules, 'tapeml.session.session' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_the_docs_run_python_blocks_and_fail_on_an_error(tmp_path):
    """docs/python.md's examples run in `tapeml docs build|check`, like the ```ml blocks."""
    from tapeml.faces.docs.render import run_markdown
    page = ("```python\nimport tapeml\ns = tapeml.Session()\nprint(s.eval('1 + 2'))\n```\n\n"
            "```text\nstale\n```\n\n```python\ns.run('[1] @ [1, 2]')\n```\n")
    failures = []
    out = run_markdown(page, "p.md", str(tmp_path), failures)
    assert "```text\n3.0\n```" in out and "stale" not in out
    assert len(failures) == 1 and "p.md block 2 (line 11)" in failures[0].where
    assert "tapeml.LangError: <string>:1:5: ShapeError" in failures[0].message


# ---- issue 29, item 5: the Python API as a NumPy user expects it ------------------------------------
def test_a_shape_comes_back_as_ints_numpy_takes():
    s = tapeml.Session()
    s["x"] = np.zeros((2, 3, 4))
    shape = s.eval("size(x)")
    assert shape == (2, 3, 4) and all(type(n) is int for n in shape)
    assert np.zeros(shape).shape == (2, 3, 4) and np.ones(s["x"].shape).reshape(shape).shape == (2, 3, 4)
    assert s.eval("size(5)") == () and s.eval("(1, 2.5)") == (1.0, 2.5)    # not all whole: floats
    assert type(s.eval("size(x, 0)")) is float and s.eval("size(x, 0)") == 2.0
    assert s.eval("((2, 3), \"a\")") == ((2, 3), "a")


def test_a_missing_name_is_a_name_error_and_a_key_error():
    s = tapeml.Session()
    for attempt in (lambda: s["nope"], lambda: s.call("nope"), lambda: s.__delitem__("nope")):
        with pytest.raises(KeyError) as e:
            attempt()
        assert isinstance(e.value, tapeml.LangError) and e.value.kind == "NameError"
        assert "'nope'" in e.value.message
    s["a"] = 1
    assert "a" in s and "nope" not in s and 3 not in s


def test_list_and_len_of_a_session_are_its_variables():
    s = tapeml.Session()
    s.run("b = 1\na = 2\nfn f(x) -> x")
    assert list(s) == s.variables() == ["b", "a", "f"] and len(s) == 3
    del s["a"]
    assert list(s) == ["b", "f"]
    assert "softmax" not in s.variables() and s.call("softmax", np.zeros(2)).tolist() == [0.5, 0.5]


def test_bool_arrays_stay_bool_both_ways():
    s = tapeml.Session(dtype="float32")
    s["m"] = np.array([True, False, True])
    s["l"] = [[True], [False]]
    assert s.eval("dtype(m)") == "bool" and s.eval("dtype(l)") == "bool"
    s["x"] = np.array([1.0, 2.0, 3.0])
    assert s.eval("x[m]").tolist() == [1.0, 3.0]
    back = s.eval("x > 1")
    assert back.dtype == np.bool_ and back.tolist() == [False, True, True]
    assert s["m"].dtype == np.bool_ and s["m"].tolist() == [True, False, True]
    assert s.eval("where(m, x, 0)").dtype == np.float32


def test_a_python_function_is_callable_from_tapeml():
    s = tapeml.Session()
    seen = []

    def scale(a, factor=2.0):
        seen.append((type(a), a.dtype if isinstance(a, np.ndarray) else None))
        return a * factor
    s["scale"] = scale
    s["shape_of"] = lambda a: a.shape
    s["pair"] = lambda a, b: (a, b)
    assert np.array_equal(s.eval("scale([1, 2]) + 1"), [3.0, 5.0])
    assert seen[-1] == (np.ndarray, np.float64)
    assert s.eval("scale(3, factor=10)") == 30.0 and s.eval("shape_of(zeros(2, 5))") == (2, 5)
    assert s.eval("type(shape_of(zeros(2, 5)))") == "tuple"
    assert s.eval("map(scale, (1, 2))") == (2, 4)
    assert s.eval('pair("a", none)') == ("a", None) and s.eval("type(scale)") == "function"
    assert s.eval("str(scale)") == "<python scale(a, factor=...)>"
    assert s["scale"] is scale                         # the same Python function comes back
    s["counts"] = lambda words: {w: words.count(w) for w in words}
    assert s.eval('counts(("a b", "c", "a b"))["a b"]') == 2.0     # keys that are no names: a dictionary
    assert s.eval('counts(("a", "c", "a")).a') == 2.0               # name keys: a record


def test_a_python_function_under_grad_is_a_clear_error():
    s = tapeml.Session()
    s["square"] = lambda v: v ** 2
    assert s.eval("grad(fn(x) -> x * square(stop_gradient(x)), 3)") == 9.0    # not differentiated: fine
    with pytest.raises(tapeml.LangError) as e:
        s.run("w = [1, 2]\ng = grad(fn(x) -> sum(square(x)), w)")
    err = e.value
    assert (err.kind, err.line, err.column) == ("TypeError", 2, 23)      # at square(x)
    assert err.message.startswith("square() is a Python function, which grad cannot differentiate: its "
                                  "argument 1 depends on the input of grad")
    with pytest.raises(tapeml.LangError) as e:
        s.eval('grad(fn(p) -> square(p["w"]) + p["w"], {"w": 1, "n": 2})')
    assert "square() is a Python function" in e.value.message
    with pytest.raises(tapeml.LangError) as e:
        s.eval('grad(fn(p) -> sum(square((1, p))), 2)')
    assert "argument 1 depends on the input of grad" in e.value.message


def test_a_python_functions_exception_and_bad_result():
    s = tapeml.Session()

    def boom(x):
        raise ValueError("no negative sizes")
    s["boom"] = boom
    s["odd"] = lambda: {1, 2}
    with pytest.raises(tapeml.LangError) as e:
        s.run("\nboom(-1)")
    assert (e.value.kind, e.value.line, e.value.column) == ("PythonError", 2, 1)
    assert e.value.message == "boom(): the Python function raised ValueError: no negative sizes"
    assert isinstance(e.value.__cause__, ValueError)
    with pytest.raises(tapeml.LangError) as e:
        s.eval("odd()")
    assert e.value.kind == "TypeError" and e.value.message.startswith("the result of odd() is a set")
    with pytest.raises(tapeml.LangError) as e:
        s["cls"] = dict
    assert "a Python class (dict)" in e.value.message


def test_dicts_convert_both_ways():
    s = tapeml.Session()
    s["sizes"] = {"gpt2": 124, "gpt2-medium": 350}             # a key that is no name: a dictionary
    s["cfg"] = {"lr": 0.1, "steps": 3}                         # name keys: a record, as before
    s["vocab"] = tapeml.Dict({"a": 0, "b": 1})                  # forced to be a dictionary
    s["pairs"] = {(97, 97): 256, (256, 97): 257, 0: "zero", 1.5: np.eye(2)}
    assert s.eval("(type(sizes), type(cfg), type(vocab), type(pairs))") == ("dict", "record", "dict", "dict")
    assert s.eval('sizes["gpt2-medium"]') == 350.0 and s.eval("cfg.lr") == 0.1
    assert s.eval("pairs[97, 97] + pairs[(256, 97)]") == 513.0 and s.eval("pairs[0]") == "zero"
    back = s["pairs"]
    assert isinstance(back, tapeml.Dict) and isinstance(back, dict)
    assert list(back) == [(97, 97), (256, 97), 0, 1.5] and all(type(x) is int for x in list(back)[0])
    assert back[(97, 97)] == 256 and np.array_equal(back[1.5], np.eye(2))
    s["again"] = back                                          # a tapeml.Dict goes back as a dictionary
    assert s.eval("again == pairs") is True
    assert s["vocab"] == {"a": 0.0, "b": 1.0} and s.eval('{"x": {:}}') == {"x": {}}
    for bad, text in [({True: 1}, "got a bool"), ({float("nan"): 1}, "cannot be nan"),
                      ({"ok": {object(): 1}}, "['ok'] has the key <object object")]:
        with pytest.raises(tapeml.LangError) as e:
            s["bad"] = tapeml.Dict(bad) if "ok" not in bad else bad
        assert e.value.kind == "TypeError" and text in e.value.message, e.value.message


def test_a_python_function_inside_a_value_and_the_tapeml_module_exports():
    s = tapeml.Session()
    s["ops"] = {"double": lambda x: 2 * x}
    assert s.eval("ops.double(4)") == 8.0
    assert "Dict" in dir(tapeml) and tapeml.Dict is tapeml.session.session.Dict


@pytest.mark.parametrize("out", [3, "log.txt"])
def test_an_out_without_write_is_refused_when_the_session_is_made(out):
    """Session(out=3) was accepted and the first print raised Python's AttributeError."""
    with pytest.raises(TypeError) as e:
        tapeml.Session(out=out)
    assert str(e.value) == ("out must be a text stream (an object with write(), such as io.StringIO()) "
                            f"or None for standard output, got {out!r}")
