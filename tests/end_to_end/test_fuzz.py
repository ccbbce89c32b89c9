"""Fuzzing the lexer, parser and interpreter with hypothesis (issue 9).

Every input ends in a value or a LangError whose span lies inside the input (a line that
exists, a column within that line or just past its end), whose message has no Python or NumPy
wording (PYTHON_WORDING; issues 15 and 25) nor a doubled word ("of a a vector"; DOUBLED) and did
not come from a Python exception's text, and no Python warning is shown. Any other exception fails. tests/fuzz_long.py runs the same checks
over 50,000 programs or more, outside CI.
Bounded: each test runs a fixed number of examples with no per-example deadline: 100 in a plain
`pytest` (the first of the same derandomized draw), 2,000 under `pytest --slow` or TAPEML_SLOW=1 (CI);
TAPEML_FUZZ_EXAMPLES and TAPEML_FUZZ_BUILTIN_EXAMPLES set them (`EXAMPLES` below).
"""
from __future__ import annotations

import io
import os
import random
import re
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tapeml.syntax import ast as A
from tapeml.syntax.errors import LangError, render
from tapeml.evaluator.interpreter import Interpreter
from tapeml.syntax.lexer import KEYWORDS, OPERATORS, tokenize
from tapeml.syntax.parser import parse
from tapeml.syntax.unparse import unparse

from conftest import run_slow
from support import time_limit

LONG = run_slow()          # --slow / TAPEML_SLOW=1: the long form of every sweep below
EXAMPLES = int(os.environ.get("TAPEML_FUZZ_EXAMPLES", "2000" if LONG else "100"))
# The same programs every run (CI must not pass or fail by chance); TAPEML_FUZZ_RANDOM=1 draws new
# ones each run, and tests/fuzz_long.py runs 50,000+ with a seed of its own.
DERANDOMIZE = os.environ.get("TAPEML_FUZZ_RANDOM") != "1"
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=DERANDOMIZE, database=None,
                suppress_health_check=list(HealthCheck))
FUZZ_BUILTINS = settings(max_examples=int(os.environ.get("TAPEML_FUZZ_BUILTIN_EXAMPLES", "2000" if LONG else "100")),
                         deadline=None,
                         derandomize=DERANDOMIZE, database=None, suppress_health_check=list(HealthCheck))
FUZZ_DIR = __import__("tempfile").mkdtemp(prefix="tapeml_fuzz_builtins_")   # every path the fuzz writes
__import__("atexit").register(__import__("shutil").rmtree, FUZZ_DIR, True)


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


# Python's and NumPy's own words, which must never reach a user (issue 15, item 12): type and
# module names, C types, exception names, file paths, bytes reprs, 20-digit numbers.
PYTHON_WORDING = re.compile("|".join([
    r"\bnumpy\b", r"\bnp\.", r"ndarray", r"\bdtype\('", r"\b[u]?int(8|16|32|64)\b", r"\bC (long|int|double)\b",
    r"Python (int|float|object)", r"NoneType", r"object of type", r"'(int|float|str|list|tuple|dict|bool|bytes)' object",
    r"unsupported operand", r"not subscriptable", r"positional argument", r"invalid literal", r"could not convert",
    r"Traceback", r"File \"", r"\.py\b", r"line \d+, in", r"0-dimensional", r"too many indices", r"out of bounds",
    r"Maximum allowed", r"cannot convert float", r"\b[A-Z][a-z]+(Error|Warning|Exception)\b(?<!ShapeError)",
    r"math domain", r"operands could not", r"\baxis \d+ is out", r"codec can't", r"surrogates not allowed",
    r"\\x[0-9a-f]{2}", r"(?<!')\bb'", r"__\w+__", r"Errno", r"autodetected", r"\d{20,}", r"\bmatplotlib\b",
    r"\bscipy\b", r"\bkwargs?\b", r"\bbuiltins?\.", r"<class ", r"<function ",
    # Python's own messages for calls and blocks (issue 25), and NumPy's and the json/csv modules'
    r"outside (loop|function)\b", r"follows? keyword argument", r"keyword argument repeated", r"non-default argument",
    r"parameter without a default", r"multiple values for", r"unexpected keyword argument", r"required positional",
    r"object is not (callable|iterable)", r"values to unpack", r"division by zero", r"recursion depth",
    r"invalid syntax", r"unexpected EOF", r"while scanning", r"unexpected indent", r"unindent",
    r"cannot reshape array", r"zero-size array", r"empty sequence", r"need at least one array",
    r"not supported between instances", r"numpy boolean", r"\bnewaxis\b", r"\bufunc\b",
    r"Expecting (value|property|'.' delimiter)", r"\bExtra data\b", r"expected after '\"'",
]))
# a word written twice ("of a a vector": an article before a phrase that brings its own)
DOUBLED = re.compile(r"\b([a-z]+)\s+\1\b|\b(a|an|the)\s+(a|an|the)\b", re.IGNORECASE)
# our own kinds and the words tapeml uses on purpose
_OURS = re.compile(r"\b(SyntaxError|NameError|TypeError|ShapeError|IndexError|ValueError|RecursionError|IOError|"
                   r"InternalError)\b|\"numpy\"")      # "numpy": the name of tapeml's default device


