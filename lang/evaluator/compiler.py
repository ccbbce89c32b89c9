"""Compile once: a user function's body becomes Python source, compiled by `compile()` the first
time the function is called, and run as a Python function from then on (the way Hy runs Lisp at
CPython's speed). The tree walker (interpreter.py) stays the reference: it runs the top level,
and every function this compiler declines.

What the compiled form keeps of the walker, by construction:
- The same answers and messages: operators, conditions, fields, calls and the rest go through
  the same functions the walker calls (semantics.py, Interpreter.call, the walker itself for
  the node kinds listed below), with the same spans; only the float fast paths are inlined
  (`a + b` of two Python floats is what the primitive's scalar form computes, operator.add).
- Scopes: the function's own names (its parameters and every name it assigns) are Python
  locals, resolved once (jlox's Resolver, flow-insensitive); a local read before its first
  assignment falls back to the enclosing scopes, as the walker's scope chain does. Every other
  name is looked up in the enclosing scopes at each read (the REPL may redefine it).
- `return`, `break` and `continue` are Python's own (no exceptions).
- A body that makes a function (`fn(x) -> ...`, a nested `fn`) keeps its names in an Env, as the
  walker does, so the closure sees later assignments: the compiled code reads and writes that
  Env's dict instead of Python locals ("scope mode").
- A loop at the top level of a program (`for`, `while`) is compiled too, in scope mode over
  the program's own scope: a training loop in a script runs compiled.
- Calls, argument binding, the call chain in errors, the recursion limit and the deep-stack
  hand-over stay in Interpreter.call_function, for compiled and walked bodies alike.
- Diagnostics (check_nan, the profiler, show_tape's recorder) watch walked code only: a body
  that starts while a mode is on is walked (Interpreter.compiled is false), and a compiled body
  that turns one on as it runs (a call: check_nan(true), or a function that calls it) hands the
  rest of itself to the walker. After each statement that calls something (and each condition
  or loop iterable that does) the code tests `I.compiled`; false, `_resume` walks the rest: the
  block's statements left, the loops' items left (the same iterators) and their conditions, on
  the body's names. A mode turned off is nothing to hand over (the walker gives the plain values).

Declined (the whole function is walked): `break`/`continue` outside a loop, `return` in a
top-level loop, an assignment to a keyword. Node kinds evaluated by the walker on a snapshot of the locals
(an Env made for that one evaluation; they cannot assign, and in a body with Python locals
nothing in them can capture it; in scope mode they get the scope itself): indexing, matrix
literals, dictionary literals, interpolated strings, ranges, imports. Assignments into fields and indices run the
walker's assignment on a snapshot and take the new value of the root name back.

This module writes the code: the cache of compiled bodies (code_for, code_for_loop), the
analysis of a body (its locals, whether it makes functions, where a call may switch a mode on)
and _Compiler, statements then expressions. What the code runs against (the name look-ups,
the snapshots, the loops' items, `_resume`) is compiled_helpers.py, whose HELPERS is every
compiled body's namespace.
"""
from __future__ import annotations

import os
import weakref
from collections import OrderedDict

from tapeml.syntax import ast as A
from tapeml.syntax.lexer import KEYWORDS
from tapeml.array.values import Function
from tapeml.evaluator import semantics
from tapeml.evaluator.compiled_helpers import HELPERS


class Declined(Exception):
    """The body holds something the compiler leaves to the walker."""



def _holds(node, hit, skip=()) -> bool:
    """Whether a node of a kind in `hit` stands anywhere in node (a syntax tree, or a tuple or
    list of them), not looking inside the nodes of a kind in `skip`."""
    stack = [node]
    while stack:
        n = stack.pop()
        t = type(n)
        if t in hit:
            return True
        if t in skip:
            continue
        if isinstance(n, A.Node):
            for f in n._fields:
                if f != "span":
                    stack.append(getattr(n, f))
        elif t is tuple or t is list:
            stack.extend(n)
    return False


