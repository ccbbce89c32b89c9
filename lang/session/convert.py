"""Values between Python and tapeml, for a `Session` (lang/session/session.py).

Values, Python -> tapeml: NumPy arrays (and lists of numbers) become matrices in the Session's
float type (integer arrays included), on the Session's device (on torch, tensors made from a
copy; a torch tensor given from Python is read through NumPy, a copy too); bool arrays (and lists of bools) bool matrices; a 0-d
array, int or float a number; bool, str and None themselves; tuple a tuple; a dict whose keys are
all names a record, any other dict (or a tapeml.Dict) a dictionary; a Python callable a function
of the language (PythonFunction). Anything else is a TypeError of the language that says where
in the value it is (r['w'][2]); an int past the float range is a ValueError. tapeml -> Python:
matrices are NumPy arrays on every device (copies, bool ones bool), numbers float, bools bool, strings str, tuples
tuple (a tuple of whole numbers, as size gives, a tuple of ints: NumPy takes it as a shape),
records dict, dictionaries tapeml.Dict (a dict; whole-number keys as ints), functions a Python
callable that calls them in the Session. Both conversions walk nested values without recursion,
so a tuple nested 100,000 deep crosses; a value that contains itself is refused.
"""
from __future__ import annotations

import sys
from collections.abc import Mapping

import numpy as np

from tapeml.array import backend as B
from tapeml.array.tape import Box, raw
from tapeml.array.values import Dict as LangDict
from tapeml.array.values import MAX_NESTING, Callable, Progress, Record, dict_key, nesting_error
from tapeml.syntax.errors import LangError, TypeErr, ValueErr
from tapeml.syntax.lexer import KEYWORDS


class PythonError(LangError):
    """A Python function called from tapeml raised an exception (its __cause__)."""
    kind = "PythonError"


class Dict(dict):
    """A tapeml dictionary on the Python side: a dict. Reading a dictionary from a Session gives
    one, and setting one into a Session makes a dictionary whatever its keys (a plain dict whose
    keys are all names becomes a record)."""
    __slots__ = ()

    def __repr__(self):
        return f"tapeml.Dict({dict.__repr__(self)})"


def is_name(name) -> bool:
    """A name the language can write: ASCII letters, digits and _, not a keyword."""
    return isinstance(name, str) and name.isascii() and name.isidentifier() and name not in KEYWORDS


# ---- Python -> tapeml ----------------------------------------------------------------------------
_CONTAINER = object()


def _max_axes() -> int:
    """The most axes a NumPy array may have: 64 in NumPy 2, 32 before."""
    for n in (64, 32):
        try:
            np.empty((1,) * n)
            return n
        except ValueError:
            continue
    return 32


MAX_AXES = _max_axes()      # a list nested deeper than this is no matrix


def _where(base: str, path: list) -> str:
    """The place in a value: base followed by the keys (r['w'][2]); a base with '{}' takes the keys
    there ('argument 1{} of f')."""
    keys = "".join(f"[{k!r}]" for k in path)
    return base.replace("{}", keys) if "{}" in base else base + keys


def to_lang(session, root, base: str):
    """The tapeml value of the Python value `root` (see the module docstring). `base` names it in
    messages ("r", "argument 1 of f"), followed by the place inside it: r['w'][2]. Walks tuples
    and dicts with an explicit stack, at most values.MAX_NESTING deep (the limit of every walk over
    a value); a dict or tuple inside itself is refused."""
    dtype = session.state.values["dtype"]
    value = _leaf(session, root, base, [], dtype)
    if value is not _CONTAINER:
        return value
    # frames: [the container, its items left (key, value), the converted items, its key, its kind]
    stack = [[root, _items(root, base, []), [], None, _container_kind(root)]]
    on_path = {id(root)}
    path: list = []
    while True:
        frame = stack[-1]
        for key, item in frame[1]:
            path.append(key)
            value = _leaf(session, item, base, path, dtype)
            if value is _CONTAINER:
                if id(item) in on_path:
                    raise TypeErr(f"{_where(base, path)} is the {_kind(item)} that contains it: "
                                  f"a value that contains itself has no tapeml form (tapeml values are trees)")
                if len(stack) >= MAX_NESTING:
                    raise nesting_error("the Python value")
                on_path.add(id(item))
                stack.append([item, _items(item, base, path), [], key, _container_kind(item)])
                break
            frame[2].append((key, value))
            path.pop()
        else:
            stack.pop()
            on_path.discard(id(frame[0]))
            kind = frame[4]
            built = (Record(dict(frame[2])) if kind == "record" else
                     LangDict({_lang_key(k): v for k, v in frame[2]}) if kind == "dict" else
                     tuple(v for _, v in frame[2]))
            if not stack:
                return built
            stack[-1][2].append((frame[3], built))
            path.pop()


