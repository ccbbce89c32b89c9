"""Diagnostics that read the tape: NaN/inf checking, the profiler, and show_tape's recording.

Three modes, all off by default, each a session's own (the context slot "diagnostics"):

    check_nan   stop at the first operation that made a NaN or an infinity, forward or backward
    profiler    time per source line and per builtin, each split into forward and backward
    recorder    the recorded Boxes, kept for show_tape's picture of the tape

How they see a running program, and the only places they attach:

- The evaluator is the *span source* (lang/evaluator/instrument.py). While a mode is on it tells
  the session's `Diagnostics` which syntax node it evaluates (`enter`/`leave`) and which function
  or builtin runs (`enter_call`/`leave_call`), checks what operators and builtins return
  (`check_operator`, `check_call`), and with every mode off it is the plain evaluator again.
- The tape hands each recorded Box to `on_node` (tape.set_node_hook, installed while any
  session has a mode on). `on_node` replaces `box.prim` by a `Recorded` stand-in: the real
  primitive plus where the node was recorded (the source span, the line, the builtin); the
  backward pass calls the stand-in's `vjp`, which times the VJP against the recording line's
  backward and checks the cotangents it made. Spans live on tape nodes only while a mode is on.

What counts as made (check_nan): an operation whose result holds a NaN where none of its inputs
held one, or an infinity where its inputs held neither NaN nor infinity. A value that is already
non-finite when it arrives (read from a file, or made on purpose) is not flagged again at every
operation it passes through, and an expression written with literals only (`0 / 0`, `-1 / 0`,
`log(0)`) is a NaN or infinity written on purpose. Inside a builtin, the builtin is judged as a
whole by its arguments and result (a step inside it may make an infinity that a later step
absorbs, as softmax's masked entries do). In the backward pass each VJP is judged by its
incoming gradient, the forward values and the gradients it made; one that made a NaN or an
infinity is a suspect whose bad cotangent is followed through the VJPs after it, since a zero
factor takes it away (zmul(0, inf) = 0: the gradient of sqrt(sum(x^2)) at 0 is 0). When the
builtin that ran the backward pass (grad) returns a result that is not finite, the first
suspect whose bad cotangent reached it is the error; when its result is finite, none is.
"""
from __future__ import annotations

import math
import time
import weakref

import numpy as np

from tapeml.array import backend as B
from tapeml.array import context, tape
from tapeml.array.backend import ARRAYS
from tapeml.array.tape import Box
from tapeml.array.printer import format_value
from tapeml.array.values import Record, shape_text
from tapeml.syntax import ast as A
from tapeml.syntax.errors import STDLIB_PREFIX, NaNErr

FWD, BWD = "forward", "backward"
UNATTRIBUTED = (None, FWD, None)      # a profile bucket: (line key, phase, operation)
LOADING = "(loading the standard library)"
OPERATORS = {A.Unary: "negation", A.Transpose: "transpose '", A.Index: "indexing",
             A.Matrix: "matrix literal", A.Range: "range"}
STATEMENTS = frozenset((A.ExprStmt, A.Assign, A.Destructure, A.If, A.For, A.While, A.Return,
                        A.FnDef, A.Break, A.Continue))
BUILTIN, STDLIB = "builtin", "stdlib"
WHERE_KEPT = 4096               # the nodes whose `where` a session's Diagnostics keeps at most


class Frame:
    """A builtin or standard-library function running (user code has no frame). `top` is the
    frame called from the user's code that this one runs under (itself when it is that one):
    its `line` and `op` are what the profiler charges and show_tape groups by."""
    __slots__ = ("kind", "name", "line", "op", "bucket", "top", "span", "called_back", "index")

    def __init__(self, kind, name, line, op, bucket, top, span, index):
        self.kind, self.name, self.line, self.op, self.bucket = kind, name, line, op, bucket
        self.top = top if top is not None else self
        self.span, self.called_back, self.index = span, False, index


