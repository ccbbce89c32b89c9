"""Issue 29, item 2: dictionaries and the collection habits of ported code.

The dictionary value (values.Dict) against Python's dict as the model (insertion order, keys by
value, a key set twice keeps its place), its value semantics under aliasing (a property test with
random operation sequences), the literal through the parser and unparse, printing that reads back
(a property test), errors with their line:col, JSON and CSV by column name, and the tuple habits:
stack/concat/vector of what map returns (gradients against finite differences and PyTorch),
max/min/sum of a tuple, a tuple indexed by a vector, a, b = v."""
from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tapeml.array.printer import format_value
from tapeml.array.values import Dict, Record, dict_key, values_equal
from tapeml.evaluator.interpreter import Interpreter
from tapeml.syntax import ast as A
from tapeml.syntax.errors import IndexErr, KeyErr, LangError, LangSyntaxError, NameErr, TypeErr, ValueErr
from tapeml.syntax.parser import parse
from tapeml.syntax.unparse import unparse

from conftest import examples
from fd import fd_grad


def run(src: str, **variables):
    out = io.StringIO()
    interp = Interpreter(out=out)
    for k, v in variables.items():
        interp.set_variable(k, v)
    interp.run(src, "<test>")
    return interp, out.getvalue()


def value(expr: str, **variables):
    interp, _ = run(f"result = {expr}", **variables)
    return interp.get_variable("result")


def error(src: str) -> LangError:
    with pytest.raises(LangError) as info:
        run("\n" + src)         # a blank first line: every place below is on line 2 or later
    return info.value


def place(err: LangError) -> str:
    return f"{err.line}:{err.column}"


def as_python(d):
    """A Dict as a Python dict (keys as stored), for comparing with the model."""
    return dict(d.items())


# ---- the literal: parser, unparse, evaluation ------------------------------------------------------
@pytest.mark.parametrize("source", [
    "{:}", '{"a": 1}', '{"a": 1, (1, 2): [3, 4], -1: "neg", x + 1: 1:3}', "{(x): y, f(1): {:}}",
    '{"k": {"inner": {a = 1}}}', 'd["a"] += 1', "d[1, 2] = 3", '"{ {"a": 1} } and { {:} }"',
])
def test_dictionary_literals_round_trip_through_unparse(source):
    tree = parse(source)
    text = unparse(tree)
    assert parse(text) == tree
    assert unparse(parse(text)) == text


def test_the_first_item_decides_record_or_dictionary():
    assert type(parse("{a = 1}").body[0].expr) is A.RecordLit
    assert type(parse("{}").body[0].expr) is A.RecordLit           # the empty record stays
    assert type(parse("{:}").body[0].expr) is A.DictLit
    assert type(parse("{a: 1}").body[0].expr) is A.DictLit         # a name's value as the key
    assert unparse(parse("{:}")) == "{:}\n"


@pytest.mark.parametrize("source, message, where", [
    ('{"lr": 0.1, steps = 100}', "expected ':' after the key in the dictionary {key: value}, found '=' "
                                 "(a record is {name = value}: the first field decides which it is)", "2:19"),
    ('{lr = 0.1, "steps": 100}', "expected a field name in the record (write {name = value}), found a string", "2:12"),
    ('{"a" 1}', "expected ':' after the key in the dictionary {key: value}, found '1'", "2:6"),
    ('{"a": 1 "b": 2}', "expected ',' or '}' in the dictionary, found a string", "2:9"),
    ('if "a" in d\n1\nend', "tapeml has no 'in' operator: write contains(container, item)", "2:8"),
    ('print("a" not in d)', "tapeml has no 'not in' operator: write not contains(container, item)", "2:11"),
])
def test_literal_syntax_errors_say_where(source, message, where):
    err = error(source)
    assert isinstance(err, LangSyntaxError)
    assert message in err.message
    assert place(err) == where


def test_literal_values_follow_pythons_dict():
    d = value('{"b": 1, "a": 2, "b": 3, 1: "one", 1.0: "uno", (1, 2): "pair", -0.0: "zero", 0: "nil"}')
    model = {"b": 1, "a": 2, "b": 3, 1: "one", 1.0: "uno", (1, 2): "pair", -0.0: "zero", 0: "nil"}
    assert list(d.keys()) == list(model.keys()) and list(d.values()) == [
        float(v) if isinstance(v, int) else v for v in model.values()]
    assert all(type(k) in (str, float, tuple) for k in d.keys())


