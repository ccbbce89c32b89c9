"""The narrow context a builtin runs in: what a builtin declared with `@builtin(..., context=True)`
receives instead of the whole interpreter (where print writes, the float type, the seeded
generator, calling a function value, the call site, the running file's directory, the progress
bars and the diagnostics). It is the one surface between the builtins and the evaluator: the
evaluator makes one per Interpreter (`interp.context`) and any evaluator that provides the
attributes read here runs every builtin. The session's values (dtype, rng) come from the
calling thread's current session state (lang/array/context.py)."""
from __future__ import annotations

import os

from tapeml.array.context import _CURRENT     # the thread's current state, read inline (constructors call dtype often)
from tapeml.syntax import ast as A


class Context:
    """What a builtin needs of the session that runs it, and no more: the one surface between the
    builtins and the evaluator (a compiled evaluator provides the same).

    out        the stream print writes to (follows progress bars, which wrap it)
    dtype      the NumPy float type of new matrices (float64 or float32)
    rng()      the session's random generator (never cache it: seed(n) replaces it)
    call(f, *args, **kwargs)   call a function value of the language (a user fn or a builtin)
    span       the call site of the builtin running (None when another builtin called it)
    argument_name(i)   the name written as the i-th positional argument at that call site
                       (`grad(loss, w)`: "w"), None when it is not a plain name
    directory  the directory of the running file, which relative paths start from (the current
               directory in -c and the REPL)
    work_bar(total, desc)   a bar for a builtin's own long loop (lang/evaluator/progress.py)
    note_progress(text)     the note beside the innermost progress(...) loop's bar, if any
    set_diagnostics(check_nan=, profiler=, recorder=)   turn the session's diagnostics on or off
                       (lang/array/diagnostics.py); the evaluator is their span source while any is on
    """
    __slots__ = ("_interp",)

    def __init__(self, interp):
        self._interp = interp

    @property
    def out(self):
        return self._interp.out

    @property
    def dtype(self):
        return _CURRENT.state.values["dtype"]

    def rng(self):
        return _CURRENT.state.values["rng"]

    def call(self, fn, *args, **kwargs):
        return self._interp.call(fn, list(args), kwargs, None)

    @property
    def span(self):
        node = self._interp.current_call
        return None if node is None else node.span

    def argument_name(self, i: int):
        node = self._interp.current_call
        if node is None or len(node.args) <= i:
            return None
        arg = node.args[i]
        return arg.name if type(arg) is A.Name else None

    @property
    def directory(self) -> str:
        stack = self._interp.dir_stack
        return stack[-1] if stack else os.getcwd()

    def work_bar(self, total: int, desc: str):
        return self._interp.work_bar(total, desc)

    def set_diagnostics(self, **modes):
        return self._interp.set_diagnostics(**modes)

    def note_progress(self, text: str) -> None:
        bars = self._interp.progress_bars
        if bars:
            bars[-1].note(text)
