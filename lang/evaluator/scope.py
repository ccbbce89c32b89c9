"""Scopes and the control-flow signals of the evaluator: an Env per call (closures), the
exceptions that carry break, continue and return out of a block, and what an error leaving a
function call gets (the call site in its chain; the too-deep error)."""
from __future__ import annotations

from tapeml.syntax.errors import LangError, RecursionErr

MAX_DEPTH = 20000       # tapeml call depth before a RecursionError


class BreakSignal(Exception):
    pass


class ContinueSignal(Exception):
    pass


class ReturnSignal(Exception):
    def __init__(self, value):
        self.value = value


class Env:
    """A scope: a dict of names and the enclosing scope."""
    __slots__ = ("vars", "parent")

    def __init__(self, parent=None, vars=None):
        self.vars = {} if vars is None else vars
        self.parent = parent

    def lookup(self, name):
        env = self
        while env is not None:
            v = env.vars
            if name in v:
                return v[name]
            env = env.parent
        raise KeyError(name)

    def names(self):
        out, env = set(), self
        while env is not None:
            out.update(env.vars)
            env = env.parent
        return out


def called_from(e: LangError, fn, span) -> LangError:
    """An error leaving fn's body, with the call site added to its chain."""
    if span is None:          # called by a builtin (grad, tree_map): the builtin's site is used
        e.pending_fn = fn.name
    else:
        e.add_call(fn.name, span)
    return e


def too_deep(fn, span) -> RecursionErr:
    return RecursionErr(f"the computation nests too deeply (in {fn.name})", span)
