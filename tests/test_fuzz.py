"""Fuzzing the lexer, parser and interpreter with hypothesis (issue 9).

Every input ends in a value or a LangError whose span lies inside the input (a line that
exists, a column within that line or just past its end). Any other exception fails.
Bounded: each test runs a fixed number of examples with no per-example deadline; the
counts are printed in the summary by `pytest -s` through `EXAMPLES` below.
"""
from __future__ import annotations

import io
import os
import random
import signal

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tapeml import ast as A
from tapeml.errors import LangError, render
from tapeml.interpreter import Interpreter
from tapeml.lexer import KEYWORDS, OPERATORS, tokenize
from tapeml.parser import parse
from tapeml.unparse import unparse

EXAMPLES = int(os.environ.get("TAPEML_FUZZ_EXAMPLES", "2000"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=False, database=None,
                suppress_health_check=list(HealthCheck))


# ---- the property every run must satisfy --------------------------------------------------
def check_span(err: LangError, source: str, filename: str = "<fuzz>") -> None:
    """The error has a place inside `source`: a line that exists (1..number of lines, where
    the text after the last newline counts as a line) and a column within it (1..len+1)."""
    assert err.span is not None, f"{err.kind} without a place: {err.message}"
    span = err.span
    if span.file != filename:      # an error inside an imported or stdlib file: not this input
        return
    lines = source.split("\n")
    assert 1 <= span.line <= len(lines), f"line {span.line} outside 1..{len(lines)}: {err}"
    width = len(lines[span.line - 1])
    assert 1 <= span.col <= width + 1, f"column {span.col} outside 1..{width + 1} on line {span.line}: {err}"
    assert isinstance(err.message, str) and err.message
    text = render(err, {filename: source})      # rendering never fails either
    assert err.kind in text


def lex_and_parse(source: str, lex_first: bool = True):
    """Tokenize then parse; a LangError must carry a valid span. Returns the tree or None."""
    if lex_first:
        try:
            tokenize(source, "<fuzz>")
        except LangError as e:
            check_span(e, source)
    try:
        return parse(source, "<fuzz>")
    except LangError as e:
        check_span(e, source)
        return None


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang("the program ran for more than 5 s")


def run_program(source: str):
    out = io.StringIO()
    interp = Interpreter(out=out)
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, 5.0)
    try:
        interp.run(source, "<fuzz>", echo=lambda v: None)
    except LangError as e:
        check_span(e, source)
        return e
    except Exception as e:
        raise AssertionError(f"{type(e).__name__}: {e}\nin the program:\n{source}") from e
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return None


def check_round_trip(tree) -> None:
    text = unparse(tree)
    again = parse(text, "<unparsed>")
    assert again == tree, f"round trip changed the tree:\n{text}"
    assert unparse(again) == text


# ---- 1. raw bytes and text through the lexer and parser -----------------------------------
@FUZZ
@given(st.binary(max_size=120))
def test_random_bytes_lex_and_parse(data):
    for source in (data.decode("utf-8", errors="replace"), data.decode("latin-1")):
        tree = lex_and_parse(source)
        if tree is not None:
            check_round_trip(tree)


ALPHABET = st.sampled_from(list("abxyz019_.eE+-*/^%@'\"\\:;,=<>!&|~#()[]{} \t\n\r") +
                           ["\u2212", "\uff03", "\u201c", "\u00a0", "é", "☃", "😀", "\x00", "\u2028"])


@FUZZ
@given(st.one_of(st.text(max_size=80), st.lists(ALPHABET, max_size=60).map("".join)))
def test_random_text_lex_and_parse(source):
    tree = lex_and_parse(source)
    if tree is not None:
        check_round_trip(tree)


# ---- 2. random token sequences through the parser ------------------------------------------
TOKENS = sorted(KEYWORDS) + OPERATORS + [
    "x", "y", "f", "r", "a1", "_", "0", "1", "2.5", "1e-9", "1e999", "3.", "\"s\"", "\"{x}\"",
    "\"a{1 + 2}b\"", "\"{{}}\"", "\n", "\n", ";", "(", ")", "[", "]", "fn", "end"]


@FUZZ
@given(st.lists(st.sampled_from(TOKENS), max_size=30), st.lists(st.booleans(), max_size=30))
def test_random_token_sequences_parse(tokens, spaces):
    parts = []
    for i, tok in enumerate(tokens):
        parts.append(tok)
        parts.append(" " if (i < len(spaces) and spaces[i]) else "")
    source = "".join(parts)
    tree = lex_and_parse(source)
    if tree is not None:
        check_round_trip(tree)
        run_program(source)