class Diagnostics:
    """One session's modes and where its evaluator is (see the module's docstring)."""

    def __init__(self):
        self.check_nan = False
        self.profiler: Profiler | None = None
        self.recorder: list | None = None
        self.where = (None, None, None, UNATTRIBUTED)   # (node, line key, operation, profile bucket)
        self.frame: Frame | None = None                 # None: the user's own code
        self.vjp_site = None                            # the Recorded whose VJP runs, if any
        self._cache: dict = {}                          # node -> its `where` in the user's code
        self._buckets: dict = {}                        # interned profile buckets
        self.calls = 0                                  # frames made (show_tape's group ids)
        self.suspects: list = []                        # [NaNErr, ids of the nodes its bad cotangent reached]

    @property
    def active(self) -> bool:
        return self.check_nan or self.profiler is not None or self.recorder is not None

    def changed(self) -> None:
        """Call after turning a mode on or off: installs or removes the tape's hook."""
        if self.active:
            if self not in _ACTIVE:     # dropped with a mode on (a Session let go): the hook goes too
                weakref.finalize(self, _dropped)
            _ACTIVE.add(self)
        else:
            _ACTIVE.discard(self)
            self.where, self.frame, self.vjp_site = (None, None, None, UNATTRIBUTED), None, None
        tape.set_node_hook(on_node if _ACTIVE else None)

    # ---- the span source (called by the evaluator while a mode is on) ----------------------
    def bucket(self, line, phase, op):
        b = (line, phase, op)
        return self._buckets.setdefault(b, b)

    def _where_of(self, node):
        span = node.span
        if span is None:
            return self.where
        if str(span.file).startswith(STDLIB_PREFIX):       # the stdlib's own top level: loading it
            line, op = None, LOADING
        else:
            line = (span.file, span.line)
            op = f"operator {node.op}" if type(node) is A.Binary else OPERATORS.get(type(node))
        if len(self._cache) >= WHERE_KEPT:
            # a long session (a kernel, a Session running cells) with a mode on: forget the nodes
            # seen so far (they would keep every cell's syntax tree alive); they are found again
            self._cache.clear()
            self._buckets.clear()
        w = (node, line, op, self.bucket(line, FWD, op))
        self._cache[node] = w
        return w

    def enter(self, node):
        """The evaluator starts on `node`; returns what `leave` restores."""
        prev = self.where
        f = self.frame
        if f is None:
            w = self._cache.get(node) or self._where_of(node)
        else:                                # inside a builtin's or the stdlib's code: its line
            w = (node, f.line, f.op, f.bucket)
        self.where = w
        p = self.profiler
        if p is not None:
            if w[3] is not p.cur:
                p.switch(w[3])
            if f is None:
                if type(node) in STATEMENTS:
                    p.runs[w[1]] = p.runs.get(w[1], 0) + 1
                elif w[2] is not None:          # an operator: counted as a call
                    p.calls[w[3]] = p.calls.get(w[3], 0) + 1
        return prev

    def leave(self, prev) -> None:
        self.where = prev
        p = self.profiler
        if p is not None and prev[3] is not p.cur:
            p.switch(prev[3])

    def enter_call(self, fn, span, user: bool, stdlib: bool):
        """A call of `fn` starts: a user function (`user`), a standard-library function
        (`stdlib`) or a builtin. Returns what `leave_call` restores."""
        prev = (self.frame, self.where)
        outer = self.frame
        if user:
            if outer is not None:
                outer.called_back = True
            self.frame = None
            p = self.profiler
            body = fn.body
            if p is not None and type(body) is not tuple and body.span is not None:
                # a one-line function's body (`fn f(v) -> ...`, a lambda) is no statement: each
                # time it runs is a run of its line, as each statement of a block body is of its
                line = (self._cache.get(body) or self._where_of(body))[1]
                p.runs[line] = p.runs.get(line, 0) + 1
            return prev
        w = self.where
        self.calls += 1
        if outer is None or (outer.kind == BUILTIN and outer.top is outer):
            # called from the user's code, or by a builtin the user called (map(sqrt, x))
            if outer is not None:
                outer.called_back = True
            line = w[1]
            frame = Frame(STDLIB if stdlib else BUILTIN, fn.name, line, fn.name,
                          self.bucket(line, FWD, fn.name), None, span or (w[0].span if w[0] else None),
                          self.calls)
        else:                                # inside the stdlib (or a builtin it called)
            frame = Frame(STDLIB if stdlib else BUILTIN, fn.name, outer.line, outer.op, outer.bucket,
                          outer.top, outer.top.span, self.calls)
        self.frame = frame
        self.where = (w[0], frame.line, frame.op, frame.bucket)
        p = self.profiler
        if p is not None:
            if frame.top is frame:
                p.calls[frame.bucket] = p.calls.get(frame.bucket, 0) + 1
            if frame.bucket is not p.cur:
                p.switch(frame.bucket)
        return prev

    def leave_call(self, prev) -> None:
        self.frame, self.where = prev
        p = self.profiler
        if p is not None and self.where[3] is not p.cur:
            p.switch(self.where[3])

    # ---- checks -----------------------------------------------------------------------------
    def absorbed(self, node) -> None:
        """The VJP of `node` took a bad incoming cotangent and made finite ones."""
        for s in self.suspects:
            s[1].discard(node)

    def carried(self, node, targets) -> None:
        """The VJP of `node` passed a bad incoming cotangent on to `targets`."""
        for s in self.suspects:
            if node in s[1]:
                s[1].discard(node)
                s[1] |= targets

    def settle(self, outer, result) -> None:
        """A builtin that may have run a backward pass returns `result`: raise the first suspect
        whose bad cotangent reached the result (or the first one, when the result is not finite
        and none can be followed there); forget them all when the result is finite."""
        suspects, self.suspects = self.suspects, outer
        if suspects and not finite(result):
            live = [s for s in suspects if s[1]] or suspects
            raise live[0][0]

    def deliberate(self) -> bool:
        """The node evaluated now is written with literals only (`0 / 0`, `log(0)`)."""
        return constant(self.where[0])

    def check_operator(self, symbol: str, result, a, b) -> None:
        """`a symbol b` gave `result`, which holds a NaN or an infinity: raise if it made one."""
        node = self.where[0]
        # no node: the statement running began before the check was turned on (`y = on() * x`,
        # where on() calls check_nan(true)); the check starts with the statements after it, in
        # the walked and the compiled evaluator alike (lang/evaluator/compiled_helpers.py's _resume)
        if not self.check_nan or node is None or self.vjp_site is not None or self.deliberate():
            return
        verdict = judge(result, [("the left operand", a), ("the right operand", b)])
        if verdict is None:
            return
        raise NaNErr(f"'{symbol}' {verdict}", getattr(node, "op_span", None) or node.span)

    def check_call(self, fn, args, kwargs, result, span) -> None:
        """The builtin `fn` (which called no function back) returned `result`."""
        if not self.check_nan or self.deliberate():
            return
        if finite(result):
            return
        names = [p.name for p in getattr(fn, "params", ())]
        inputs = []
        for i, a in enumerate(args):
            name = names[i] if i < len(names) and not getattr(fn.params[i], "variadic", False) else \
                f"argument {i + 1}"
            inputs.append((name, a))
        inputs += [(k, v) for k, v in kwargs.items()]
        verdict = judge(result, inputs, "arguments")
        if verdict is not None:
            raise NaNErr(f"{fn.name} {verdict}", span)


