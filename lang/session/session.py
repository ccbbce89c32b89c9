"""The Python API: a `Session` runs tapeml code and trades values with Python.

    import tapeml
    s = tapeml.Session(dtype="float64", seed=0)
    s["x"] = numpy_array           # Python -> tapeml
    s.run("y = softmax(x)")
    y = s["y"]                     # tapeml -> Python (a NumPy array)

A Session owns an interpreter (its variables), and a `context.State`: its float type, random
generator, figures and caches. Every entry point (run, run_file, eval, call, reading and writing
variables) makes the Session's state the current one of the calling thread while it runs
(lang/array/context.py), so two Sessions never see each other's dtype, seed or figures, however their
calls interleave and from whichever threads (one Session used by two threads AT ONCE shares its
variables, as any Python object would). While it runs, Python's recursion limit is the command
line's, and a computation nested deeper than lang/evaluator/stack.py's HOP_DEPTH continues on a thread with
a large stack, so a Session reaches the language's limit of 20,000 nested calls as the command
line does. Ctrl-C raises KeyboardInterrupt out of the method; the variables set so far stay.

Every face is one of these too: the command line, the REPL, the kernel and the docs builder (one
per example and per page) each hold a Session made by `face_session(dtype, backend, ...)` (its
own state, a bad float type or device refused before anything runs) and drive its interpreter
through runner.run_cell inside `s.entered()`, the block every method runs its work in: the
Session's state current, NumPy's floating-point warnings off (the host's error state is back
after), Python's recursion limit raised, BLAS on the Session's threads. `Session.of(interp,
state)` wraps an interpreter made elsewhere.

Values cross between Python and tapeml as lang/session/convert.py says.
"""
from __future__ import annotations

import contextlib
import math
import os
import sys

import numpy as np

from tapeml.array import backend as B
from tapeml.array import context
from tapeml.array import threads as blas_threads
from tapeml.array.primitive_table import DTYPES
from tapeml.array.values import Callable, describe
from tapeml.evaluator.interpreter import Interpreter
from tapeml.evaluator.stack import running
from tapeml.session.convert import (MAX_AXES, Dict, PythonError, PythonFunction, SessionFunction,  # noqa: F401
                                    is_name, to_lang, to_python)
from tapeml.syntax.errors import LangError, NameErr, TypeErr
from tapeml.syntax.lexer import KEYWORDS


class UndefinedName(NameErr, KeyError):
    """A name the Session does not have: a NameError of the language, and a KeyError, as a
    missing key of a Python mapping is (`s["x"]`, `del s["x"]`, `s.call("x")`)."""


class _Stdout:
    """sys.stdout at the moment of writing (so pytest's and Jupyter's capture see print)."""

    def write(self, text):
        return sys.stdout.write(text)

    def __getattr__(self, name):
        return getattr(sys.stdout, name)


