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
first order, when `first_order` (the one test) finds no Box in sight (nothing to record): once
for the pass on a tape that recorded no Box of another level, else at each node.

A primitive may have several outputs (`outputs=k`: svd's U, S and Vh, qr's Q and R): its `impl`
returns a tuple of k arrays and its call a tuple of k values. Recorded, that is one node, the
*joint* Box (value: the tuple, prim: the primitive), and k *output* Boxes, one per result, each
with the joint Box as its one parent and a `Part` as its prim. The walk stays one walk: an output
Box's VJP (`Part.vjp`) hands the joint Box a tuple of k cotangents, its own in its slot and None
in the others; tuples that meet at the joint Box are merged slot by slot (`add` where both hold
one); the joint Box is visited after all its outputs (it is older), and its VJP receives the
tuple: None for an output that got no cotangent (no zeros are made; the VJP skips that output's
terms). The single-output path does not change: `Part` nodes go through the ordinary VJP call
(their argument is the joint value, a tuple, whose shape check sees () on both sides), and the
one extra test is at the accumulation of a second cotangent (a tuple or not).

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
import math

import numpy as np

from tapeml.array.backend import ARRAYS, xp_of
from tapeml.syntax.errors import InternalError


class Box:
    """A value tracked by the `grad` call of level `level`, and the tape node it came from: the
    recorded application `prim(*args, **kw) = value`, with `saved` kept by the forward for the
    VJP. `parents` holds one entry per positional argument: the Box of this level the argument
    came from, or None where it is not tracked here; it is also the `tracked` a VJP receives (a
    Box is true, None false). A leaf (a `grad` input) has no prim and no parents. `idx` grows
    with creation, so a Box's parents always have smaller indices. One object per recorded op:
    the node is not a separate allocation."""
    __slots__ = ("value", "level", "prim", "args", "kw", "saved", "parents", "idx")

    def __init__(self, value, level: int, prim, args, kw, saved, parents):
        self.value = value
        self.level = level
        self.prim = prim
        self.args = args
        self.kw = kw
        self.saved = saved
        self.parents = parents
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

    def __init__(self, value, level, prim, args, kw, saved, parents):
        plain(self, value, level, prim, args, kw, saved, parents)
        if prim is not None:
            hook(self)
    Box.__init__ = __init__
_NDARRAY = np.ndarray
NO_KW: dict = {}


class Part:
    """The prim of output Box `index` of a primitive with `count` outputs (see the module's
    docstring): its VJP gives its parent, the joint Box, the cotangent tuple with its own
    cotangent in slot `index` and None in the others."""
    __slots__ = ("name", "index", "count", "primitive")
    vjp_plain = None

    def __init__(self, primitive, index: int, count: int):
        self.primitive = primitive
        self.name = f"{primitive.name}[{index}]"
        self.index = index
        self.count = count

    def vjp(self, g, ans, saved, tracked, joint):
        ct = [None] * self.count
        ct[self.index] = g
        return (tuple(ct),)

    def __repr__(self):
        return f"<output {self.index} of primitive {self.primitive.name}>"


def merge_cotangents(a: tuple, b: tuple, add) -> tuple:
    """Two cotangent tuples of one joint Box, slot by slot (None: no cotangent yet)."""
    return tuple(y if x is None else x if y is None else add(x, y) for x, y in zip(a, b))