_ACTIVE = weakref.WeakSet()  # the Diagnostics with a mode on (the tape's hook is set while any)
WHEN_DROPPED: list = []      # called when a Diagnostics with a mode on is collected (the evaluator's operator checks)


def _dropped() -> None:
    """A Diagnostics with a mode on was collected (its Session dropped without turning it off):
    the tape's hook, and what WHEN_DROPPED re-judges, stay only while another one is on."""
    tape.set_node_hook(on_node if len(_ACTIVE) else None)
    for again in WHEN_DROPPED:
        again()
context.slot("diagnostics", Diagnostics)


def current() -> Diagnostics:
    """The current session's Diagnostics."""
    return context.LIVE["diagnostics"]


# ---- the tape's hook and the recorded nodes' stand-in ------------------------------------------
class Recorded:
    """A recorded node's primitive while a mode is on (tape.Box.prim): the real primitive, where
    the node was recorded, and its VJP timed and checked. `group` is the builtin call that
    recorded it (a Frame), None in the user's own code; `node` and `parents` are the ids of its
    Box and of its parents' Boxes by argument, which the check follows a bad cotangent along."""
    __slots__ = ("prim", "name", "diag", "span", "line", "op", "group", "phase", "bwd_bucket", "node",
                 "parents")

    def __init__(self, prim, diag, span, line, op, group, phase, node=0, parents=()):
        self.prim, self.name, self.diag = prim, prim.name, diag
        self.span, self.line, self.op, self.group, self.phase = span, line, op, group, phase
        self.bwd_bucket = diag.bucket(line, BWD, op)
        self.node, self.parents = node, parents

    def vjp(self, g, ans, saved, tracked, *args, **kw):
        return self._run(self.prim.vjp, g, ans, saved, tracked, args, kw)

    def vjp_plain(self, g, ans, saved, tracked, *args, **kw):
        return self._run(self.prim.vjp_plain, g, ans, saved, tracked, args, kw)

    def _run(self, fn, g, ans, saved, tracked, args, kw):
        d = self.diag
        p = d.profiler
        if p is not None:
            before = p.cur
            p.switch(self.bwd_bucket)
        outer = d.vjp_site
        d.vjp_site = self
        try:
            grads = fn(g, ans, saved, tracked, *args, **kw)
            if grads is not None:
                if p is not None:
                    p.nodes[self.bwd_bucket] = p.nodes.get(self.bwd_bucket, 0) + 1
                if d.check_nan and outer is None:
                    self._check(grads, g, ans, args, kw)
        finally:
            d.vjp_site = outer
            if p is not None:
                # between VJPs the tape walks (a heap, sums of cotangents): charged to the backward
                # of the line that runs the backward pass (the grad call)
                p.switch(before if before[1] == BWD else d.bucket(before[0], BWD, before[2]))
        return grads

    def _check(self, grads, g, ans, args, kw):
        """A VJP that makes a NaN or infinity is a suspect, not yet an error: a later VJP may take
        the bad cotangent away (a zero factor wins: zmul(0, inf) = 0, so the gradient of
        sqrt(sum(x^2)) at 0 is 0). The suspect's bad cotangents are followed to the nodes they
        reach; the builtin that ran the backward pass (grad) raises the first suspect whose bad
        cotangent reached its result (Diagnostics.settle)."""
        d = self.diag
        bad = [i for i, gi in enumerate(grads) if gi is not None and not finite(gi)]
        g_bad = not finite(g)
        if not bad:
            if g_bad:
                d.absorbed(self.node)
            return
        targets = {pid for i, pid in self.parents if i in bad}
        names = argument_names(self.prim, args, kw)
        inputs = [("the incoming gradient", g), ("the forward result", ans)]
        inputs += [(name, a) for name, a in zip(names, args)]
        outputs = [(f"the gradient for {'its argument' if name == 'the argument' else name}", gi)
                   for name, gi in zip(names, grads) if gi is not None]
        verdict = judge(None, inputs, "values", outputs)
        if verdict is None:
            if g_bad:
                d.carried(self.node, targets)
            return
        if g_bad:
            d.absorbed(self.node)       # this VJP made something new: it is the one to blame
        by = d.frame.top if d.frame is not None else None
        ran = f"; {by.name} at {by.span} ran the backward pass" if by is not None and by.span else ""
        what = self.name if self.op in (None, self.name) or self.op.startswith("operator") else \
            f"{self.name} (in {self.op})"
        d.suspects.append([NaNErr(f"the backward pass of {what} {verdict}; this line recorded {self.name} "
                                  f"in the forward pass{ran}", self.span), targets])