def test_an_undefined_name_as_key_hints_at_a_string():
    err = error("{lr: 0.1}")
    assert isinstance(err, NameErr) and place(err) == "2:2"
    assert 'a word as a dictionary key is a string: {"lr": ...} (and {lr = ...} is a record)' in err.message


# ---- keys ------------------------------------------------------------------------------------------
def test_keys_are_strings_numbers_and_tuples_by_value():
    assert dict_key(1) == 1.0 and type(dict_key(1)) is float
    assert dict_key(np.float64(2.5)) == 2.5 and dict_key(np.array(3.0)) == 3.0
    assert math.copysign(1, dict_key(-0.0)) == 1.0
    assert dict_key((1, ("a", 2))) == (1.0, ("a", 2.0))
    assert value("d[1] + d[1.0]", d=Dict({1.0: 2.0})) == 4.0


@pytest.mark.parametrize("src, kind, message, where", [
    ("d = {:}\nd[true] = 1", TypeErr, "a dictionary key is a string, a number or a tuple of those, got a bool", "3:3"),
    ("d = {[1, 2]: 1}", TypeErr, "got a vector of length 2; a vector's numbers as a key: tuple(v)", "2:6"),
    ("d = {:}\nd[0 / 0] = 1", ValueErr, "a dictionary key cannot be nan", "3:3"),
    ("d = {:}\nd[(1, [2])] = 1", TypeErr, "got a vector of length 1", "3:3"),
    ('d = {"a": 1}\nd[0:1]', IndexErr, "a dictionary is read by key: ranges and ':' pick positions", "3:3"),
    ('d = {"a": 1}\nd[:]', IndexErr, "a dictionary is read by key", "3:3"),
    ('d = {"a": 1}\nd[end]', IndexErr, "'end' means the last position, and a dictionary's keys are not positions", "3:3"),
    ('d = {"abc": 1}\nd["abd"]', KeyErr, 'the dictionary has no key "abd"; did you mean "abc"? (1 key: "abc"); '
                                         "get(d, key, default) reads a key that may be missing", "3:3"),
    ('d = {1: 1}\nx = d["1"]', KeyErr, 'no key "1"; it has the number key 1', "3:7"),
    ('d = {"2": 1}\nx = d[2]', KeyErr, 'no key 2; it has the string key "2"', "3:7"),
    ("d = {:}\nd[1, 2] += 1", KeyErr, "the dictionary has no key (1, 2) (0 keys)", "3:3"),
    ("n = {}\nn[\"a\"] = 1", TypeErr, "cannot assign into a record by index; {} is an empty record: an empty "
                                      "dictionary is {:} (or dict())", "3:1"),
    ("r = {a = 1}\nr[\"a\"]", TypeErr, "records are read by field name (r.name), not by index", "3:1"),
])
def test_key_errors_name_the_key_at_its_place(src, kind, message, where):
    err = error(src)
    assert isinstance(err, kind), err
    assert message in err.message
    assert place(err) == where


def test_a_missing_key_is_also_a_python_key_error():
    err = error('{"a": 1}["b"]')
    assert isinstance(err, KeyError) and err.kind == "KeyError"


# ---- value semantics ----------------------------------------------------------------------------
def test_assignment_copies():
    interp, out = run('d = {"a": 1}\ne = d\ne["a"] = 2\ne["b"] = 3\nprint(d, e)\n'
                      'fn bump(x)\n  x["a"] += 10\n  return x\nend\nf = bump(d)\nprint(d, f)\n'
                      't = (d, d)\nd["a"] = 0\nprint(t, d)')
    assert out.splitlines() == ['{"a": 1} {"a": 2, "b": 3}', '{"a": 1} {"a": 11}',
                                '({"a": 1}, {"a": 1}) {"a": 0}']


def test_a_loop_over_a_dictionary_walks_its_keys_as_they_were():
    _, out = run('d = {"a": 1, "b": 2}\nfor k in d\n  d[k + "!"] = d[k]\n  print(k)\nend\nprint(len(d), keys(d))')
    assert out.splitlines() == ["a", "b", '4 ("a", "b", "a!", "b!")']


