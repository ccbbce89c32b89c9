"""The one size guard. Every producer of a new value checks the size of its result here,
before allocating: constructors and ranges (element counts), the binary operators and
products (the broadcast or product shape), indexing with index vectors, concat and stack,
string concatenation, interpolation, repetition, code points, file reads.

The limits (docs/language.md, "Limits"):
- a matrix holds at most `max_elements()` elements: half the memory of the device the session's
  matrices live on in float64 (the host's for NumPy and torch:cpu, the GPU's for torch:cuda,
  lang/array/backend.py), and never more than 8 GB; MAX_ELEMENTS is the host's;
- a range at most MAX_RANGE elements;
- a string at most MAX_STRING_BYTES bytes of UTF-8 (0.1 GB);
- a walk over a value (printing, ==, tree_map, grad's parameter trees, ...) follows tuples and
  records at most MAX_NESTING deep (declared in values.py; `nesting_error` is its message);
- records and tuples nest at most FILE_NESTING deep where files are read or written (save, load,
  write_json, read_json): each level costs a Python frame (or, in save, a longer key).
"""
from __future__ import annotations

import math
import os

from tapeml.syntax.errors import ValueErr


def _max_elements(ram: int | None = None) -> int:
    """Half of `ram` bytes (None: the machine's memory) in float64 elements, and never more
    than 8 GB of them."""
    if ram is None:
        try:
            ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            ram = 16 * 1024 ** 3
    return int(min(1_000_000_000, ram // 2 // 8))


MAX_ELEMENTS = _max_elements()      # the host's limit (NumPy, torch:cpu); tests may lower it
_HOST_ELEMENTS = MAX_ELEMENTS
_DEVICE_ELEMENTS: dict = {}          # device name -> the limit from its own memory, read once


def max_elements() -> int:
    """The limit of the session's device: MAX_ELEMENTS on the host; on a GPU, half the GPU's
    memory (Backend.memory_bytes) in float64, at most 8 GB (and at most MAX_ELEMENTS where that
    was lowered below the host's: the tests)."""
    from tapeml.array import backend
    be = backend.current()
    if be is backend.NUMPY:
        return MAX_ELEMENTS
    n = _DEVICE_ELEMENTS.get(be.name)
    if n is None:
        mem = be.memory_bytes()
        n = _DEVICE_ELEMENTS[be.name] = -1 if mem is None else _max_elements(mem)
    if n < 0:
        return MAX_ELEMENTS
    return n if MAX_ELEMENTS == _HOST_ELEMENTS else min(n, MAX_ELEMENTS)


def _whose() -> str:
    """Whose memory the limit is half of, for the messages."""
    from tapeml.array import backend
    be = backend.current()
    if be is backend.NUMPY or _DEVICE_ELEMENTS.get(be.name, -1) < 0:
        return "this machine's memory"
    return f"the memory of {be.name}"


MAX_RANGE = 100_000_000
MAX_STRING_BYTES = 100_000_000


RANGE_MAX = 100_000_000    # elements of one range
FILE_NESTING = 1000        # records and tuples inside each other, in files


def file_nesting_error(what: str) -> ValueErr:
    """'save(): the value nests tuples and records more than 1000 deep'."""
    return ValueErr(f"{what} nests tuples and records more than {FILE_NESTING} deep")


# The nesting limit of walks over values (MAX_NESTING, nesting_error) is declared in values.py
# (which imports nothing of limits), and listed here.
from tapeml.array.values import MAX_NESTING, nesting_error  # noqa: E402,F401


def g3(x: float) -> str:
    """Three significant digits, written as the printer writes numbers (8e12, 0.4, 1e8)."""
    from tapeml.array.number_text import format_number
    try:
        x = float(x)
    except OverflowError:            # a Python int past the float range
        return "more than 1e308"
    if not math.isfinite(x):
        return "more than 1e308"
    return format_number(float(f"{x:.3g}"))


def elements_error(what: str, n: int) -> ValueErr:
    """'{what} would need 8000 GB of float64; the limit is 8 GB (...)'."""
    from tapeml.array.number_text import format_gb
    try:
        nbytes = float(n * 8)
    except OverflowError:            # a Python int past the float range
        nbytes = math.inf
    need = format_gb(nbytes) if math.isfinite(nbytes) else "more than 1e299 GB"
    limit = max_elements()
    return ValueErr(f"{what} would need {need} of float64; the limit is "
                    f"{format_gb(limit * 8)} (half {_whose()}, at most 8 GB)")


def range_error(count: float, fname: str = "") -> ValueErr:
    """'the range would have 100000001 elements; the limit is 100000000' (count inf: more than 1e308)."""
    from tapeml.array.number_text import format_number
    shown = format_number(float(count)) if math.isfinite(count) else "more than 1e308"
    return ValueErr(f"{fname}the range would have {shown} elements; the limit is {format_number(RANGE_MAX)}")


def check_elements(what: str, shape) -> None:
    """Refuse a matrix of `shape` past max_elements(); `what` names the producer."""
    n = math.prod(shape)
    if n > max_elements():
        raise elements_error(what, n)


def check_shape(what: str, shape) -> None:
    """check_elements, and no axis longer than max_elements() either, even in an empty result
    (zeros(0, 2^60), one_hot of no ids into 2^40 classes): an axis of a size asked for by a
    count is refused before NumPy sees it."""
    check_elements(what, shape)
    check_axes(what, shape)


def check_axes(what: str, shape) -> None:
    """Refuse an axis longer than max_elements() (an empty result may have one: zeros(0, 2^60))."""
    if shape and max(shape) > (limit := max_elements()):
        big = max(shape)
        raise ValueErr(f"{what}: a size of {big if big < 10 ** 16 else g3(big)} is past the limit of "
                       f"{g3(limit)} elements")


OP_SYMBOLS = {"add": "'+'", "sub": "'-'", "mul": "'*'", "div": "'/'", "mod": "'%'", "pow": "'^'",
              "matmul": "'@'", "eq": "'=='", "ne": "'!='", "lt": "'<'", "le": "'<='", "gt": "'>'",
              "ge": "'>='", "logical": "'and'/'or'"}


def check_operands(name: str, out_shape, *shapes) -> None:
    """Refuse the result of an operator or primitive on operands of `shapes` whose result shape
    `out_shape` would pass the limit (called only when the operands' sizes multiply past it)."""
    n = math.prod(out_shape)
    if n > max_elements():
        from tapeml.array.values import shape_text
        op = OP_SYMBOLS.get(name, f"{name}()")
        names = [shape_text(s) for s in shapes]
        listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        err = elements_error(f"{op} of {listed} (a result of "
                             f"{shape_text(tuple(out_shape))})", n)
        err.operation = (name, tuple(out_shape), n)     # a builtin that ran this step names itself instead
        raise err


OWN_STEP = {"max": "maximum", "min": "minimum"}     # builtin -> its primitive of another name


def in_builtin(fname: str, args, err: ValueErr) -> ValueErr:
    """The refusal of an operation that builtin `fname` ran on the user's arguments `args` (the
    primitive's operands are the builtin's own intermediates, e.g. kron's [m, 1, n, 1]): the same
    need, said of `fname()` and the shapes of the matrices the user gave."""
    from tapeml.array.tape import raw
    from tapeml.array.values import shape_text
    op, out, n = err.operation
    if op == fname or OWN_STEP.get(fname) == op:    # the builtin's own primitive (dense, atan2): as it is
        msg = err.message.replace(OP_SYMBOLS.get(op, f"{op}()"), f"{fname}()", 1)
        new = ValueErr(msg, err.span)
        new.trace = err.trace
        return new
    from tapeml.array.backend import Matrix
    shown = [shape_text(tuple(raw(a).shape)) for a in args if isinstance(raw(a), Matrix)]
    of = ""
    if shown:
        of = " of " + (", ".join(shown[:-1]) + " and " + shown[-1] if len(shown) > 1 else shown[0])
    new = elements_error(f"{fname}(){of} (an intermediate result of {shape_text(out)})", n)
    new.span, new.trace = err.span, err.trace
    return new


def utf8_len(s: str) -> int:
    """The UTF-8 size of a string (O(1) for ASCII text)."""
    return len(s) if s.isascii() else len(s.encode("utf-8", "surrogatepass"))


def check_string_bytes(what: str, nbytes: float) -> None:
    """Refuse a string of `nbytes` UTF-8 bytes past MAX_STRING_BYTES."""
    if nbytes > MAX_STRING_BYTES:
        raise ValueErr(f"{what} would take {g3(nbytes / 1e9)} GB; the limit is "
                       f"{g3(MAX_STRING_BYTES / 1e9)} GB")


def check_join(what: str, parts) -> None:
    """Refuse the concatenation of the strings `parts` past the limit (cheap for short strings)."""
    total = 0
    for p in parts:
        total += len(p)
    if total * 4 <= MAX_STRING_BYTES:        # at most 4 bytes a character: surely fine
        return
    check_string_bytes(what, sum(utf8_len(p) for p in parts))
