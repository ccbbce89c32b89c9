"""Core builtins: printing, sizes and kinds of values, record/tuple trees, strings and numbers,
errors, the clock, and progress bars over a `for` loop.

`progress(items)` returns a values.Progress; the interpreter's `for` walks its items exactly as
it walks the bare items (the same items, tracked ones still tracked) while lang/evaluator/progress.py
draws the bar. The stream and the mode (live bar, log lines, off) are chosen there.
"""
from __future__ import annotations

import os

import numpy as np

from tapeml.array import backend as B, context, limits
from tapeml.builtins.registry import P, builtin, one_of
from tapeml.syntax.errors import LangError, ShapeError, TypeErr, ValueErr
from tapeml.array.ranges import ValueWalk, Walk, walk_length, walkable
from tapeml.array.tape import raw
from tapeml.array.values import Dict, Progress, Record, describe, type_name
from tapeml.array.printer import format_value
from tapeml.builtins.util import axis, tree_leaves as leaves_with_paths


@builtin("print", "Core", "Print values separated by spaces, then a newline.",
         [P("values", variadic=True, doc="any values; each is written on one line as the literal that makes it "
           "(a string without quotes), where the REPL shows a large matrix as a grid")],
         returns="none", context=True,
         errors=["none for values of any kind (print() writes an empty line); a ValueError for a tuple or "
                 "record nested more than 20000 deep"],
         what="Writes its arguments to standard output with the one printer of the language: "
              "whole numbers below 2^53 with every digit, other numbers with up to 7 significant digits, "
              "matrices as the literal that makes them (`[1, 2; 3, 4]`, a one-row `[1, 2;]`).",
         how="Each argument goes through `format_value`; strings print without quotes at the top level.",
         examples=['print("hello", 1 + 2, [1, 2; 3, 4])', 'print(1e-9, -1/0, 0/0, true, none)'])
def print_(ctx, values):
    ctx.out.write(" ".join(format_value(v) for v in values) + "\n")
    return None


@builtin("len", "Core", "Length of the first axis of a matrix, or of a tuple, string, record or dictionary.",
         [P("x", doc="a matrix, number, tuple, string, record or dictionary")], returns="number",
         what="How many items x holds along its first axis: the rows of a matrix (the length of a vector), "
              "the items of a tuple, the fields of a record, the keys of a dictionary, the characters of a "
              "string. A number counts 1 and an empty matrix 0.",
         how="The first entry of the shape (like Python's len on a NumPy array); tuples count items, records "
             "fields, dictionaries keys, and strings characters (code points), not bytes.",
         errors=["TypeError for a function, bool or none"],
         examples=["len([1, 2, 3])", "len(zeros(4, 2))", 'len((1, "a"))', 'len("héllo")', 'len({"a": 1, "b": 2})'])
def len_(x):
    r = raw(x)
    if isinstance(r, B.Matrix):
        return float(r.shape[0]) if r.ndim else 1.0
    if isinstance(r, (tuple, str)):
        return float(len(r))
    if isinstance(r, Record):
        return float(len(r.fields))
    if isinstance(r, Dict):
        return float(len(r))
    if isinstance(r, (float, int)) and not isinstance(r, bool):
        return 1.0
    raise TypeErr(f"len() needs a matrix, number, tuple, string, record or dictionary, got {describe(x)}")


@builtin("size", "Core", "The shape of a matrix as a tuple, or the size of one axis.",
         [P("x", "array"), P("dim", "int", None, doc="an axis (negative counts from the end)")],
         returns="tuple of numbers, or a number with dim",
         what="The sizes of every axis of x, e.g. (T, D) for T tokens of width D; size(x, dim) is one of "
              "them. A number has the empty shape (), so len(size(x)) is the number of axes.",
         how="NumPy's `shape` as a tuple of numbers; a number has the empty shape (). With dim, one entry "
             "(negative dim counts from the end).",
         errors=["ValueError when dim is out of range for x"],
         examples=["size(zeros(2, 3))", "size(zeros(2, 3), 1)", "size([1, 2, 3])", "size(5)"])
