"""Statements of the evaluator: assignment (plain, destructuring, into fields and indices),
if, while, for (every item keeps the tape; progress bars), break/continue/return, fn
definitions. A mixin of Interpreter (lang/evaluator/interpreter.py), which dispatches to these methods.
"""
from __future__ import annotations

import numpy as np

from tapeml.syntax import ast as A
from tapeml.array import ops
from tapeml.array.backend import ARRAYS
from tapeml.syntax.errors import InternalError, ShapeError, TypeErr, ValueErr
from tapeml.syntax.lexer import KEYWORDS
from tapeml.evaluator.progress import loop_bar
from tapeml.array.ranges import ValueWalk, Walk, walk_items, walkable
from tapeml.evaluator.scope import BreakSignal, ContinueSignal, ReturnSignal
from tapeml.array.tape import raw
from tapeml.array.values import Dict, Function, Progress, Record, describe, is_numeric, shape_text
from tapeml.evaluator.semantics import binary, condition_value, range_note


def unpacked(value, n: int, kind_span, count_span, what: str):
    """The n items `a, b = value` binds: a tuple's items, a vector's elements, a matrix's rows (as
    `for` walks them, the tape kept). TypeErr (at kind_span) for any other value, ValueErr (at
    count_span) when the count differs."""
    r = raw(value)
    if isinstance(r, tuple):
        if len(r) != n:
            raise ValueErr(f"cannot unpack a tuple of {len(r)} into {n} names", count_span)
        return r
    if (type(r) is np.ndarray or type(r) in ARRAYS) and r.ndim >= 1:
        if r.shape[0] != n:
            what_it = f"a vector of length {r.shape[0]}" if r.ndim == 1 else \
                f"{describe(r)} ({r.shape[0]} row{'s' * (r.shape[0] != 1)})"
            raise ValueErr(f"cannot unpack {what_it} into {n} names", count_span)
        return list(walk_items(value))
    hint = "; for its keys write a, b = keys(d)" if isinstance(r, Dict) else ""
    raise TypeErr(f"cannot unpack {describe(value)} into {n} names; {what} must be a tuple or a "
                  f"vector{hint}", kind_span)



def loop_item_unpacked(item, names):
    """The items `for a, b in ...` binds from one item (names: the loop's Name nodes)."""
    r = raw(item)
    if type(r) is not tuple or len(r) != len(names):
        span = names[0].span.to(names[-1].span)
        r = unpacked(item, len(names), span, span, "each item of the loop")
    return r


