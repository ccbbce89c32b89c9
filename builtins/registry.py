"""The builtin registry: every builtin is declared once, with its documentation.

    @builtin("layer_norm", "Statistics & ML", "Normalize each row ...",
             params=[P("x", "array", shape="[..., D]", doc="..."), ...],
             returns="[..., D]", what="...", how="...", errors=[...], examples=[...])
    def layer_norm(x, gamma, beta, eps): ...

The one binder (values.bind_arguments), the REPL's completion and help, and the docs builder all
read this one table (DESIGN.md rule 8). Each builtin's binder is built from its declaration once,
at registration (`_binder`: the parameters' positions, defaults and conversions looked up then);
a call it does not take as it stands goes to the general binder, which words every error. A builtin that needs the session (where print writes,
the float type, the random generator, calling a function value, the call site, the running
file's directory, the progress bars) declares `context=True` and receives a
`tapeml.builtins.context.Context` first: the one surface between builtins and the evaluator.
`interp=True` (the whole interpreter) is left to `help` alone, which runs examples in a fresh
interpreter of the session's kind; its declaration says why. Argument kinds and constraints are
checked here, so builtin bodies receive validated values.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable as CallableType

import numpy as np

from tapeml.array import limits
from tapeml.array.backend import ARRAYS, Matrix, is_out_of_memory, new_matrix, to_numpy
from tapeml.syntax.errors import LangError, TypeErr, ValueErr
from tapeml.array.tape import Box, raw
from tapeml.array.values import Callable, Dict, Record, bind_arguments, describe
from tapeml.array.printer import format_value, not_whole_text

REQUIRED = object()
INT_BOUND = 2 ** 53           # "int" parameters: whole numbers a float64 holds exactly
# Keyword names other libraries use for a parameter tapeml names differently (NumPy's axis,
# PyTorch's keepdim, Hugging Face's num_heads): the error suggests tapeml's name.
SYNONYMS = {"axis": "dim", "keepdim": "keepdims", "num_heads": "n_heads", "nhead": "n_heads",
            "epsilon": "eps", "is_causal": "causal", "attn_mask": "mask", "p": "dropout", "ddof": "correction"}

# Names other libraries use for what tapeml does under another name: name -> (what tapeml writes, the
# builtin whose help `help(name)` shows, or None for an operator). The undefined-name error and
# help() lead there. Never a
# name tapeml has (PyTorch's scatter is put_along, but tapeml's scatter is a plot).
FOREIGN_NAMES = {
    "gather": ("take_along(x, ids, dim) (PyTorch's gather(x, dim, ids), one element per position along dim)",
               "take_along"),
    "take_along_axis": ("take_along(x, ids, dim) (NumPy's take_along_axis(x, ids, axis))", "take_along"),
    "take_along_dim": ("take_along(x, ids, dim) (PyTorch's take_along_dim(x, ids, dim))", "take_along"),
    "index_select": ("x[:, ids] (PyTorch's index_select(x, 1, ids): whole slices along an axis); for one "
                     "element per row, take_along(x, ids, dim)", "take_along"),
    "put_along_axis": ("x = put_along(x, ids, values, dim) (NumPy's put_along_axis, a new value)", "put_along"),
    "scatter_add": ("x = add_along(x, ids, values, dim) (PyTorch's scatter_add(x, dim, ids, values), a new value)",
                    "add_along"),
    "multinomial": ("sample(p, n) (PyTorch's multinomial(p, n, replacement=True))", "sample"),
    "matmul": ("a @ b (the matrix product)", None),
    "dot": ("a @ b (the matrix product; for two vectors, their dot product), or sum(a * b)", None),
    "mm": ("a @ b (the matrix product)", None),
    "bmm": ("a @ b (a batch of matrix products: '@' works on the last two axes)", None),
    "clamp": ("clip(x, lo, hi) (PyTorch's clamp(x, min, max))", "clip"),
    "masked_fill": ("where(mask, value, x) (PyTorch's x.masked_fill(mask, value))", "where"),
    "hstack": ("concat(a, b, dim=1) for matrices, concat(a, b) for vectors (NumPy's hstack)", "concat"),
    "vstack": ("concat(a, b) (along axis 0; stack(a, b) makes a new axis)", "concat"),
    "cat": ("concat(xs..., dim=0) (PyTorch's cat(xs, dim))", "concat"),
    "concatenate": ("concat(xs..., dim=0) (NumPy's concatenate(xs, axis))", "concat"),
    "arange": ("a range: 0:n-1, or range(n) (both are 0, 1, ..., n-1; a:b includes b)", "range"),
    "int": ("floor(x) or round(x) (every number is a float); num(s) reads a number from a string", "num"),
    "float": ("x itself (every number is a float); num(s) reads a number from a string", "num"),
    "attention": ("scaled_dot_product_attention(q, k, v) (one head), or multi_head_attention(x, heads, "
                  "n_heads) (a layer)", "scaled_dot_product_attention"),
    "unsqueeze": ("expand_dims(x, dim) (PyTorch's unsqueeze(x, dim))", "expand_dims"),
}

# Attributes and methods of other libraries' arrays (x.T, x.shape, x.sum()): what tapeml writes
# instead, with x for the receiver. A name not here that is a builtin is written name(x, ...).
FOREIGN_FIELDS = {
    "T": "x' (the transpose)", "mT": "x' (the transpose of the last two axes)",
    "shape": "size(x) (a tuple; size(x, d) for one axis)", "ndim": "len(size(x))",
    "item": "x itself (a 1-element result is a number already)", "tolist": "x itself",
    "clone": "y = x (assignment copies: values are never shared)", "copy": "y = x (assignment copies: values are never shared)",
    "detach": "stop_gradient(x)", "unsqueeze": "expand_dims(x, dim)", "view": "reshape(x, dims...)",
    "backward": "grad(loss_fn, params) (the gradient of a function)", "matmul": "x @ y", "dot": "x @ y",
    "masked_fill": "where(mask, value, x)", "clamp": "clip(x, lo, hi)",
}

CATEGORIES = ["Core", "Math", "Reductions & sorting", "Arrays", "Linear algebra", "Statistics & ML", "Autodiff", "Random", "Plotting",
              "IO", "Strings & collections", "Distributed"]


class SourceText(str):
    """A default value as written in tapeml source (a stdlib signature), shown verbatim."""


@dataclass
class P:
    """One parameter: name, kind, default, doc text, shape, and an optional constraint.

    kinds: any, number, int, bool, string, array (number or matrix), numbers (an array, or a
    tuple of numbers, as map returns them, given to the builtin as a vector), function, record,
    tuple, tree (number, matrix, tuple, record or dictionary, nested). `check(value)` returns an error
    message (the constraint that failed) or None. `variadic` collects the remaining
    positional arguments into a tuple."""
    name: str
    kind: str = "any"
    default: object = REQUIRED
    doc: str = ""
    shape: str = ""
    check: CallableType | None = None
    variadic: bool = False
    constraint: str = ""     # the constraint in words, for docs (`> 0`, `one of ...`)
    walked: bool = False     # in a for loop's iterable, given to the builtin's lazy form as a ranges.Walk

    @property
    def required(self) -> bool:
        return self.default is REQUIRED and not self.variadic


@dataclass
class Builtin(Callable):
    """A builtin: a Python function with its declaration. Its arguments are bound by the one
    binder (values.bind_arguments), which checks each one's kind and constraint here."""
    name: str
    category: str
    summary: str
    fn: CallableType
    params: list
    returns: str = ""
    what: str = ""
    how: str = ""
    errors: list = field(default_factory=list)
    examples: list = field(default_factory=list)
    interp: bool = False            # fn takes the interpreter as its first argument
    differentiable: bool = False    # records onto the tape (docs check its gradient)
    context: bool = False           # fn takes the session's narrow Context (builtins/context.py) first
    walk: CallableType | None = None   # the lazy form, run when the call is what a for loop walks

    def walked_positions(self, n: int) -> set:
        """The positions among n positional arguments that the lazy form takes as walks."""
        out = set()
        for i, p in enumerate(self.params):
            if p.variadic:
                return out | set(range(i, n)) if p.walked else out
            if p.walked and i < n:
                out.add(i)
        return out

    NO_DEFAULT = REQUIRED
    synonyms = SYNONYMS
    TOO_MANY = "{name}() takes at most {n} argument{s}, got {got}: {signature}"
    MISSING = "{name}() is missing the argument '{param}': {signature}"
    UNKNOWN = "{name}() has no parameter '{key}'{hint} (parameters: {names})"

    def __post_init__(self):
        # the binder's per-builtin facts, found once at registration (values.bind_arguments reads them)
        self.variadic_at = next((i for i, p in enumerate(self.params) if p.variadic), None)
        self._bind = _binder(self)

    def signature(self) -> str:
        return call_text(self.name, self.params)

    def convert_argument(self, p: P, v):
        """Check a passed argument's kind and constraint; return it converted."""
        if p.variadic:
            return tuple(convert(self.name, p, x) for x in v)
        v = convert(self.name, p, v)
        if v is None and p.default is None:     # an explicit none is the default: nothing to check
            return v
        if p.check is not None:
            msg = p.check(raw(v))
            if msg:
                raise ValueErr(f"{self.name}(): {p.name} {msg}, got {format_value(v, True)}")
        return v

    def bind(self, args: list, kwargs: dict) -> list:
        """Match positional and keyword arguments to parameters, apply defaults, check kinds
        and constraints. Raises TypeErr / ValueErr that name the builtin and the parameter.
        The binder was built once, at registration (`_binder`)."""
        return self._bind(args, kwargs)

    def bind_slowly(self, args: list, kwargs: dict) -> list:
        """`bind` by the one general binder (values.bind_arguments), parameter by parameter:
        what the built binder does, and the one that says what is wrong with a call."""
        bound = bind_arguments(self, args, kwargs, {})
        return [bound[p.name] for p in self.params]

    def call(self, interp, args: list, kwargs: dict, span, lazy: bool = False):
        """Bind and run; errors get `span` (the call site), Python exceptions become ValueErr.
        `lazy`: run the lazy form (the call is what a for loop walks; lang/evaluator/statements.py)."""
        bound = ()
        try:
            bound = self._bind(args, kwargs)
            fn = self.walk if lazy else self.fn
            if self.interp:
                return fn(interp, *bound)
            if self.context:
                return fn(interp.context, *bound)
            return fn(*bound)
        except LangError as e:
            if e.span is None and getattr(e, "operation", None) is not None:
                e = limits.in_builtin(self.name, bound, e)     # never an internal step's name and shapes
            pending = getattr(e, "pending_fn", None)
            if pending is not None and span is not None:
                e.add_call(f"{pending} (called by {self.name})", span)
                e.pending_fn = None
            raise e.with_span(span)
        except KeyboardInterrupt:
            raise
        except MemoryError:
            raise ValueErr(f"{self.name}(): not enough memory for this computation", span) from None
        except RuntimeError as e:       # PyTorch's out of memory (a GPU's): the same words
            if is_out_of_memory(e):
                raise ValueErr(f"{self.name}(): not enough memory for this computation", span) from None
            raise
        except (ValueError, TypeError, IndexError, ZeroDivisionError, OverflowError) as e:
            err = ValueErr(f"{self.name}(): {e}", span)
            err.python_text = True      # a Python exception's words: the fuzz suite counts these
            raise err from e