def size(x, dim):
    r = raw(x)
    shape = tuple(r.shape) if type(r) in B.ARRAYS else ()
    if dim is None:
        return tuple(float(n) for n in shape)
    return float(shape[axis(x, dim)])


@builtin("type", "Core", "The kind of a value: number, bool, none, string, matrix, tuple, record, dict or function.",
         [P("x")], returns="string",
         what="Names the kind of a value, for checks and messages: \"number\", \"bool\", \"none\", "
              "\"string\", \"matrix\" (bool matrices and ranges too), \"tuple\", \"record\", \"dict\" "
              "(a dictionary) or \"function\" (builtins too).",
         how="A dispatch on the Python type under the value (values.type_name: float is number, "
             "numpy.ndarray is matrix, ...); a value tracked by grad reports the kind of the value inside.",
         errors=["TypeError when not called with exactly one argument"],
         examples=["type(1)", "type([1, 2])", 'type({a = 1})', 'type({"a": 1})', "type(fn(x) -> x)"])
def type_(x):
    return type_name(x)


@builtin("str", "Core", "A value formatted as print shows it, as a string.",
         [P("x")], returns="string",
         what="Turns any value into the text print would show for it, e.g. to build a message; a string "
              "comes back unchanged, strings inside tuples keep their quotes.",
         how="format_value(x), the language's one printer (whole numbers below 2^53 with every digit, other "
             "numbers with up to 7 significant digits, matrices as their literal: [1, 2; 3, 4], a one-row "
             "[1, 2;]), the same one string interpolation \"{x}\" uses; like Python's `str`.",
         errors=["TypeError when not called with exactly one argument", "ValueError when the value nests tuples and records more than 20000 deep"],
         examples=['str([1, 2]) + "!"', 'str([1, 2;])', "str(6 * 3152384)", "len(str(pi()))"])
def str_(x):
    return format_value(x)


@builtin("pi", "Core", "The number π.", [], returns="number",
         what="The ratio of a circle's circumference to its diameter, for angles in radians: sin(pi() / 2) "
              "is 1. It prints as 3.141593; the stored value is the float64 3.141592653589793.",
         how="NumPy's `pi` constant (the float64 closest to π, the same as Python's `math.pi`).",
         errors=["TypeError when given any argument: pi() takes none"],
         examples=["pi()", "cos(pi())"])
def pi():
    return float(np.pi)


@builtin("set_dtype", "Core", "Choose the float type of new matrices for this session: \"float64\" (default) or \"float32\".",
         [P("name", "string", doc='"float64" or "float32"', check=one_of("float64", "float32"),
            constraint='one of "float64", "float32"')],
         returns="none",
         errors=['ValueError when name is not "float64" or "float32", or is "float64" on torch:mps (float32 only)',
                 "TypeError when name is not a string"],
         what="Matrix literals, ranges and constructors (zeros, ones, eye, fill, linspace, rand, randn) "
              "create matrices of this type from now on; arithmetic keeps the type of its matrices. "
              "float32 halves memory and is what most training runs use; float64 is the default and "
              "what gradient checks need. `tapeml --dtype float32 script.ml` sets it for a whole script.",
         how="Sets the one dtype setting read by every constructor. Python numbers are weak scalars in "
             "NumPy 2, so `x * 0.5` keeps a float32 x in float32.",
         examples=['set_dtype("float32")\nx = [1, 2, 3] / 3\nprint(x, dtype(x))\nset_dtype("float64")\nprint(dtype([1, 2, 3] / 3))'])
def set_dtype(name):
    from tapeml.array import ops
    if name == "float64" and B.current().device == "mps":
        raise ValueErr('set_dtype(): torch:mps has float32 matrices only; keep set_dtype("float32") there '
                       '(or run on torch:cpu or torch:cuda for float64)')
    ops.set_dtype(name)
    return None


