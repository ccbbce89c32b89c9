"""The reverse-mode tape.

A differentiable operation is a `Primitive`: a NumPy forward (`impl`) and one VJP. Calling a
primitive with no tracked argument runs `impl` directly (one type check per argument: rule 5).
While `grad` runs, its inputs are wrapped in `Box`es of a fresh *level*; a primitive applied to
a Box of the highest level present returns a new Box of that level that records the application.
Boxes of lower levels stay boxed inside, so nested `grad`s record into their own tapes and
never mix (the scheme of HIPS autograd).

VJPs are written with primitives (see ops.py), so the backward pass of an inner `grad` is
itself recorded while an outer `grad` runs: grad of grad works (DESIGN.md rule 4). A primitive
may also declare `vjp_plain`, the same VJP on plain NumPy arrays; `backward` takes it only at
first order, when `first_order` (the one test) finds no Box in sight (nothing to record).

`backward` walks Boxes newest first (creation order is a topological order) with a dict of
pending cotangents: no recursion, no mutation of the tape, so it is idempotent and safe on
graphs of any depth. `toposort` is kept for tools that list a tape's nodes.

Diagnostics (check_nan, the profiler, show_tape: lang/array/diagnostics.py) attach to the tape in
one place, `set_node_hook`: while a hook is set, each recorded Box is handed to it once made
(it may replace `box.prim` by a stand-in that times and checks the VJP). With no hook set,
nothing here differs: the hook swaps `Box.__init__` and puts the plain one back.
"""
from __future__ import annotations

import heapq
import itertools

import numpy as np

from tapeml.syntax.errors import InternalError


class Box:
    """A value tracked by the `grad` call of level `level`, and the tape node it came from: the
    recorded application `prim(*args, **kw) = value`, with `saved` kept by the forward for the
    VJP and the parent Boxes of the tracked arguments as (argnum, Box). A leaf (a `grad` input)
    has no prim and no parents. `idx` grows with creation, so a Box's parents always have
    smaller indices. One object per recorded op: the node is not a separate allocation."""
    __slots__ = ("value", "level", "prim", "args", "kw", "saved", "parents", "tracked", "idx")

    def __init__(self, value, level: int, prim, args, kw, saved, parents, tracked):
        self.value = value
        self.level = level
        self.prim = prim
        self.args = args
        self.kw = kw
        self.saved = saved
        self.parents = parents
        self.tracked = tracked      # tracked[i]: argument i is tracked at this level
        self.idx = next(_counter)

    def __repr__(self):
        return f"Box(level={self.level}, {self.value!r})"


_counter = itertools.count()
_PLAIN_INIT = Box.__init__


def set_node_hook(hook) -> None:
    """Hand every recorded Box (one with a primitive) to `hook(box)` once it is made; None
    stops. The one place diagnostics attach to the tape (where a node is made); off, `Box`
    is exactly the class above (its own `__init__`), so the tape pays nothing for it."""
    if hook is None:
        Box.__init__ = _PLAIN_INIT
        return
    plain = _PLAIN_INIT

    def __init__(self, value, level, prim, args, kw, saved, parents, tracked):
        plain(self, value, level, prim, args, kw, saved, parents, tracked)
        if prim is not None:
            hook(self)
    Box.__init__ = __init__
_NDARRAY = np.ndarray
NO_KW: dict = {}
TRACKED_0 = (True, False)
TRACKED_1 = (False, True)