class Statements:
    """assign, if, while, for, return, fn: the statement half of the evaluator."""

    def eval_assign(self, node, env):
        value = self.dispatch[type(node.value)](node.value, env)
        target = node.target
        if node.op is None and type(target) is A.Name:
            env.vars[target.name] = value
            return
        if node.op is not None:
            current = self.eval(node.target, env)
            value = binary(node.op, current, value, node.span)
        self.assign(node.target, value, env)

    def eval_destructure(self, node, env):
        value = self.eval(node.value, env)
        items = unpacked(value, len(node.targets), node.value.span, node.span, "the right side")
        for target, v in zip(node.targets, items):
            self.assign(target, v, env)

    def assign(self, target, value, env):
        t = type(target)
        if t is A.Name:
            if target.name in KEYWORDS:
                raise TypeErr(f"cannot assign to the keyword '{target.name}'", target.span)
            env.vars[target.name] = value
        elif t is A.Field:
            container = self.eval(target.obj, env)
            c = raw(container)
            if not isinstance(c, Record):
                raise TypeErr(f"cannot set field '{target.name}' of {describe(container)}; "
                              f"only records have fields", target.span)
            self.assign(target.obj, c.with_field(target.name, value), env)
        elif t is A.Index:
            container = self.eval(target.obj, env)
            c = raw(container)
            if type(c) is Dict:     # a new version with the key set (O(1): values.Dict)
                self.assign(target.obj, c.with_item(self.dict_key_of(target, env), value), env)
                return
            if isinstance(c, tuple):
                i = self.tuple_position(c, target, env)
                self.assign(target.obj, c[:i] + (value,) + c[i + 1:], env)
                return
            if type(c) is not np.ndarray and type(c) not in ARRAYS:
                hint = ""
                if isinstance(c, Record):
                    hint = ("; {} is an empty record: an empty dictionary is {:} (or dict()), from "
                            "Python a tapeml.Dict()" if not c.fields
                            else "; a record's fields are set by name: r.name = value")
                raise TypeErr(f"cannot assign into {describe(container)} by index{hint}", target.span)
            if c.ndim == 0:        # zeros(): written as a 1-vector, then given back its shape ()
                flat = ops.reshape(container, shape=(1,))
                idx = self.index_tuple(raw(flat), target, env)
                if not is_numeric(value):
                    raise TypeErr(f"cannot store {describe(value)} in a matrix", target.span)
                try:
                    new = ops.setitem(flat, value, idx=idx)
                except (ValueError, TypeError) as e:
                    raise ShapeError(f"cannot assign {describe(value)} to a single element", target.span) from e
                if ops.shape_of(new) != (1,):
                    raise ShapeError(f"cannot assign {describe(value)} to a single element", target.span)
                self.assign(target.obj, ops.reshape(new, shape=()), env)
                return
            idx = self.index_tuple(c, target, env)
            if not is_numeric(value):
                raise TypeErr(f"cannot store {describe(value)} in a matrix", target.span)
            try:
                new = ops.setitem(container, value, idx=idx)
            except (ValueError, TypeError) as e:
                shape = ops.shape_of(ops.index(c, idx=idx))
                part = ("a single element" if shape == () else f"a part that is {shape_text(shape)}"
                        if len(shape) == 1 else f"a part of shape {shape_text(shape)}")
                raise ShapeError(f"cannot assign {describe(value)} to {part}{range_note(target)}",
                                 target.span) from e
            self.assign(target.obj, new, env)
        else:
            raise InternalError(f"assignment to {t.__name__}")

    def eval_if(self, node, env):
        for cond, body in node.branches:
            if self.condition(cond, env, "if"):
                self.exec_block(body, env)
                return
        if node.orelse is not None:
            self.exec_block(node.orelse, env)

    def condition(self, node, env, what: str) -> bool:
        return condition_value(self.eval(node, env), node.span, what)

    def eval_while(self, node, env):
        body = node.body
        while self.condition(node.cond, env, "while"):
            try:
                self.exec_block(body, env)
            except BreakSignal:
                break
            except ContinueSignal:
                continue

    def eval_for(self, node, env, bar=None):
        seq = self.loop_value(node.iterable, env) if bar is None else bar.items
        if type(seq) is Progress:     # progress(items): this same loop over the items, with a bar
            with loop_bar(self, seq) as bar:
                return self.eval_for(node, env, bar)
        # every item keeps the tape: a tracked matrix gives its elements or rows through the index
        # primitive, a tuple its (tracked) items, a number (or 0-d value) itself, once; a range
        # or a vector is walked a chunk at a time (lang/array/ranges.py), never made into a list
        if isinstance(seq, Walk):
            items = iter(seq)
        elif walkable(seq):
            items = walk_items(seq)
        else:
            raise TypeErr(f"cannot loop over {describe(seq)}; loop over a range, a matrix, "
                          f"a tuple or a string", node.iterable.span)
        if bar is not None:
            items = bar.track(items)
        name, body, vars_, dispatch = node.var, node.body, env.vars, self.dispatch
        destructure = type(name) is not str      # for a, b in pairs: each item unpacked as 'a, b = item'
        for item in items:
            if destructure:
                self.unpack_item(item, name, env)
            else:
                vars_[name] = item
            try:
                for stmt in body:
                    dispatch[type(stmt)](stmt, env)
            except BreakSignal:
                break
            except ContinueSignal:
                continue

    def loop_value(self, node, env):
        """What a `for` loop walks, evaluated without making what it need not: a range is
        planned, not made into a vector; a call of a builtin that declares a lazy form
        (`walk=`: range, progress, enumerate, zip) runs that form, its walked arguments given
        the same way (so `for i, x in progress(enumerate(1:n))` makes nothing n long).
        Anything else is evaluated as usual."""
        t = type(node)
        if t is A.Range:
            return self.range_plan(node, env)
        if t is not A.Call:
            return self.eval(node, env)
        fn = self.eval(node.func, env)
        walk = getattr(fn, "walk", None) if type(fn) is not Function else None
        if walk is None:
            args = [self.eval(a, env) for a in node.args]
        else:
            walked = fn.walked_positions(len(node.args))
            args = [self.walk_argument(a, env) if i in walked else self.eval(a, env)
                    for i, a in enumerate(node.args)]
        kwargs = {k: self.eval(v, env) for k, v in node.kwargs} if node.kwargs else {}
        self.current_call = node
        if walk is None:
            return self.call(fn, args, kwargs, node.span)
        return fn.call(self, args, kwargs, node.span, lazy=True)

    def walk_argument(self, node, env):
        v = self.loop_value(node, env)
        return v if isinstance(v, Walk) else ValueWalk(v)

    def unpack_item(self, item, names, env):
        """Bind one item of `for a, b in pairs` as 'a, b = item' would (the same checks and
        messages; the tape's values pass through unchanged)."""
        for target, v in zip(names, loop_item_unpacked(item, names)):
            self.assign(target, v, env)

    def eval_break(self, node, env):
        raise BreakSignal()

    def eval_continue(self, node, env):
        raise ContinueSignal()

    def eval_return(self, node, env):
        raise ReturnSignal(None if node.value is None else self.eval(node.value, env))

    def eval_fndef(self, node, env):
        fn = Function(node.name, node.fn.params, node.fn.body, env, node.span)
        env.vars[node.name] = fn

    def eval_program(self, node, env):
        self.exec_block(node.body, env)

    # ---- expressions -----------------------------------------------------------------------