@builtin("set_device", "Core", "Choose where this session's matrices live and compute: \"numpy\" (default), "
         "\"torch:cpu\", \"torch:cuda\", \"torch:cuda:N\" or \"torch:mps\".",
         [P("name", "string", doc='"numpy", "torch:cpu", "torch:cuda", "torch:cuda:N" or "torch:mps"')],
         returns="none",
         errors=["ValueError when the device is unknown, PyTorch is not installed, the machine lacks it, or a "
                 "matrix already exists in this session", "TypeError when name is not a string"],
         what="Call it at the top of a script, before any matrix is made: from then on literals, ranges, "
              "constructors and loaded files make PyTorch tensors on that device, and every operation, "
              "gradient and print is the same as on NumPy (tapeml's tape does the backward pass on every "
              "device). `tapeml --device torch:cuda script.ml` does the same for a whole script. "
              "torch:mps holds float32 only.",
         how="Sets the session's backend (lang/array/backend.py). Matrices made before cannot move, so a "
             "second device after the first matrix is refused rather than mixing two.",
         examples=['set_device("numpy")\nprint(device())'])
def set_device(name):
    try:
        be = B.make(name)
    except B.DeviceError as e:
        raise ValueErr(f"set_device(): {e}") from None
    if be is not B.current() and B.made_any():
        raise ValueErr(f"set_device(\"{name}\"): this session already made matrices on {B.current().name}; "
                         f"call set_device before the first matrix (or run with tapeml --device {name})")
    B.set_current(be)
    return None


@builtin("device", "Core", "The device this session's new matrices are made on: \"numpy\", \"torch:cpu\", ...",
         [], returns="string",
         what="The backend chosen by set_device, tapeml --device or tapeml.Session(device=...): where the "
              "matrices made from now on live and compute. A script can print it to say where it ran.",
         how="The name of the session's backend (lang/array/backend.py): \"numpy\" unless set_device, "
             "tapeml --device, tapeml.Session(device=...) or the TAPEML_DEVICE environment variable chose "
             "another; torch:cuda is named with its GPU index, torch:cuda:0.",
         errors=["TypeError when given an argument: device() takes none"],
         examples=['print(device())'])
def device():
    return B.current().name


@builtin("dtype", "Core", "The float type of a matrix: \"float64\", \"float32\" or \"bool\".",
         [P("x", "array")], returns="string",
         what="Tells how a matrix is stored: \"float64\" (the default), \"float32\" after set_dtype(\"float32\"), "
              "or \"bool\" for the result of a comparison. A plain number is always float64, true and false bool.",
         how="The name of NumPy's `x.dtype`; numbers report \"float64\" (they are Python floats) and bools \"bool\".",
         errors=["TypeError when x is not a number, bool or matrix"],
         examples=["dtype([1, 2])", "dtype([1, 2] > 1)"])
def dtype(x):
    r = raw(x)
    if isinstance(r, B.Matrix):
        be = B.of(r)
        return "bool" if be.is_bool(r) else be.np_dtype(r.dtype).name
    return "bool" if isinstance(r, bool) else "float64"


def _differs(j: int, path: list, first, other) -> ValueErr:
    """Tree j is not shaped as tree 0 at path (first: tree 0's subtree there, other: tree j's)."""
    return ValueErr(f"tree_map(): tree {j} differs from tree 0 at {_where(path)}: "
                    f"{_shape_desc(first)} vs {_shape_desc(other)}")