def _kind(v) -> str:
    return "dict" if isinstance(v, Mapping) else "tuple"


def _container_kind(container) -> str:
    """"tuple"; "record" for a dict whose keys are all names; "dict" for a tapeml.Dict or any other dict."""
    if not isinstance(container, Mapping):
        return "tuple"
    if not isinstance(container, Dict) and all(is_name(k) for k in container):
        return "record"
    return "dict"


def _lang_key(k):
    """A Python dict key as a tapeml dictionary key (values.dict_key: ints become numbers)."""
    if isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)):
        k = float(k)
    elif isinstance(k, tuple):
        k = tuple(_lang_key(x) for x in k)
    elif isinstance(k, np.floating):
        k = float(k)
    elif not isinstance(k, (str, float, bool, np.bool_)):
        raise TypeErr(f"a dictionary key is a string, a number or a tuple of those, got {_python_kind(k)}")
    return dict_key(k)


def _items(container, base, path):
    """(key, item) pairs of a tuple or a dict; a dict that becomes a dictionary has its keys checked."""
    if not isinstance(container, Mapping):
        return iter(enumerate(container))
    if _container_kind(container) == "dict":
        for k in container:
            try:
                _lang_key(k)
            except (LangError, OverflowError) as e:
                why = e.message if isinstance(e, LangError) else "a number too large for a float64"
                raise TypeErr(f"{_where(base, path)} has the key {k!r}: {why}") from None
    return iter(container.items())


def _leaf(session, v, base, path, dtype):
    """A value that is not a tuple or a dict, converted; _CONTAINER for a tuple or a dict."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (float, np.floating)) and not isinstance(v, np.complexfloating):
        return float(v)
    if isinstance(v, (int, np.integer)):
        try:
            return float(v)
        except OverflowError:
            digits = _digits(v)
            raise ValueErr(f"{_where(base, path)} is an int with {digits} digits, too large for a number "
                           f"(tapeml's numbers are float64: at most about 1.8e308)") from None
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, (tuple, Mapping)):
        return _CONTAINER
    if isinstance(v, SessionFunction):
        if v.session is not session:
            raise TypeErr(f"{_where(base, path)}: the function {v.fn.name} belongs to another Session")
        return v.fn
    if isinstance(v, (np.ndarray, list)):
        return _on_device(session, _matrix(v, base, path, dtype))
    if _is_torch_tensor(v):             # a tensor (a torch session's values are NumPy arrays in Python)
        _check_tensor(v, _where(base, path))
        try:
            host = _tensor_to_numpy(v)
        except (RuntimeError, TypeError, NotImplementedError, ValueError):    # another kind we cannot read
            raise TypeErr(f"{_where(base, path)} is a torch tensor ({v.layout}, {v.dtype}, on {v.device}) "
                          f"whose values cannot be read as a NumPy array") from None
        return _on_device(session, _matrix(host, base, path, dtype))
    if callable(v) and not hasattr(v, "__array__") and not isinstance(v, type):
        return PythonFunction(session, v, _function_name(v, base, path))
    kind = _python_kind(v)
    raise TypeErr(f"{_where(base, path)} is {kind}" + (f"; {_HAS}" if kind.startswith("an object") else ""))


_HAS = ("tapeml takes numbers, bools, strings, None, NumPy arrays and lists of numbers, tuples, "
        "dicts and functions")


def _is_torch_tensor(v) -> bool:
    """A torch.Tensor, an nn.Parameter or another subclass, whether or not a torch Session was
    made in this process (the backend need not be loaded): only when torch is imported can v be one."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(v, torch.Tensor)


def _check_tensor(v, where: str) -> None:
    """Refuse, in tapeml's words, a tensor that has no values to read (the meta device), is
    not dense (sparse layouts) or holds complex numbers."""
    shape = "x".join(str(n) for n in v.shape) or "a number's"
    if v.device.type == "meta":
        raise TypeErr(f"{where} is a torch tensor on the 'meta' device: it has a shape ({shape}) but no values; "
                      f"make it on a device that holds them (cpu, cuda)")
    if str(v.layout) != "torch.strided":         # sparse_coo, sparse_csr, ...
        raise TypeErr(f"{where} is a sparse torch tensor ({v.layout}, {shape}); tapeml's matrices are dense: "
                      f"give t.to_dense()")
    if v.is_complex():
        raise TypeErr(f"{where} is a torch tensor of complex numbers ({v.dtype}); a matrix holds real numbers")