def _may_switch(node) -> bool:
    """Whether evaluating node calls something (a call or an import; not the body of a function
    it makes), and so may turn a diagnostics mode on."""
    return _holds(node, (A.Call, A.Import), (A.Lambda, A.FnDef))


def _makes_functions(node) -> bool:
    """Whether a lambda or a nested fn appears anywhere (then the names live in an Env)."""
    return _holds(node, (A.Lambda, A.FnDef))


# operators whose two-float result is Python's own operator (the primitives' scalar forms)
INLINE = {"+", "-", "*", "<", "<=", ">", ">=", "==", "!="}
for _sym in INLINE:
    assert semantics.FLOAT_OPS[_sym].__module__ in ("_operator", "operator"), _sym

# Compiled code is owned by the functions that run it: each Function value holds its body's code
# (Function.code), and this table only finds that code again for another Function made from the
# same definition (a closure made in a loop), while any such Function lives. The code holds its
# body and parameters (so their ids stay theirs); when the last Function made from a definition
# is gone (its session discarded, its cell's name redefined) the code goes too. A top-level loop
# runs once per parse: its code is made for that run and not kept.
_CODE: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()    # (id(body), id(params)) -> code
_DECLINED: OrderedDict = OrderedDict()      # the same key -> (body, params): the latest bodies the compiler declined
DECLINED_KEPT = 256
# TAPEML_COMPILE=0 walks every body (the reference the tests compare the compiled form with)
ENABLED = os.environ.get("TAPEML_COMPILE", "1") != "0"


def code_for(fn: Function):
    """The compiled form of fn's body (shared by every live Function made from the same
    definition), or None when the compiler declines it (or compiling is switched off)."""
    if not ENABLED:
        return None
    body, params = fn.body, fn.params
    # the key is the definition: the body and the parameters (an empty body `()` is one object
    # for every function with an empty body, whatever its parameters)
    key = (id(body), id(params))
    code = _CODE.get(key)
    if code is not None and code.body is body and code.params is params:
        return code
    hit = _DECLINED.get(key)
    if hit is not None and hit[0] is body and hit[1] is params:
        return None
    code = _compiled(lambda: _Compiler(fn.name, params, body).build())
    if code is None:
        _DECLINED[key] = (body, params)
        while len(_DECLINED) > DECLINED_KEPT:
            _DECLINED.popitem(last=False)
    else:
        code.body, code.params = body, params
        _CODE[key] = code
    return code


def code_for_loop(stmt):
    """A top-level `for` or `while` compiled over the scope it runs in: code(interp, env)."""
    if not ENABLED:
        return None
    return _compiled(lambda: _Compiler("<top level>", (), (stmt,), top=True).build())


def _compiled(make):
    try:
        return make()
    except (Declined, SyntaxError, RecursionError, MemoryError):
        # what the compiler leaves to the walker, and what CPython's compiler refuses: more than
        # 20 statically nested blocks, an expression nested past its recursion limit
        return None


def _assigned(stmts, out: set):
    """Every name the statements assign (a function's locals)."""
    for s in stmts:
        t = type(s)
        if t is A.Assign:
            out.add(_root(s.target))
        elif t is A.Destructure:
            for target in s.targets:
                out.add(_root(target))
        elif t is A.For:
            if type(s.var) is str:
                out.add(s.var)
            else:
                out.update(n.name for n in s.var)
            _assigned(s.body, out)
        elif t is A.While:
            _assigned(s.body, out)
        elif t is A.If:
            for _, body in s.branches:
                _assigned(body, out)
            if s.orelse is not None:
                _assigned(s.orelse, out)
        elif t is A.FnDef:
            out.add(s.name)
    return out


def _root(target):
    while type(target) is not A.Name:
        if type(target) not in (A.Field, A.Index):
            raise Declined("an assignment target")
        target = target.obj
    if target.name in KEYWORDS:
        raise Declined("an assignment to a keyword")
    return target.name