# ---- 3. well-formed programs from a grammar ------------------------------------------------
# The grammar is driven by a seeded random.Random: hypothesis draws the seed (fast: one draw
# per example instead of hundreds), and a failure message always shows the whole program.
NAMES = ["a", "b", "c", "x", "y"]
NUMBERS = ["0", "1", "2", "3", "-1", "-3", "5", "0.5", "2.5", "1e-9", "1e300", "1e999", "1e308",
           "3.0", "1e-320"]
LEAVES = ["true", "false", "none", '"s"', "[1, 2, 3]", "[1, 2; 3, 4]", "()", "{w = 1}", "[]"]
BUILTINS_1 = ["sum", "mean", "max", "min", "exp", "log", "sqrt", "abs", "tanh", "sin", "relu",
              "sigmoid", "softmax", "log_softmax", "len", "size", "type", "str", "transpose",
              "round", "argmax", "argmin", "stop_gradient", "print", "gelu", "cos", "range", "zeros",
              "ones", "eye", "cross_entropy", "norm", "cumsum", "var", "std"]
BUILTINS_2 = ["fill", "reshape", "concat", "stack", "clip", "zeros", "ones", "linspace", "where",
              "sum", "softmax", "max", "mean", "round", "size", "dense", "cross_entropy", "layer_norm",
              "scaled_dot_product_attention", "mse", "matmul", "dot", "outer", "grad", "value_and_grad"]
KEYWORDS_ARGS = ["dim", "causal", "mask", "eps", "tau", "nope", "bias", "digits"]
BINOPS = ["+", "-", "*", "/", "%", "^", "@", "==", "!=", "<", ">=", "and", "or"]
INDEX_ITEMS = [":", "end", "0", "1", "0:end", "end-1", "1.5", "-1", "1e300", "[0, 1]", "[true, false]",
               "0:1", "1:0", "0:2:end", "[]"]
GRAD_ARGS = ["[1, 2, 3]", "2.0", "{w = [1, 2], b = 0.5}", "(1, [2, 3])", "[0, 0]", "[1, -1; 2, 0]", "0"]
SIZES = ["2", "1e6, 1e6", "-1", "1.5", "1e300", "0", "2, 0", "none", "1e999", "2, 3", "(2, 2)"]


def gen_expr(rng, depth: int) -> str:
    if depth <= 0 or rng.random() < 0.15:
        return rng.choice(NUMBERS + NAMES + LEAVES)
    def sub():
        return gen_expr(rng, depth - 1)
    choice = rng.randint(0, 21)
    if choice == 0:
        return rng.choice(NUMBERS)
    if choice == 1:
        return rng.choice(NAMES)
    if choice == 2:     # binary operator
        return f"({sub()} {rng.choice(BINOPS)} {sub()})"
    if choice == 3:
        return f"({rng.choice(['-', '+', 'not '])}{sub()})"
    if choice == 4:     # matrix literal, sometimes ragged
        rows, cols = rng.randint(1, 3), rng.randint(1, 2)
        ragged = rng.random() < 0.2
        body = "; ".join(", ".join(sub() for _ in range(cols + (ragged and r == 1))) for r in range(rows))
        return f"[{body}{';' if rng.random() < 0.2 else ''}]"     # a trailing ';': one-row matrix
    if choice == 5:     # range
        lo, hi = rng.randint(-2, 3), rng.randint(-2, 6)
        if rng.random() < 0.5:
            return f"({lo}:{rng.choice(['1', '2', '-1', '0.5', '0', '1e-300'])}:{hi})"
        return f"({lo}:{hi})"
    if choice == 6:     # indexing
        items = [rng.choice(INDEX_ITEMS) if rng.random() < 0.7 else sub() for _ in range(rng.randint(1, 3))]
        return f"{rng.choice(NAMES)}[{', '.join(items)}]"
    if choice == 7:     # record literal or field
        if rng.random() < 0.5:
            return f"{{w = {sub()}, b = {sub()}}}"
        return f"{rng.choice(NAMES)}.{rng.choice(['w', 'b', 'z'])}"
    if choice == 8:     # tuple, maybe indexed
        n = rng.randint(0, 3)
        text = "(" + ", ".join(sub() for _ in range(n)) + ("," if n == 1 else "") + ")"
        if rng.random() < 0.5:
            text += f"[{rng.choice(['0', '1', 'end', '0:1', '5', ':'])}]"
        return text
    if choice == 9:     # anonymous function, called
        return f"(fn(x, y=2) -> {sub()})({sub()})"
    if choice == 10:    # builtin of one argument
        return f"{rng.choice(BUILTINS_1)}({sub()})"
    if choice == 11:    # builtin of two arguments, or one and a keyword
        name = rng.choice(BUILTINS_2)
        if rng.random() < 0.5:
            return f"{name}({sub()}, {sub()})"
        return f"{name}({sub()}, {rng.choice(KEYWORDS_ARGS)}={sub()})"
    if choice == 12:    # differentiation
        fname = rng.choice(["grad", "value_and_grad", "check_grad"])
        red = rng.choice(["sum", "mean", "max", ""])
        return f"{fname}(fn(x) -> {red}({sub()}), {rng.choice(GRAD_ARGS)})"
    if choice == 13:
        return f"{sub()}'"
    if choice == 14:    # interpolation with non-ASCII text
        return f"\"v={{ {sub()} }} é😀\""
    if choice == 15:
        return f"{rng.choice(['-', ''])}x^{sub()}"
    if choice == 16:
        return f"{sub()}[{sub()}]"
    if choice == 17:
        return f"(\"{rng.choice(['ab', 'é', ''])}\" * {rng.choice(NUMBERS)})"
    if choice == 18:    # sizes: fine, negative, fractional, huge
        return f"{rng.choice(['zeros(', 'ones(', 'fill(1, ', 'eye('])}{rng.choice(SIZES)})"
    if choice == 19:
        return f"{rng.choice(['f', 'g'])}({sub()})"
    if choice == 20:
        return f"(1:{rng.choice(['3', '1e300', '1e999', '-1e999', 'none', '[1, 2]'])})"
    return f"({sub()} {rng.choice(BINOPS)} {sub()})"


