"""The evaluator's side of the diagnostics (lang/array/diagnostics.py): the span source.

While the session has a mode on (check_nan, the profiler, show_tape's recording), its
Interpreter tells the session's Diagnostics where it is:

- every syntax node but the leaves runs through `enter`/`leave` (the dispatch table holds
  wrappers: the one place a node's evaluation is wrapped);
- every call runs through `enter_call`/`leave_call` (`interp.call` is wrapped), and a builtin
  that called no function back has its result checked (check_nan);
- the arithmetic operators of semantics.BINARY and FLOAT_OPS check their results while any
  session checks for NaN (the operators are shared by every interpreter of the process).

`set_modes(interp, ...)` turns modes on or off and attaches or detaches. Detached, the
dispatch table, `call` and the operator tables are the plain ones: with every mode off nothing
here runs, and the evaluator costs what it cost before. While attached, `interp.compiled` is
false: function bodies and top-level loops are walked (lang/evaluator/compiler.py), so every node
passes the wrappers, and a compiled body that turned a mode on walks the rest of itself from its
next statement (compiled_helpers._resume); detached, compiled code runs again.
"""
from __future__ import annotations

import contextlib
import weakref

from numpy import isfinite, ndarray

from tapeml.array import diagnostics
from tapeml.array.values import Callable, Function
from tapeml.evaluator import semantics
from tapeml.syntax import ast as A
from tapeml.syntax.errors import STDLIB_PREFIX

LEAVES = frozenset((A.Number, A.Bool, A.NoneLit, A.Name, A.String, A.Lambda, A.End, A.Colon, A.Param))
CHECKED_OPERATORS = ("+", "-", "*", "/", "%", "^", "@")
_PLAIN_BINARY = dict(semantics.BINARY)
_PLAIN_FLOAT_OPS = dict(semantics.FLOAT_OPS)
# interp -> its plain dispatch table while attached (kept on the interp, not here: the table's
# bound methods hold the interp, so a value here would keep a dropped Session alive for good)
_ATTACHED: "weakref.WeakSet" = weakref.WeakSet()

_NOT_GIVEN = object()


def set_modes(interp, check_nan=_NOT_GIVEN, profiler=_NOT_GIVEN, recorder=_NOT_GIVEN):
    """Turn the current session's modes on or off (check_nan: bool; profiler: a
    diagnostics.Profiler or None; recorder: a list or None), then attach `interp` while any
    is on and detach it when none is. Returns the session's Diagnostics."""
    d = diagnostics.current()
    if check_nan is not _NOT_GIVEN:
        d.check_nan = bool(check_nan)
    if profiler is not _NOT_GIVEN:
        d.profiler = profiler
    if recorder is not _NOT_GIVEN:
        d.recorder = recorder
    d.changed()
    if d.active and interp not in _ATTACHED:
        attach(interp, d)
    elif not d.active and interp in _ATTACHED:
        detach(interp)
    _recheck_operators()
    return d


@contextlib.contextmanager
def profiling(interp):
    """Profile what runs in `interp` inside the block; yields the diagnostics.Profiler (stopped,
    its times complete, once the block ends)."""
    d = diagnostics.current()
    outer = d.profiler
    prof = diagnostics.Profiler()
    set_modes(interp, profiler=prof)
    try:
        yield prof
    finally:
        prof.stop()
        set_modes(interp, profiler=outer)


def attach(interp, d) -> None:
    table = interp.dispatch
    interp.plain_dispatch = dict(table)
    _ATTACHED.add(interp)
    for cls, fn in list(table.items()):
        if cls not in LEAVES:
            table[cls] = _wrap(fn, d)
    interp.call = _wrap_call(interp, d)
    interp.compiled = False         # the walker runs every body while a mode is on (compiler.py)


def detach(interp) -> None:
    _ATTACHED.discard(interp)
    interp.dispatch.update(interp.plain_dispatch)
    del interp.plain_dispatch
    del interp.call                 # the class's own method again
    interp.compiled = True


def attached(interp) -> bool:
    return interp in _ATTACHED


def _wrap(fn, d):
    enter, leave = d.enter, d.leave

    def run(node, env):
        prev = enter(node)
        try:
            return fn(node, env)
        finally:
            leave(prev)
    run.__name__ = getattr(fn, "__name__", "run")
    return run


def _wrap_call(interp, d):
    plain = type(interp).call.__get__(interp)

    def call(fn, args, kwargs, span):
        if type(fn) is Function:
            stdlib = fn.span is not None and str(fn.span.file).startswith(STDLIB_PREFIX)
            token = d.enter_call(fn, span, not stdlib, stdlib)
            try:
                return plain(fn, args, kwargs, span)
            finally:
                d.leave_call(token)
        if not isinstance(fn, Callable):
            return plain(fn, args, kwargs, span)        # the error of calling a non-function
        token = d.enter_call(fn, span, False, False)
        frame = d.frame
        suspects, d.suspects = d.suspects, []
        try:
            result = plain(fn, args, kwargs, span)
            if d.check_nan:
                d.settle(suspects, result)          # the backward pass it ran, if any (grad)
                if not frame.called_back:
                    d.check_call(fn, args, kwargs, result, span or frame.span)
            return result
        finally:
            d.suspects = suspects
            d.leave_call(token)
    return call


def _operator_checks(on: bool) -> None:
    """Check the arithmetic operators' results (on) or restore the plain operators."""
    for table, plain in ((semantics.BINARY, _PLAIN_BINARY), (semantics.FLOAT_OPS, _PLAIN_FLOAT_OPS)):
        for sym in CHECKED_OPERATORS:
            if sym in plain:
                table[sym] = _checked(sym, plain[sym]) if on else plain[sym]


def _recheck_operators() -> None:
    _operator_checks(any(x.check_nan for x in diagnostics._ACTIVE))


diagnostics.WHEN_DROPPED.append(_recheck_operators)     # a Session dropped with check_nan on


def _checked(sym, op):
    finite, current = diagnostics.finite, diagnostics.current

    def checked(a, b):
        r = op(a, b)
        t = type(r)
        if t is float:
            if r - r == 0.0:            # finite (inf - inf and nan - nan are nan)
                return r
        elif t is ndarray:
            if r.dtype.kind != "f" or isfinite(r).all():
                return r
        if not finite(r):
            current().check_operator(sym, r, a, b)
        return r
    return checked