def python_wording(message: str) -> str | None:
    """The first Python/NumPy phrase in a message (None when there is none)."""
    m = PYTHON_WORDING.search(_OURS.sub("", message))
    return m.group(0) if m else None


def doubled_word(message: str) -> str | None:
    """The first doubled word of a message ("a a", "the an"), outside quoted text (a user's name
    or string may hold anything)."""
    m = DOUBLED.search(re.sub(r"'[^']*'|\"[^\"]*\"", "''", message))
    return m.group(0) if m else None


def check_wording(err: LangError, source: str) -> None:
    assert not getattr(err, "python_text", False), \
        f"a Python exception's text reached the user: {err.kind}: {err.message}\nin the program:\n{source}"
    word = python_wording(err.message)
    assert word is None, f"Python/NumPy wording {word!r} in {err.kind}: {err.message}\nin the program:\n{source}"
    twice = doubled_word(err.message)
    assert twice is None, f"Python/NumPy wording: a doubled word {twice!r} in {err.kind}: {err.message}\n" \
                          f"in the program:\n{source}"


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


def run_program(source: str, seconds: float = 5.0):
    """Run one program: a value or a LangError with a span inside it and no Python wording;
    no Python warning either (what the user would see on stderr). The session's global state
    (dtype, figures) is reset after it."""
    out = io.StringIO()
    interp = Interpreter(out=out)
    try:
        with time_limit(seconds), warnings.catch_warnings(record=True) as seen:   # the filters in force stay
            try:
                interp.run(source, "<fuzz>", echo=lambda v: None)
            except LangError as e:
                check_span(e, source)
                check_wording(e, source)
                return e
            finally:
                shown = [f"{w.category.__name__}: {w.message}" for w in seen]
                assert not shown, f"Python warnings reached stderr: {shown}\nin the program:\n{source}"
    except AssertionError:
        raise
    except Exception as e:
        raise AssertionError(f"{type(e).__name__}: {e}\nin the program:\n{source}") from e
    finally:
        _reset_session()
    return None


def _reset_session() -> None:
    from tapeml.array import ops
    ops.set_dtype("float64")
    import sys
    plot = sys.modules.get("tapeml.builtins.plot")
    if plot is not None:
        plot.close_all()


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
           "3.0", "1e-320", "1.e3", ".5", "1.", "0.1", "2^53"]
LEAVES = ["true", "false", "none", '"s"', "[1, 2, 3]", "[1, 2; 3, 4]", "()", "{w = 1}", "[]", "zeros()",
          "{:}", '{"k": 1, (1, 2): [3]}']
BUILTINS_1 = ["sum", "mean", "max", "min", "exp", "log", "sqrt", "abs", "tanh", "sin", "relu",
              "sigmoid", "softmax", "log_softmax", "len", "size", "type", "str", "transpose",
              "round", "argmax", "argmin", "stop_gradient", "print", "gelu", "cos", "range", "zeros",
              "ones", "eye", "cross_entropy", "norm", "cumsum", "var", "std", "vector", "tuple", "keys",
              "items", "dict"]