def argument_names(prim, args, kw) -> list:
    """What a report calls each positional argument of a primitive's application: its declared
    names (Primitive.arg_names), else "the argument" for one and "argument i" for several."""
    declared = getattr(prim, "arg_names", None)      # (a Part of a several-output primitive has none)
    if callable(declared):
        declared = declared(len(args), kw)
    declared = list(declared or ())
    if len(args) == 1 and not declared:
        return ["the argument"]
    return [declared[i] if i < len(declared) else f"argument {i + 1}" for i in range(len(args))]


class RecordedNoPlain(Recorded):
    """A Recorded for a primitive without a first-order VJP in NumPy (backward tests for None)."""
    __slots__ = ()
    vjp_plain = None


def on_node(box) -> None:
    """tape.set_node_hook's hook: give a recorded Box its stand-in (see Recorded)."""
    d = context.LIVE["diagnostics"]
    if not d.active or type(box.prim) is not tape.Primitive:
        return
    site = d.vjp_site
    if site is not None:          # recorded by a VJP (grad of grad): where that node was recorded
        span, line, op, group, phase = site.span, site.line, site.op, site.group, BWD
    else:
        node, line, op, _ = d.where
        f = d.frame
        if f is not None:
            span, group = f.top.span, f.top
        else:
            span, group = (getattr(node, "op_span", None) or node.span) if node is not None else None, None
        phase = FWD
    cls = Recorded if box.prim.vjp_plain is not None else RecordedNoPlain
    # a parent that is an output of a primitive with several outputs (tape.Part) stands for its
    # joint Box, whose VJP carries the cotangent on
    box.prim = cls(box.prim, d, span, line, op, group, phase, id(box),
                   tuple((i, id(p.parents[0] if type(p.prim) is tape.Part else p))
                         for i, p in enumerate(box.parents) if p is not None))
    if d.recorder is not None:
        d.recorder.append(box)


