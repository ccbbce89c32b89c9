"""Session state: the slots, a session's State, the thread's current one.

What belongs to one session (its float type, its random generator, its figures, its caches)
is declared by the module that uses it, as a *slot*: `slot(name, fresh)` registers how a new
session makes its value. A `State` holds one session's values; each thread has a current
State (a `threading.local`), the process default `DEFAULT` until the thread enters another,
so two threads running two Sessions never see each other's values, however they interleave.
Code reads the current values through `LIVE` (`LIVE["dtype"]`, a dict lookup behind a
thread-local one), and a value is made by its slot's `fresh()` on first use.

One slot is different: matplotlib's pyplot keeps ONE list of figures per process, so the
figures cannot be per thread. A *shared* slot, `shared_slot(name, read, write, fresh)`, keeps
its live value where its module keeps it (the pyplot registry); `claim(name)` makes the
current State its owner, saving the previous owner's value into that State and installing
this one's. The module that keeps a shared slot claims it, under its own lock, before each use.

A plain `Interpreter` runs in its thread's current state (the process default, as before
sessions existed); a `tapeml.Session` owns a `State` and enters it on every run/eval/call.
The evaluator's deep-stack worker (lang/evaluator/stack.py) enters the state of the thread it works for.
Several programs in one process each start clean only in a State of their own: a bare Interpreter
shares its thread's current state with every other one made there (what its program sets, the
float type, the device, the seed, the diagnostics, the notes, stays for the next, as
torch.set_default_dtype does for a process). So every face holds a tapeml Session, a State of
its own entered around everything it runs (lang/session/session.py: face_session, entered): the
command line's, the REPL's, the kernel's, one per docs example and page, one per Python-API
Session; help runs each example in a fresh State.

The narrow `Context` a builtin receives (it reads the running interpreter) is the builtins'
own: builtins/context.py. This module imports nothing of tapeml: the core registers its slots
here, and so do builtins.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class Slot:
    """One piece of session state: how a new session makes its value; for a shared slot also
    how to read the live value and install one (read and write are None for a plain slot)."""
    name: str
    fresh: object      # () -> value for a new session
    read: object = None
    write: object = None
    lock: object = None


SLOTS: dict[str, Slot] = {}


def slot(name: str, fresh) -> None:
    """Declare a piece of per-session state (called once, by the module that owns it); its
    value is `LIVE[name]`, made by `fresh()` on first use in each State."""
    SLOTS[name] = Slot(name, fresh)


def shared_slot(name: str, read, write, fresh, lock) -> None:
    """Declare a piece of session state whose live value lives in a process-wide place
    (pyplot's figures): `read()` the live value, `write(v)` install one; `lock` (an RLock)
    guards the place. See `claim`."""
    SLOTS[name] = Slot(name, fresh, read, write, lock)


class _Values(dict):
    """A State's values: a slot's value is made by its `fresh()` on first use."""
    __slots__ = ()

    def __missing__(self, name):
        value = self[name] = SLOTS[name].fresh()
        return value


class State:
    """The values of every slot for one session. Entering it makes it the current state of
    the calling thread (until the matching leave); other threads keep theirs."""

    def __init__(self, **values):
        self.values = _Values(values)      # slot name -> value (given ones, the rest made on use)

    def enter(self) -> None:
        """Make this state the calling thread's current one (nesting: leave() restores)."""
        c = _CURRENT
        try:
            outer = c.outer
        except AttributeError:
            outer = c.outer = []
        outer.append(c.state)
        c.state = self

    def leave(self) -> None:
        c = _CURRENT
        c.state = c.outer.pop()
        if self in _OWNERS.values():
            release(self)

    def __enter__(self):
        self.enter()
        return self

    def __exit__(self, *exc):
        self.leave()
        return False


DEFAULT = State()


class _Current(threading.local):
    state = DEFAULT         # a thread that entered no session runs in the process default state


_CURRENT = _Current()


def current() -> State:
    """The calling thread's current state."""
    return _CURRENT.state


def restart(state: State | None = None) -> None:
    """Forget the values of every plain slot of `state` (default: the current one): each is made
    again by its `fresh()` on next use. Shared slots are kept (their module owns the live value)."""
    state = _CURRENT.state if state is None else state
    for name in [n for n in state.values if SLOTS[n].read is None]:
        del state.values[name]


class _Live:
    """The current state's values as a mapping: `LIVE["dtype"]`, `LIVE["rng"] = generator`."""
    __slots__ = ()

    def __getitem__(self, name):
        return _CURRENT.state.values[name]

    def __setitem__(self, name, value):
        _CURRENT.state.values[name] = value

    def __repr__(self):
        return f"<the current session's values: {dict(_CURRENT.state.values)!r}>"


LIVE = _Live()

_OWNERS: dict[str, State] = {}      # shared slot name -> the State whose value is live


def claim(name: str, state: State | None = None) -> None:
    """Make the current state (or `state`) the owner of the shared slot `name`: the live value
    becomes its own (the previous owner's is saved into that State first). The caller holds
    the slot's lock."""
    s = SLOTS[name]
    now = _CURRENT.state if state is None else state
    owner = _OWNERS.get(name, DEFAULT)
    if owner is now:
        return
    owner.values[name] = s.read()
    s.write(now.values[name])
    if now is DEFAULT:
        _OWNERS.pop(name, None)
    else:
        _OWNERS[name] = now


def release(state: State) -> None:
    """Hand the shared slots that `state` owns back to the default state (a Session's method
    returning), so that outside Sessions the live values are the process default's."""
    for name, owner in list(_OWNERS.items()):
        if owner is state:
            with SLOTS[name].lock:
                if _OWNERS.get(name) is state:
                    claim(name, DEFAULT)