class Primitive:
    """A differentiable operation, as the table declares it (primitive_table.primitive):

        name       the table's key, and the primitive's name in messages and tape dumps
        impl       the forward on raw values: impl(*args, **kw)
        vjp        vjp(g, ans, saved, tracked, *args, **kw) -> one cotangent per positional
                   argument (None where tracked[i] is false or the argument is not
                   differentiable), written with primitives, so an outer `grad` records it (grad
                   of grad); None: not differentiable (the call never records)
        fwd        impl that also returns what the VJP may reuse: (ans, saved), on plain arrays
      keyword options, each for a few primitives:
        arity      1 or 2: the call's fast path for one tracked argument (`call(x, **kw)`,
                   `call(a, b)`); None: any arguments
        vjp_plain  the same VJP written directly on plain arrays, for first order
        outputs    k > 1: impl returns a tuple of k values (the module's docstring)
        scalar     the operation on two Python floats, which the interpreter calls directly
                   (plain numbers are never tracked)
        arg_names  what check_nan's reports call the positional arguments: a tuple of names,
                   or a function (number of arguments, keywords) -> names

    `vjp_plain` has no Box anywhere (nothing to record); it may return None for a case it does
    not take, and `vjp` runs instead. Its matrix products need no 0 x inf test: where a
    cotangent comes out non-finite, `backward` (for the whole pass) and `pullback` (for one
    application) take `vjp`, whose products are zmatmul's. `backward` picks between them with
    `first_order` (the one test, once per pass on a tape opened with `open_level`).
    tests/array/test_grad.py checks every primitive that declares a vjp_plain against its vjp. A
    primitive with several outputs has none; its `vjp(g, ans, ...)` receives `g` and `ans` as
    tuples, with None in `g` for an output that got no cotangent.

    `fwd` runs when the arguments hold no Box of a lower level; otherwise the primitive records
    itself on the lower tapes (`call`), `saved` is None, and the VJP computes what it needs with
    primitives. Each operation has one forward.

    `call` is the plain function the rest of tapeml calls: it checks its arguments for Boxes
    (the one check the plain interpreter pays) and otherwise runs `impl` directly."""

    def __init__(self, name: str, impl, vjp=None, fwd=None, *, arity: int | None = None, vjp_plain=None,
                 outputs: int = 1, scalar=None, arg_names=None):
        if outputs > 1 and vjp_plain is not None:
            raise InternalError(f"primitive {name}: a primitive with several outputs has no vjp_plain")
        self.name = name
        self.arg_names = arg_names
        self.outputs = outputs
        self.parts = tuple(Part(self, i, outputs) for i in range(outputs)) if outputs > 1 else None
        self.impl = impl
        self.scalar = scalar
        self.vjp = vjp
        self.vjp_plain = vjp_plain
        self.fwd = fwd
        self.nondiff = vjp is None
        self.call = self._make_call(arity)

    def _make_call(self, arity):
        impl, traced, prim = self.impl, self.traced, self
        plain = self.fwd is None and not self.nondiff   # may record with the one-Box fast path
        if self.outputs > 1:
            traced = self.traced_outputs
            arity = None
        if arity == 1:
            def call(x, **kw):
                if type(x) is Box:
                    v = x.value
                    if plain and type(v) is not Box and (not kw or Box not in map(type, kw.values())):
                        ans = impl(v, **kw)
                        return Box(ans, x.level, prim, (v,), kw or NO_KW, None, (x,))
                    return traced((x,), kw)
                return impl(x, **kw)
        elif arity == 2:
            def call(a, b):
                if type(a) is Box:
                    v = a.value
                    if plain and type(b) is not Box and type(v) is not Box:
                        ans = impl(v, b)
                        return Box(ans, a.level, prim, (v, b), NO_KW, None, (a, None))
                    return traced((a, b), {})
                if type(b) is Box:
                    v = b.value
                    if plain and type(v) is not Box:
                        ans = impl(a, v)
                        return Box(ans, b.level, prim, (a, v), NO_KW, None, (None, b))
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
        """The cotangents of one application, as `backward` computes them: vjp_plain at first
        order, kept when every cotangent it gives is finite (its products have no 0 x inf test)."""
        if self.vjp_plain is not None and first_order(g, ans, args, kw):
            grads = self.vjp_plain(g, ans, saved, tracked, *args, **kw)
            if grads is not None and all_finite(c for c in grads if c is not None):
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
        parents = [None] * len(args)
        lower = False
        i = 0
        for a in args:
            if type(a) is Box:
                if a.level == top:
                    v = unboxed[i] = a.value
                    parents[i] = a
                    if type(v) is Box:
                        lower = True
                else:
                    lower = True
            i += 1
        if (lower or (kw and Box in map(type, kw.values()))) and top in _pure:
            _pure[top] = False      # this tape now holds a Box of another level (backward's test)
        if lower:
            ans, saved = self.call(*unboxed, **kw), None     # records on the lower tapes too
        elif self.fwd is not None:
            ans, saved = self.fwd(*unboxed, **kw)
        else:
            ans, saved = self.impl(*unboxed, **kw), None
        return Box(ans, top, self, unboxed, kw, saved, parents)

    def traced_outputs(self, args, kw):
        """`traced` for a primitive with several outputs: the joint Box, and one output Box per
        result pointing at it (the module's docstring); returns the tuple of output Boxes."""
        if self.nondiff:
            return self.impl(*[raw(a) for a in args], **kw)
        joint = self.traced(args, kw)
        ans, level = joint.value, joint.level
        return tuple(Box(v, level, part, (ans,), NO_KW, None, (joint,)) for v, part in zip(ans, self.parts))

    def __repr__(self):
        return f"<primitive {self.name}>"