# ---- what is finite, and what an operation made -------------------------------------------------
def leaves(v, out=None, depth=0):
    """The number and float-matrix leaves of a value (through tuples, records and Boxes)."""
    out = [] if out is None else out
    while type(v) is Box:
        v = v.value
    t = type(v)
    if t is float or (t is np.ndarray and v.dtype.kind in "fc"):
        out.append(v)
    elif t is np.float64 or t is np.float32:
        out.append(float(v))
    elif t in ARRAYS and B.of(v).is_float(v):      # another backend's matrix
        out.append(v)
    elif (t is tuple or t is Record) and depth < 100:
        for x in (v if t is tuple else v.fields.values()):
            leaves(x, out, depth + 1)
    return out


def finite(v) -> bool:
    """Every number in v is finite (a quick test: most results pass it)."""
    for x in leaves(v):
        t = type(x)
        if t is float:
            if not math.isfinite(x):
                return False
        elif t is np.ndarray:
            if not np.isfinite(x).all():
                return False
        else:
            xp = B.xp_of(x)
            if not B.of(x).item(xp.all(xp.isfinite(x))):
                return False
    return True


def _has(x, what) -> bool:
    t = type(x)
    if t is float:
        return math.isnan(x) if what == "nan" else math.isinf(x)
    if t is np.ndarray:
        return bool((np.isnan(x) if what == "nan" else np.isinf(x)).any())
    xp = B.xp_of(x)
    return B.of(x).item(xp.any(xp.isnan(x) if what == "nan" else xp.isinf(x)))


def _first(x, what):
    """(index, value) of the first NaN or infinity of x (index () for a number)."""
    if type(x) is float:
        return (), x
    x = B.to_numpy(x)           # an error's message: read on the host
    where = np.isnan(x) if what == "nan" else np.isinf(x)
    flat = int(np.argmax(where.reshape(-1)))
    idx = np.unravel_index(flat, x.shape)
    return tuple(int(i) for i in idx), float(x[idx])


def _index_text(idx) -> str:
    return "[" + ", ".join(str(i) for i in idx) + "]"


def _shape(x) -> tuple:
    return () if type(x) is float else tuple(x.shape)