def _tree_map(ctx, f, trees, path: list):
    """`path` holds the parts of where this subtree sits in the trees ([] at the top, then
    [".w"], [".w", "[0]"], ...), joined only for a message: a deep tree costs no long strings."""
    first = raw(trees[0])
    if isinstance(first, (Record, tuple, Dict)) and len(path) >= limits.MAX_NESTING:
        raise limits.nesting_error("tree_map(): the tree")
    if isinstance(first, Dict):
        keys = first.keys()
        others = []
        for j, t in enumerate(trees[1:], 1):
            r = raw(t)
            if not isinstance(r, Dict) or set(r.keys()) != set(keys):
                raise _differs(j, path, first, r)
            others.append(r)
        out = {}
        for k in keys:
            path.append(f"[{format_value(k, True)}]")
            out[k] = _tree_map(ctx, f, [first.get(k)] + [r.get(k) for r in others], path)
            path.pop()
        return Dict(out)
    if isinstance(first, Record):
        for j, t in enumerate(trees[1:], 1):
            r = raw(t)
            if not isinstance(r, Record) or list(r.fields) != list(first.fields):
                raise _differs(j, path, first, r)
        out = {}
        for k in first.fields:
            path.append(f".{k}")
            out[k] = _tree_map(ctx, f, [raw(t).fields[k] for t in trees], path)
            path.pop()
        return Record(out)
    if isinstance(first, tuple):
        for j, t in enumerate(trees[1:], 1):
            r = raw(t)
            if not isinstance(r, tuple) or len(r) != len(first):
                raise _differs(j, path, first, r)
        items = []                   # a list, not a generator: deep trees recurse in Python frames only
        for i in range(len(first)):
            path.append(f"[{i}]")
            items.append(_tree_map(ctx, f, [raw(t)[i] for t in trees], path))
            path.pop()
        return tuple(items)
    for j, t in enumerate(trees[1:], 1):
        if isinstance(raw(t), (Record, tuple, Dict)):
            raise _differs(j, path, first, raw(t))
    try:
        return ctx.call(f, *trees)
    except LangError as e:
        if path and not getattr(e, "tree_path", None):    # the innermost tree_map names the leaf
            e.tree_path = "".join(path)
            e.message += f" (in tree_map, at the leaf {e.tree_path} of the trees)"
        raise


def _where(path: list) -> str:
    return f"the leaf or subtree {''.join(path)}" if path else "the top level"


def _shape_desc(r):
    if isinstance(r, Record):
        return "a record with fields " + (", ".join(r.fields) or "none")
    if isinstance(r, Dict):
        shown = r.keys()
        return "a dictionary with keys " + (", ".join(format_value(k, True) for k in shown[:8])
                                            + (", ..." if len(shown) > 8 else "") or "none")
    return describe(r)


@builtin("tree_map", "Core", "Apply f leaf by leaf to records and tuples of the same structure.",
         [P("f", "function", doc="called with one leaf from each tree"),
          P("trees", variadic=True, doc="one or more records/tuples/dictionaries (nested) of the same structure")],
         returns="a tree of the same structure holding f's results", context=True,
         what="Maps a function over the leaves (numbers, matrices, anything that is not a record, a "
              "tuple or a dictionary) of parameter trees. With several trees, f gets the matching leaves of all of "
              "them: tree_map(fn(p, g) -> p - 0.1 * g, params, grads) is one SGD step.",
         how="Walks the first tree; at a record it requires the same field names in the same order in "
             "every tree, at a tuple the same length, at a dictionary the same keys (in the first tree's "
             "order), then calls f on the leaves (JAX's "
             "`jax.tree_util.tree_map`).",
         errors=["ValueError naming the path where the trees' structures differ",
                 "TypeError when f is not a function",
                 "ValueError when the trees nest tuples and records more than 20000 deep"],
         examples=["tree_map(fn(x) -> 2 * x, {a = 1, b = ([1, 2], 3)})",
                   "p = {w = [1, 2], b = 0.5}\ng = {w = [0.1, 0.1], b = 1}\n"
                   "tree_map(fn(p, g) -> p - 0.5 * g, p, g)"])
def tree_map(ctx, f, trees):
    if not trees:
        raise TypeErr("tree_map() needs at least one tree after the function")
    return _tree_map(ctx, f, list(trees), [])