OPS = st.lists(st.tuples(st.integers(0, 3),                       # which earlier version to start from
                         st.sampled_from(["set", "remove", "read"]),
                         st.sampled_from(["a", "b", "c", 1.0, (1.0, 2.0)]),
                         st.integers(-5, 5)), max_size=40)


@given(OPS)
@settings(max_examples=examples(150), deadline=None)
def test_every_version_keeps_its_items_under_any_order_of_changes(ops):
    """Values are immutable: each version (kept in `versions`, as variables keep them) equals the
    Python dict that the same changes give, however versions are changed and read in between
    (the shared store is moved back and forth between them)."""
    versions, models = [Dict()], [{}]
    for which, op, key, n in ops:
        i = which % len(versions)
        d, m = versions[i], models[i]
        if op == "set":
            versions.append(d.with_item(key, float(n)))
            models.append({**m, key: float(n)})
        elif op == "remove" and key in m:
            versions.append(d.without(key))
            models.append({k: v for k, v in m.items() if k != key})
        else:
            assert d.get(key, None) == m.get(key)
        for v, mm in zip(versions, models):
            assert list(v.items()) == list(mm.items())


def test_counting_in_a_loop_does_not_copy_the_dictionary():
    """The newest version is changed in place (values.Dict): setting a key in a dictionary of n keys
    costs the same for any n. Measured by the work done, not by time: the store is one object."""
    d = Dict()
    for i in range(1000):
        d = d.with_item(float(i), float(i))
    store = d._store
    d2 = d.with_item("x", 1.0)
    assert d2._store is store and d._store is None        # the old version holds an undo, not a copy
    assert d.get("x", None) is None and len(d) == 1000       # reading the old one moves the store back
    assert d._store is store and d2._store is None
    assert d2.get("x") == 1.0 and len(d2) == 1001 and d2._store is store


# ---- equality and printing --------------------------------------------------------------------------
def test_equality_is_by_keys_and_values_in_any_order():
    assert value('{"p": 1, "q": [1, 2]} == {"q": [1, 2], "p": 1}') is True
    assert value('{"p": 1} == {"p": 2}') is False
    assert value('{"p": 1} == {"p": 1, "q": 2}') is False
    assert value('{"p": 1} != {p = 1}') is True
    assert value("{1: 2} == {1.0: 2}") is True


# what prints exactly: numbers of up to 7 significant digits (the printer's rule), strings without
# braces (a brace in a string literal starts an interpolation; the printer writes strings as they are)
TEXT = st.text(st.characters(blacklist_characters="{}", blacklist_categories=("Cs",)), max_size=6)
NUMBER = st.one_of(st.integers(-2 ** 53 + 1, 2 ** 53 - 1).map(float),
                   st.tuples(st.integers(-9999, 9999), st.sampled_from([2, 4, 8, 1000])).map(lambda p: p[0] / p[1]))
KEYS = st.recursive(st.one_of(TEXT, NUMBER), lambda inner: st.tuples(inner, inner), max_leaves=4)
VALUES = st.recursive(st.one_of(st.none(), st.booleans(), TEXT, NUMBER,
                                st.lists(st.integers(-9, 9).map(float), min_size=1, max_size=3)
                                .map(lambda xs: np.array(xs))),
                      lambda inner: st.one_of(st.tuples(inner, inner),
                                              st.dictionaries(KEYS, inner, max_size=3).map(Dict)),
                      max_leaves=6)


@given(st.dictionaries(KEYS, VALUES, max_size=6))
@settings(max_examples=examples(150), deadline=None)
def test_a_printed_dictionary_reads_back_as_an_equal_one(items):
    """The printer writes a dictionary as its literal: it parses and evaluates to an equal one."""
    d = Dict({dict_key(k): v for k, v in items.items()})
    text = format_value(d)
    back = value(text)
    assert isinstance(back, Dict) and values_equal(back, d), text
    assert back.keys() == d.keys()
    assert format_value(back) == text