def _tensor_to_numpy(v) -> np.ndarray:
    """A tensor's values on the host: detached (a Parameter requires grad), widened to float64
    where NumPy has no such type (bfloat16)."""
    t = v.detach().cpu()
    try:
        return t.numpy()
    except TypeError:
        return t.double().numpy()


def _python_kind(v) -> str:
    """A Python value's kind in a message, with what to do about it where there is something."""
    if v is None:
        return "None"
    if isinstance(v, str):
        return f"a string ({v[:20]!r}{'...' if len(v) > 20 else ''})"
    if isinstance(v, (complex, np.complexfloating)):
        return f"a complex number ({v!r}): tapeml's numbers are real"
    if isinstance(v, (set, frozenset)):
        return "a set (tapeml has no sets: a tuple of its items, tuple(sorted(s)), is the nearest)"
    if isinstance(v, (bytes, bytearray)):
        return "bytes (decode them to a str first)"
    if isinstance(v, Mapping):
        return "a dict"
    if hasattr(v, "__array__"):
        return f"a {type(v).__name__} (convert it with numpy.asarray(...) first)"
    if isinstance(v, type):
        return f"a Python class ({v.__name__}); wrap it in a function to call it from tapeml"
    return f"an object of the Python class {type(v).__name__}"


def _matrix(v, base, path, dtype):
    """A NumPy array or a (nested) list of numbers as a matrix of `dtype` (a 0-d array: a number)."""
    a = None
    if isinstance(v, np.ma.MaskedArray) and np.ma.getmaskarray(v).any():
        raise TypeErr(f"{_where(base, path)} is a masked array with masked elements; tapeml has no "
                      f"mask: fill them first (a.filled(numpy.nan))")
    try:
        a = np.asarray(v)
    except (ValueError, TypeError, RecursionError, OverflowError):
        pass
    except MemoryError:
        raise ValueErr(f"{_where(base, path)}: not enough memory to convert it") from None
    if a is None or a.dtype.kind not in "biuf":
        a = _explain_matrix(v, a, base, path)       # raises, or gives the numbers it found
    if a.ndim == 0:
        return bool(a) if a.dtype.kind == "b" else float(a)
    try:
        if a.dtype.kind == "b":
            return a.copy()             # a mask stays a bool matrix
        return a.astype(dtype)          # a copy: the caller's array stays theirs
    except MemoryError:
        raise ValueErr(f"{_where(base, path)}: not enough memory to copy a "
                       f"{'x'.join(map(str, a.shape))} array") from None


def _on_device(session, a):
    """A matrix made from Python (a NumPy array of the caller's or a copy: see _matrix) on the
    Session's device: NumPy's stays as it is; another backend's is made from it (the one crossing,
    lang/array/backend.py)."""
    if type(a) is not np.ndarray:
        return a                        # a number or a bool
    values = session.state.values
    values["made"] = True               # set_device in the Session now refuses to move (it cannot move a)
    be = values["backend"]
    return a if be is B.NUMPY else be.asarray(a)


_ARRAY_KINDS = {"c": "complex numbers", "U": "strings", "S": "bytes",
                "M": "dates (datetime64)", "m": "time spans (timedelta64)", "V": "records (a structured dtype)"}


def _explain_matrix(v, a, base, path):
    """Why a list or array is no matrix of numbers (a TypeErr/ValueErr naming the place), or, for
    an object array or a list of ints too large for int64 but not for a float, its numbers."""
    if isinstance(v, np.ndarray) and v.dtype.kind != "O":
        raise TypeErr(f"{_where(base, path)} is a NumPy array of {_ARRAY_KINDS.get(v.dtype.kind, v.dtype.name)}"
                      f" (dtype {v.dtype}); a matrix holds real numbers")
    shape = _shape_of(v, base, list(path), 0, set())       # raises for what is no number
    flat: list = []
    _flatten(v, flat)
    return np.array([float(x) for x in flat], dtype=np.float64).reshape(shape)


def _flatten(v, out):
    if isinstance(v, np.ndarray):
        out.extend(v.reshape(-1).tolist())
    elif isinstance(v, (list, tuple)):
        for x in v:
            _flatten(x, out)
    else:
        out.append(v)


