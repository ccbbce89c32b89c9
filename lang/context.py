"""Session state, and the narrow context a builtin runs in.

What belongs to one session (its float type, its random generator, its figures, its caches)
lives in the module that uses it, as a *slot*: `slot(name, read, write, fresh)` registers how
to read the live value, how to install one, and how to make a new session's. The live values
are the CURRENT state's: `State.enter()` saves the state that was current into its own store,
installs this one's, and `leave()` puts the other back. So the code that reads
`ops.SESSION_FLOAT["dtype"]` or calls `builtins.random.rng()` always sees the state of the
session that is running, and reading them costs what it did (a dict lookup, no indirection).

A plain `Interpreter` runs in the process's default state (`DEFAULT`), as before sessions
existed; a `tapeml.Session` owns a `State` and enters it on every run/eval/call. Switching is
not thread safe (one running session at a time per process), which the Python API documents.

`Context` is what a builtin declared with `@builtin(..., context=True)` receives instead of the
whole interpreter: `out` (where print writes), `dtype` (the float type of new matrices), `rng()`
(the seeded generator) and `call(fn, *args)` (call a function value of the language).

This module imports nothing of tapeml: the core registers its slots here, and so do builtins.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Slot:
    """One piece of session state: how to read the live value, install one, and make a new one."""
    name: str
    read: object       # () -> value
    write: object      # (value) -> None
    fresh: object      # () -> value for a new session
    get: object        # () -> the value for use (read, or made on first use)


SLOTS: dict[str, Slot] = {}


def slot(name: str, read, write, fresh, get=None) -> None:
    """Declare a piece of per-session state (called once, by the module that owns it). `get`,
    when given, is how code uses the value (e.g. the generator, made on first use)."""
    SLOTS[name] = Slot(name, read, write, fresh, get or read)


class State:
    """The values of every slot for one session. While the state is current its values are
    the live ones (in their modules) and `store` is stale; otherwise `store` holds them."""

    def __init__(self, **values):
        self.store: dict = {}
        self.values_given = values      # slot name -> value for a new session (e.g. dtype)
        self.outer: list[State] = []

    def _fill(self) -> None:
        """A new state's store: each slot's fresh value, or the one given."""
        for name, s in SLOTS.items():
            if name not in self.store:
                self.store[name] = self.values_given[name] if name in self.values_given else s.fresh()

    def enter(self) -> None:
        """Make this state current (nesting: entering the current state again is free)."""
        prev = _CURRENT[0]
        self.outer.append(prev)
        if prev is self:
            return
        for name, s in SLOTS.items():
            prev.store[name] = s.read()
        self._fill()
        for name, s in SLOTS.items():
            s.write(self.store[name])
        _CURRENT[0] = self

    def leave(self) -> None:
        prev = self.outer.pop()
        if prev is self:
            return
        for name, s in SLOTS.items():
            self.store[name] = s.read()
        prev._fill()
        for name, s in SLOTS.items():
            s.write(prev.store[name])
        _CURRENT[0] = prev

    def __enter__(self):
        self.enter()
        return self

    def __exit__(self, *exc):
        self.leave()
        return False


DEFAULT = State()
_CURRENT = [DEFAULT]


def current() -> State:
    """The state whose values are live now."""
    return _CURRENT[0]


class Context:
    """What a builtin needs of the session that runs it, and no more.

    out      the stream print writes to (follows progress bars, which wrap it)
    dtype    the NumPy float type of new matrices (float64 or float32)
    rng()    the session's random generator (never cache it: seed(n) replaces it)
    call(f, *args, **kwargs)   call a function value of the language (a user fn or a builtin)
    """
    __slots__ = ("_interp",)

    def __init__(self, interp):
        self._interp = interp

    @property
    def out(self):
        return self._interp.out

    @property
    def dtype(self):
        return SLOTS["dtype"].get()

    def rng(self):
        return SLOTS["rng"].get()

    def call(self, fn, *args, **kwargs):
        return self._interp.call(fn, list(args), kwargs, None)