BUILTINS_2 = ["fill", "reshape", "concat", "stack", "clip", "zeros", "ones", "linspace", "where",
              "sum", "softmax", "max", "mean", "round", "size", "dense", "cross_entropy", "layer_norm",
              "scaled_dot_product_attention", "mse", "matmul", "dot", "outer", "grad", "value_and_grad",
              "get", "contains", "remove"]
KEYWORDS_ARGS = ["dim", "causal", "mask", "eps", "tau", "nope", "bias", "digits"]
BINOPS = ["+", "-", "*", "/", "%", "^", "@", "==", "!=", "<", ">=", "and", "or"]
INDEX_ITEMS = [":", "end", "0", "1", "0:end", "end-1", "1.5", "-1", "1e300", "[0, 1]", "[true, false]",
               "0:1", "1:0", "0:2:end", "[]"]
GRAD_ARGS = ["[1, 2, 3]", "2.0", "{w = [1, 2], b = 0.5}", "(1, [2, 3])", "[0, 0]", "[1, -1; 2, 0]", "0",
             '{"w": [1, 2], (0, 1): 0.5}']
SIZES = ["2", "1e6, 1e6", "-1", "1.5", "1e300", "0", "2, 0", "none", "1e999", "2, 3", "(2, 2)"]


def gen_expr(rng, depth: int) -> str:
    if depth <= 0 or rng.random() < 0.15:
        return rng.choice(NUMBERS + NAMES + LEAVES)
    def sub():
        return gen_expr(rng, depth - 1)
    choice = rng.randint(0, 22)
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
            return f"({lo}:{rng.choice(['1', '2', '-1', '0.5', '0', '1e-300', '0.1', '-0.1', '1e-320'])}:{hi})"
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
    if choice == 21:    # dictionary literal, read by a key it may not have
        text = rng.choice(["{:}", f"{{{sub()}: {sub()}}}", f'{{"k": {sub()}, ({sub()}, 1): {sub()}}}'])
        if rng.random() < 0.5:
            key = rng.choice(['"k"', '0', '(1, 1)', 'end', ':', sub()])
            text += f"[{key}]"
        return text
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
        if rng.random() < 0.3:      # destructuring: for i, v in enumerate(...) / zip(...) / any value
            names = ", ".join(rng.sample(NAMES, rng.randint(2, 3)))
            seq = rng.choice([f"enumerate({e()})", f"zip({e()}, {e()})", e()])
            return [f"for {names} in {seq}"] + inner + ["    " + tail, "end"]
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
    if rng.random() < 0.3:      # a format spec (a range inside needs its parentheses)
        spec = rng.choice(FORMAT_SPECS)
        return [f"print(\"{{({e()}):{spec}}} {{ {e()} :{spec}}}\")"]
    return [f"print({e()}, \"{{ {e()} }}\")"]


FORMAT_SPECS = [".3f", "5d", ">8", "<6", "*^9", "+.2e", "08.3f", ",", "x", "#b", ".1%", "g", ".2", "s",
                "10", "=+7.1f", "_X"]


PRELUDE = "a = [1, 2, 3]\nb = [1, 2; 3, 4]\nc = {w = [0.5, 1], b = 2}\nx = 2\ny = (1, \"é\")\n"


def gen_program(seed: int) -> str:
    rng = random.Random(seed)
    lines = [line for _ in range(rng.randint(1, 3)) for line in gen_statement(rng, 2)]
    return PRELUDE + "\n".join(lines) + "\n"


SEEDS = st.integers(0, 2 ** 64 - 1)