# ---- the binder of one builtin, built at registration -----------------------------------------
_UNSET = object()      # a parameter nothing was bound to yet
_NO = object()         # a fast test that does not take the value: the general conversion decides


def _take_array(v):
    t = type(v)
    if t is Box:            # a tracked matrix or number is kept boxed (convert's rule)
        r = raw(v)
        t = type(r)
    return v if t is np.ndarray or t is float or t in ARRAYS else _NO


_TREE_TYPES = (Record, tuple, float, np.ndarray)


def _take_int(v):
    if type(v) is float and v.is_integer() and -INT_BOUND <= v <= INT_BOUND:
        return int(v)
    return _NO


# per kind, the values `convert` passes through unchanged (or converts without a question), taken
# without its tests; anything else goes to `convert`, which converts it or says what is wrong
_FAST = {
    "any": lambda v: _NO if type(v) is Box else v,      # a check sees the plain value: convert_argument
    "array": _take_array,
    "number": lambda v: v if type(v) is float else _NO,
    "int": _take_int,
    "bool": lambda v: v if v is True or v is False else _NO,
    "string": lambda v: v if type(v) is str else _NO,
    "record": lambda v: v if type(v) is Record else _NO,
    "tree": lambda v: v if type(v) in _TREE_TYPES else _NO,
}