class Primitive:
    """A differentiable operation: forward `impl(*args, **kw)` on raw NumPy values, and
    `vjp(g, ans, saved, tracked, *args, **kw) -> tuple` giving one cotangent per positional
    argument (None where `tracked[i]` is false or the argument is not differentiable). `vjp` is
    written with primitives, so an outer `grad` records it (grad of grad).

    `vjp_plain`, when given, is the same VJP written directly in NumPy for first order (no Box
    anywhere: nothing to record); it may return None for a case it does not take, and `vjp`
    runs instead. `backward` picks between them with `first_order` (the one test);
    `pullback` is the same choice for a single application.
    tests/test_grad.py checks every primitive that declares a vjp_plain against its vjp.

    `fwd`, when given, is `impl` that also returns what the VJP may reuse: (ans, saved), on plain
    arrays. It runs when the arguments hold no Box of a lower level; otherwise the primitive
    records itself on the lower tapes (`call`), `saved` is None, and the VJP computes what it
    needs with primitives. Each operation has one forward.

    `call` is the plain function the rest of tapeml calls: it checks its arguments for Boxes
    (the one check the plain interpreter pays) and otherwise runs `impl` directly."""

    def __init__(self, name: str, impl, vjp=None, fwd=None, nondiff: bool = False, arity: int | None = None,
                 scalar=None, vjp_plain=None):
        self.name = name
        self.impl = impl
        self.scalar = scalar      # the same operation on two Python floats (never tracked), if any
        self.vjp = vjp
        self.vjp_plain = vjp_plain
        self.fwd = fwd
        self.nondiff = nondiff or vjp is None
        self.call = self._make_call(arity)

    def _make_call(self, arity):
        impl, traced, prim = self.impl, self.traced, self
        plain = self.fwd is None and not self.nondiff   # may record with the one-Box fast path
        if arity == 1:
            def call(x, **kw):
                if type(x) is Box:
                    v = x.value
                    if plain and type(v) is not Box:
                        ans = impl(v, **kw)
                        return Box(ans, x.level, prim, (v,), kw or NO_KW, None, ((0, x),), TRACKED_0)
                    return traced((x,), kw)
                return impl(x, **kw)
        elif arity == 2:
            def call(a, b):
                if type(a) is Box:
                    v = a.value
                    if plain and type(b) is not Box and type(v) is not Box:
                        ans = impl(v, b)
                        return Box(ans, a.level, prim, (v, b), NO_KW, None, ((0, a),), TRACKED_0)
                    return traced((a, b), {})
                if type(b) is Box:
                    v = b.value
                    if plain and type(v) is not Box:
                        ans = impl(a, v)
                        return Box(ans, b.level, prim, (a, v), NO_KW, None, ((1, b),), TRACKED_1)
                    return traced((a, b), {})
                return impl(a, b)
        else:
            def call(*args, **kw):
                for a in args:
                    if type(a) is Box:
                        return traced(args, kw)
                return impl(*args, **kw)
        call.__name__ = self.name
        call.primitive = self
        return call

    def __call__(self, *args, **kw):
        return self.call(*args, **kw)

    def pullback(self, g, ans, saved, tracked, *args, **kw):
        """The cotangents of one application, as `backward` computes them (vjp_plain at first order)."""
        if self.vjp_plain is not None and first_order(g, ans, args, kw):
            grads = self.vjp_plain(g, ans, saved, tracked, *args, **kw)
            if grads is not None:
                return grads
        return self.vjp(g, ans, saved, tracked, *args, **kw)

    def traced(self, args, kw):
        if self.nondiff:
            return self.impl(*[raw(a) for a in args], **kw)
        top = 0
        for a in args:
            if type(a) is Box and a.level > top:
                top = a.level
        unboxed = list(args)
        parents = []
        lower = False
        i = 0
        for a in args:
            if type(a) is Box:
                if a.level == top:
                    v = unboxed[i] = a.value
                    parents.append((i, a))
                    if type(v) is Box:
                        lower = True
                else:
                    lower = True
            i += 1
        if lower:
            ans, saved = self.call(*unboxed, **kw), None     # records on the lower tapes too
        elif self.fwd is not None:
            ans, saved = self.fwd(*unboxed, **kw)
        else:
            ans, saved = self.impl(*unboxed, **kw), None
        tracked = [False] * len(args)
        for i, _ in parents:
            tracked[i] = True
        return Box(ans, top, self, unboxed, kw, saved, parents, tracked)

    def __repr__(self):
        return f"<primitive {self.name}>"


