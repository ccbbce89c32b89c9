"""Running one piece of source for a face: the one place a program, a REPL entry, a notebook cell
or a docs example is run and its end is classified.

    outcome = run_cell(interp, source, filename, show=..., help=...)

parses and runs `source` in `interp` under `filename`, answers a help request (`?name`, `name?`)
when `help` is set, echoes the value of each top-level expression statement not ending in ';'
through `show(value)` and keeps the last one in `ans`, and says how the run ended in an
`Outcome`: ok, help, a language error (rendered with its source line and caret), interrupted
(Ctrl-C), terminated (SIGTERM, SIGHUP), the reader of the output gone (a broken pipe), nesting
too deep, out of memory, or a bug in tapeml. Nothing is printed here: each face shows the outcome
its own way (the command line prints it and returns an exit status, the REPL prints it and goes
on, the kernel sends the protocol's messages, the docs builder records the text).
"""
from __future__ import annotations

import gc
import re
import sys
from dataclasses import dataclass

ANS = "ans"                 # the variable holding the last echoed value

# how a run ended (Outcome.status)
OK = "ok"
HELP = "help"               # a help request answered: Outcome.text is the page
ERROR = "error"             # a language error: Outcome.text is its rendering with the caret
INTERRUPTED = "interrupted"  # KeyboardInterrupt (Ctrl-C)
TERMINATED = "terminated"   # Terminated (SIGTERM, SIGHUP)
BROKEN_PIPE = "broken pipe"  # the reader of the output went away
RECURSION = "recursion"     # Python's RecursionError (the evaluator converts the ones it sees)
MEMORY = "memory"           # MemoryError
INTERNAL = "internal"       # any other exception: a bug in tapeml

RECURSION_MESSAGE = ("the program nests too deeply: split a long expression into several statements, "
                     "or give a recursion a base case")
MEMORY_MESSAGE = "the computation ran out of memory"

_HELP = re.compile(r"\?\s*[A-Za-z_]\w*|[A-Za-z_]\w*\?")        # ?name, name?
_LOOSE_HELP = re.compile(r"\?.*|[A-Za-z_]\w*\?", re.S)          # also ? alone (the help index)


class Terminated(BaseException):
    """Raised by the command line's SIGTERM and SIGHUP handlers: unwinds like KeyboardInterrupt
    (a write in progress removes its temporary file), and generic handlers (`except Exception`)
    never swallow it. The exit status is 128 + the signal's number, as the shell reports a kill."""

    def __init__(self, signum: int = 15):
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return "SIGHUP" if self.signum == 1 else "SIGTERM"


# A signal lands wherever Python is, inside a library's constructor too (zipfile.ZipFile's
# __init__ before it sets `_writing`): the half-built object's finalizer then fails when the
# unwinding frees it, and Python would print "Exception ignored in ..." with a traceback under the
# one line a face prints for the signal. From a signal until the face settles (collects what the
# interrupted run left), such finalizer failures are quiet; any other time they print as usual.
_signalled = False


def note_signal() -> None:
    """Called by the faces' signal handlers (SIGINT, SIGTERM, SIGHUP) before they raise."""
    global _signalled
    _signalled = True


def signalled() -> bool:
    """Whether a signal came since the last settle()."""
    return _signalled


def settle() -> None:
    """After an interrupted or terminated run has been reported: collect its garbage (quietly)
    and let later finalizer failures print again."""
    global _signalled
    if _signalled:
        gc.collect()
        _signalled = False


def quiet_after_signal(unraisable, _default=sys.unraisablehook) -> None:
    """sys.unraisablehook for the faces: silent between a signal and settle(), else Python's."""
    if not _signalled:
        _default(unraisable)


@dataclass
class Outcome:
    """How a run ended. `ename` and `message` name an error the way Jupyter's error reply does
    (the language error's kind and message; RecursionError, MemoryError, InternalError with
    "Type: text" of the Python exception); `text` is what the user reads: the rendered language
    error, the help page, or "ename: message"; `exception` is what was raised."""
    status: str
    ename: str = ""
    message: str = ""
    text: str = ""
    exception: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.status in (OK, HELP)


def help_request(text: str, loose: bool = False) -> str | None:
    """The name asked for by `?name` or `name?` ("" for the index), or None when `text` is no help
    request. `loose` (the REPL) also takes `?` alone and anything after a leading `?`."""
    stripped = text.strip()
    if not (_LOOSE_HELP if loose else _HELP).fullmatch(stripped):
        return None
    return stripped.strip("?").strip()