class Session:
    """An independent tapeml session: its own variables, float type, random generator and figures.

    Session(dtype="float64", seed=None, out=None, prelude=True, check_nan=False, threads=None, device=None)
      dtype   "float64" (default) or "float32": the float type of every new matrix
      device  where the Session's matrices live: "numpy" (default), "torch:cpu", "torch:cuda[:N]"
              or "torch:mps" (PyTorch tensors; the extra tapeml[torch]); values come back to
              Python as NumPy arrays on every device
      seed    a whole number >= 0 for repeatable random draws (as `seed(n)`), or None (OS entropy)
      out     a text stream for print (default: sys.stdout at the time of writing)
      prelude load the standard library (softmax, mse, ...) on first use (default True)
      check_nan  stop at the first operation that makes a NaN or an infinity, forward or
              backward, with a NaNError naming it and its line (as `check_nan(true)`; the
              attribute `s.check_nan` turns it on and off later)
      threads the BLAS threads of matrix products while the Session's run, run_file, eval and
              call run (the host program's count is put back after): a whole number >= 1, or
              None for TAPEML_THREADS, else the count the environment gives BLAS
              (OPENBLAS_NUM_THREADS, ...), else 1 (lang/array/threads.py)

    `with s.profile() as p:` profiles what the Session runs inside the block; then
    `p.table()` is the time per source line and per builtin (forward and backward) and
    `p.save(path)` writes it in speedscope's format.

    Raises TypeError for an `out` without write(); ValueError for an unknown dtype or device (or
    one this machine lacks), a seed that is not a whole number >= 0 or a thread count that is not
    a whole number >= 1. Language errors in code that a Session runs raise
    `tapeml.LangError` (with .kind, .message, .line, .column, .file).
    """

    def __init__(self, dtype: str = "float64", seed: int | None = None, out=None, prelude: bool = True,
                 check_nan: bool = False, threads: int | None = None, device: str | None = None):
        from tapeml.array import backend
        if not isinstance(dtype, str) or dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        if seed is not None and not _whole_seed(seed):
            raise ValueError(f"seed must be a whole number >= 0 or None, got {seed!r}")
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise ValueError(f"threads must be a whole number >= 1 or None, got {threads!r}")
        if out is not None and not callable(getattr(out, "write", None)):
            raise TypeError(f"out must be a text stream (an object with write(), such as io.StringIO()) "
                            f"or None for standard output, got {out!r}")
        self.threads = blas_threads.wanted(threads)
        values = {"dtype": DTYPES[dtype]}
        # DeviceError (a ValueError) says why not, before anything runs; TAPEML_DEVICE's too
        values["backend"] = backend.make(device) if device is not None else backend.from_environment()
        if seed is not None:
            values["rng"] = np.random.default_rng(int(seed))
        self.state = context.State(**values)
        with self.state:        # (the interpreter is made in the state it runs in)
            self.interp = Interpreter(out=out if out is not None else _Stdout(), load_prelude=prelude)
        if check_nan:
            self.check_nan = True

    # ---- running code ------------------------------------------------------------------------
    def run(self, source: str, filename: str = "<string>") -> None:
        """Run a program (statements, as in a .ml file). Its variables stay in the Session.
        Raises LangError (SyntaxError, ShapeError, ...) with the line and column in `filename`."""
        _check_source(source, "run")
        with _computing(self):
            self.interp.run(source, filename)

    def run_file(self, path, args=None) -> None:
        """Run the .ml file at `path` (its imports resolve next to it); `args`, a list of
        strings, are the script's ARGS (as after the file name on the command line). Raises
        OSError when it cannot be read, LangError when it fails (with .file the path)."""
        path = os.fspath(path)
        if args is not None:
            if isinstance(args, str) or not all(isinstance(a, str) for a in args):
                raise TypeError(f"args must be a list of strings, got {args!r}")
            self.interp.set_arguments(tuple(args))
        with open(path, encoding="utf-8") as fh:
            source = fh.read()
        with _computing(self):
            self.interp.run(source, path)

    # ---- diagnostics -------------------------------------------------------------------------
    @property
    def check_nan(self) -> bool:
        """Whether the Session stops at the first operation that makes a NaN or an infinity."""
        from tapeml.array import diagnostics
        with running(self.state):
            return diagnostics.current().check_nan

    @check_nan.setter
    def check_nan(self, on: bool) -> None:
        if not isinstance(on, bool):
            raise TypeError(f"check_nan must be True or False, got {on!r}")
        with running(self.state):
            self.interp.set_diagnostics(check_nan=on)

    @contextlib.contextmanager
    def profile(self):
        """`with s.profile() as p:` profile what the Session runs in the block; p (a Profile)
        holds the tables once the block ends."""
        from tapeml.evaluator.instrument import profiling
        handle = Profile()
        block = profiling(self.interp)
        with running(self.state):
            prof = block.__enter__()
        try:
            yield handle
        finally:
            with running(self.state):
                block.__exit__(None, None, None)
            from tapeml.array.profile_report import Report
            handle.report = Report(prof, dict(self.interp.sources))

    def eval(self, source: str):
        """Run `source` and return the value of its last expression statement (one not ended
        by `;` and not none) as a Python value; None when it has none (only assignments).
        `s.eval("x @ w")` -> a NumPy array of the product's shape. Raises LangError."""
        _check_source(source, "eval")
        last = []
        with _computing(self):
            self.interp.run(source, "<string>", echo=last.append)
            return to_python(self, last[-1]) if last else None

    def call(self, name: str, *args, **kwargs):
        """Call the function `name` (a user fn, a stdlib or builtin function) with Python
        arguments, converted as for `s[name] = value`; returns its result as a Python value.
        `s.call("softmax", np.array([[1., 2.]]))` -> array of shape (1, 2).
        Raises LangError (NameError when there is no such function, TypeError when it is not one)."""
        with _computing(self):
            fn = self._lookup(name)
            if not isinstance(fn, Callable):
                raise TypeErr(f"{name} is {describe(fn)}, not a function")
            return self._call(fn, args, kwargs, name)

    # ---- variables ---------------------------------------------------------------------------
    def __getitem__(self, name: str):
        """The variable `name` as a Python value (see the module docstring for the kinds).
        Raises UndefinedName (a LangError of kind NameError, and a KeyError) when no scope has it."""
        with running(self.state):
            return to_python(self, self._lookup(name))

    def __setitem__(self, name: str, value) -> None:
        """Set the global variable `name` (a valid tapeml name) to a Python value. Raises
        LangError (TypeError) for a value tapeml has no kind for (complex, object arrays, ...)."""
        if not is_name(name):
            raise NameErr(f"{name!r} is not a variable name" + _keyword_hint(name))
        with running(self.state):
            self.interp.set_variable(name, to_lang(self, value, name))

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and self.interp.has_variable(name)

    def __delitem__(self, name: str) -> None:
        """Forget the global variable `name`; UndefinedName (a KeyError) when there is none."""
        if not (isinstance(name, str) and self.interp.has_variable(name)):
            raise UndefinedName(f"{name!r} is not a variable of the Session")
        self.interp.delete_variable(name)

    def variables(self) -> list[str]:
        """The names of the Session's global variables (the program's own, not the builtins or the
        standard library), in the order they were first set. `list(s)` is the same list, and
        `len(s)` its length."""
        return list(self.interp.variables())

    def __iter__(self):
        return iter(self.variables())

    def __len__(self) -> int:
        return len(self.interp.variables())

    def figures(self) -> list:
        """The Session's open matplotlib figures (drawn by plot, hist, ... and not yet shown)."""
        from tapeml.builtins import plot
        with running(self.state):
            return plot.open_figures()

    # ---- conversions -------------------------------------------------------------------------
    def _lookup(self, name: str):
        try:
            return self.interp.get_variable(name)
        except (KeyError, TypeError):       # TypeError: an unhashable name
            raise UndefinedName(f"{name!r} is not defined") from None

    def _call(self, fn, args, kwargs, name):
        lang_args = [to_lang(self, a, f"argument {i + 1}{{}} of {name}") for i, a in enumerate(args)]
        lang_kwargs = {k: to_lang(self, v, f"argument {k}{{}} of {name}") for k, v in kwargs.items()}
        return to_python(self, self.interp.call(fn, lang_args, lang_kwargs, None))

    # ---- for the faces ------------------------------------------------------------------------
    @classmethod
    def of(cls, interp: Interpreter, state: context.State | None = None) -> Session:
        """A Session over an interpreter a face made (the command line's, the REPL's, the kernel's,
        the docs builder's): `state` is its session state (default: a new one, whose values are
        made on first use). BLAS threads stay the face's (set for the process at its start)."""
        self = cls.__new__(cls)
        self.interp = interp
        self.state = context.State() if state is None else state
        self.threads = None
        return self

    def entered(self):
        """`with s.entered():` what every method does around its work, for a face that drives
        `s.interp` itself (runner.run_cell): the Session's state is the calling thread's current
        one, NumPy's floating-point warnings are off, Python's recursion limit is raised and BLAS
        runs on the Session's threads, all put back when the block ends."""
        return _computing(self)

    def state_dtype(self):
        """The NumPy float type of the Session's new matrices (set_dtype in the Session changes it)."""
        return self.state.values["dtype"]

    def __repr__(self):
        be = self.state.values["backend"]
        device = "" if be is B.NUMPY else f", device={be.name}"
        return f"<tapeml.Session dtype={np.dtype(self.state_dtype()).name}{device}, {len(self.interp.variables())} variables>"