def _converter(b: "Builtin", p: P):
    """The conversion of parameter p's argument, as Builtin.convert_argument makes it, with the
    commonest values of its kind taken at once; None where there is nothing to do."""
    if p.variadic:
        if p.kind == "any":
            return None
        return lambda v: b.convert_argument(p, v)
    take, check = _FAST.get(p.kind), p.check
    if take is None:
        return lambda v: b.convert_argument(p, v)
    if check is None:
        if p.kind == "any":
            return None

        def conv(v):
            r = take(v)
            return b.convert_argument(p, v) if r is _NO else r
        return conv

    def conv_checked(v):
        r = take(v)
        if r is _NO or r is None or check(r):      # a value the check refuses: convert_argument says so
            return b.convert_argument(p, v)
        return r
    return conv_checked


def _binder(b: "Builtin"):
    """`bind(args, kwargs) -> list` for builtin b, built once: positional arguments, keywords,
    defaults and each parameter's conversion, with the parameters' facts looked up here rather
    than at every call. A call it does not take as it stands (too many arguments, an unknown or
    repeated keyword, a missing argument) goes to the general binder (`bind_slowly`), which says
    what is wrong in the same words, in the same order, as for every callable."""
    params = b.params
    n = len(params)
    rest = b.variadic_at
    defaults = [REQUIRED if p.variadic else p.default for p in params]
    convs = [_converter(b, p) for p in params]
    keyword_at = {p.name: i for i, p in enumerate(params) if i != rest}
    slow = b.bind_slowly
    todo = [i for i in range(n) if convs[i] is not None or i != rest]

    def bind(args, kwargs):
        na = len(args)
        if rest is None:
            if na > n:
                return slow(args, kwargs)
            out = list(args)
            if na < n:
                out += [_UNSET] * (n - na)
        elif na > rest:
            out = list(args[:rest])
            out.append(tuple(args[rest:]))
            out += [_UNSET] * (n - rest - 1)
        else:
            out = list(args) + [_UNSET] * (rest - na) + [()] + [_UNSET] * (n - rest - 1)
        if kwargs:
            for k, v in kwargs.items():
                i = keyword_at.get(k)
                if i is None or out[i] is not _UNSET:
                    return slow(args, kwargs)
                out[i] = v
        for i in todo:
            v = out[i]
            if v is _UNSET:
                v = defaults[i]
                if v is REQUIRED:
                    return slow(args, kwargs)
                out[i] = v
            else:
                c = convs[i]
                if c is not None:
                    out[i] = c(v)
        return out
    return bind