def first_order(g, ans, args, kw) -> bool:
    """Whether no outer `grad` records a backward step: no Box in the cotangent, the value or the
    arguments. The one test that lets the tape take a primitive's `vjp_plain` on a tape that may
    hold Boxes of outer levels (`backward` skips it on a tape known to hold none: `open_level`)."""
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
# Levels opened with `open_level`, each True while nothing on its tape holds a Box of another
# level (no outer `grad` tracks anything this one records): `Primitive.traced` clears it when it
# records such an application. A tape known to hold none runs its backward pass at first order
# with one test for the whole pass instead of one per node (`backward`). A level not listed (one
# from `new_level`, or one already closed) gets the test at every node.
_pure: dict = {}


def new_level() -> int:
    _levels[0] += 1
    return _levels[0]


def open_level() -> int:
    """A new level whose tape `backward` may find free of other levels' Boxes; close it with
    `close_level` when its last backward pass has run."""
    level = new_level()
    _pure[level] = True
    return level


def close_level(level: int) -> None:
    _pure.pop(level, None)


def leaf(value, level: int) -> Box:
    return Box(value, level, None, (), NO_KW, None, ())


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
        stack.extend(p for p in node.parents if p is not None)
    order = []
    ready = [end_node]
    while ready:
        node = ready.pop()
        order.append(node)
        for parent in node.parents:
            if parent is None:
                continue
            if child_counts[parent] == 1:
                ready.append(parent)
            else:
                child_counts[parent] -= 1
    return order


_add_reduce = np.add.reduce
_isfinite = math.isfinite
_SMALL = 4096       # elements: a matrix this small is summed with the others (all_finite)
# how `_walk` picks a node's VJP: the recorded form always, the plain form where `first_order`
# finds no Box (per node), or the plain form everywhere (a tape known to hold no other level's Box)
RECORDED, TESTED, PLAIN = 0, 1, 2


def all_finite(cotangents) -> bool:
    """Whether every cotangent (a number or matrix, possibly boxed) is finite: a sum of its
    elements is, unless one is inf or NaN (an overflowing sum of finite elements is a false
    alarm, which only costs a careful pass). Small matrices are summed as one (one reduction
    instead of one per leaf, which costs more than their elements)."""
    if type(cotangents) is not list:
        cotangents = list(cotangents)
    n_all = 0
    for v in cotangents:        # the common case first: NumPy matrices, all small (one sum in all)
        if type(v) is not _NDARRAY:
            break
        n_all += v.size
    else:
        if n_all <= _SMALL * 4:
            return not cotangents or _isfinite(_add_reduce(np.concatenate([v.ravel() for v in cotangents]), None))
    small = []
    n_small = 0
    others = []
    for v in cotangents:
        while type(v) is Box:
            v = v.value
        t = type(v)
        if t is _NDARRAY:
            n = v.size
            if n <= _SMALL:
                small.append(v.ravel())
                n_small += n
            elif not _isfinite(_add_reduce(v, None)):
                return False
        elif t is float:
            if not _isfinite(v):
                return False
        elif t in ARRAYS:       # another backend's matrix: summed where it lies, read back once below
            others.append(v.sum())
    if others and not _isfinite(float(_stack_sum(others))):
        return False
    if len(small) > 1 and n_small:
        return _isfinite(_add_reduce(np.concatenate(small), None))
    return not small or _isfinite(_add_reduce(small[0], None))