@builtin("tree_leaves", "Core", "The leaves of a record/tuple tree as a flat tuple, in field order.",
         [P("tree", doc="a record or tuple (nested), or a single leaf")],
         returns="a tuple of leaves",
         what="Flattens a nested record or tuple (parameters, gradients) into one tuple of its leaves, so a "
              "loop can visit every matrix, e.g. for a global gradient norm. A value that is neither a record "
              "nor a tuple is its own single leaf.",
         errors=["none for a value of any kind (a leaf gives a 1-tuple, an empty tuple gives ()); a "
                 "ValueError for a tree nested more than 20000 deep"],
         how="Depth-first over record fields in their order and tuple items in order (JAX's "
             "`jax.tree_util.tree_leaves`). Useful to reduce over all parameters, e.g. a gradient norm.",
         examples=["tree_leaves({a = 1, b = ([1, 2], 3)})",
                   "g = {w = [3, 0], b = 4}\ntotal = 0\nfor l in tree_leaves(g)\n"
                   "    total = total + sum(l^2)\nend\nsqrt(total)"])
def tree_leaves(tree):
    return tuple([leaf for _, leaf in leaves_with_paths(tree, None, "keep", "tree_leaves(): tree")])


@builtin("char_codes", "Core", "The Unicode code point of each character of a string, as a vector.",
         [P("s", "string")], returns="[len(s)]",
         what="The Unicode number of each character: char_codes(\"A\") is [65]. The raw material of the "
              "character tokenizer (char_vocab, encode).",
         errors=["TypeError when s is not a string"],
         how="Python's `ord` of each character, as float64 (a char tokenizer's raw ids).",
         examples=["char_codes(\"Hi!\")"])
def char_codes(s):
    return B.new_matrix(np.fromiter((ord(c) for c in s), dtype=np.float64, count=len(s)), np.float64)


@builtin("from_char_codes", "Core", "The string whose characters have the given code points.",
         [P("codes", "array", shape="a number or [N]", doc="whole numbers in 0..1114111")],
         returns="string",
         what="The string spelled by a vector of Unicode code points (or one code point); "
              "from_char_codes(char_codes(s)) is s.",
         how="Python's `chr` of each element, joined; the inverse of char_codes.",
         errors=["ValueError when a code is not a whole number in 0..1114111, or is a surrogate (55296..57343)",
                 "ValueError when the string would pass the string limit, 0.1 GB",
                 "ShapeError when codes is a matrix rather than a vector",
                 "TypeError when codes is not a number or matrix"],
         examples=["from_char_codes([72, 105, 33])"])
def from_char_codes(codes):
    a = np.atleast_1d(np.asarray(B.to_numpy(raw(codes)), dtype=np.float64))     # on the host: a string is made
    if a.ndim != 1:
        raise ShapeError(f"from_char_codes(): codes must be a vector, got {describe(codes)}")
    if a.size and (not np.all(np.isfinite(a)) or np.any(a != np.floor(a)) or a.min() < 0 or a.max() > 0x10FFFF):
        raise ValueErr("from_char_codes(): codes must be whole numbers in 0..1114111")
    surrogate = (a >= 0xD800) & (a <= 0xDFFF)
    if surrogate.any():     # halves of UTF-16 pairs: no character, and no UTF-8 text can hold one
        raise ValueErr(f"from_char_codes(): {format_value(a[surrogate][0])} is a surrogate code point "
                       f"(55296..57343, U+D800..U+DFFF), which is not a character")
    from tapeml.array import limits
    if a.size > limits.MAX_STRING_BYTES // 4:      # its UTF-8 size: 1 to 4 bytes a code
        limits.check_string_bytes("from_char_codes(): the string", a.size + int((a >= 0x80).sum())
                                  + int((a >= 0x800).sum()) + int((a >= 0x10000).sum()))
    return "".join(map(chr, a.astype(np.int64).tolist()))