def _is_number(v) -> bool:
    return isinstance(v, (float, int)) and not isinstance(v, bool)


def convert(fname: str, p: P, v):
    """Check a value against a parameter kind; return it converted (Boxes kept for arrays)."""
    kind = p.kind
    if kind == "any" or (v is None and p.default is None):
        return v
    r = raw(v)
    ok = True
    if kind == "number":
        if type(r) in ARRAYS and r.ndim == 0:
            return float(r)
        if _is_number(r):
            if type(v) is Box:  # a tracked number: its gradient would silently be 0
                raise TypeErr(f"{fname}(): {p.name} is being differentiated (it depends on the input of "
                              f"grad), but {fname}() takes it as a plain number; write "
                              f"stop_gradient(...) around it to use its value with a gradient of 0")
            return float(r)
        ok = False
    elif kind == "int":
        if _is_number(r) and math.isfinite(r) and float(r).is_integer():
            if abs(r) > INT_BOUND:      # no count, index or seed is larger; never a 300-digit int
                raise ValueErr(f"{fname}(): {p.name} must be a whole number between -2^53 and 2^53, "
                               f"got {format_value(r)}")
            return int(r)
        if _is_number(r):
            raise ValueErr(f"{fname}(): {p.name} must be a whole number, got {not_whole_text(r)}")
        ok = False
    elif kind == "array":
        # a backend's own array type first: isinstance against the Matrix ABC costs more than the call's work
        ok = type(r) in ARRAYS or _is_number(r) or isinstance(r, (bool, Matrix))
    elif kind == "numbers":
        if isinstance(r, tuple):
            return numbers_vector(fname, p.name, v)
        ok = type(r) in ARRAYS or _is_number(r) or isinstance(r, (bool, Matrix))
    elif kind == "bool":
        if isinstance(r, np.bool_):
            return bool(r)
        ok = isinstance(r, bool)
    elif kind == "string":
        ok = isinstance(r, str)
    elif kind == "function":
        ok = isinstance(r, Callable)
    elif kind == "record":
        ok = isinstance(r, Record)
    elif kind == "tuple":
        ok = isinstance(r, tuple)
    elif kind == "tree":
        ok = _is_number(r) or isinstance(r, (Matrix, tuple, Record, Dict))
    if not ok:
        want = {"number": "a number", "int": "a whole number", "array": "a number or a matrix",
                "numbers": "a number, a matrix or a tuple of numbers",
                "bool": "true or false", "string": "a string", "function": "a function",
                "record": "a record", "tuple": "a tuple",
                "tree": "a number, matrix, tuple, record or dictionary"}[kind]
        raise TypeErr(f"{fname}(): {p.name} must be {want}, got {describe(v)}")
    return v


