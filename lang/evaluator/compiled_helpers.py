"""What the compiled code calls (lang/evaluator/compiler.py writes the code; this module is what
it runs against): the name look-ups that fall back to the enclosing scopes, the snapshots of a
body's Python locals that the walker's node kinds evaluate on, the loops' items, the functions a
body makes, and `_resume`, the hand-over of the rest of a compiled body to the walker when a
diagnostics mode is turned on as it runs. HELPERS is the namespace every compiled body runs in.
"""
from __future__ import annotations

from contextlib import contextmanager

from tapeml.syntax import ast as A
from tapeml.array.values import Function, Progress, Record, describe
from tapeml.evaluator import semantics
from tapeml.evaluator.progress import loop_bar
from tapeml.evaluator.scope import MAX_DEPTH, BreakSignal, ContinueSignal, Env, ReturnSignal, called_from, too_deep
from tapeml.evaluator.stack import HOP_DEPTH
from tapeml.evaluator.statements import loop_item_unpacked, unpacked
from tapeml.array.ranges import Walk, walk_items, walkable
from tapeml.syntax.errors import LangError, TypeErr

_UNSET = object()          # a local not assigned yet


def _look(interp, env, name, span, local_names, local_values):
    """A name that is not (yet) one of the function's locals: the enclosing scopes, the standard
    library on first need, else the walker's NameError (with the locals set so far as candidates)."""
    try:
        return env.lookup(name)
    except KeyError:
        pass
    if interp.stdlib_pending:
        interp.load_stdlib()
        return _look(interp, env, name, span, local_names, local_values)
    raise interp.unknown_name(name, span, _snapshot(env, local_names, local_values))


def _snapshot(env, names, values):
    """An Env holding the locals set so far, below the function's enclosing scope."""
    return Env(env, {n: v for n, v in zip(names, values) if v is not _UNSET})


def _unpack(value, n, node):
    """`a, b = value` (Name targets): the walker's unpacking, checks and messages."""
    return unpacked(value, n, node.value.span, node.span, "the right side")


@contextmanager
def _loop(interp, seq, node):
    """The items a `for` loop walks (the walker's eval_for), as a context manager: a
    progress(...) loop's bar is drawn around the loop and closed when it ends, however it ends."""
    if type(seq) is Progress:
        with loop_bar(interp, seq) as bar:
            yield bar.track(_plain_items(bar.items, node))
        return
    yield _plain_items(seq, node)


def _function(node, env, name="<anonymous>"):
    """A function value made by `fn(x) -> ...` or a nested `fn name(...)`, closing over env."""
    lam = node if type(node) is A.Lambda else node.fn
    return Function(name if type(node) is A.Lambda else node.name, lam.params, lam.body, env, node.span)


def _plain_items(seq, node):
    if isinstance(seq, Walk):
        return iter(seq)
    if walkable(seq):
        return walk_items(seq)
    raise TypeErr(f"cannot loop over {describe(seq)}; loop over a range, a matrix, "
                  f"a tuple or a string", node.iterable.span)


def _resume(interp, env, frames, iters):
    """The rest of a compiled body, walked: a diagnostics mode was turned on (by a call in the
    statement just run: check_nan(true), or a function that calls it), and from here on the
    walker runs it, as it would have, had it walked the body from the start (its nodes pass the
    diagnostics' wrappers; lang/evaluator/instrument.py). `env` holds the body's names (its own
    scope, or a snapshot of its Python locals); `frames`, innermost last, say where the body
    stands: ("block", statements, i) runs statements[i:], ("if", node, j) the if's branches from
    j on, ("for", node, k) the loop's items left in iters[k], ("while", node) the loop from its
    condition on. Returns what the body returns."""
    signal = None               # a break or continue on its way to its loop
    try:
        for frame in reversed(frames):
            kind = frame[0]
            if kind == "block" or kind == "if":
                if signal is None:
                    try:
                        if kind == "block":
                            interp.exec_block(frame[1][frame[2]:], env)
                        else:
                            _rest_of_if(interp, frame[1], frame[2], env)
                    except (BreakSignal, ContinueSignal) as e:
                        signal = type(e)
                continue
            if signal is BreakSignal:       # a loop: a break ends it, a continue goes on with it
                signal = None
                continue
            signal = None
            if kind == "for":
                _rest_of_for(interp, frame[1], iters[frame[2]], env)
            else:
                interp.eval_while(frame[1], env)
    except ReturnSignal as r:
        return r.value
    return None


def _rest_of_if(interp, node, j, env):
    """The walker's eval_if from its branch j on."""
    for cond, body in node.branches[j:]:
        if interp.condition(cond, env, "if"):
            interp.exec_block(body, env)
            return
    if node.orelse is not None:
        interp.exec_block(node.orelse, env)


def _rest_of_for(interp, node, items, env):
    """The walker's eval_for over the items left."""
    name, body = node.var, node.body
    for item in items:
        if type(name) is str:
            env.vars[name] = item
        else:
            interp.unpack_item(item, name, env)
        try:
            interp.exec_block(body, env)
        except BreakSignal:
            break
        except ContinueSignal:
            continue



HELPERS = {"_U": _UNSET, "_look": _look, "_snap": _snapshot, "_unpack": _unpack,
           "_unpack_item": loop_item_unpacked, "_loop": _loop, "_function": _function, "Env": Env, "_resume": _resume, "_bin": semantics.binary,
           "_cond": semantics.condition_value, "_unary": semantics.unary, "_field": semantics.field,
           "_transpose": semantics.transpose, "_is_mask": semantics.is_mask,
           "_mask": semantics.logical_mask, "Record": Record, "Function": Function,
           "_MAX_DEPTH": MAX_DEPTH, "_HOP_DEPTH": HOP_DEPTH, "_LangError": LangError,
           "_called_from": called_from, "_too_deep": too_deep}