# ---- calls of every builtin with odd arguments (issue 15, item 12) -------------------------------
# Each builtin of the registry, called with values at the edges: huge, tiny, NaN, empty, 0-d,
# surrogate code points, wrong kinds, files that are devices or directories.
ODD = ["0", "1", "-1", "2", "3", "0.5", "1e300", "-1e300", "1e-320", "1e999", "-1e999", "(0 / 0)", "2^63",
       "[]", "zeros(0, 0)", "zeros(0, 3)", "zeros()", "[1, 2, 3]", "[1, 2; 3, 4]", "[0 / 0, 1]", "[1e308, -1e308]",
       "ones(2, 2, 2)", "[true, false]", "true", "none", '""', '"x"', '"é😀"', "(1,)", "()", "(1, [2, 3])",
       "{w = 1}", "{w = [1, 2], b = 0.5}", "fn(x) -> x", "fn(x) -> sum(x)", "55296", "[55296]", "1114112",
       "[65, 66]", "ones(3, 4)", "randn(2, 3)", "[0, 1]", "[1, 0; 0, 1]", "1e6", "-1e-300", "[1e300, 1]",
       "zeros(0, 2, 2)", "zeros(2, 0, 0)", "zeros(0, 4)", "[true, false; false, true]"]
# Paths only inside FUZZ_DIR, for every builtin: a writer given /dev/null would, run as root
# before the fix in atomic_write, have put a regular file in place of the device.
if not os.path.exists(os.path.join(FUZZ_DIR, "fifo")):
    os.mkfifo(os.path.join(FUZZ_DIR, "fifo"))
os.makedirs(os.path.join(FUZZ_DIR, "dir"), exist_ok=True)
PATHS = [f'"{FUZZ_DIR}/{name}"' for name in ("f.npz", "t.txt", "p.png", "p.pdf", "dir", "fifo", "missing/x.npz", "")]
NOT_CALLED = {"show"}          # opens a window or writes a PNG into the current directory


def _registry():
    from tapeml.builtins.registry import REGISTRY, REQUIRED
    Interpreter(out=io.StringIO())            # registers the builtins
    return sorted((name, b, REQUIRED) for name, b in REGISTRY.items() if name not in NOT_CALLED)


_BUILTINS: list = []


def gen_builtin_call(rng, depth: int = 2) -> str:
    """name(args) for a random builtin: its required arguments (variadic ones 0 to 3 times),
    sometimes its optional ones by position or keyword, from ODD, PATHS or a generated expression."""
    if not _BUILTINS:
        _BUILTINS.extend(_registry())
    name, b, required = rng.choice(_BUILTINS)

    def arg(p):
        if "path" in p.name:
            return rng.choice(PATHS)
        if rng.random() < 0.15:
            return gen_expr(rng, depth)
        return rng.choice(ODD)
    args, kwargs = [], []
    for p in b.params:
        if p.variadic:
            args += [arg(p) for _ in range(rng.randint(0, 3))]
        elif p.default is required or rng.random() < 0.3:
            if p.default is not required and rng.random() < 0.5:
                kwargs.append(f"{p.name}={arg(p)}")
            elif not kwargs:
                args.append(arg(p))
    if rng.random() < 0.05:
        args.append(rng.choice(ODD))            # one too many
    return f"{name}({', '.join(args + kwargs)})"


def gen_builtin_program(seed: int) -> str:
    rng = random.Random(seed)
    lines = []
    for _ in range(rng.randint(1, 3)):
        call = gen_builtin_call(rng)
        lines.append(rng.choice([f"r = {call}", f"print({call})", f'print("{{ {call} }}")', call + ";"]))
    return PRELUDE + "\n".join(lines) + "\n"


@FUZZ_BUILTINS
@given(SEEDS)
def test_every_builtin_with_odd_arguments(seed):
    run_program(gen_builtin_program(seed))


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
    '"{x:.3f}|{(0:3)}|{a[1:2]:>8}|{x + 1:+d}|{ {a = 1} :*^9}|{"s":<4}|{x:}|{f(1:2, k=3):,}"',
    "for i, v in enumerate(xs)\n print(i)\nend", "for a, b, c in zip(x, y, z)\n continue\nend",
    "{:}", '{"a": 1, (1, 2): x + 1, -1: 1:3, f(2): {:}}', 'd["a"] += 1', "d[1, 2] = 3", 'd["a"]["b"] = {"c": 1}',
    '"{ {"a": 1} }|{ {:} }|{d["k"]:>5}"', "{x: y}", "{(x): [1, 2]}",
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
        check_wording(e, source)
    except Exception as e:
        raise AssertionError(f"{type(e).__name__}: {e}") from e
