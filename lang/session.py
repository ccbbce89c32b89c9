"""The Python API: a `Session` runs tapeml code and trades values with Python.

    import tapeml
    s = tapeml.Session(dtype="float64", seed=0)
    s["x"] = numpy_array           # Python -> tapeml
    s.run("y = softmax(x)")
    y = s["y"]                     # tapeml -> Python (a NumPy array)

A Session owns an interpreter (its variables), and a `context.State`: its float type, random
generator, figures and caches. Every entry point (run, run_file, eval, call, reading and writing
variables) makes the Session's state current while it runs and restores the previous one after,
so two Sessions in one process never see each other's dtype, seed or figures, however their
calls interleave. Sessions are not thread safe: use one thread at a time.

Values, Python -> tapeml: NumPy arrays (and lists of numbers) become matrices in the Session's
float type (integer and bool arrays included); a 0-d array, int or float a number; bool, str and
None themselves; tuple a tuple; a dict (str keys) a record. tapeml -> Python: matrices are NumPy
arrays (copies), numbers float, bools bool, strings str, tuples tuple, records dict, functions
a Python callable that calls them in the Session.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Mapping

import numpy as np

from . import context, limits
from .errors import LangError, NameErr, RecursionErr, TypeErr
from .interpreter import Interpreter
from .primitive_table import DTYPES
from .tape import raw
from .values import Callable, Record, describe


class _Stdout:
    """sys.stdout at the moment of writing (so pytest's and Jupyter's capture see print)."""

    def write(self, text):
        return sys.stdout.write(text)

    def __getattr__(self, name):
        return getattr(sys.stdout, name)


class Session:
    """An independent tapeml session: its own variables, float type, random generator and figures.

    Session(dtype="float64", seed=None, out=None, prelude=True)
      dtype   "float64" (default) or "float32": the float type of every new matrix
      seed    a whole number >= 0 for repeatable random draws (as `seed(n)`), or None (OS entropy)
      out     a text stream for print (default: sys.stdout at the time of writing)
      prelude load the standard library (softmax, mse, ...) on first use (default True)

    Raises ValueError for an unknown dtype or a negative seed. Language errors in code that a
    Session runs raise `tapeml.LangError` (with .kind, .message, .line, .column, .file).
    """

    def __init__(self, dtype: str = "float64", seed: int | None = None, out=None, prelude: bool = True):
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        if seed is not None and (int(seed) != seed or seed < 0):
            raise ValueError(f"seed must be a whole number >= 0 or None, got {seed!r}")
        self.interp = Interpreter(out=out if out is not None else _Stdout(), load_prelude=prelude)
        values = {"dtype": DTYPES[dtype]}
        if seed is not None:
            values["rng"] = np.random.default_rng(int(seed))
        self.state = context.State(**values)

    # ---- running code ------------------------------------------------------------------------
    def run(self, source: str, filename: str = "<string>") -> None:
        """Run a program (statements, as in a .ml file). Its variables stay in the Session.
        Raises LangError (SyntaxError, ShapeError, ...) with the line and column in `filename`."""
        with self.state:
            self.interp.run(source, filename)

    def run_file(self, path) -> None:
        """Run the .ml file at `path` (its imports resolve next to it). Raises OSError when it
        cannot be read, LangError when it fails (with .file the path)."""
        path = os.fspath(path)
        with open(path, encoding="utf-8") as fh:
            source = fh.read()
        with self.state:
            self.interp.run(source, path)

    def eval(self, source: str):
        """Run `source` and return the value of its last expression statement (one not ended
        by `;` and not none) as a Python value; None when it has none (only assignments).
        `s.eval("x @ w")` -> a NumPy array of the product's shape. Raises LangError."""
        last = []
        with self.state:
            self.interp.run(source, "<string>", echo=last.append)
            return self._to_python(last[-1]) if last else None

    def call(self, name: str, *args, **kwargs):
        """Call the function `name` (a user fn, a stdlib or builtin function) with Python
        arguments, converted as for `s[name] = value`; returns its result as a Python value.
        `s.call("softmax", np.array([[1., 2.]]))` -> array of shape (1, 2).
        Raises LangError (NameError when there is no such function, TypeError when it is not one)."""
        with self.state:
            fn = self._lookup(name)
            if not isinstance(fn, Callable):
                raise TypeErr(f"{name} is {describe(fn)}, not a function")
            return self._call(fn, args, kwargs)

    # ---- variables ---------------------------------------------------------------------------
    def __getitem__(self, name: str):
        """The variable `name` as a Python value (see the module docstring for the kinds).
        Raises LangError (NameError) when no scope has it."""
        with self.state:
            return self._to_python(self._lookup(name))

    def __setitem__(self, name: str, value) -> None:
        """Set the global variable `name` (a valid tapeml name) to a Python value. Raises
        LangError (TypeError) for a value tapeml has no kind for (complex, object arrays, ...)."""
        from .lexer import KEYWORDS
        if not isinstance(name, str) or not name.isidentifier() or name in KEYWORDS:
            raise NameErr(f"{name!r} is not a variable name")
        with self.state:
            self.interp.globals.vars[name] = self._to_lang(value)

    def __contains__(self, name) -> bool:
        return name in self.interp.globals.vars

    def __delitem__(self, name: str) -> None:
        del self.interp.globals.vars[name]

    def variables(self) -> list[str]:
        """The names of the Session's global variables, in the order they were first set."""
        return list(self.interp.globals.vars)

    def figures(self) -> list:
        """The Session's open matplotlib figures (drawn by plot, hist, ... and not yet shown)."""
        from tapeml.builtins import plot
        with self.state:
            return plot.open_figures()

    # ---- conversions -------------------------------------------------------------------------
    def _lookup(self, name: str):
        if self.interp.stdlib_pending and name not in self.interp.globals.vars:
            self.interp.load_stdlib()
        try:
            return self.interp.globals.lookup(name)
        except KeyError:
            raise NameErr(f"'{name}' is not defined") from None

    def _call(self, fn, args, kwargs):
        lang_args = [self._to_lang(a) for a in args]
        lang_kwargs = {k: self._to_lang(v) for k, v in kwargs.items()}
        return self._to_python(self.interp.call(fn, lang_args, lang_kwargs, None))

    def _to_python(self, v, depth: int = 0):
        if depth == 0:
            return self._converting(self._to_python, v, "the value")
        v = raw(v)
        t = type(v)
        if t is np.ndarray:
            return v.copy()
        if t is bool or t is str or v is None:
            return v
        if isinstance(v, (float, int, np.floating, np.integer)):
            return float(v)
        if (t is tuple or t is Record) and depth > limits.MAX_NESTING:
            raise limits.nesting_error("the value")
        if t is tuple:
            return tuple([self._to_python(x, depth + 1) for x in v])
        if t is Record:
            return {k: self._to_python(x, depth + 1) for k, x in v.fields.items()}
        if isinstance(v, Callable):
            return SessionFunction(self, v)
        return v

    def _converting(self, convert, v, what: str):
        """convert(v) from the top (depth 1); Python's own recursion limit, lower than the
        nesting limit in a plain Python process, is a RecursionError of the language too."""
        try:
            return convert(v, 1)
        except RecursionError:
            raise RecursionErr(f"{what} nests tuples and records too deeply to convert within Python's "
                               f"recursion limit ({sys.getrecursionlimit()}); raise it with "
                               f"sys.setrecursionlimit") from None

    def _to_lang(self, v, depth: int = 0):
        if depth == 0:
            return self._converting(self._to_lang, v, "the Python value")
        dtype = self.state_dtype()
        if isinstance(v, (bool, np.bool_)):
            return bool(v)
        if isinstance(v, (int, float, np.integer, np.floating)):
            return float(v)
        if v is None or isinstance(v, str):
            return v
        if isinstance(v, SessionFunction):
            if v.session is not self:
                raise TypeErr(f"the function {v.fn.name} belongs to another Session")
            return v.fn
        if isinstance(v, (tuple, Mapping)) and depth > limits.MAX_NESTING:
            raise limits.nesting_error("the Python value")
        if isinstance(v, tuple):
            return tuple([self._to_lang(x, depth + 1) for x in v])
        if isinstance(v, Mapping):
            fields = {}
            for k, x in v.items():
                if not isinstance(k, str) or not k.isidentifier():
                    raise TypeErr(f"a record's field names are names, got {k!r}")
                fields[k] = self._to_lang(x, depth + 1)
            return Record(fields)
        if isinstance(v, (np.ndarray, list)):
            a = np.asarray(v)
            if a.dtype.kind not in "biuf":
                raise TypeErr(f"tapeml has no matrices of NumPy dtype {a.dtype} (numbers only)")
            if a.ndim == 0:
                return bool(a) if a.dtype.kind == "b" else float(a)
            return a.astype(dtype)          # a copy: the caller's array stays theirs
        raise TypeErr(f"tapeml has no kind of value for the Python type {type(v).__name__}")

    def state_dtype(self):
        """The NumPy float type of the Session's new matrices (set_dtype in the Session changes it)."""
        if context.current() is self.state:
            return context.SLOTS["dtype"].read()
        return self.state.store.get("dtype", self.state.values_given.get("dtype"))

    def __repr__(self):
        return f"<tapeml.Session dtype={np.dtype(self.state_dtype()).name}, {len(self.interp.globals.vars)} variables>"


class SessionFunction:
    """A tapeml function handed to Python: calling it converts the arguments and runs it in
    its Session (`f(x)` is `session.call` of that function)."""

    def __init__(self, session: Session, fn):
        self.session, self.fn = session, fn

    def __call__(self, *args, **kwargs):
        with self.session.state:
            return self.session._call(self.fn, args, kwargs)

    def __repr__(self):
        return f"<tapeml function {self.fn.signature() if hasattr(self.fn, 'signature') else self.fn.name}>"


__all__ = ["Session", "SessionFunction", "LangError"]
