"""Issue 15, front end and limits: range ends, the number grammar, 0-d indexing, the one size
guard, Python wording, SIGTERM, and messages. Each kind has a property or sweep test."""
from __future__ import annotations

import io
import math
import os
import signal
import subprocess
import sys
import time
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tapeml.errors import IOErr, LangError, LangSyntaxError, ValueErr
from tapeml.interpreter import Interpreter, make_range
from tapeml.lexer import NUMBER, tokenize

TAPEML = [sys.executable, "-m", "tapeml.cli"]


def run(source: str) -> str:
    out = io.StringIO()
    Interpreter(out=out).run(source, "<test>")
    return out.getvalue()


def error_of(source: str) -> LangError:
    with pytest.raises(LangError) as info:
        run(source)
    return info.value


# ---- 6. range ends -----------------------------------------------------------------------------
def test_a_float_range_ends_exactly_at_its_end():
    assert run("print((0:0.1:0.3)[end] == 0.3, any((0:0.1:0.3) == 0.3), len(0:0.1:0.3))\n") == "true true 4\n"
    r = make_range(0.0, 0.1, 0.3)
    assert r[-1] == 0.3 and list(r[:-1]) == [0.0, 0.1, 0.2]      # interior: a + k*step
    assert make_range(1.0, -0.1, 0.7)[-1] == 0.7
    assert len(make_range(0.0, 1.0, 1 - 1e-11)) == 1              # far from b by more than rounding: left out
    assert list(make_range(0.0, 0.5, 1.2)) == [0.0, 0.5, 1.0]     # an end between steps is not reached


DEC = st.integers(-5000, 5000).map(lambda k: Decimal(k) / 100)
STEP = st.tuples(st.integers(1, 999), st.integers(0, 5), st.sampled_from([1, -1])).map(
    lambda t: Decimal(t[0] * t[2]) / Decimal(10) ** t[1])


@settings(max_examples=600, deadline=None)
@given(DEC, STEP, st.integers(0, 20_000))
def test_decimal_ranges_have_n_plus_one_elements_and_end_at_b(a, step, n):
    """a:step:b with b = a + n*step in decimal: n + 1 elements, interior a + k*step, last exactly b;
    range(a, b, step) has the n elements before b."""
    fa, fs, fb = float(a), float(step), float(a + n * step)
    r = make_range(fa, fs, fb)
    assert len(r) == n + 1
    assert r[-1] == fb
    k = np.arange(n)
    assert np.array_equal(r[:-1], fa + fs * k)
    from tapeml.builtins.arrays import range_
    h = range_(fa, fb, fs)
    assert len(h) == n and np.array_equal(h, fa + fs * k)


@settings(max_examples=300, deadline=None)
@given(DEC, STEP, st.integers(1, 2000), st.floats(0.05, 0.95))
def test_an_end_between_steps_is_never_passed(a, step, n, frac):
    fa, fs = float(a), float(step)
    fb = float(a + n * step) + frac * fs          # between step n and n + 1
    r = make_range(fa, fs, fb)
    assert len(r) == n + 1
    assert (r[-1] <= fb) if fs > 0 else (r[-1] >= fb)


@pytest.mark.parametrize("source, message", [
    ("x = 0:1e-320:1", "the range would have more than 1e308 elements; the limit is 1e8"),
    ("x = range(0, 1, 1e-320)", "range(): the range would have more than 1e308 elements; the limit is 1e8"),
    ("x = 0:1e8", "the range would have 1e8 elements; the limit is 1e8"),
    ("x = range(0, 1 / 0)", "range(): a, b and step must be finite"),
])
def test_ranges_too_long_are_clear_errors(source, message):
    err = error_of(source)
    assert isinstance(err, ValueErr) and err.message == message
    assert err.span is not None and err.span.line == 1


# ---- 8. the number grammar -------------------------------------------------------------------------
DIGITS = st.text("0123456789", min_size=1, max_size=6)
EXPONENT = st.one_of(st.just(""), st.tuples(st.sampled_from("eE"), st.sampled_from(["", "+", "-"]), DIGITS)
                     .map("".join))
LITERAL = st.one_of(
    st.tuples(DIGITS, EXPONENT).map("".join),                                     # 12, 1e3
    st.tuples(DIGITS, st.just("."), st.one_of(st.just(""), DIGITS), EXPONENT).map("".join),   # 1., 1.5, 1.e3
    st.tuples(st.just("."), DIGITS, EXPONENT).map("".join),                       # .5, .5e-2
)


def number_tokens(text: str):
    return [t for t in tokenize(text, "<n>") if t.kind not in ("NEWLINE", "EOF")]


@settings(max_examples=1500, deadline=None)
@given(LITERAL)
def test_every_literal_of_the_grammar_is_one_number_with_pythons_value(text):
    toks = number_tokens(text)
    assert [t.kind for t in toks] == [NUMBER] and toks[0].text == text
    assert toks[0].value == float(text) or (math.isnan(float(text)) and math.isnan(toks[0].value))


@settings(max_examples=1500, deadline=None)
@given(st.text("0123456789.eE+-_", min_size=1, max_size=10))
def test_a_whole_number_token_always_agrees_with_float(text):
    """Any text over the number alphabet: when the lexer makes one NUMBER of all of it, float()
    reads the same value; it never takes what float() refuses (e.g. '1e', '1_0', '..')."""
    try:
        toks = number_tokens(text)
    except LangSyntaxError:
        return
    if len(toks) == 1 and toks[0].kind == NUMBER:
        assert toks[0].text == text
        assert "_" not in text
        assert toks[0].value == float(text)


def test_number_grammar_cases():
    assert run("print(1.e3, 1.E+5, 1.e-3, 1., .5e1, 2.5e2, 0.e0, 00.5)\n") == "1000 100000 0.001 1 5 250 0 0.5\n"
    assert run("x = {e3 = 4}\nprint(x.e3)\n") == "4\n"                # a name's field is still a field
    assert "cannot read field 'e3' of a number" in error_of("print(1.5.e3)").message
    assert "cannot read field 'e' of a number" in error_of("print(1.e)").message
    assert error_of("print(1_000)").message == "numbers are written without '_' separators: write 1000 for 1_000"
    assert "undefined name 'inf'" in error_of("print(inf)").message   # inf and nan are not literals
    assert run("print(1.:3, 0:1.:2)\n") == "[1, 2, 3] [0, 1, 2]\n"


# ---- 10. a 0-d matrix indexed, assigned ------------------------------------------------------------
def test_zeros_of_no_size_is_indexed_as_the_number_it_holds():
    assert run("print(zeros()[0], zeros()[end], zeros()[0:0], zeros()[:], zeros()[[0, 0]], 5[0])\n") == \
        "0 0 [0] [0] [0, 0] 5\n"
    assert run("x = zeros()\nx[0] = 3\nprint(x, size(x))\nx[end] += 1\nprint(x)\n") == "3 ()\n4\n"
    err = error_of("x = zeros()\nx[1] = 3\n")
    assert "index 1 is out of range" in err.message and (err.span.line, err.span.col) == (2, 3)
    err = error_of("x = zeros()\nx[:] = [1, 2]\n")
    assert err.message == "cannot assign a vector of length 2 to a single element"
    assert run("print(grad(fn(v) -> (zeros() + v)[0] * 3, 2))\n") == "3\n"
