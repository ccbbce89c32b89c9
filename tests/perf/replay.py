"""A measure, not a feature: the floor of a compiled training step.

`recorded_replay(step)` runs a `value_and_grad` step once with the tape's node hook on, keeps the
recorded primitives in creation order, and returns a function that replays them on the same
leaves: each node's forward (its `fwd` or `impl`) on plain arrays, then each node's VJP as the
tape picks it (`Primitive.pullback`: the plain one where it has one and takes the case) newest
first, cotangents summed per slot. No interpreter, no builtin
argument checks, no Box, no heap, no finiteness test: what replaying a step compiled after its
first run could cost (jax.jit and torch.compile do that, with guards this skips). The bench prints
it beside the T=8 block row (docs/performance.md), the one row where tapeml's fixed costs dominate.
"""
from __future__ import annotations

import numpy as np

from tapeml.array import tape


def recorded_replay(step):
    """(replay, leaves): replay() -> (value, [cotangent of each leaf]), the leaves being the Boxes
    `grad` made for the step's parameters, in the order their first use was recorded."""
    nodes = []
    tape.set_node_hook(nodes.append)
    try:
        step()
    finally:
        tape.set_node_hook(None)
    slots: dict = {}
    leaves = []
    for n in nodes:
        for p in n.parents:
            if p is not None and p.prim is None and id(p) not in slots:
                slots[id(p)] = len(leaves)
                leaves.append(p)
    base = len(leaves)
    plan = []
    for k, n in enumerate(nodes):
        slots[id(n)] = base + k
        spec = tuple((slots[id(p)], None) if p is not None else (-1, a) for a, p in zip(n.args, n.parents))
        plan.append((n.prim, spec, n.kw, tuple(p is not None for p in n.parents)))
    inputs = [b.value for b in leaves]
    n_slots = base + len(nodes)

    session = getattr(step, "session", None)

    def replay():
        if session is None:
            return _replay()
        from tapeml.evaluator.stack import running
        with running(session.state):        # the step's Session's settings (its device, its float type)
            return _replay()

    def _replay():
        vals = inputs + [None] * len(nodes)
        saved = [None] * len(nodes)
        given = [None] * len(nodes)
        for k, (prim, spec, kw, _) in enumerate(plan):
            args = [vals[s] if s >= 0 else a for s, a in spec]
            if prim.fwd is not None:
                vals[base + k], saved[k] = prim.fwd(*args, **kw)
            else:
                vals[base + k] = prim.impl(*args, **kw)
            given[k] = args
        cts = [None] * n_slots
        cts[-1] = 1.0
        for k in range(len(plan) - 1, -1, -1):
            prim, spec, kw, tracked = plan[k]
            g = cts[base + k]
            if g is None:
                continue
            # the tape's own choice: vjp_plain at first order, vjp where it declines (returns None,
            # as sum's fast VJP does for some shapes) or gives a non-finite cotangent
            grads = prim.pullback(g, vals[base + k], saved[k], tracked, *given[k], **kw)
            for (s, _), gi in zip(spec, grads):
                if s >= 0 and gi is not None:
                    cts[s] = gi if cts[s] is None else cts[s] + gi
        return vals[-1], cts[:base]
    return replay, leaves


def _leaves_of(tree):
    """The matrices of a tree of Records and tuples, in field order."""
    if hasattr(tree, "fields"):
        return [m for v in tree.fields.values() for m in _leaves_of(v)]
    if isinstance(tree, tuple):
        return [m for v in tree for m in _leaves_of(v)]
    return [tree]


def check_replay(replay, leaves, step, weights):
    """The replay's value and cotangents equal the step's value and gradient (the same operations
    in the same order): each leaf is found by its matrix, which `grad` boxed as it was."""
    value, cts = replay()
    ref_value, grads = step()
    assert float(value) == float(ref_value), "the replay's value differs from the step's"
    by_id = {id(w): g for w, g in zip(_leaves_of(weights), _leaves_of(grads))}
    assert len(leaves) == len(by_id), "the replay did not reach every weight"
    for leaf, ct in zip(leaves, cts):
        assert np.array_equal(ct, by_id[id(leaf.value)]), "a replayed cotangent differs from the step's gradient"