@builtin("num", "Core", "The number a string spells: num(\"3.5\") is 3.5 (the inverse of str for numbers).",
         [P("s", "any", doc="a string such as \"12\", \"1e-3\", \"inf\"; a number is returned as it is")],
         returns="number",
         what="Reads a number from text, e.g. a command-line argument from ARGS; surrounding spaces are "
              "ignored and a number passes through unchanged.",
         how="Python's `float` of the stripped string (script arguments in ARGS are strings).",
         errors=["ValueError when the string is not a number",
                 "TypeError when s is neither a string nor a number"],
         examples=["num(\"1e-3\") * 2", "num(\"600\") + 1"])
def num(s):
    r = raw(s)
    if isinstance(r, (float, int)) and not isinstance(r, bool):
        return float(r)
    if not isinstance(r, str):
        raise TypeErr(f"num(): s must be a string, got {describe(s)}")
    try:
        return float(r.strip())
    except ValueError:
        raise ValueErr(f"num(): \"{r}\" is not a number") from None


@builtin("error", "Core", "Stop the program with a ValueError carrying the message.",
         [P("message", "string")], returns="never returns",
         what="Stops the program with your own message, e.g. when an argument of a tapeml function fails a "
              "check; the report shows the call site and the chain of calls like any built-in error.",
         errors=["ValueError carrying message, always (that is its purpose)",
                 "TypeError when message is not a string"],
         how="Raises a ValueError at the call site; the usual error report (place, source line, the "
             "chain of calls) follows. For checks in tapeml code, e.g. the stdlib's argument checks.",
         examples=["fn safe_div(a, b)\n    if b == 0\n        error(\"safe_div: b must not be 0\")\n    end\n"
                   "    return a / b\nend\nsafe_div(1, 2)"])
def error(message):
    raise ValueErr(message or "error() was called with an empty message")


@builtin("append", "Core", "A new tuple: the items of t followed by item.",
         [P("t", "tuple"), P("item", doc="any value")], returns="a tuple one longer than t",
         what="Builds tuples step by step, e.g. a stack of block weights in a loop (tuples are immutable "
              "values, so t itself is unchanged).",
         how="Python's t + (item,).",
         errors=["TypeError when t is not a tuple (a vector grows with [v, item] or concat)"],
         examples=["append((1, 2), 3)", "blocks = ()\nfor i in 0:2\n    blocks = append(blocks, i * 10)\nend\nblocks"])
def append(t, item):
    return tuple(raw(t)) + (item,)


@builtin("clock", "Core", "Seconds on a monotonic clock; subtract two readings to time a piece of code.",
         [], returns="number",
         what="A timer reading in seconds, to measure how long code takes: t0 = clock(), then clock() - t0. "
              "Only differences mean something; the origin is arbitrary.",
         errors=["TypeError when given an argument: clock() takes none"],
         how="Python's `time.perf_counter()`: monotonic, sub-microsecond resolution, arbitrary origin.",
         examples=["t0 = clock()\nclock() - t0 >= 0"])
def clock():
    import time
    return time.perf_counter()


def loop_length(items) -> int:
    """The number of steps a `for` loop over items takes; a TypeErr for what it cannot loop over."""
    if isinstance(items, ValueWalk):
        items = items.value
    elif isinstance(items, Walk):
        return len(items)
    if walkable(items):
        return walk_length(items)
    raise TypeErr(f"progress(): cannot loop over {describe(items)}; give a range, a matrix, "
                  f"a tuple or a string")


def progress_walk(items, desc):
    """progress(...) as a for loop's iterable: the walk of items, not made into a value."""
    return Progress(items, desc, loop_length(items))