def _stack_sum(sums):
    """The sum of 0-d sums of one backend's matrices (one device read instead of one per leaf);
    sums on several devices are added on the host."""
    first = sums[0]
    if len(sums) == 1:
        return first
    try:
        xp = xp_of(first)
        return xp.sum(xp.stack(sums))
    except (RuntimeError, TypeError, ValueError):
        return sum(float(s) for s in sums)


def backward(out: Box, g, add, shape_of) -> dict:
    """Propagate the cotangent `g` of `out` to every Box on its tape; return {leaf Box: cotangent}.

    Boxes are visited newest first (a heap on the creation index), so each cotangent is
    complete before its VJP runs; only Boxes that receive a cotangent are visited. A chain
    (one parent, nothing else pending) goes straight to the parent without the heap. `add`
    accumulates cotangents (a primitive, so that nested tapes record it).

    The trust checks cost once per pass: the first-order test is made once for a tape known to
    hold no other level's Box (`open_level`), and the plain VJPs multiply matrices without a
    finiteness test of each product. A product can only differ from the careful one (zmatmul's
    0 x inf = 0) where it is NaN, and a NaN reaches a leaf unless a VJP drops that element
    whatever its value; so when every leaf's cotangent is finite the pass is the careful one's,
    and otherwise the pass runs again with the VJPs written with primitives (zmul and zmatmul at
    every product): the answers of a careful pass at the price of one test per leaf."""
    mode = PLAIN if type(g) is not Box and _pure.get(out.level) else TESTED
    leaves = _walk(out, g, add, shape_of, mode)
    if all_finite(leaves.values()):
        return leaves
    return _walk(out, g, add, shape_of, RECORDED)


def _walk(out: Box, g, add, shape_of, mode) -> dict:
    pending: dict = {}
    heap: list = []
    leaves = {}
    pop, push = heapq.heappop, heapq.heappush

    def pend(parent, gi):
        """gi added to what `parent` has pending (slot by slot for a joint Box's tuples)."""
        prev = pending.get(parent)
        if prev is None:
            pending[parent] = gi
            push(heap, (-parent.idx, parent))
        else:
            pending[parent] = add(prev, gi) if type(gi) is not tuple else merge_cotangents(prev, gi, add)

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
            parents = node.parents
            if vjp_plain is not None and mode and (mode == PLAIN or first_order(g, node.value, args, kw)):
                if kw:
                    grads = vjp_plain(g, node.value, node.saved, parents, *args, **kw)
                else:
                    grads = vjp_plain(g, node.value, node.saved, parents, *args)
            if grads is None:
                if kw:
                    grads = prim.vjp(g, node.value, node.saved, parents, *args, **kw)
                else:
                    grads = prim.vjp(g, node.value, node.saved, parents, *args)
            nxt = None
            i = -1
            for parent in parents:      # an index, not zip: a zip per node costs the short chains more
                i += 1
                if parent is None:
                    continue
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
                if nxt is None and not heap:
                    nxt, gnxt = parent, gi      # nothing else pending so far: maybe a chain
                    continue
                pend(parent, gi)
            if nxt is not None:
                if not heap:      # a chain: the parent is the only Box left to visit
                    node, g = nxt, gnxt
                    continue
                pend(nxt, gnxt)
        if not heap:
            return leaves
        node = pop(heap)[1]
        g = pending.pop(node)