def _shape_of(v, base, path, depth, seen):
    """The shape of a nested list of numbers; a TypeErr naming the first item that is no number
    or that makes the list ragged. Recursion is bounded by MAX_AXES."""
    if isinstance(v, np.ndarray):
        if v.dtype.kind == "O":
            return _shape_of(v.tolist() if v.ndim else v.item(), base, path, depth, seen)
        if v.dtype.kind not in "biuf":
            raise TypeErr(f"{_where(base, path)} is a NumPy array of {_ARRAY_KINDS.get(v.dtype.kind, v.dtype.name)}"
                          f"; a matrix holds real numbers")
        return v.shape
    if isinstance(v, (list, tuple)):
        if id(v) in seen:
            raise TypeErr(f"{_where(base, path)} is the list that contains it: a value that contains "
                          f"itself has no tapeml form")
        if depth >= MAX_AXES:
            raise TypeErr(f"{_where(base, [])}: the list is nested more than {MAX_AXES} deep; "
                          f"a matrix has at most {MAX_AXES} axes")
        seen.add(id(v))
        shapes = []
        for i, x in enumerate(v):
            path.append(i)
            shapes.append(_shape_of(x, base, path, depth + 1, seen))
            if shapes[-1] != shapes[0]:
                raise TypeErr(f"{_where(base, path[:-1])} is a ragged list: item [0] {_shape_words(shapes[0])} "
                              f"and item [{i}] {_shape_words(shapes[-1])}; the rows of a matrix have "
                              f"equal lengths")
            path.pop()
        seen.discard(id(v))
        return (len(v),) + (shapes[0] if shapes else ())
    if isinstance(v, (bool, np.bool_, int, float, np.integer, np.floating)) and not isinstance(v, np.complexfloating):
        try:
            float(v)
        except OverflowError:
            raise ValueErr(f"{_where(base, path)} is an int with {_digits(v)} digits, too large "
                           f"for a number (tapeml's numbers are float64: at most about 1.8e308)") from None
        return ()
    raise TypeErr(f"{_where(base, path)} is {_python_kind(v)}; a list or array given to tapeml holds numbers")


def _digits(n) -> int:
    """The number of decimal digits of a (large) int, without str() (Python refuses str of an
    int with more than 4300 digits)."""
    n = abs(int(n))
    d = int(n.bit_length() * 0.30102999566398120) + 1
    return d if n >= 10 ** (d - 1) else d - 1


def _shape_words(shape) -> str:
    """'is a number', 'has 2 items', 'has the shape 2x3'."""
    if not shape:
        return "is a number"
    if len(shape) == 1:
        return f"has {shape[0]} item{'' if shape[0] == 1 else 's'}"
    return f"has the shape {'x'.join(map(str, shape))}"


# ---- tapeml -> Python ----------------------------------------------------------------------------
def to_python(session, root):
    """The Python value of a tapeml value (see the module docstring), walking tuples and records
    with an explicit stack, at most values.MAX_NESTING deep."""
    value = _py_leaf(session, root)
    if value is not _CONTAINER:
        return value
    stack = [[_py_items(root), [], None, root]]
    while True:
        frame = stack[-1]
        for key, item in frame[0]:
            value = _py_leaf(session, item)
            if value is _CONTAINER:
                if len(stack) >= MAX_NESTING:
                    raise nesting_error("the value")
                stack.append([_py_items(item), [], key, item])
                break
            frame[1].append((key, value))
        else:
            stack.pop()
            r = raw(frame[3])
            t = type(r)
            built = (dict(frame[1]) if t is Record else
                     Dict({_py_key(k): v for k, v in frame[1]}) if t is LangDict else
                     _py_tuple([v for _, v in frame[1]]))
            if not stack:
                return built
            stack[-1][1].append((frame[2], built))


def _py_items(v):
    v = raw(v)
    t = type(v)
    return iter(v.fields.items()) if t is Record else iter(v.items()) if t is LangDict else iter(enumerate(v))


def _whole(x) -> bool:
    return type(x) is float and x.is_integer() and abs(x) < 2.0 ** 63


def _py_tuple(items: list) -> tuple:
    """A tuple; a non-empty one of whole numbers (a shape from size, indices) holds ints, so NumPy
    takes it as a shape and Python as indices."""
    if items and all(_whole(x) for x in items):
        return tuple(int(x) for x in items)
    return tuple(items)


def _py_key(k):
    """A dictionary key for Python: strings as they are, whole numbers as ints, tuples of them too."""
    if type(k) is tuple:
        return _py_tuple([_py_key(x) for x in k])
    if _whole(k):
        return int(k)
    return k