def numbers_vector(fname: str, pname: str, t):
    """A tuple of numbers (what map returns) as the vector of its items, tracked items kept on the
    tape (the stack primitive); a tuple of bools a bool vector; () the empty vector. TypeErr naming
    the first item that is neither."""
    from tapeml.array import ops
    items = raw(t)
    if not items:
        return new_matrix(np.zeros(0), ops.FLOAT["dtype"])
    bools = 0
    for i, x in enumerate(items):
        rx = raw(x)
        if isinstance(rx, Matrix) and rx.ndim == 0:
            rx = to_numpy(rx)[()]
        if isinstance(rx, (bool, np.bool_)):
            bools += 1
        elif not _is_number(rx):
            raise TypeErr(f"{fname}(): {pname} is a tuple, whose items must be numbers to make a vector, "
                          f"but item {i} is {describe(x)}")
    if bools == len(items):
        return new_matrix([bool(raw(x)) for x in items], np.bool_)
    if bools:
        raise TypeErr(f"{fname}(): {pname} is a tuple mixing bools and numbers; a vector holds one kind")
    if not any(type(x) is Box for x in items):
        return new_matrix([float(raw(x)) for x in items], ops.FLOAT["dtype"])
    return ops.stack(*items, dim=0)


def call_text(name: str, params) -> str:
    """`name(a, b=1, rest...)`: the one formatter of call shapes (help, completion, docs).
    A default that is a `str` subclass other than str (source text kept verbatim) prints as is."""
    parts = []
    for p in params:
        if p.variadic:
            parts.append(f"{p.name}...")
        elif p.default is REQUIRED:
            parts.append(p.name)
        elif isinstance(p.default, str) and type(p.default) is not str:
            parts.append(f"{p.name}={p.default}")
        else:
            parts.append(f"{p.name}={format_value(p.default, True)}")
    return f"{name}({', '.join(parts)})"


REGISTRY: dict[str, Builtin] = {}


def builtin(name: str, category: str, summary: str, params=(), *, returns: str = "", what: str = "",
            how: str = "", errors=(), examples=(), interp: bool = False, differentiable: bool = False,
            context: bool = False, walk=None):
    """Declare a builtin. See the module docstring. `walk`: its lazy form, a function of the same
    arguments returning a ranges.Walk (or a Progress), run instead when the call is the iterable
    of a `for` loop; parameters marked P(walked=True) then arrive as walks, not values."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown category {category!r}")

    def register(fn):
        if name in REGISTRY:
            raise ValueError(f"builtin {name!r} declared twice")
        REGISTRY[name] = Builtin(name, category, summary, fn, list(params), returns, what, how,
                                 list(errors), list(examples), interp, differentiable, context, walk)
        return fn
    return register


# constraint helpers: each returns a check function and is documented by its text
def positive(v):
    return None if v > 0 else "must be > 0"


def non_negative(v):
    return None if v >= 0 else "must be >= 0"


def one_of(*choices):
    def check(v):
        return None if v in choices else "must be one of " + ", ".join(f'"{c}"' for c in choices)
    return check