class Profile:
    """What `Session.profile()` measured (complete once its block has ended)."""

    def __init__(self):
        self.report = None

    def _done(self):
        if self.report is None:
            raise RuntimeError("the profile is complete when its `with s.profile()` block has ended")
        return self.report

    def table(self, top: int | None = 15, times: bool = True) -> str:
        """Time per source line and per builtin or operator, each split into forward and backward
        (`top` rows each, None for all); times=False leaves the times out (rows ranked by the
        nodes they recorded), for output that must not change from run to run."""
        return self._done().table(top=top, times=times)

    def save(self, path) -> None:
        """Write the profile in speedscope's format (https://www.speedscope.app)."""
        self._done().save(os.fspath(path))

    def __repr__(self):
        if self.report is None:
            return "<tapeml profile, running>"
        return f"<tapeml profile of {self.report.total:.3g} s over {len(self.report.lines)} source lines>"


def _check_source(source, method: str) -> None:
    if not isinstance(source, str):
        raise TypeError(f"Session.{method}() takes the program as a str, got {type(source).__name__}")


def _whole_seed(seed) -> bool:
    """A seed is an int (or a whole float, NumPy integer) >= 0; bools, NaN and strings are not."""
    if isinstance(seed, (bool, np.bool_)):
        return False
    if isinstance(seed, (int, np.integer)):
        return seed >= 0
    if isinstance(seed, (float, np.floating)):
        return math.isfinite(seed) and seed >= 0 and float(seed).is_integer()
    return False


