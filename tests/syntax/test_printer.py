"""The printer and the parser agree (issue 17): the printed text of any array of rank 0-2,
empty ones included, evaluates to the same shape, kind and values. A trailing ';' is a
one-row matrix in both; a whole number below 2^53 prints every digit."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from conftest import examples
from support import echoed, on_host, variables_after

from tapeml.syntax.parser import parse
from tapeml.syntax.unparse import unparse
from tapeml.array.printer import format_number, format_value

WHOLE = 2 ** 53 - 1
PROPERTY = settings(max_examples=examples(400), deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

# values that print exactly: small integers, halves, whole numbers below 2^53, and numbers of
# at most 7 significant digits at any scale (1234567e-20)
EXACT = st.one_of(
    st.integers(-100, 100).map(float),
    st.integers(-1000, 1000).map(lambda k: k / 2),
    st.integers(-WHOLE, WHOLE).map(float),
    st.builds(lambda m, e: float(f"{m}e{e}"), st.integers(-9_999_999, 9_999_999), st.integers(-30, 30)),
)
SHAPES = st.integers(0, 2).flatmap(lambda rank: hnp.array_shapes(min_dims=rank, max_dims=rank,
                                                                  min_side=0, max_side=4))
NUMERIC = SHAPES.flatmap(lambda s: hnp.arrays(np.float64, s, elements=EXACT))
BOOLEAN = SHAPES.flatmap(lambda s: hnp.arrays(np.bool_, s))


def evaluate(text: str, interp=None):
    """The value of the expression `text`, as the REPL would echo it."""
    got = echoed(text, interp)
    assert len(got) == 1, text
    return on_host(got[0])


def check_reads_back(a: np.ndarray, interp=None) -> None:
    value = a[()] if a.ndim == 0 else a           # a number is a float, not a 0-d array
    text = format_value(value)
    back = evaluate(text, interp)
    if a.ndim == 0:
        assert isinstance(back, (float, bool)) and not isinstance(back, np.ndarray), text
        assert back == a[()], text
        return
    assert isinstance(back, np.ndarray), text
    assert back.shape == a.shape, f"{text} read back as shape {back.shape}, printed from {a.shape}"
    assert (back.dtype == np.bool_) == (a.dtype == np.bool_), text
    np.testing.assert_array_equal(back, a, err_msg=text)


@PROPERTY
@given(NUMERIC)
def test_printed_numeric_arrays_read_back(a):
    check_reads_back(a)


@PROPERTY
@given(BOOLEAN)
def test_printed_bool_arrays_read_back(a):
    check_reads_back(a)


F32_EXACT = st.one_of(st.integers(-2 ** 24, 2 ** 24).map(float),
                      st.integers(-1000, 1000).map(lambda k: k / 4),
                      st.integers(0, 2 ** 24).map(lambda k: float(np.float32(k * 1024.0 + 1.0))))


@settings(max_examples=examples(150), deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(SHAPES.filter(lambda s: len(s) > 0).flatmap(lambda s: hnp.arrays(np.float32, s, elements=F32_EXACT)))
def test_float32_prints_the_stored_value_and_reads_back(f32, a):
    """In float32 the stored number is printed (every digit when whole), and it reads back."""
    text = format_value(a)
    back = evaluate(text, f32)
    assert back.dtype == np.float32 and back.shape == a.shape, text
    np.testing.assert_array_equal(back, a, err_msg=text)


def test_empty_vectors_follow_float32_too(f32):
    """[] reads back in the session's float type, as do the other empty vectors (1:0, range(0))."""
    g = variables_after("a = []\nb = 1:0\nc = range(0)\nd = range(5, 1)\ne = zeros(0)", f32)
    for name in "abcde":
        assert g[name].dtype == np.float32 and g[name].shape == (0,), name