SIMPLE = (A.ExprStmt, A.Assign, A.Destructure)     # statements after which a checkpoint may stand
SNAPSHOT_KINDS = (A.Index, A.Matrix, A.String, A.Range, A.Import, A.Formatted, A.End, A.Colon, A.DictLit)


class _Compiler:
    """One body to Python source. Names: Python locals v0, v1, ... (parameters first), or in
    scope mode the dict LV of the Env L that closures made here capture (at the top level, the
    program's own scope)."""

    def __init__(self, name, params, body, top=False):
        self.fn_name = name
        self.params = [p.name for p in params]
        self.top = top
        self.block = body if type(body) is tuple else None
        self.body = body
        self.scope_mode = top or _makes_functions(body)
        local = set(self.params)
        if self.block is not None:
            _assigned(self.block, local)
        self.locals = sorted(local - set(self.params))
        self.all_locals = self.params + self.locals
        self.py = {n: f"v{i}" for i, n in enumerate(self.all_locals)}
        self.consts: dict = {}
        self.lines: list[str] = []
        self.depth = 1
        self.loops = 0
        self.tmp = 0
        # locals certainly assigned at this point of the straight-line code (their reads need no
        # test for _U): a name stored outside any if or loop; a branch's or a loop body's own
        # stores count inside it only
        self.assigned: set = set()
        # where the code being emitted stands, outermost first: ("block", statements, next index),
        # ("for", node, its items' variable), ("while", node) (the frames of _resume)
        self.ctx: list = []

    # ---- emitting --------------------------------------------------------------------------
    def emit(self, line: str):
        self.lines.append("    " * self.depth + line)

    def const(self, value) -> str:
        name = f"k{len(self.consts)}"
        self.consts[name] = value
        return name

    def temp(self) -> str:
        self.tmp += 1
        return f"t{self.tmp}"

    def locals_tuple(self) -> str:
        return "(" + "".join(f"{self.py[n]}, " for n in self.all_locals) + ")"

    def names_const(self) -> str:
        if "_names" not in self.__dict__:
            self._names = self.const(tuple(self.all_locals))
        return self._names

    def scope(self) -> str:
        """An Env holding the names as they are now (scope mode: the scope itself)."""
        if self.scope_mode:
            return "L"
        env = self.temp()
        self.emit(f"{env} = _snap(E, {self.names_const()}, {self.locals_tuple()})")
        return env

    def store(self, name: str, value: str):
        if self.scope_mode:
            self.emit(f"LV[{name!r}] = {value}")
        else:
            self.emit(f"{self.py[name]} = {value}")
            self.assigned.add(name)

    def build(self):
        if self.top:
            args = "I, L"
            self.emit("LV = L.vars")
            self.emit("E = L")
        else:
            args = ", ".join(["I", "E"] + [self.py[n] for n in self.params])
            self.emit("EV = E.vars")
            if self.scope_mode:
                self.emit("L = Env(E, {" + ", ".join(f"{n!r}: {self.py[n]}" for n in self.params) + "})")
                self.emit("LV = L.vars")
            else:
                for n in self.locals:
                    self.emit(f"{self.py[n]} = _U")
        if self.block is None:
            self.emit(f"return {self.expr(self.body)}")
        else:
            self.stmts(self.block)
            self.emit("return None")
        name = "".join(c if c.isalnum() else "_" for c in self.fn_name)
        source = f"def tapeml_{name}({args}):\n" + "\n".join(self.lines) + "\n"
        namespace = dict(HELPERS)
        namespace.update(self.consts)
        exec(compile(source, f"<tapeml: compiled {self.fn_name}>", "exec"), namespace)
        code = namespace.pop(f"tapeml_{name}")     # (no cycle through its globals: freed when unused)
        code.source = source
        return code

    # ---- statements ------------------------------------------------------------------------
    def stmts(self, body):
        start = len(self.lines)
        for i, s in enumerate(body):
            self.ctx.append(("block", body, i + 1))
            self.stmt(s)
            if type(s) in SIMPLE and _may_switch(s):
                self.checkpoint()
            self.ctx.pop()
        if len(self.lines) == start:        # an empty block, or one of constants only (`3.0;`)
            self.emit("pass")

    def checkpoint(self, inner=(), inner_false=None, cond=None):
        """After code that called something: if a diagnostics mode is on now, the rest of the body
        is walked (_resume), from `inner` on (`inner_false` when the condition `cond` is false)."""
        iters = [f[2] for f in self.ctx + list(inner) if f[0] == "for"]
        which = self.const(self.frames(inner, iters))
        if inner_false is not None:
            which = f"{which} if {cond} else {self.const(self.frames(inner_false, iters))}"
        env = "L" if self.scope_mode else f"_snap(E, {self.names_const()}, {self.locals_tuple()})"
        self.emit("if not I.compiled:")
        self.emit(f"    return _resume(I, {env}, {which}, ({''.join(i + ', ' for i in iters)}))")

    def frames(self, inner, iters) -> tuple:
        return tuple(("for", f[1], iters.index(f[2])) if f[0] == "for" else f
                     for f in self.ctx + list(inner))

    def stmt(self, s):
        t = type(s)
        if t is A.ExprStmt:
            self.expr(s.expr)
        elif t is A.Assign:
            self.assign(s)
        elif t is A.Destructure:
            self.destructure(s)
        elif t is A.If:
            self.if_(s)
        elif t is A.While:
            self.while_(s)
        elif t is A.For:
            self.for_(s)
        elif t is A.Return:
            if self.top:
                raise Declined("return at the top level")
            self.emit(f"return {'None' if s.value is None else self.expr(s.value)}")
        elif t is A.Break or t is A.Continue:
            if not self.loops:
                raise Declined("break or continue outside a loop")
            self.emit("break" if t is A.Break else "continue")
        elif t is A.FnDef:
            if not self.scope_mode:
                raise Declined("a nested fn outside scope mode")
            self.store(s.name, f"_function({self.const(s)}, L)")
        else:
            raise Declined(t.__name__)

    def assign(self, s):
        target = s.target
        if type(target) is A.Name:
            value = self.expr(s.value)
            if s.op is None:
                self.store(target.name, value)
                return
            current = self.expr(target)
            self.store(target.name, self.binary_code(s.op, current, value, self.const(s.span)))
            return
        self.walker_statement(s, "eval_assign", [_root(target)])

    def walker_statement(self, s, method, roots):
        """The walker's own statement on the scope (a snapshot: the roots' new values come back)."""
        env = self.scope()
        self.emit(f"I.{method}({self.const(s)}, {env})")
        if not self.scope_mode:
            for r in dict.fromkeys(roots):
                self.emit(f"{self.py[r]} = {env}.vars[{r!r}]")
                self.assigned.add(r)

    def destructure(self, s):
        if not all(type(t) is A.Name for t in s.targets):
            self.walker_statement(s, "eval_destructure", [_root(t) for t in s.targets])
            return
        value = self.expr(s.value)
        r = self.temp()
        self.emit(f"{r} = _unpack({value}, {len(s.targets)}, {self.const(s)})")
        for i, target in enumerate(s.targets):
            self.store(target.name, f"{r}[{i}]")

    def condition(self, node, what) -> str:
        c = self.temp()
        self.emit(f"{c} = {self.expr(node)}")
        self.emit(f"if {c} is not True and {c} is not False:")
        self.emit(f"    {c} = _cond({c}, {self.const(node.span)}, {what!r})")
        return c

    def if_(self, node, j=0):
        cond, body = node.branches[j]
        c = self.condition(cond, "if")
        if _may_switch(cond):
            self.checkpoint([("block", body, 0)], [("if", node, j + 1)], c)
        before = set(self.assigned)
        self.emit(f"if {c}:")
        self.depth += 1
        self.stmts(body)
        self.depth -= 1
        self.assigned = set(before)
        if j + 1 < len(node.branches) or node.orelse is not None:
            self.emit("else:")
            self.depth += 1
            if j + 1 < len(node.branches):
                self.if_(node, j + 1)
            else:
                self.stmts(node.orelse)
            self.depth -= 1
        self.assigned = before

    def while_(self, s):
        before = set(self.assigned)
        self.emit("while True:")
        self.depth += 1
        c = self.condition(s.cond, "while")
        if _may_switch(s.cond):
            self.checkpoint([("while", s), ("block", s.body, 0)], [], c)
        self.emit(f"if not {c}:")
        self.emit("    break")
        self.loops += 1
        self.ctx.append(("while", s))
        self.stmts(s.body)
        self.ctx.pop()
        self.loops -= 1
        self.depth -= 1
        self.assigned = before

    def for_(self, s):
        env = self.scope()
        seq, items, item = self.temp(), self.temp(), self.temp()
        self.emit(f"{seq} = I.loop_value({self.const(s.iterable)}, {env})")
        self.emit(f"with _loop(I, {seq}, {self.const(s)}) as {items}:")
        before = set(self.assigned)
        self.depth += 1
        if _may_switch(s.iterable):
            self.checkpoint([("for", s, items)])
        self.emit(f"for {item} in {items}:")
        self.depth += 1
        if type(s.var) is str:
            self.store(s.var, item)
        else:
            r = self.temp()
            self.emit(f"{r} = _unpack_item({item}, {self.const(s.var)})")
            for i, n in enumerate(s.var):
                self.store(n.name, f"{r}[{i}]")
        self.loops += 1
        self.ctx.append(("for", s, items))
        self.stmts(s.body)
        self.ctx.pop()
        self.loops -= 1
        self.depth -= 2
        self.assigned = before

    # ---- expressions: each returns a Python name or constant holding the value --------------
    def expr(self, node) -> str:
        t = type(node)
        if t is A.Number:
            return self.const(node.value)
        if t is A.Bool:
            return "True" if node.value else "False"
        if t is A.NoneLit:
            return "None"
        if t is A.String and len(node.parts) == 1 and type(node.parts[0]) is str:
            return self.const(node.parts[0])
        if t is A.Name:
            return self.name(node)
        if t is A.Binary:
            a = self.expr(node.left)
            b = self.expr(node.right)
            out = self.temp()
            note = semantics.range_note(node.left, node.right)
            if note:            # an operand indexed by a range: its shape error says ranges include their end
                self.emit(f"{out} = _bin({node.op!r}, {a}, {b}, {self.const(node.op_span or node.span)}, "
                          f"{note!r})")
            else:
                self.emit(f"{out} = {self.binary_code(node.op, a, b, self.const(node.op_span or node.span))}")
            return out
        if t is A.Call:
            return self.call(node)
        if t is A.Logical:
            return self.logical(node)
        if t is A.Unary:
            return self.assigned_to(f"_unary({node.op!r}, {self.expr(node.operand)}, {self.const(node.span)})")
        if t is A.Field:
            return self.assigned_to(f"_field({self.expr(node.obj)}, {node.name!r}, {self.const(node.span)})")
        if t is A.Transpose:
            return self.assigned_to(f"_transpose({self.expr(node.operand)}, {self.const(node.span)})")
        if t is A.TupleLit:
            items = [self.expr(x) for x in node.items]
            return self.assigned_to(f"({''.join(i + ', ' for i in items)})")
        if t is A.RecordLit:
            values = [(name, self.expr(x)) for name, x in node.fields]
            return self.assigned_to(f"Record({{{', '.join(f'{n!r}: {v}' for n, v in values)}}})")
        if t is A.Lambda:
            return self.assigned_to(f"_function({self.const(node)}, L)")
        if t in SNAPSHOT_KINDS:
            env = self.scope()
            return self.assigned_to(f"I.eval({self.const(node)}, {env})")
        raise Declined(t.__name__)

    def assigned_to(self, code: str) -> str:
        """A new temporary holding the value of the Python expression `code`."""
        out = self.temp()
        self.emit(f"{out} = {code}")
        return out

    def binary_code(self, op, a, b, span) -> str:
        if op in INLINE:
            checks = [f"type({x}) is float" for x in (a, b)
                      if not (x in self.consts and type(self.consts[x]) is float)]
            fast = f"{a} {op} {b}"
            if not checks:
                return fast
            return f"{fast} if {' and '.join(checks)} else _bin({op!r}, {a}, {b}, {span})"
        return f"_bin({op!r}, {a}, {b}, {span})"

    def name(self, node) -> str:
        n = node.name
        local = n in self.py
        if local and not self.scope_mode and (n in self.params or n in self.assigned):
            return self.py[n]
        out = self.temp()
        span = self.const(node.span)
        if self.scope_mode:
            read = f"LV.get({n!r}, _U)" if self.top or local else f"EV.get({n!r}, _U)"
            look = f"_look(I, L, {n!r}, {span}, (), ())"
        else:
            read = self.py[n] if local else f"EV.get({n!r}, _U)"
            look = f"_look(I, E, {n!r}, {span}, {self.names_const()}, {self.locals_tuple()})"
        self.emit(f"{out} = {read}")
        self.emit(f"if {out} is _U:")
        self.emit(f"    {out} = {look}")
        return out

    def call(self, node) -> str:
        f = self.expr(node.func)
        args = [self.expr(a) for a in node.args]
        kwargs = [(k, self.expr(v)) for k, v in node.kwargs]
        out = self.temp()
        self.emit(f"I.current_call = {self.const(node)}")
        kw = "{" + ", ".join(f"{k!r}: {v}" for k, v in kwargs) + "}"
        span = self.const(node.span)
        call = f"({f}, [{', '.join(args)}], {kw}, {span})"
        if kwargs:
            # a user function straight to call_function (Interpreter.call's first test), unless a
            # diagnostics mode has wrapped I.call meanwhile (then I.compiled is false)
            self.emit(f"{out} = I.call_function{call} if type({f}) is Function and I.compiled else I.call{call}")
            return out
        # A compiled function called with its positional arguments: call_function's hot path
        # inline (the same depth, hand-over and error steps); anything else goes through it.
        code, depth = self.temp(), self.temp()
        self.emit(f"{code} = {f}.code if type({f}) is Function and I.compiled and "
                  f"len({f}.params) == {len(args)} else None")
        self.emit(f"if {code}:")
        self.emit(f"    {depth} = I.depth = I.depth + 1")
        self.emit(f"    if {depth} <= _MAX_DEPTH and {depth} % _HOP_DEPTH:")
        self.emit("        try:")
        self.emit(f"            {out} = {code}(I, {f}.env{''.join(', ' + a for a in args)})")
        self.emit("        except _LangError as e:")
        self.emit(f"            raise _called_from(e, {f}, {span})")
        self.emit("        except RecursionError:")
        self.emit(f"            raise _too_deep({f}, {span}) from None")
        self.emit("        finally:")
        self.emit("            I.depth -= 1 if I.depth > 0 else 0")
        self.emit("    else:")
        self.emit("        I.depth -= 1")
        self.emit(f"        {out} = I.call_function{call}")
        self.emit("else:")
        self.emit(f"    {out} = I.call_function{call} if type({f}) is Function and I.compiled else I.call{call}")
        return out

    def logical(self, node) -> str:
        left = self.expr(node.left)
        out = self.temp()
        k = self.const(node)
        self.emit(f"if _is_mask({left}):")
        self.depth += 1
        right = self.expr(node.right)
        self.emit(f"{out} = _mask({k}, {left}, {right})")
        self.depth -= 1
        self.emit("else:")
        self.depth += 1
        self.emit(f"{out} = _cond({left}, {self.const(node.left.span)}, {f'{node.op!r} operand'!r})")
        self.emit(f"if {'' if node.op == 'and' else 'not '}{out}:")
        self.depth += 1
        right = self.expr(node.right)
        self.emit(f"{out} = _cond({right}, {self.const(node.right.span)}, {f'{node.op!r} operand'!r})")
        self.depth -= 2
        return out
