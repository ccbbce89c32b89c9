"""A parameter whose documented default is none accepts an explicit none, which behaves as leaving
it out (issue 25: transformer_block_init(4, 2, seed=none) failed in the constraint check).

For every builtin of the registry and every such parameter: each call of the builtin in its doc
examples is run twice in fresh sessions (seed(0) first), as written and with `param=none` added,
and the outputs must be equal. Parameters no example leaves out get a program of their own below;
a parameter covered by neither fails the coverage test.
"""
from __future__ import annotations

import pytest

from tapeml.syntax import ast as A
from tapeml.builtins import REGISTRY
from tapeml.syntax.errors import LangError
from tapeml.syntax.parser import parse

from support import fresh, run

# (builtin, parameter) -> a program calling the builtin without that parameter
EXTRA = {
    ("bar", "labels"): "bar([1, 2, 3])",
    ("dense", "b"): "print(dense([1, 2; 3, 4], [1, 0.5; 0, 2]))",
    ("help", "name"): "help()",
    ("transformer_block_init", "seed"): "w = transformer_block_init(4, 2)\nprint(w.w1, w.heads[1].wq)",
    ("transformer_decoder_block_init", "seed"): "w = transformer_decoder_block_init(4, 2)\nprint(w.w2, w.cross_heads[0].wk)",
    ("write_csv", "header"): 'write_csv("{tmp}/t.csv", [1, 2; 3, 4])\nprint(read_text("{tmp}/t.csv"))',
    ("xlim", "lo"): "plot([1, 2, 3])\nxlim(hi=1.5)",
    ("xlim", "hi"): "plot([1, 2, 3])\nxlim(lo=0.5)",
    ("ylim", "lo"): "plot([1, 2, 3])\nylim(hi=2)",
}


def none_params(b):
    return [p.name for p in b.params if p.default is None and not p.variadic]


def _calls(node, out):
    if isinstance(node, A.Node):
        if isinstance(node, A.Call):
            out.append(node)
        for f in node._fields:
            _calls(getattr(node, f), out)
    elif isinstance(node, (tuple, list)):
        for x in node:
            _calls(x, out)
    return out


def with_explicit_none(source, b, only=None):
    """(source with `p=none` added to each call of b that leaves a none-default p out, the set of
    parameters added). The keyword goes just before the call's closing parenthesis."""
    lines = source.split("\n")
    edits, added = [], set()
    names = [p.name for p in b.params]
    for c in _calls(parse(source, "<example>"), []):
        if not (isinstance(c.func, A.Name) and c.func.name == b.name):
            continue
        given = {k for k, _ in c.kwargs} | set(names[:len(c.args)])
        add = [n for n in none_params(b) if n not in given and (only is None or n == only)]
        if add:
            sep = ", " if (c.args or c.kwargs) else ""
            edits.append((c.span.end_line, c.span.end_col - 1, sep + ", ".join(f"{n}=none" for n in add)))
            added.update(add)
    for line, col, text in sorted(edits, reverse=True):
        lines[line - 1] = lines[line - 1][:col - 1] + text + lines[line - 1][col - 1:]
    return "\n".join(lines), added


def shown(source):
    """What `source` printed after seed(0), then "Kind: message" of the error that ended it if
    one did; its figures are closed."""
    interp = fresh()
    try:
        run("seed(0)\n" + source + "\n", interp)
    except LangError as e:
        return interp.out.getvalue() + f"{e.kind}: {e.message}"
    finally:
        import sys
        plot = sys.modules.get("tapeml.builtins.plot")
        if plot is not None:
            plot.close_all()
    return interp.out.getvalue()


def cases():
    fresh()                             # registers every builtin
    for name in sorted(REGISTRY):
        b = REGISTRY[name]
        if not none_params(b) or name == "show":
            continue
        for k, ex in enumerate(b.examples):
            if with_explicit_none(ex, b)[1]:        # the example leaves a none-default parameter out
                yield pytest.param(name, ex, None, id=f"{name}-example{k}")
    for (name, param), src in sorted(EXTRA.items()):
        yield pytest.param(name, src, param, id=f"{name}-{param}")


@pytest.mark.parametrize("name, source, only", list(cases()))
def test_explicit_none_is_the_default(name, source, only, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)         # an example that saves a figure writes here
    source = source.replace("{tmp}", str(tmp_path))
    b = REGISTRY[name]
    explicit, added = with_explicit_none(source, b, only)
    assert added
    omitted = shown(source)
    if "{tmp}" in EXTRA.get((name, only), ""):
        (tmp_path / "t.csv").unlink()
    assert shown(explicit) == omitted, explicit
    assert "Error:" not in omitted, omitted


def test_every_none_default_is_exercised():
    covered = set(EXTRA)
    for name, b in REGISTRY.items():
        for ex in b.examples:
            covered.update((name, p) for p in with_explicit_none(ex, b)[1])
    wanted = {(name, p) for name, b in REGISTRY.items() if name != "show" for p in none_params(b)}
    assert wanted - covered == set(), "add a program to EXTRA for these"


def test_seed_none_draws_from_the_session_generator():
    """The reported call: seed=none is the documented default, the generator of seed(n)."""
    a = shown("seed(7)\nw = transformer_block_init(4, 2, seed=none)\nprint(w.w1)")
    b = shown("seed(7)\nw = transformer_block_init(4, 2)\nprint(w.w1)")
    c = shown("seed(8)\nw = transformer_block_init(4, 2, seed=none)\nprint(w.w1)")
    assert a == b and a != c and "Error" not in a


# ---- issue 28 item 3: each builtin's binder is built once, at registration ------------------------
def _bind_outcome(bind, args, kwargs):
    try:
        out = bind(list(args), dict(kwargs))
    except Exception as e:      # a language error, or a constraint check's own exception
        return ("error", type(e).__name__, str(e))
    return ("bound", [(type(v).__name__, repr(v)) for v in out])


def test_the_built_binder_binds_every_builtin_as_the_general_binder_does():
    """For every builtin, calls of many shapes (numbers whole and not, matrices, strings, booleans,
    none, tuples, functions, tracked values; too many, too few, keywords known, unknown and
    repeated) bind to the same values, or fail with the same error, through the binder built at
    registration (Builtin.bind) and through the general one (Builtin.bind_slowly)."""
    import numpy as np
    from tapeml.array.tape import leaf, new_level
    from tapeml.array.values import Record
    rng = np.random.default_rng(0)
    f = REGISTRY["abs"]
    pool = [0.0, 1.0, 2.0, -3.0, 2.5, 1e300, float("nan"), np.ones((2, 2)), np.array([1.0, 0.0]),
            np.array(2.0), "mean", "x", True, False, None, (1.0, 2.0), Record({"a": 1.0}), f,
            leaf(np.ones(2), new_level()), leaf(3.0, new_level())]
    compared = 0
    for name, b in sorted(REGISTRY.items()):
        names = [p.name for p in b.params] + ["nope", "axis"]
        for _ in range(60):
            n = int(rng.integers(0, len(b.params) + 2))
            args = [pool[i] for i in rng.integers(0, len(pool), n)]
            kwargs = {}
            for _ in range(int(rng.integers(0, 3))):
                kwargs[names[int(rng.integers(0, len(names)))]] = pool[int(rng.integers(0, len(pool)))]
            fast, slow = _bind_outcome(b.bind, args, kwargs), _bind_outcome(b.bind_slowly, args, kwargs)
            assert fast == slow, (name, args, kwargs)
            compared += fast[0] == "bound"
    assert compared > 1000          # many calls bound, not only refused