def gen_statement(rng, depth: int) -> list[str]:
    def e():
        return gen_expr(rng, rng.randint(1, 3))
    choice = rng.randint(0, 11 if depth > 0 else 5)
    name = rng.choice(NAMES)
    if choice == 0:
        return [f"{name} = {e()}"]
    if choice == 1:
        return [f"{name} {rng.choice(['+=', '-=', '*=', '/='])} {e()}"]
    if choice == 2:
        return [f"{name}[{rng.choice(INDEX_ITEMS)}] = {e()}"]
    if choice == 3:
        return [f"{name}.{rng.choice(['w', 'b'])} = {e()}"]
    if choice == 4:
        return [f"{e()}{rng.choice(['', ';'])}"]
    if choice == 5:
        return [f"{name}, {rng.choice(NAMES)} = {e()}"]
    inner = ["    " + line for _ in range(rng.randint(0, 3)) for line in gen_statement(rng, depth - 1)]
    if choice == 6:
        out = [f"if {e()}"] + inner
        if rng.random() < 0.5:
            out += [f"elif {e()}", f"    {name} = {e()}"]
        if rng.random() < 0.5:
            out += ["else", f"    {name} = {e()}"]
        return out + ["end"]
    if choice == 7:
        tail = rng.choice(["", "break", "continue", "if true\n        break\n    end"])
        return [f"for {name} in {e()}"] + inner + ["    " + tail, "end"]
    if choice == 8:     # a bounded while loop: one counter per nesting depth
        k = f"k{depth}"
        return [f"{k} = 0", f"while {k} < {rng.randint(0, 4)}", f"    {k} += 1"] + inner + ["end"]
    if choice == 9:     # a named function, sometimes recursive (bounded by x > 3)
        fname = rng.choice(["f", "g"])
        ret = e()
        last = rng.choice([ret, f"{fname}(x + 1)", "none", ""])
        return [f"fn {fname}(x, y=1)"] + inner + [
            "    if x > 3", f"        return {ret}", "    end", f"    return {last}", "end"]
    if choice == 10:
        return [f"fn {rng.choice(['f', 'g'])}(x) -> {e()}"]
    return [f"print({e()}, \"{{ {e()} }}\")"]


PRELUDE = "a = [1, 2, 3]\nb = [1, 2; 3, 4]\nc = {w = [0.5, 1], b = 2}\nx = 2\ny = (1, \"é\")\n"


def gen_program(seed: int) -> str:
    rng = random.Random(seed)
    lines = [line for _ in range(rng.randint(1, 3)) for line in gen_statement(rng, 2)]
    return PRELUDE + "\n".join(lines) + "\n"


SEEDS = st.integers(0, 2 ** 64 - 1)


