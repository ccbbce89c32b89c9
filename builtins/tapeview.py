"""show_tape's graph: what `grad(f, x)` records, as nodes and edges, folded and drawn.

    graph = record(ctx, f, x, root)      the tape as recorded: one node per input leaf and per
                                         recorded primitive (shape, source line, builtin call)
    shown = fold(graph, expand, max_nodes)   what the picture shows: builtin calls that recorded
                                         several primitives collapsed into one node each, a chain
                                         of equal collapsed calls folded into one (`block ×2`),
                                         inputs with the same consumers folded by their common
                                         path, and the nodes farthest from the result cut at
                                         max_nodes (the caption says what was folded)
    figure = draw(shown, layout)         a matplotlib figure: inputs at the top, the result at
                                         the bottom, the gradient's path in colour

The layout is a layered (Sugiyama-style) one in pure Python: each node one row below its lowest
parent, inputs one row above their first consumer, the order within a row by the mean position
of the parents and then of the children (a few sweeps). `layout="dot"` asks graphviz's `dot`
(when it is on PATH) for the positions instead. The recording is diagnostics' recorder mode
(lang/array/diagnostics.py): the spans on the nodes exist only while show_tape runs.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field

from tapeml.array import ops
from tapeml.array.primitive_table import is_float_array
from tapeml.array.tape import NO_KW, Box, Part, new_level, raw
from tapeml.array.values import describe
from tapeml.builtins.util import tree_leaves, tree_map
from tapeml.syntax.errors import ValueErr


@dataclass
class Node:
    """One node of the picture. kind: "input", "op" (a primitive), "group" (a builtin call's
    primitives, collapsed), "more" (the nodes cut by max_nodes)."""
    id: int
    kind: str
    label: str
    shape: tuple = ()
    line: int | None = None
    on_path: bool = True        # the result depends on it: the gradient flows through it
    members: int = 1            # primitives it stands for
    repeat: int = 1             # equal builtin calls folded into it (a chain)
    group: tuple | None = None  # (call number, builtin name) of the builtin call that recorded it
    output: bool = False


@dataclass
class Graph:
    nodes: dict = field(default_factory=dict)       # id -> Node, in recording order
    edges: set = field(default_factory=set)          # (parent id, child id)
    recorded: int = 0                                 # primitives recorded
    notes: list = field(default_factory=list)         # what fold() folded, in words

    def parents(self, i):
        return [a for a, b in self.edges if b == i]

    def children(self, i):
        return [b for a, b in self.edges if a == i]

    def describe(self) -> tuple:
        """(nodes, edges) as plain tuples, for tests: (label, kind, shape, line, on_path) and
        (parent label, child label)."""
        n = [(x.label, x.kind, x.shape, x.line, x.on_path) for x in self.nodes.values()]
        e = sorted((self.nodes[a].label, self.nodes[b].label) for a, b in self.edges)
        return n, e


# ---- recording -------------------------------------------------------------------------------
def record(ctx, f, x, root: str = "x") -> Graph:
    """Run f(x) once with every leaf of x tracked (as grad does) and the recorder on; the graph
    of what the tape recorded at that level."""
    paths = [p for p, _ in tree_leaves(x, root)]        # a TypeError naming a leaf grad refuses
    level = new_level()
    boxes = []

    def box(v):
        b = Box(v, level, None, (), NO_KW, None, ())
        boxes.append(b)
        return b

    boxed = tree_map(box, x, f"show_tape(): {root}")
    recorded: list = []
    d = ctx.set_diagnostics()
    outer = d.recorder
    ctx.set_diagnostics(recorder=recorded)
    try:
        out = ctx.call(f, boxed)
    finally:
        ctx.set_diagnostics(recorder=outer)
    if outer is not None:
        outer.extend(recorded)
    r = raw(out)
    if not (isinstance(r, float) or is_float_array(r)):
        raise ValueErr(f"show_tape needs f to return a number or a matrix, but it returned {describe(r)}")
    if type(out) is not Box or out.level != level:
        raise ValueErr("show_tape: f's result does not depend on x, so grad records nothing to draw")
    g = Graph()
    ids = {}
    for path, b in zip(paths, boxes):
        ids[b] = len(ids)
        g.nodes[ids[b]] = Node(ids[b], "input", path, ops.shape_of(b.value))
    for b in recorded:
        if b.level != level:
            continue
        rec = b.prim
        group = None if rec.group is None or rec.group.called_back else (rec.group.index, rec.group.name)
        line = rec.line[1] if rec.line is not None else None
        ids[b] = len(ids)
        # a primitive with several outputs (svd) is one node, drawn with its outputs' shapes
        shape = tuple(ops.shape_of(v) for v in b.value) if type(b.value) is tuple else ops.shape_of(b.value)
        g.nodes[ids[b]] = Node(ids[b], "op", rec.name, shape, line, group=group)
        for p in b.parents:                 # one per argument: its Box on this tape, or None
            if p is not None and type(p.prim) is Part:      # an output of such a node: the node
                p = p.parents[0]
            if p is not None and p in ids:
                g.edges.add((ids[p], ids[b]))
    g.recorded = len(g.nodes) - len(boxes)
    g.nodes[ids[out]].output = True
    _mark_path(g, ids[out])
    return g


def _mark_path(g: Graph, out: int) -> None:
    """on_path: the nodes the result is reached from (a node the result does not use is grey)."""
    up = {}
    for a, b in g.edges:
        up.setdefault(b, []).append(a)
    seen, todo = {out}, [out]
    while todo:
        for p in up.get(todo.pop(), ()):
            if p not in seen:
                seen.add(p)
                todo.append(p)
    for n in g.nodes.values():
        n.on_path = n.id in seen


# ---- folding -----------------------------------------------------------------------------------
def fold(g: Graph, expand=False, max_nodes: int = 60) -> Graph:
    """The graph the picture shows (see the module's docstring). `expand`: True (every builtin
    call's primitives), False, or a builtin name or tuple of names to show in full."""
    names = () if expand is False else (expand,) if isinstance(expand, str) else tuple(expand) \
        if isinstance(expand, tuple) else None        # None: everything expanded
    out = Graph(dict(g.nodes), set(g.edges), g.recorded, list(g.notes))
    _collapse_groups(out, names)
    _fold_repeats(out)
    _fold_inputs(out)
    _cap(out, max_nodes)
    return out


def _merge(g: Graph, members: list, node: Node) -> None:
    """Replace `members` by `node`: edges into and out of the set now go to and from it."""
    ms = set(members)
    edges = set()
    for a, b in g.edges:
        a2, b2 = (node.id if a in ms else a), (node.id if b in ms else b)
        if a2 != b2:
            edges.add((a2, b2))
    g.edges = edges
    first = min(members)
    nodes = {}
    for i, n in g.nodes.items():
        if i == first:
            nodes[node.id] = node
        elif i not in ms:
            nodes[i] = n
    g.nodes = nodes


def _op_groups(g: Graph) -> dict:
    """The graph's primitives by the builtin call that recorded them: group -> nodes, in order."""
    groups: dict = {}
    for n in g.nodes.values():
        if n.kind == "op" and n.group is not None:
            groups.setdefault(n.group, []).append(n)
    return groups


def _collapse_groups(g: Graph, names) -> None:
    groups = _op_groups(g)
    for (index, name), members in groups.items():
        if len(members) < 2 or names is None or name in names:
            if len(members) == 1 and members[0].label != name:
                members[0].label = f"{members[0].label} ({name})"
            continue
        ids = {m.id for m in members}
        outputs = [m for m in members if m.output or any(b not in ids for a, b in g.edges if a == m.id)]
        last = (outputs or members)[-1]
        node = Node(min(ids), "group", name, last.shape, members[0].line, any(m.on_path for m in members),
                    len(members), 1, (index, name), any(m.output for m in members))
        _merge(g, [m.id for m in members], node)


def _fold_repeats(g: Graph) -> None:
    """A chain of collapsed calls of the same builtin with the same number of primitives (one
    block after another) becomes one node `name ×k`."""
    changed = True
    while changed:
        changed = False
        for a, b in sorted(g.edges):
            na, nb = g.nodes[a], g.nodes[b]
            if na.kind == nb.kind == "group" and na.label.split(" ×")[0] == nb.label.split(" ×")[0] \
                    and na.members // na.repeat == nb.members // nb.repeat and \
                    all(c == b for c in g.children(a)):
                base = na.label.split(" ×")[0]
                k = na.repeat + nb.repeat
                node = Node(a, "group", f"{base} ×{k}", nb.shape, na.line, na.on_path or nb.on_path,
                            na.members + nb.members, k, na.group, nb.output)
                _merge(g, [a, b], node)
                changed = True
                break
    reps = [n for n in g.nodes.values() if n.repeat > 1]
    for n in reps:
        g.notes.append(f"{n.repeat} calls of {n.label.split(' ×')[0]} in a row drawn as one")


_PATH_CUT = re.compile(r"(\.[A-Za-z_]\w*|\[\d+\])$")


def _common_path(paths) -> str:
    p = paths[0]
    for q in paths[1:]:
        while not (q == p or q.startswith(p + ".") or q.startswith(p + "[")):
            cut = _PATH_CUT.search(p)
            if cut is None:
                return p
            p = p[:cut.start()]
    return p


def _fold_inputs(g: Graph) -> None:
    """Inputs read by the same nodes become one node named by their common path (w.heads[0]:
    4 arrays)."""
    by_users: dict = {}
    for n in g.nodes.values():
        if n.kind == "input":
            by_users.setdefault(frozenset(g.children(n.id)), []).append(n)
    for users, members in by_users.items():
        if len(members) < 2:
            continue
        paths = [m.label for m in members]
        label = "\n".join(paths) if len(paths) <= 3 else f"{_common_path(paths)} ({len(paths)} arrays)"
        node = Node(min(m.id for m in members), "input", label, (), None,
                    any(m.on_path for m in members), len(members))
        _merge(g, [m.id for m in members], node)


def _cap(g: Graph, max_nodes: int) -> None:
    """Keep the max_nodes - 1 nodes nearest the end of the tape (by the longest path from each
    to a node nothing reads, the result or a dead end); the rest becomes one node that says how
    many primitives and inputs it hides. Every child of a kept node is kept (it is nearer the end),
    so the folded node only feeds the rest: the picture stays a graph without cycles."""
    if len(g.nodes) <= max_nodes:
        return
    children = {i: [] for i in g.nodes}
    for a, b in g.edges:
        children[a].append(b)
    height: dict = {}
    for i in sorted(g.nodes, reverse=True):        # recording order: children come later
        stack = [i]
        while stack:
            j = stack[-1]
            todo = [c for c in children[j] if c not in height]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            height[j] = 1 + max((height[c] for c in children[j]), default=-1)
    order = sorted(g.nodes, key=lambda i: (height[i], -i))
    keep = set(order[:max_nodes - 1])
    cut = [i for i in g.nodes if i not in keep]
    prims = sum(g.nodes[i].members for i in cut if g.nodes[i].kind != "input")
    inputs = sum(g.nodes[i].members for i in cut if g.nodes[i].kind == "input")
    words = []
    if prims:
        words.append(f"{prims} primitive{'s' * (prims != 1)}")
    if inputs:
        words.append(f"{inputs} input{'s' * (inputs != 1)}")
    node = Node(min(cut), "more", f"... {' and '.join(words)}", (), None, True, prims)
    _merge(g, cut, node)
    g.notes.append(f"the {' and '.join(words)} farthest from the result folded into one node "
                   f"(max_nodes={max_nodes})")


# ---- layout ------------------------------------------------------------------------------------
def layered(g: Graph) -> dict:
    """{node id: (x, row)}: the pure-Python layered layout (see the module's docstring)."""
    return layered_routes(g)[0]


def layered_routes(g: Graph) -> tuple:
    """({node id: (x, row)}, {edge: [(x, row), ...]}): the layered layout, and for each edge that
    spans more than one row the points it bends at, one in each row between its ends. Those points
    are dummy nodes of Sugiyama's scheme: each takes a place in its row as a node does, so no box
    is put where an edge passes and a long edge never crosses an unrelated box."""
    ids = list(g.nodes)
    parents = {i: [] for i in ids}
    children = {i: [] for i in ids}
    for a, b in sorted(g.edges):
        parents[b].append(a)
        children[a].append(b)
    pending = {i: len(parents[i]) for i in ids}
    order, ready = [], [i for i in ids if not parents[i]]
    while ready:                          # Kahn's topological order, recording order among equals
        i = ready.pop(0)
        order.append(i)
        for c in children[i]:
            pending[c] -= 1
            if pending[c] == 0:
                ready.append(c)
    row = {}
    for i in order:
        ps = [row[p] for p in parents[i] if g.nodes[p].kind not in ("input", "more")]
        row[i] = (max(ps) + 1) if ps else 1
    for i in ids:
        if g.nodes[i].kind in ("input", "more"):
            row[i] = max(0, min((row[c] for c in children[i]), default=1) - 1)
    # an edge over several rows becomes a chain through one dummy node in each row between
    chains = {}
    for a, b in sorted(g.edges):
        if row[b] - row[a] > 1:
            chain = [("bend", a, b, r) for r in range(row[a] + 1, row[b])]
            for d, r in zip(chain, range(row[a] + 1, row[b])):
                row[d] = r
                parents[d], children[d] = [], []
            links = [a] + chain + [b]
            children[a][children[a].index(b)] = chain[0]
            parents[b][parents[b].index(a)] = chain[-1]
            for u, v in zip(chain, links[2:]):
                children[u].append(v)
            for u, v in zip(chain, links):
                parents[u].append(v)
            chains[(a, b)] = chain
    every = ids + [d for chain in chains.values() for d in chain]
    rows: dict = {}
    for i in every:
        rows.setdefault(row[i], []).append(i)
    pos = {i: float(k) for r in rows.values() for k, i in enumerate(r)}

    def mean(xs, default):
        return sum(pos[x] for x in xs) / len(xs) if xs else default
    for _ in range(4):
        for r in sorted(rows):
            rows[r].sort(key=lambda i: (mean(parents[i], pos[i]), pos[i]))
            for k, i in enumerate(rows[r]):
                pos[i] = float(k)
        for r in sorted(rows, reverse=True):
            rows[r].sort(key=lambda i: (mean(children[i], pos[i]), pos[i]))
            for k, i in enumerate(rows[r]):
                pos[i] = float(k)
    width = max(len(r) for r in rows.values())
    place = {i: (pos[i] - (len(rows[row[i]]) - 1) / 2 + (width - 1) / 2, row[i]) for i in every}
    return {i: place[i] for i in ids}, {e: [place[d] for d in chain] for e, chain in chains.items()}


def dot_layout(g: Graph) -> dict:
    """{node id: (x, row)} from graphviz's `dot -Tplain` (its y grows upward: rows are flipped)."""
    exe = shutil.which("dot")
    if exe is None:
        raise ValueErr('show_tape(): layout="dot" needs graphviz\'s dot on PATH; layout="python" needs nothing')
    lines = ["digraph tape {", "rankdir=TB;", "node [shape=box];"]
    lines += [f'n{i} [label="{i}"];' for i in g.nodes]
    lines += [f"n{a} -> n{b};" for a, b in sorted(g.edges)]
    lines.append("}")
    try:
        res = subprocess.run([exe, "-Tplain"], input="\n".join(lines), capture_output=True, text=True,
                             timeout=60, check=True)
    except (OSError, subprocess.SubprocessError) as e:
        raise ValueErr(f"show_tape(): graphviz's dot failed ({type(e).__name__})") from None
    pos = {}
    for line in res.stdout.splitlines():
        parts = line.split()
        if parts and parts[0] == "node" and len(parts) >= 4 and parts[1].startswith("n"):
            pos[int(parts[1][1:])] = (float(parts[2]), float(parts[3]))
    if set(pos) != set(g.nodes):
        raise ValueErr("show_tape(): graphviz's dot gave no position for some nodes")
    ys = sorted({y for _, y in pos.values()}, reverse=True)
    rank = {y: k for k, y in enumerate(ys)}
    xs = [x for x, _ in pos.values()]
    lo = min(xs)
    return {i: ((x - lo) / 1.8, rank[y]) for i, (x, y) in pos.items()}


# ---- drawing -----------------------------------------------------------------------------------
COLORS = {"input": "#cfe2f3", "op": "#fce5cd", "group": "#d9ead3", "more": "#ffffff"}
OFF_PATH = "#eeeeee"


def _text(n: Node) -> str:
    lines = [n.label]
    if n.kind != "more" and not (n.kind == "input" and n.members > 1):
        shapes = n.shape if n.shape and type(n.shape[0]) is tuple else (n.shape,)     # several outputs
        lines.append(" ".join("[" + ", ".join(str(s) for s in sh) + "]" if sh else "number" for sh in shapes))
    if n.kind == "group":
        lines[-1] += f", {n.members} ops"
    if n.line is not None:
        lines.append(f"line {n.line}")
    return "\n".join(lines)


def draw(g: Graph, layout: str = "python", title: str | None = None):
    """The figure of a folded graph (a pyplot figure: the session's figures hold it)."""
    import tapeml.builtins.plot as plot
    pos, routes = (dot_layout(g), {}) if layout == "dot" else layered_routes(g)
    bent = [p for bends in routes.values() for p in bends]      # the long edges' places count too
    width = max((x for x, _ in list(pos.values()) + bent), default=0) + 1
    rows = max((r for _, r in pos.values()), default=0) + 1
    fig_w = min(plot.MAX_INCHES, max(4.0, 1.75 * width + 0.6))
    fig_h = min(plot.MAX_INCHES, max(2.5, 0.95 * rows + 0.9))
    fig = plot.plt().figure(figsize=(fig_w, fig_h))
    ax = fig.add_axes((0, 0.06, 1, 0.94 if title is None else 0.88))
    ax.set_axis_off()
    ax.set_xlim(-0.6, width - 0.4)
    ax.set_ylim(rows - 0.4, -0.6)
    artists = {}
    for i, n in g.nodes.items():
        x, r = pos[i]
        face = COLORS[n.kind] if n.on_path or n.kind == "more" else OFF_PATH
        style = "round,pad=0.3" if n.kind != "input" else "square,pad=0.3"
        artists[i] = ax.text(x, r, _text(n), ha="center", va="center", fontsize=7,
                             color="#000000" if n.on_path else "#888888",
                             fontweight="bold" if n.kind == "group" or n.output else "normal",
                             bbox=dict(boxstyle=style, fc=face, ec="#cc0000" if n.output else "#666666",
                                       lw=1.4 if n.output else 0.6, ls="--" if n.kind == "more" else "-"))
    for a, b in sorted(g.edges):
        on = g.nodes[a].on_path and g.nodes[b].on_path
        look = dict(color="#cc0000" if on else "#aaaaaa", lw=0.9 if on else 0.6, shrinkA=1, shrinkB=1)
        bends = routes.get((a, b), [])
        if bends:       # a long edge: through its places in the rows between, where no box is
            ax.annotate("", xy=bends[0], xycoords="data", xytext=(0.5, 0.0), textcoords=artists[a],
                        arrowprops=dict(arrowstyle="-", **{**look, "shrinkB": 0}))
            for (x0, r0), (x1, r1) in zip(bends, bends[1:]):
                ax.plot([x0, x1], [r0, r1], color=look["color"], lw=look["lw"], zorder=1)
            ax.annotate("", xy=(0.5, 1.0), xycoords=artists[b], xytext=bends[-1], textcoords="data",
                        arrowprops=dict(arrowstyle="-|>", **{**look, "shrinkA": 0}))
        else:
            ax.annotate("", xy=(0.5, 1.0), xycoords=artists[b], xytext=(0.5, 0.0), textcoords=artists[a],
                        arrowprops=dict(arrowstyle="-|>", **look))
    _frame_groups(ax, g, pos)
    caption = f"{g.recorded} primitive{'s' * (g.recorded != 1)} recorded, {len(g.nodes)} node{'s' * (len(g.nodes) != 1)} shown"
    if g.notes:
        caption += "; " + "; ".join(g.notes)
    fig.text(0.01, 0.01, caption, fontsize=7, color="#444444", ha="left", va="bottom", wrap=True)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def _frame_groups(ax, g: Graph, pos: dict) -> None:
    """A shaded frame behind the primitives of each builtin call shown in full, named by it."""
    from matplotlib.patches import FancyBboxPatch
    groups = _op_groups(g)
    for (_, name), members in sorted(groups.items()):
        if len(members) < 2:
            continue
        xs = [pos[m.id][0] for m in members]
        rs = [pos[m.id][1] for m in members]
        x0, x1, r0, r1 = min(xs) - 0.48, max(xs) + 0.48, min(rs) - 0.45, max(rs) + 0.45
        ax.add_patch(FancyBboxPatch((x0, r0), x1 - x0, r1 - r0, boxstyle="round,pad=0.02",
                                    fc="#d9ead3", ec="#6aa84f", lw=0.8, alpha=0.35, zorder=0))
        line = f", line {members[0].line}" if members[0].line is not None else ""
        ax.text(x0 + 0.03, r0 + 0.03, f"{name}{line}", fontsize=7, color="#38761d", ha="left", va="top",
                zorder=0)


def save(fig, path: str) -> None:
    """Write the figure as PNG or SVG (by the file's extension), as savefig writes files."""
    import tapeml.builtins.plot as plot
    from tapeml.builtins.files import atomic_write
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".png", ".svg"):
        raise ValueErr(f"show_tape(): file must end in .png or .svg, got '{path}'")
    if ext == ".png":
        atomic_write("show_tape", path, lambda f: plot.save_png(fig, f), binary=True)
    else:
        atomic_write("show_tape", path, lambda f: fig.savefig(f, format="svg", metadata={"Date": None}),
                     binary=True)