def judge(result, inputs, word="operands", outputs=None) -> str | None:
    """The message part after an operation's name when it made a NaN or infinity (see the
    module's docstring), else None. `inputs` and `outputs` are (name, value) pairs; `result`
    alone is one unnamed output."""
    ins = [(name, x) for name, v in inputs for x in leaves(v)]
    in_nan = any(_has(x, "nan") for _, x in ins)
    in_inf = any(_has(x, "inf") for _, x in ins)
    outs = [(name, x) for name, v in (outputs if outputs is not None else [("the result", result)])
            for x in leaves(v)]
    made = None
    if not in_nan:
        made = next(((n, x, "nan") for n, x in outs if _has(x, "nan")), None)
    if made is None and not (in_nan or in_inf):
        made = next(((n, x, "inf") for n, x in outs if _has(x, "inf")), None)
    if made is None:
        return None
    name, x, what = made
    idx, value = _first(x, what)
    shown = format_value(value)
    place = f"{name} is {shown}" if idx == () else f"{name} ({shape_text(_shape(x))}) is {shown} at {_index_text(idx)}"
    there = []
    for iname, a in inputs:
        ls = leaves(a)
        if len(ls) != 1:
            continue
        a = ls[0]
        try:
            at = a if type(a) is float else np.broadcast_to(B.to_numpy(a), _shape(x))[idx]
        except ValueError:
            at = None
        state = None if finite(a) else "NaN" if _has(a, "nan") else "infinite"
        if at is not None:
            there.append(f"{iname} is {format_value(float(at))}" + (f" (already {state})" if state else ""))
        elif state:
            there.append(f"{iname} was already {state}")
    before = {("nan", False): f"from finite {word}", ("inf", False): f"from finite {word}",
              ("nan", True): f"from {word} with infinities but no NaN"}[(what, in_inf and what == "nan")]
    verb = "made NaN" if what == "nan" else f"made {shown}"
    return f"{verb} {before}: {place}" + (f", where {_join(there)}" if there else "")


def _join(parts) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def constant(node) -> bool:
    """An expression written with literals only (no name, so no variable): `0 / 0`, `-1 / 0`,
    `log(0)`, `[1, 0 / 0]`. Its NaN or infinity is the one the user wrote."""
    t = type(node)
    if t in (A.Number, A.Bool, A.String, A.NoneLit):
        return True
    if t is A.Binary or t is A.Logical:
        return constant(node.left) and constant(node.right)
    if t is A.Unary or t is A.Transpose:
        return constant(node.operand)
    if t is A.Call:
        return (type(node.func) is A.Name and all(constant(a) for a in node.args)
                and all(constant(v) for _, v in node.kwargs))
    if t is A.Matrix:
        return all(constant(x) for row in node.rows for x in row)
    if t is A.TupleLit:
        return all(constant(x) for x in node.items)
    if t is A.ExprStmt:
        return constant(node.expr)
    return False


# ---- the profiler -------------------------------------------------------------------------------
class Profiler:
    """Where the time goes: seconds per bucket (line key, phase, operation), the calls of each
    builtin from the user's code, the VJPs run per bucket and the statements run per line. The
    clock is charged to the current bucket whenever the bucket changes, so the buckets add up
    to the time profiled (UNATTRIBUTED: no line, e.g. loading the standard library). On a GPU
    the clock waits for the device's queued work first (Backend.synchronize), so a line is charged
    the time its kernels took, not the next line that happened to wait for them."""

    def __init__(self, clock=time.perf_counter):
        be = B.current()
        if be.device != "cpu":
            sync = be.synchronize

            def clock(clock=clock):
                sync()
                return clock()
        self.clock = clock
        self.seconds: dict = {}
        self.calls: dict = {}
        self.nodes: dict = {}
        self.runs: dict = {}
        self.cur = UNATTRIBUTED
        self.start = self.t = clock()
        self.total = None

    def switch(self, bucket) -> None:
        now = self.clock()
        c = self.cur
        self.seconds[c] = self.seconds.get(c, 0.0) + (now - self.t)
        self.t = now
        self.cur = bucket

    def stop(self) -> None:
        self.switch(UNATTRIBUTED)
        self.total = self.t - self.start