@FUZZ
@given(SEEDS)
def test_generated_programs_run(seed):
    source = gen_program(seed)
    tree = lex_and_parse(source, lex_first=False)
    assert tree is not None, f"the grammar only makes well-formed programs:\n{source}"
    check_round_trip(tree)
    run_program(source)


@FUZZ
@given(SEEDS)
def test_generated_expressions_round_trip_and_run(seed):
    rng = random.Random(seed)
    source = PRELUDE + "print(" + gen_expr(rng, 4) + ")\n"
    tree = lex_and_parse(source, lex_first=False)
    assert tree is not None, source
    check_round_trip(tree)
    run_program(source)


# ---- 4. the round trip on fixed programs (readable failures) --------------------------------
ROUND_TRIP_CASES = [
    "-2^2", "2^-1", "2^3^2", "-x^2", "x''", "a:b:c", "x[0:end, :]", "(1,)", "()", "{a = 1, b = (2, 3)}",
    "f(1, k=2)", "(fn(x) -> x + 1)(2)", "fn f(a, b=2) -> a * b", "fn f(x)\n  return x\nend",
    "a, b = (1, 2)", "x[1, 2] = 5", "r.w.v += 1", "if a\n x\nelif b\n y\nelse\n z\nend",
    "for i in 0:3\n if i == 2\n  break\n end\nend", "while false\n continue\nend",
    '"a{x + 1}b{{c}}\\n\\t\\"\\\\"', '"{ {a = 1} }"', '"{ "in{1}" }"', "1e999", "[1, 2; 3, 4]'",
    "not not true", "x.w'", "3.'", "[]", "[[1, 2], 3]", "import(\"m.ml\")", "x;", "1e-320",
    "[1, 2;]", "[5;]", "[x;]'", "[1, 2; 3, 4;]", "[[1, 2];]",
]


@pytest.mark.parametrize("source", ROUND_TRIP_CASES)
def test_round_trip_cases(source):
    check_round_trip(parse(source))
    assert parse(unparse(parse(source))) == parse(source)


def test_unparse_is_fully_parenthesized():
    assert unparse(parse("-2^2")) == "-(2.0 ^ 2.0)\n"
    assert unparse(parse("1 + 2 * 3")) == "1.0 + (2.0 * 3.0)\n"
    assert unparse(parse("a - (b - c)")) == "a - (b - c)\n"
    assert unparse(parse("(a - b) - c")) == "(a - b) - c\n"
    assert unparse(parse('"x{1}"')) == '"x{1.0}"\n'


# ---- 5. corrupted checkpoints through load ------------------------------------------------------
_CHECKPOINT_DIR = None


def _checkpoint_dir():
    """One temporary directory with a good checkpoint, made once (hypothesis reruns the test body)."""
    global _CHECKPOINT_DIR
    if _CHECKPOINT_DIR is None:
        import tempfile
        _CHECKPOINT_DIR = tempfile.mkdtemp(prefix="tapeml_fuzz_")
        with open(os.path.join(_CHECKPOINT_DIR, "main.ml"), "w") as f:   # paths are relative to it
            f.write("# fuzz\n")
        Interpreter(out=io.StringIO()).run('save("good.npz", {w = [1, 2; 3, 4], b = (1, [5])})\n',
                                           os.path.join(_CHECKPOINT_DIR, "main.ml"))
    return _CHECKPOINT_DIR


@FUZZ
@given(st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=8), st.integers(0, 10_000))
def test_corrupted_checkpoints_load_or_fail_cleanly(flips, cut):
    pytest.importorskip("tapeml.builtins.io")
    folder = _checkpoint_dir()
    data = bytearray(open(os.path.join(folder, "good.npz"), "rb").read())
    for pos, byte in flips:
        data[pos % len(data)] = byte
    with open(os.path.join(folder, "bad.npz"), "wb") as f:
        f.write(bytes(data[: max(cut, 0)] if cut < len(data) else data))
    run_program_in(folder, 'x = load("bad.npz")\nprint(x)\n')


_LOADER = []


def run_program_in(folder: str, source: str):
    if not _LOADER:                       # one interpreter for all examples: load() keeps no state
        _LOADER.append(Interpreter(out=io.StringIO()))
    interp = _LOADER[0]
    try:
        interp.run(source, os.path.join(folder, "main.ml"))
    except LangError as e:
        check_span(e, source, os.path.join(folder, "main.ml"))
    except Exception as e:
        raise AssertionError(f"{type(e).__name__}: {e}") from e