def _py_leaf(session, v):
    v = raw(v)
    t = type(v)
    if t is np.ndarray:
        return v.copy()
    if t in B.ARRAYS:                    # another backend's matrix: a NumPy array of the caller's own
        a = B.to_numpy(v)
        return a.copy() if B.of(v).device == "cpu" else a
    if t is bool or t is str or v is None:
        return v
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, (float, int, np.floating, np.integer)):
        return float(v)
    if t is tuple or t is Record or t is LangDict:
        return _CONTAINER
    if t is PythonFunction and v.session is session:
        return v.fn                      # the Python function that was set in
    if isinstance(v, Callable):
        return SessionFunction(session, v)
    if isinstance(v, Progress):          # progress(items): what its loop walks
        return to_python(session, v.items)
    return v


class SessionFunction:
    """A tapeml function handed to Python: calling it converts the arguments and runs it in
    its Session (`f(x)` is `session.call` of that function)."""

    def __init__(self, session, fn):
        self.session, self.fn = session, fn

    def __call__(self, *args, **kwargs):
        with self.session.entered():
            return self.session._call(self.fn, args, kwargs, self.fn.name)

    def __repr__(self):
        return f"<tapeml function {self.fn.signature() if hasattr(self.fn, 'signature') else self.fn.name}>"


# ---- Python functions called from tapeml -----------------------------------------------------------
def _function_name(fn, base, path) -> str:
    """What a Python function is called in tapeml's messages: the variable it was set as (s["f"] =
    ...), else its own __name__."""
    if not path and is_name(base):
        return base
    name = getattr(fn, "__name__", "")
    return name if is_name(name) else "python_function"


class _PyParam:
    __slots__ = ("name", "default", "variadic")

    def __init__(self, name, default, variadic=False):
        self.name, self.default, self.variadic = name, default, variadic


class PythonFunction(Callable):
    """A Python callable set into a Session (`s["f"] = lambda x: ...`), callable from tapeml: the
    arguments go to Python as `s[name]` gives values, the result comes back as `s[name] = value`
    takes it. The tape cannot follow Python code: an argument that grad is differentiating (a
    tracked value, anywhere inside it) is a TypeError naming the argument, never a silent zero
    gradient. An exception in the function is a PythonError (the exception its __cause__)."""
    __slots__ = ("session", "fn", "name", "params")

    def __init__(self, session, fn, name: str):
        self.session, self.fn, self.name = session, fn, name
        self.params = _py_params(fn)

    def signature(self) -> str:
        parts = []
        for p in self.params:
            parts.append(f"{p.name}..." if p.variadic else p.name if p.default is None else f"{p.name}=...")
        return f"{self.name}({', '.join(parts)})"

    def printed(self) -> str:
        return f"<python {self.signature()}>"

    def call(self, interp, args: list, kwargs: dict, span):
        for where, a in [(f"argument {i + 1}", a) for i, a in enumerate(args)] + \
                        [(f"argument {k}", v) for k, v in kwargs.items()]:
            if _tracked(a):
                raise TypeErr(f"{self.name}() is a Python function, which grad cannot differentiate: its "
                              f"{where} depends on the input of grad. Write it in tapeml, or pass "
                              f"stop_gradient(...) to use the value with a gradient of 0", span)
        session = self.session
        py_args = [to_python(session, a) for a in args]
        py_kwargs = {k: to_python(session, v) for k, v in kwargs.items()}
        try:
            out = self.fn(*py_args, **py_kwargs)
        except LangError:
            raise                           # a Session call inside the function failed: its own error
        except Exception as e:
            text = str(e)
            raise PythonError(f"{self.name}(): the Python function raised {type(e).__name__}"
                              + (f": {text}" if text else ""), span) from e
        try:
            return to_lang(session, out, f"the result of {self.name}()")
        except LangError as e:
            raise e.with_span(span)


def _py_params(fn) -> list:
    import inspect
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return [_PyParam("args", None, True)]
    out = []
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            out.append(_PyParam(p.name, None, True))
        else:
            out.append(_PyParam(p.name, None if p.default is p.empty else p.default))
    return out


def _tracked(v) -> bool:
    """Whether v, or anything inside it, is on grad's tape."""
    todo = [v]
    while todo:
        x = todo.pop()
        if type(x) is Box:
            return True
        if type(x) is tuple:
            todo.extend(x)
        elif type(x) is Record:
            todo.extend(x.fields.values())
        elif type(x) is LangDict:
            todo.extend(x.values())
    return False