def _keyword_hint(name) -> str:
    if isinstance(name, str) and name in KEYWORDS:
        return f" ('{name}' is a keyword of tapeml)"
    if isinstance(name, str) and name.isidentifier():
        return " (names are ASCII letters, digits and _)"
    return ""


def face_state(dtype: str | None = None, be=None) -> context.State:
    """A face's session state: the float type `dtype` names (None: float64) on the backend `be`
    (None: TAPEML_DEVICE's, else NumPy), made now, so that a bad one is refused before anything
    runs: a ValueError (a backend.DeviceError naming TAPEML_DEVICE for the environment's)."""
    values = {"backend": B.from_environment() if be is None else be}
    if dtype is not None:
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        values["dtype"] = DTYPES[dtype]
    return context.State(**values)


def face_session(dtype: str | None = None, be=None, **interp_options) -> Session:
    """A face's Session: its state (`face_state(dtype, be)`, so a ValueError for a bad float
    type or device) and an Interpreter(**interp_options) made in it."""
    state = face_state(dtype, be)
    with state:
        interp = Interpreter(**interp_options)
    return Session.of(interp, state)


class _computing:
    """`with _computing(session):` a Session's method that computes: `running` (its state is the
    thread's current one, lang/evaluator/stack.py) with BLAS on the Session's thread count."""
    __slots__ = ("run", "blas")

    def __init__(self, session: Session):
        self.run = running(session.state)
        self.blas = blas_threads.limited(session.threads)

    def __enter__(self):
        self.blas.__enter__()
        try:
            self.run.__enter__()
        except BaseException:
            self.blas.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        try:
            return self.run.__exit__(*exc)
        finally:
            self.blas.__exit__(*exc)


__all__ = ["Session", "SessionFunction", "PythonFunction", "Dict", "UndefinedName", "PythonError", "LangError"]