def test_printing_and_display():
    assert format_value(Dict()) == "{:}"
    assert format_value(value('{"a": "x", (1, 2): [1, 2; 3, 4], 0.5: {:}}')) == \
        '{"a": "x", (1, 2): [1, 2; 3, 4], 0.5: {:}}'
    assert value('str({"a": 1})') == '{"a": 1}' and value('"{ {"k": 2} }"') == '{"k": 2}'
    from tapeml.array.display import display_value
    big = value('dict(map(fn(i) -> ("key {i}", zeros(3, 4) + i), 0:30))')
    shown = display_value(big, width=60, height=12)
    assert shown.splitlines()[0] == "dict of 31 keys, 372 numbers:"
    assert shown.splitlines()[1].split() == ['["key', '0"]', "3x4", "matrix"]


# ---- the builtins -----------------------------------------------------------------------------------
def test_dictionary_builtins_follow_python():
    d = value('dict(zip(("x", "y", "z"), [1, 2, 3]))')
    assert as_python(d) == {"x": 1.0, "y": 2.0, "z": 3.0}
    assert value("keys(d)", d=d) == ("x", "y", "z") and value("values(d)", d=d) == (1.0, 2.0, 3.0)
    assert value("items(d)", d=d) == (("x", 1.0), ("y", 2.0), ("z", 3.0))
    assert value("dict(items(d)) == d", d=d) is True
    assert value('get(d, "y")', d=d) == 2.0 and value('get(d, "q", 0)', d=d) == 0.0
    assert value('get(d, "q")', d=d) is None
    assert as_python(value('remove(d, "y")', d=d)) == {"x": 1.0, "z": 3.0} and len(d) == 3
    assert value("len(d)", d=d) == 3.0 and value("len({:})") == 0.0
    assert as_python(value("dict({lr = 0.1, steps = 3})")) == {"lr": 0.1, "steps": 3.0}
    assert value("tuple([1, 2])") == (1.0, 2.0) and value('tuple("ab")') == ("a", "b")
    assert value("tuple(d)", d=d) == ("x", "y", "z") and value("map(upper, d)", d=d) == ("X", "Y", "Z")
    assert value('contains(d, "x")', d=d) is True and value('contains(d, "q")', d=d) is False
    assert value("contains(d, [1, 2])", d=d) is False and value("contains({1: 0}, 1.0)") is True
    assert value('type({"a": 1})') == "dict"


@pytest.mark.parametrize("src, kind, message", [
    ("keys({a = 1})", TypeErr, "keys(): d must be a dictionary, got a record; a record's field names: fields(r)"),
    ('get([1, 2], "a")', TypeErr, "get(): d must be a dictionary, got a vector of length 2"),
    ('remove({"a": 1}, "b")', KeyErr, 'remove(): the dictionary has no key "b"'),
    ("dict((1, 2))", TypeErr, "dict(): item 0 of pairs is a number; each item must be a (key, value) pair"),
    ("dict(((true, 1),))", TypeErr, "dict(): a dictionary key is a string, a number or a tuple of those, got a bool"),
    ("get({:}, [1])", TypeErr, "get(): a dictionary key is a string"),
])
def test_dictionary_builtin_errors(src, kind, message):
    err = error(src)
    assert isinstance(err, kind) and message in err.message, err
    assert place(err) == "2:1"