def first_order(g, ans, args, kw) -> bool:
    """Whether no outer `grad` records a backward step: no Box in the cotangent, the value or the
    arguments. The one test that lets the tape take a primitive's `vjp_plain`."""
    if type(g) is Box or type(ans) is Box:
        return False
    for a in args:
        if type(a) is Box:
            return False
    return not kw or Box not in map(type, kw.values())


def raw(v):
    """The plain value under any number of Boxes."""
    while type(v) is Box:
        v = v.value
    return v


_levels = [0]


def new_level() -> int:
    _levels[0] += 1
    return _levels[0]


def leaf(value, level: int) -> Box:
    return Box(value, level, None, (), NO_KW, None, (), ())


def toposort(end_node) -> list:
    """Boxes reachable from end_node, each after all Boxes that use it (children first)."""
    child_counts: dict = {}
    stack = [end_node]
    while stack:
        node = stack.pop()
        if node in child_counts:
            child_counts[node] += 1
            continue
        child_counts[node] = 1
        stack.extend(p for _, p in node.parents)
    order = []
    ready = [end_node]
    while ready:
        node = ready.pop()
        order.append(node)
        for _, parent in node.parents:
            if child_counts[parent] == 1:
                ready.append(parent)
            else:
                child_counts[parent] -= 1
    return order


def backward(out: Box, g, add, shape_of) -> dict:
    """Propagate the cotangent `g` of `out` to every Box on its tape; return {leaf Box: cotangent}.

    Boxes are visited newest first (a heap on the creation index), so each cotangent is
    complete before its VJP runs; only Boxes that receive a cotangent are visited. A chain
    (one parent, nothing else pending) goes straight to the parent without the heap. `add`
    accumulates cotangents (a primitive, so that nested tapes record it)."""
    pending: dict = {}
    heap: list = []
    leaves = {}
    pop, push = heapq.heappop, heapq.heappush
    node = out
    while True:
        prim = node.prim
        if prim is None:
            leaves[node] = g      # only when `out` is itself a leaf
        else:
            args = node.args
            kw = node.kw
            grads = None
            vjp_plain = prim.vjp_plain
            if vjp_plain is not None and type(g) is not Box and first_order(g, node.value, args, kw):
                grads = vjp_plain(g, node.value, node.saved, node.tracked, *args, **kw)
            if grads is None:
                grads = prim.vjp(g, node.value, node.saved, node.tracked, *args, **kw)
            nxt = None
            parents = node.parents
            chain = not heap and len(parents) == 1
            for i, parent in parents:
                gi = grads[i]
                if gi is None:
                    continue
                a = args[i]
                if type(gi) is _NDARRAY and type(a) is _NDARRAY:
                    ok = gi.shape == a.shape
                else:
                    ok = shape_of(gi) == shape_of(a)
                if not ok:   # every VJP must undo its broadcasting
                    raise InternalError(f"VJP of {prim.name} gave a cotangent of shape {shape_of(gi)} "
                                        f"for argument {i} of shape {shape_of(a)}")
                if parent.prim is None:   # a leaf has no VJP to wait for: accumulate at once
                    prev = leaves.get(parent)
                    leaves[parent] = gi if prev is None else add(prev, gi)
                    continue
                if chain:
                    nxt = parent      # a chain: the parent is the only Box left to visit
                    g = gi
                    continue
                prev = pending.get(parent)
                if prev is None:
                    pending[parent] = gi
                    push(heap, (-parent.idx, parent))
                else:
                    pending[parent] = add(prev, gi)
            if nxt is not None:
                node = nxt
                continue
        if not heap:
            return leaves
        node = pop(heap)[1]
        g = pending.pop(node)
