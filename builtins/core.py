"""Core builtins: printing, sizes and kinds of values."""
from __future__ import annotations

import numpy as np

from tapeml.builtins.registry import P, builtin, one_of
from tapeml.errors import TypeErr
from tapeml.tape import raw
from tapeml.values import Record, describe, format_value, type_name
from tapeml.builtins.util import axis


@builtin("print", "Core", "Print values separated by spaces, then a newline.",
         [P("values", variadic=True, doc="any values; each is formatted as the REPL shows it")],
         returns="none", interp=True,
         errors=["none: any number of values of any kind can be printed (print() writes an empty line)"],
         what="Writes its arguments to standard output with the one printer of the language: "
              "whole numbers below 2^53 with every digit, other numbers with up to 7 significant digits, "
              "matrices as the literal that makes them (`[1, 2; 3, 4]`, a one-row `[1, 2;]`).",
         how="Each argument goes through `format_value`; strings print without quotes at the top level.",
         examples=['print("hello", 1 + 2, [1, 2; 3, 4])', 'print(1e-9, -1/0, 0/0, true, none)'])
def print_(interp, values):
    interp.out.write(" ".join(format_value(v) for v in values) + "\n")
    return None


@builtin("len", "Core", "Length of the first axis of a matrix, or of a tuple, string or record.",
         [P("x", doc="a matrix, number, tuple, string or record")], returns="number",
         what="How many items x holds along its first axis: the rows of a matrix (the length of a vector), "
              "the items of a tuple, the fields of a record, the characters of a string. A number counts 1 "
              "and an empty matrix 0.",
         how="The first entry of the shape (like Python's len on a NumPy array); tuples count items, records "
             "fields, and strings characters (code points), not bytes.",
         errors=["TypeError for a function, bool or none"],
         examples=["len([1, 2, 3])", "len(zeros(4, 2))", 'len((1, "a"))', 'len("héllo")'])
def len_(x):
    r = raw(x)
    if isinstance(r, np.ndarray):
        return float(r.shape[0]) if r.ndim else 1.0
    if isinstance(r, (tuple, str)):
        return float(len(r))
    if isinstance(r, Record):
        return float(len(r.fields))
    if isinstance(r, (float, int)) and not isinstance(r, bool):
        return 1.0
    raise TypeErr(f"len() needs a matrix, number, tuple, string or record, got {describe(x)}")


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
    shape = np.shape(raw(x))
    if dim is None:
        return tuple(float(n) for n in shape)
    return float(shape[axis(x, dim)])


@builtin("type", "Core", "The kind of a value: number, bool, none, string, matrix, tuple, record or function.",
         [P("x")], returns="string",
         what="Names the kind of a value, for checks and messages: \"number\", \"bool\", \"none\", "
              "\"string\", \"matrix\" (bool matrices and ranges too), \"tuple\", \"record\" or "
              "\"function\" (builtins too).",
         how="A dispatch on the Python type under the value (values.type_name: float is number, "
             "numpy.ndarray is matrix, ...); a value tracked by grad reports the kind of the value inside.",
         errors=["TypeError when not called with exactly one argument"],
         examples=["type(1)", "type([1, 2])", 'type({a = 1})', "type(fn(x) -> x)"])
def type_(x):
    return type_name(x)


@builtin("str", "Core", "A value formatted as print shows it, as a string.",
         [P("x")], returns="string",
         what="Turns any value into the text print would show for it, e.g. to build a message; a string "
              "comes back unchanged, strings inside tuples keep their quotes.",
         how="format_value(x), the language's one printer (whole numbers below 2^53 with every digit, other "
             "numbers with up to 7 significant digits, matrices as their literal: [1, 2; 3, 4], a one-row "
             "[1, 2;]), the same one string interpolation \"{x}\" uses; like Python's `str`.",
         errors=["TypeError when not called with exactly one argument"],
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
         errors=['ValueError when name is not "float64" or "float32"', "TypeError when name is not a string"],
         what="Matrix literals, ranges and constructors (zeros, ones, eye, fill, linspace, rand, randn) "
              "create matrices of this type from now on; arithmetic keeps the type of its matrices. "
              "float32 halves memory and is what most training runs use; float64 is the default and "
              "what gradient checks need. `tapeml --dtype float32 script.ml` sets it for a whole script.",
         how="Sets the one dtype setting read by every constructor. Python numbers are weak scalars in "
             "NumPy 2, so `x * 0.5` keeps a float32 x in float32.",
         examples=['set_dtype("float32")\nx = [1, 2, 3] / 3\nprint(x, dtype(x))\nset_dtype("float64")\nprint(dtype([1, 2, 3] / 3))'])
def set_dtype(name):
    from tapeml import ops
    ops.set_dtype(name)
    return None


@builtin("dtype", "Core", "The float type of a matrix: \"float64\", \"float32\" or \"bool\".",
         [P("x", "array")], returns="string",
         what="Tells how a matrix is stored: \"float64\" (the default), \"float32\" after set_dtype(\"float32\"), "
              "or \"bool\" for the result of a comparison. A plain number is always float64, true and false bool.",
         how="The name of NumPy's `x.dtype`; numbers report \"float64\" (they are Python floats) and bools \"bool\".",
         errors=["TypeError when x is not a number, bool or matrix"],
         examples=["dtype([1, 2])", "dtype([1, 2] > 1)"])
def dtype(x):
    r = raw(x)
    if isinstance(r, np.ndarray):
        return "bool" if r.dtype == np.bool_ else str(r.dtype)
    return "bool" if isinstance(r, bool) else "float64"