@builtin("progress", "Core", "Loop with a live progress bar: for step in progress(1:n, desc=\"train\") ... end.",
         [P("items", doc="what the loop walks: a range, a matrix (its rows), a tuple or a string",
            walked=True),
          P("desc", "string", "", doc="a title shown before the bar")],
         returns="a progress(...) loop, for a `for` loop to walk",
         what="Wraps what a `for` loop walks so that the loop draws a bar on standard error with the "
              "count done, the rate and the time left; `progress_note(text)` shows text beside it "
              "(the latest loss, say). The loop itself is unchanged: the same items in the same order "
              "(rows of a tracked matrix stay tracked inside `grad`), and `break`, `continue` and "
              "errors behave as in the bare loop. Standard output is untouched, so a program prints "
              "the same with or without it.",
         how="Built on tqdm. Standard error decides the look: a terminal gets tqdm's live bar, "
             "redrawn in place (lines printed meanwhile appear above it); a pipe, a file or CI gets a "
             "plain line such as `train:  50% 5/10 [00:01<00:01, 4.98it/s, loss 1.2]` at every "
             "tenth of the count and at least every 30 seconds, never a carriage return. "
             "`TAPEML_PROGRESS=0` in the environment turns bars off; the docs are built with them "
             "off, so the examples on this page show only what they print. When the loop ends (done, "
             "`break`, an error, Ctrl-C) the bar's line is closed; after Ctrl-C in the REPL the "
             "variables keep the values they had. In `for step in progress(1:n)` the range is walked a "
             "chunk at a time, never made into a vector (nor are enumerate(...) and zip(...) inside it).",
         errors=["TypeError when items is something a for loop cannot walk (a record, a function, a bool)"],
         examples=['total = 0\nfor step in progress(1:100, desc="sum")\n    total = total + step\n'
                   '    progress_note("total {total}")\nend\ntotal',
                   'progress(1:10, desc="train")'],
         walk=progress_walk)
def progress(items, desc):
    return Progress(items, desc, loop_length(items))


@builtin("progress_note", "Core", "Show a short text beside the progress bar of the loop running (e.g. the loss).",
         [P("text", doc="a string, or any value (shown as print shows it)")],
         returns="none",
         what="Sets the note shown after the count of the innermost `for step in progress(...)` loop "
              "running, tqdm's postfix: call it in the loop with the latest loss. The bar shows the "
              "newest note at its next redraw. Outside such a loop, or with bars off, it does nothing, "
              "so the same code runs anywhere.",
         how="tqdm's `set_postfix_str` on the live bar; in log lines (standard error not a terminal) "
             "the note ends each line.",
         errors=["none: any value is accepted"],
         examples=['for step in progress(1:3, desc="train")\n    loss = 1 / step\n'
                   '    progress_note("loss {round(loss, 3)}")\nend\nloss'],
         context=True)
def progress_note(ctx, text):
    ctx.note_progress(text if isinstance(text, str) else format_value(text))
    return None


# ---- notes: one-time hints on standard error about habits of other languages (issue 29) --------
NOTES_OFF = ("0", "off", "false", "no")
# Whether this session prints notes; TAPEML_NOTES=0 (off, false, no) starts every session without them.
context.slot("notes", lambda: os.environ.get("TAPEML_NOTES", "").strip().lower() not in NOTES_OFF)


@builtin("notes", "Core", "Turn the one-time notes on standard error on or off: notes(false) silences them.",
         [P("on", "bool", True, doc="true prints the notes (the default), false silences them")],
         returns="none",
         what="tapeml prints a note, once per source line, on standard error where a program uses a habit "
              "of NumPy or PyTorch that gives a different result here without an error: P[0:n-1, ys], "
              "which NumPy reads as one element per row (P[arange(n), ys]) and tapeml as the n x n grid of "
              "every row with every index (see take_along). The note changes nothing in the result; "
              "notes(false) turns the notes off for the rest of the session, notes(true) back on.",
         how="A per-session setting (a Session, a notebook kernel, the REPL each have their own). "
             "`TAPEML_NOTES=0` (or off, false, no) in the environment starts sessions with notes off. "
             "Standard output is never touched, so a program prints the same with or without notes.",
         errors=["TypeError when on is not true or false"],
         examples=["notes(false)\nP = [1, 2; 3, 4]\nP[0:1, [1, 0]]   # the grid, silently",
                   "notes(true)"])
def notes(on):
    context.LIVE["notes"] = bool(on)
    return None