def test_a_dictionary_of_parameters_is_a_tree_for_grad():
    torch = pytest.importorskip("torch")
    w = np.array([[1.0, -2.0], [0.5, 3.0]])
    b = np.array([0.25, -1.0])
    g = value('grad(fn(p) -> sum(tanh([1, 2] @ p["W"] + p[("b", 0)]) ^ 2), {"W": w, ("b", 0): b})', w=w, b=b)
    assert isinstance(g, Dict) and g.keys() == ("W", ("b", 0.0))
    tw, tb = torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True)
    (torch.tanh(torch.tensor([1.0, 2.0], dtype=torch.float64) @ tw + tb) ** 2).sum().backward()
    np.testing.assert_allclose(g.get("W"), tw.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(g.get(("b", 0.0)), tb.grad.numpy(), rtol=1e-12)
    assert as_python(value('tree_map(fn(p, g) -> p - g, {"a": 1, "b": 2}, {"b": 1, "a": 1})')) == {"a": 0.0, "b": 1.0}
    assert value('param_count({"w": zeros(2, 3), "b": 1})') == 7.0


# ---- JSON and CSV -------------------------------------------------------------------------------------
def test_json_objects_with_keys_that_are_not_names_are_dictionaries(tmp_path):
    p = tmp_path / "models.json"
    doc = {"gpt2": {"n_layer": 12, "n_embd": 768}, "gpt2-medium": {"n_layer": 24, "n_embd": 1024},
           "1": [1, 2]}
    p.write_text(json.dumps(doc), encoding="utf-8")
    r = value("read_json(p)", p=str(p))
    assert isinstance(r, Dict) and r.keys() == ("gpt2", "gpt2-medium", "1")
    assert isinstance(r.get("gpt2-medium"), Record) and r.get("gpt2-medium").fields["n_layer"] == 24.0
    assert value('read_json(p)["gpt2-medium"].n_embd', p=str(p)) == 1024.0
    every = value('read_json(p, objects="dict")', p=str(p))
    assert isinstance(every.get("gpt2"), Dict)
    out = tmp_path / "back.json"
    interp, _ = run("write_json(o, read_json(p))", p=str(p), o=str(out))
    assert json.loads(out.read_text(encoding="utf-8")) == doc
    err = error(f'read_json("{p}", objects="record")')
    assert isinstance(err, ValueErr) and 'objects must be one of "auto", "dict"' in err.message


def test_write_json_refuses_keys_that_are_not_strings(tmp_path):
    err = error(f'write_json("{tmp_path / "x.json"}", {{"a": {{(1, 2): 3}}}})')
    assert isinstance(err, TypeErr) and place(err) == "2:1"
    assert 'write_json(): ["a"] has the key (1, 2); the keys of a JSON object are strings' in err.message


def test_save_refuses_a_dictionary_clearly(tmp_path):
    err = error(f'save("{tmp_path / "c.npz"}", {{w = [1, 2], vocab = {{"a": 1}}}})')
    assert isinstance(err, TypeErr)
    assert "save(): vocab is a dictionary; a checkpoint holds numbers and matrices in records and tuples" in err.message


def _reference_columns(text: str) -> dict:
    """The columns as Python's csv module and float() read them (pandas' rule: an empty cell in a
    numeric column is nan)."""
    rows = [r for r in csv.reader(io.StringIO(text)) if r]
    names, body = rows[0], rows[1:]
    out = {}
    for j, name in enumerate(names):
        cells = [r[j] for r in body]
        try:
            nums = [float("nan") if c.strip() == "" else float(c) for c in cells]
            if all(c.strip() == "" for c in cells):
                raise ValueError
            out[name] = np.array(nums)
        except ValueError:
            out[name] = tuple(cells)
    return out


def test_read_columns_reads_numbers_and_text_by_name(tmp_path):
    text = ('species,sepal length,petal,"note, quoted",empty\n'
            'setosa,5.1,1.4,"a, b",\n'
            'virginica,6.3,,plain,\n'
            '\n'
            'versicolor,-0.0,1e-3,"x ""y""",\n')
    p = tmp_path / "iris.csv"
    p.write_text(text, encoding="utf-8")
    got = value("read_columns(p)", p=str(p))
    want = _reference_columns(text)
    assert isinstance(got, Dict) and list(got.keys()) == list(want)
    for name, col in want.items():
        if isinstance(col, tuple):
            assert got.get(name) == col
        else:
            np.testing.assert_array_equal(got.get(name), col)
    assert value('mean(read_columns(p)["sepal length"])', p=str(p)) == pytest.approx((5.1 + 6.3 - 0.0) / 3)


@pytest.mark.parametrize("text, message", [
    ("a,b,a\n1,2,3\n", 'line 1: the column name "a" is given twice (columns 1 and 3)'),
    ("a,b\n1,2\n3\n", "line 3 has 1 field, but the header (line 1) names 2"),
])
def test_read_columns_errors(tmp_path, text, message):
    p = tmp_path / "bad.csv"
    p.write_text(text, encoding="utf-8")
    err = error(f'read_columns("{p}")')
    assert err.kind == "IOError" and message in err.message and place(err) == "2:1"


def test_read_csv_points_at_read_columns_for_text(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("a,b\n1,x\n", encoding="utf-8")
    err = error(f'read_csv("{p}")')
    assert "read_columns(path) reads a table with text columns" in err.message


# ---- tuples where vectors go -----------------------------------------------------------------------
def test_stack_concat_and_vector_take_what_map_returns():
    np.testing.assert_array_equal(value("stack(map(fn(i) -> [i, i ^ 2], 1:3))"), [[1, 1], [2, 4], [3, 9]])
    np.testing.assert_array_equal(value("stack(map(fn(i) -> i * 2, [1, 2]))"), [2, 4])
    np.testing.assert_array_equal(value("concat(map(fn(n) -> zeros(n) + n, (1, 2)))"), [1, 2, 2])
    np.testing.assert_array_equal(value("concat(0, [1, 2], 3)"), [0, 1, 2, 3])
    np.testing.assert_array_equal(value("vector(map(len, (\"to\", \"be\", \"or\")))"), [2, 2, 2])
    np.testing.assert_array_equal(value("vector((true, false))"), [True, False])
    assert value("vector(())").shape == (0,) and value("vector(2)").tolist() == [2.0]
    np.testing.assert_array_equal(value("stack(map(fn(r) -> r * 2, [1, 2; 3, 4]), dim=1)"), [[2, 6], [4, 8]])


@pytest.mark.parametrize("src, message", [
    ("stack(())", "stack() of an empty tuple: there is nothing to join"),
    ('stack(([1, 2], "a"))', "stack() joins matrices and numbers, got a string (item 1)"),
    ('vector((1, "a"))', "vector(): xs is a tuple, whose items must be numbers to make a vector, but item 1 is a string"),
    ("vector((1, true))", "vector(): xs is a tuple mixing bools and numbers"),
    ("vector(zeros(2, 2))", "vector(): xs is a 2x2 matrix; a vector has one axis"),
    ("concat(1, zeros(2, 2))", "concat() joins numbers only with vectors, along dim 0"),
    ('sum((1, "a"))', "sum(): x is a tuple, whose items must be numbers to make a vector, but item 1 is a string"),
    ("max(())", "max() of an empty matrix"),
])
def test_tuple_joining_errors(src, message):
    err = error(src)
    assert message in err.message and place(err) == "2:1", err


def test_reductions_of_a_tuple_of_numbers_are_numpys():
    t = (3.0, -1.0, 4.0, 1.5)
    v = np.array(t)
    assert value("sum(t)", t=t) == v.sum() and value("max(t)", t=t) == v.max()
    assert value("min(t)", t=t) == v.min() and value("mean(t)", t=t) == v.mean()
    assert value("argmax(t)", t=t) == float(v.argmax()) and value("argmin(t)", t=t) == float(v.argmin())
    assert value("sum(())") == 0.0
    assert value("max(map(len, (\"a\", \"abc\")))") == 3.0


def test_gradients_through_tuples_made_vectors_match_finite_differences_and_torch():
    torch = pytest.importorskip("torch")
    x0 = np.array([0.3, -1.2, 2.0])
    src = "grad(fn(x) -> sum(vector(map(fn(e) -> e ^ 2, x)) * [1, 2, 3]) + max((x[0], x[2])) " \
          "+ sum(stack(map(fn(e) -> [e, 2 * e], x)) ^ 2) + sum(concat(x[1], x)), x0)"
    g = value(src, x0=x0)

    def f(x):
        return float(np.sum(x ** 2 * [1, 2, 3]) + max(x[0], x[2]) + np.sum(np.stack([x, 2 * x], 1) ** 2)
                     + np.sum(np.concatenate([[x[1]], x])))
    np.testing.assert_allclose(g, fd_grad(f, x0, device=False), rtol=1e-6, atol=1e-6)
    t = torch.tensor(x0, requires_grad=True)
    (torch.sum(t ** 2 * torch.tensor([1.0, 2, 3], dtype=torch.float64)) + torch.max(t[0], t[2])
     + torch.sum(torch.stack([t, 2 * t], 1) ** 2) + torch.sum(torch.cat([t[1:2], t]))).backward()
    np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-12)


def test_a_tuple_indexed_by_a_vector_picks_items():
    t = ("a", "b", "c", "d")
    assert value("t[[0, 2]]", t=t) == ("a", "c") and value("t[[3, 3, 0]]", t=t) == ("d", "d", "a")
    assert value("t[[true, false, true, false]]", t=t) == ("a", "c") and value("t[[]]", t=t) == ()
    assert value("t[[1]]", t=t) == ("b",) and value("t[1]", t=t) == "b"
    assert value("t[argsort([3, 1, 2, 0])]", t=t) == tuple(np.array(t)[np.argsort([3, 1, 2, 0])])
    err = error('t = ("a", "b")\nt[[0, 5]]')
    assert isinstance(err, IndexErr) and "index 5 is out of range for a tuple of 2 items" in err.message
    assert place(err) == "3:3"


def test_a_vector_unpacks_into_names():
    interp, _ = run("a, b = [3, 9]\nr, s = [1, 2; 3, 4]\nlo, hi = size(zeros(2, 5))")
    assert interp.get_variable("a") == 3.0 and interp.get_variable("b") == 9.0
    np.testing.assert_array_equal(interp.get_variable("s"), [3, 4])
    assert interp.get_variable("hi") == 5.0
    _, out = run("for x, y in [1, 2; 3, 4]\n  print(x + y)\nend")
    assert out.split() == ["3", "7"]
    interp, _ = run("fn prod_of(v)\n  a, b = v\n  return a * b\nend\ng = grad(prod_of, [2, 5])")
    np.testing.assert_array_equal(interp.get_variable("g"), [5, 2])       # the elements keep the tape


@pytest.mark.parametrize("src, kind, message, where", [
    ("a, b = [1, 2, 3]", ValueErr, "cannot unpack a vector of length 3 into 2 names", "2:1"),
    ("a, b = zeros(3, 2)", ValueErr, "cannot unpack a 3x2 matrix (3 rows) into 2 names", "2:1"),
    ("a, b = 5", TypeErr, "cannot unpack a number into 2 names; the right side must be a tuple or a vector", "2:8"),
    ('a, b = {"x": 1, "y": 2}', TypeErr, "for its keys write a, b = keys(d)", "2:8"),
])
def test_unpacking_errors(src, kind, message, where):
    err = error(src)
    assert isinstance(err, kind) and message in err.message and place(err) == where, err


def test_number_keys_print_in_full_so_two_keys_never_print_alike():
    """Found by a newcomer: 0.123456789 and 0.12345679 both printed as 0.1234568, and the
    KeyError listed two equal-looking keys; 2^53 printed as 9.007199e15. Keys print as the
    shortest text that reads back as that key, and the printed dictionary reads back equal."""
    from support import run
    interp = run('d = {0.123456789: "a", 0.12345679: "b", 2^53: 3, (1.5, 1e300): 4, 1e-7: 5}\n'
                 'print(d)\ne = {0.123456789: "a", 0.12345679: "b", 9007199254740992: 3, (1.5, 1e300): 4, 1e-7: 5}\n'
                 'print(d == e)')
    assert interp.out.getvalue() == ('{0.123456789: "a", 0.12345679: "b", 9007199254740992: 3, (1.5, 1e300): 4, '
                                     '1e-7: 5}\ntrue\n')
    from support import error_of
    msg = str(error_of('d = {0.123456789: "a", 0.12345679: "b"}\nd[0.1234568]'))
    assert "no key 0.1234568 (2 keys: 0.123456789, 0.12345679)" in msg


def test_a_record_indexed_by_one_of_its_field_names_says_write_the_field():
    """Found by a newcomer: read_json gives a record for an inner object whose keys are names, and
    c["gpt2-medium"]["n_layer"] failed pointing only at the dictionary literal."""
    from support import error_of
    e = error_of('c = {gpt = {n_layer = 2}}\nc["gpt"]')
    assert e.message == "records are read by field name (r.name), not by index; this record has the field: write .gpt"
    assert (e.span.line, e.span.col) == (2, 1)
    e = error_of('c = {gpt = 1}\nc["x"]')
    assert 'from Python: a tapeml.Dict; read_json(path, objects="dict")' in e.message