# ---- the rules, one value each ---------------------------------------------------------------
@pytest.mark.parametrize("value, text", [
    (np.array([1.0, 2.0]), "[1, 2]"),
    (np.array([[1.0, 2.0]]), "[1, 2;]"),
    (np.array([[5.0]]), "[5;]"),
    (np.array([[1.0], [2.0]]), "[1; 2]"),
    (np.array([[1.0, 2.0], [3.0, 4.0]]), "[1, 2; 3, 4]"),
    (np.zeros(0), "[]"),
    (np.zeros((1, 0)), "zeros(1, 0)"),
    (np.zeros((0, 3)), "zeros(0, 3)"),
    (np.zeros((0, 0)), "zeros(0, 0)"),
    (np.zeros((2, 0, 3)), "zeros(2, 0, 3)"),
    (np.zeros((0, 3), dtype=bool), "zeros(0, 3) > 0"),
    (np.zeros(0, dtype=bool), "[] > 0"),
    (np.array([[True, False]]), "[true, false;]"),
    (np.ones((1, 2000)), "1x2000 matrix\n[1, 1, 1, ..., 1, 1, 1;]"),
    (np.arange(6.0).reshape(2, 1, 3), "2x1x3 array\n[0, :, :] = [0, 1, 2;]\n[1, :, :] = [3, 4, 5;]"),
])
def test_array_forms(value, text):
    assert format_value(value) == text


@pytest.mark.parametrize("x, text", [
    (18915328.0, "18915328"), (-4096.0, "-4096"), (123456789012.0, "123456789012"),
    (12345678.0, "12345678"), (1e7, "10000000"), (-0.0, "0"),
    (2.0 ** 53 - 1, "9007199254740991"), (-(2.0 ** 53 - 1), "-9007199254740991"),
    (2.0 ** 53, "9.007199e15"), (1e21, "1e21"),
    (1e7 + 0.5, "1e7"), (1234567.5, "1.234568e6"), (-1234567.5, "-1.234568e6"), (1000000.5, "1e6"),
    (999999.99, "1e6"), (999999.5, "999999.5"), (0.99999999, "1"),
    (123456.75, "123456.8"), (1 / 3, "0.3333333"), (1e-9, "1e-9"), (2.5e-12, "2.5e-12"),
    (np.float32(123456789), "123456792"), (np.float32(16777217), "16777216"), (np.float32(0.1), "0.1"),
])
def test_number_forms(x, text):
    assert format_number(x) == text


def test_seven_digits_alone_always_mean_that_whole_number():
    """No fraction prints as 7 or more digits alone: 1234567.5 is not shown as 1234568."""
    rng = np.random.default_rng(0)
    xs = np.concatenate([rng.uniform(-1e8, 1e8, 20000), rng.uniform(-2e6, 2e6, 20000),
                         rng.integers(-10 ** 7, 10 ** 7, 2000) + rng.uniform(-1e-3, 1e-3, 2000)])
    for x in xs:
        s = format_number(x)
        if len(s.lstrip("-")) >= 7 and "." not in s and "e" not in s:
            assert float(s) == x, (x, s)
    assert format_number(0.99999999) == "1" and format_number(-2.0000000001) == "-2"


# ---- the literal: a trailing ';' ---------------------------------------------------------------
@pytest.mark.parametrize("source, shape", [
    ("[1, 2;]", (1, 2)), ("[5;]", (1, 1)), ("[1, 2]", (2,)), ("[1; 2]", (2, 1)),
    ("[1, 2; 3, 4;]", (2, 2)), ("[[1, 2];]", (1, 2)), ("[[1, 2], 3;]", (1, 3)),
    ("[zeros(2, 2);]", (2, 2)), ("[1, 2;\n]", (1, 2)), ("[true, false;]", (1, 2)),
])
def test_trailing_semicolon_literal(source, shape):
    assert np.shape(evaluate(source)) == shape


def test_trailing_semicolon_is_the_same_tree_as_without_for_several_rows():
    assert parse("[1, 2; 3, 4;]") == parse("[1, 2; 3, 4]")
    assert parse("[1, 2;]") != parse("[1, 2]")
    assert unparse(parse("[1, 2;]")) == "[1.0, 2.0;]\n"
    assert unparse(parse("[1, 2; 3, 4;]")) == "[1.0, 2.0; 3.0, 4.0]\n"


@pytest.mark.parametrize("source, message", [
    ("[1, 2;;]", "expected"), ("[;]", "expected"), ("[1, 2,;]", "expected"),
])
def test_only_one_trailing_semicolon(source, message):
    from tapeml.syntax.errors import LangSyntaxError
    with pytest.raises(LangSyntaxError, match=message):
        parse(source)