def show_help(interp, name: str) -> Outcome:
    """The help page of `name` (the index for ""), or the error of an unknown name, without caret."""
    from tapeml.builtins.help import help_text
    from tapeml.syntax.errors import LangError
    try:
        return Outcome(HELP, text=help_text(name or None, interp))
    except LangError as e:
        return Outcome(ERROR, e.kind, e.message, f"{e.kind}: {e.message}", e)


def run_cell(interp, source: str, filename: str, *, show=None, ans: bool = True,
             help: bool = False, shown: str | None = None, raise_internal: bool = False,
             render=None) -> Outcome:
    """Run `source` in `interp` as `filename` and classify its end (see the module's docstring).

    show            show(value) displays an echoed value; None runs a script: nothing is echoed
    ans             keep each echoed value in the variable `ans` (before it is shown)
    help            answer `?name` and `name?` with the help page instead of running them
    shown           the text a language error quotes its source line from (default: source)
    raise_internal  let a bug in tapeml raise (the command line's --debug)
    render          render(error, sources), the text of a language error (default errors.render)
    """
    from tapeml.syntax.errors import LangError
    if render is None:
        from tapeml.syntax.errors import render
    if help:
        name = help_request(source)
        if name is not None:
            return show_help(interp, name)
    echo = None
    if show is not None:
        def echo(value):
            if ans:
                interp.set_variable(ANS, value)        # `ans`: the last echoed value
            show(value)
    try:
        interp.run(source, filename, echo=echo)
    except LangError as e:
        signal = _signal_behind(e)
        if signal is not None:
            return _signal_outcome(signal)
        if shown is not None:
            interp.sources[filename] = shown
        return Outcome(ERROR, e.kind, e.message, render(e, interp.sources), e)
    except KeyboardInterrupt as e:
        return Outcome(INTERRUPTED, "KeyboardInterrupt", exception=e)
    except Terminated as e:
        return Outcome(TERMINATED, "Terminated", e.name, exception=e)
    except BrokenPipeError as e:
        return internal(e, BROKEN_PIPE)
    except RecursionError as e:
        return Outcome(RECURSION, "RecursionError", RECURSION_MESSAGE,
                       f"RecursionError: {RECURSION_MESSAGE}", e)
    except MemoryError as e:
        return Outcome(MEMORY, "MemoryError", MEMORY_MESSAGE, f"MemoryError: {MEMORY_MESSAGE}", e)
    except Exception as e:  # noqa: BLE001 - a bug in tapeml: the face says so
        signal = _signal_behind(e)
        if signal is not None:
            return _signal_outcome(signal)
        from tapeml.array.backend import is_out_of_memory
        if is_out_of_memory(e):         # PyTorch's (a GPU's memory): a RuntimeError
            return Outcome(MEMORY, "MemoryError", MEMORY_MESSAGE, f"MemoryError: {MEMORY_MESSAGE}", e)
        if raise_internal:
            raise
        return internal(e)
    return Outcome(OK)


def _signal_behind(e: BaseException) -> BaseException | None:
    """The Ctrl-C or termination an error replaced, if any: a signal raised inside a library's
    cleanup (zipfile's close, while save writes) can make that cleanup fail with an error of its
    own, which then carries the signal as its context (or its cause's). The run ended because of
    the signal, and the face reports that."""
    seen = 0
    stack = [e]
    while stack and seen < 64:
        x = stack.pop()
        seen += 1
        if isinstance(x, (KeyboardInterrupt, Terminated)):
            return x
        stack.extend(c for c in (x.__cause__, x.__context__) if c is not None)
    return None


def _signal_outcome(signal: BaseException) -> Outcome:
    if isinstance(signal, Terminated):
        return Outcome(TERMINATED, "Terminated", signal.name, exception=signal)
    return Outcome(INTERRUPTED, "KeyboardInterrupt", exception=signal)


def internal(e: BaseException, status: str = INTERNAL) -> Outcome:
    """The outcome of a bug in tapeml: InternalError, "Type: text" of the Python exception."""
    message = f"{type(e).__name__}: {e}"
    return Outcome(status, "InternalError", message, f"InternalError: {message}", e)
