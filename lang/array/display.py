"""The REPL's display of a value: the second layout of the one
printer's numbers, for a bare expression in the REPL, the docs and the kernel's text/plain.
"""
from __future__ import annotations

import numpy as np

from tapeml.array.tape import raw
from tapeml.array.printer import SUMMARY_THRESHOLD, _scalar, format_array, format_value
from tapeml.array.values import MAX_NESTING, Dict, Record, host, nesting_error, shape_text, type_name

# print, str and interpolation keep format_value's one-line form; a bare expression in the REPL
# (and in the docs, the kernel's text/plain) shows display_value's form, laid out for a terminal
# of `width` columns and `height` rows: matrices as aligned grids under a shape header, long
# vectors wrapped, big records and tuples as a tree of fields with shapes. Every number is still
# written by format_number (through _scalar): only the layout differs.

DISPLAY_WIDTH = 80           # columns, when there is no terminal (the docs, the kernel)
DISPLAY_HEIGHT = 24          # rows, likewise
GAP = "  "                   # between grid columns
H_ELLIPSIS = "..."           # the elided columns of a grid
V_ELLIPSIS = "⋮"             # the elided rows of a grid or lines of a tree
D_ELLIPSIS = "⋱"             # where elided rows meet elided columns


def display_value(v, width: int = DISPLAY_WIDTH, height: int = DISPLAY_HEIGHT) -> str:
    """The REPL's echo of `v` for a terminal of `width` x `height`: a matrix with more than one
    row (or too wide for a line) as an aligned grid under a `RxC matrix:` header, a vector too
    long for a line wrapped under an `N-element vector:` header, a record or tuple too long for
    a line as a tree of fields with shapes; anything else as format_value writes it (strings
    quoted). Never wider than `width` (bar a single cell or name longer than that), and never
    much taller than `height`."""
    width, height = max(int(width), 20), max(int(height), 8)
    v = host(raw(v))
    if isinstance(v, np.ndarray):
        return display_array(v, width, height)
    if isinstance(v, (tuple, Record, Dict)):
        line = format_value(v, True)
        if "\n" not in line and len(line) <= width:
            return line
        return _display_tree(v, width, height)
    return format_value(v, True)


def _split_cell(s: str) -> tuple[str, str]:
    """A formatted number split where its decimal point goes ('-1.5e-8' -> '-1', '.5e-8'),
    so a column's cells align on it; words (true, nan, inf) are all left part."""
    for i, ch in enumerate(s):
        if ch in ".e" and i > 0 and s[i - 1].isdigit():
            return s[:i], s[i:]
    return s, ""


class _Column:
    """The cells of one grid column, aligned on the decimal point."""
    __slots__ = ("parts", "left", "right")

    def __init__(self, cells):
        self.parts = [_split_cell(c) for c in cells]
        self.left = max(len(a) for a, _ in self.parts)
        self.right = max(len(b) for _, b in self.parts)

    @property
    def width(self):
        return self.left + self.right

    def cell(self, i):
        a, b = self.parts[i]
        return a.rjust(self.left) + b.ljust(self.right)

    def mark(self, ch):
        """`ch` (⋮) under the column's decimal point."""
        return (" " * max(self.left - 1, 0) + ch).ljust(self.width)


def _edge_indices(n: int, keep: int) -> list:
    """0..n-1, or its first and last items with None between when n > keep (keep >= 3)."""
    if n <= keep:
        return list(range(n))
    top = (keep - 1 + 1) // 2
    bottom = keep - 1 - top
    return list(range(top)) + [None] + list(range(n - bottom, n))


def _grid_rows(m: np.ndarray, width: int, max_rows: int, indent: str = " ") -> list[str]:
    """The lines of a 2-D matrix as a grid: columns aligned on the decimal point, rows elided
    with ⋮ past max_rows, columns elided with ... past `width` (taken from both ends)."""
    is_bool = m.dtype == np.bool_
    nrows, ncols = m.shape
    rows = _edge_indices(nrows, max(max_rows, 3))
    shown_rows = [i for i in rows if i is not None]
    # no column is narrower than one character plus the gap: at most this many fit from each end
    reach = min(ncols, width // (1 + len(GAP)) + 1)
    candidates = sorted(set(range(reach)) | set(range(max(ncols - reach, 0), ncols)))
    cols = {j: _Column([_scalar(m[i, j], is_bool) for i in shown_rows]) for j in candidates}
    room = width - len(indent)
    total = sum(cols[j].width for j in range(ncols)) + len(GAP) * (ncols - 1) if reach == ncols else room + 1
    if total <= room:
        left, right = list(range(ncols)), []
    else:
        left, right, used = [], [], len(H_ELLIPSIS)
        lo, hi = 0, ncols - 1
        take_left = True
        while lo <= hi:
            j = lo if take_left else hi
            need = cols[j].width + len(GAP)
            if used + need > room and (left or right):
                break
            used += need
            if take_left:
                left.append(j)
                lo += 1
            else:
                right.insert(0, j)
                hi -= 1
            take_left = not take_left
    lines = []
    for i in rows:
        if i is None:
            cells = [cols[j].mark(V_ELLIPSIS) for j in left]
            if right:
                cells += [D_ELLIPSIS.center(len(H_ELLIPSIS))] + [cols[j].mark(V_ELLIPSIS) for j in right]
        else:
            k = shown_rows.index(i)
            cells = [cols[j].cell(k) for j in left]
            if right:
                cells += [H_ELLIPSIS] + [cols[j].cell(k) for j in right]
        lines.append((indent + GAP.join(cells)).rstrip())
    return lines


def _vector_lines(a: np.ndarray, width: int, max_lines: int, indent: str = " ") -> list[str]:
    """A long vector wrapped in lines of equal, decimal-aligned cells; lines elided with ⋮."""
    is_bool = a.dtype == np.bool_
    n = a.shape[0]
    far = 4096                       # enough cells for any screen: the middle is never formatted
    idx = list(range(n)) if n <= 2 * far else list(range(far)) + list(range(n - far, n))
    col = _Column([_scalar(a[i], is_bool) for i in idx])
    where = {i: k for k, i in enumerate(idx)}
    per_line = max(1, (width - len(indent) + len(GAP)) // (col.width + len(GAP)))
    nlines = -(-n // per_line)
    lines = []
    for line in _edge_indices(nlines, max(max_lines, 3)):
        if line is None:
            lines.append((indent + col.mark(V_ELLIPSIS)).rstrip())
            continue
        cells = [col.cell(where[i]) for i in range(line * per_line, min(n, (line + 1) * per_line))]
        lines.append((indent + GAP.join(cells)).rstrip())
    return lines


def _kind_of_array(a: np.ndarray) -> str:
    return "bool " if a.dtype == np.bool_ else ""


def display_array(a: np.ndarray, width: int = DISPLAY_WIDTH, height: int = DISPLAY_HEIGHT) -> str:
    """A matrix as the REPL shows it (display_value)."""
    line = format_array(a)
    if a.ndim == 0 or a.size == 0:
        return line
    rows_room = max(height - 5, 6)          # the header, the prompts and a line of context
    kind = _kind_of_array(a)
    short = a.size <= SUMMARY_THRESHOLD and "\n" not in line and len(line) <= width
    if a.ndim == 1:
        if short:
            return line
        return "\n".join([f"{a.shape[0]}-element {kind}vector:"] + _vector_lines(a, width, rows_room))
    if a.ndim == 2:
        if a.shape[0] == 1 and short:
            return line                     # [1, 2, 3;]: one row stays on one line
        return "\n".join([f"{shape_text(a.shape)} {kind}matrix:"] + _grid_rows(a, width, rows_room))
    lead = list(np.ndindex(*a.shape[:-2]))
    slices = _edge_indices(len(lead), max(3, min(len(lead), 5) if len(lead) <= 5 else 5))
    n_shown = sum(1 for s in slices if s is not None)
    per_slice = max(3, (height - 3) // n_shown - 2)
    out = [f"{shape_text(a.shape)} {kind}array:"]
    for k in slices:
        if k is None:
            out.append(V_ELLIPSIS)
            continue
        idx = lead[k]
        out.append("[" + ", ".join(str(i) for i in idx) + ", :, :] =")
        out.extend(_grid_rows(a[idx], width, per_slice))
    return "\n".join(out)


def _leaf_text(v) -> str:
    """A tree leaf: a matrix's shape, a number's or string's value, a function's signature."""
    if isinstance(v, np.ndarray):
        kind = _kind_of_array(v)
        if v.ndim == 0:
            return _scalar(v[()], v.dtype == np.bool_)
        if v.ndim == 1:
            return f"{v.shape[0]}-element {kind}vector"
        return f"{shape_text(v.shape)} {kind}{'matrix' if v.ndim == 2 else 'array'}"
    return format_value(v, True)


def _count_numbers(v, depth: int = 0) -> int:
    """The numbers a tree holds, as param_count counts them (float matrices and numbers)."""
    v = host(raw(v))
    if isinstance(v, (Record, tuple, Dict)):
        if depth >= MAX_NESTING:
            raise nesting_error("the value to show")
        total = 0
        for x in (v.fields.values() if isinstance(v, Record) else v.values() if isinstance(v, Dict) else v):
            total += _count_numbers(x, depth + 1)
        return total
    if isinstance(v, np.ndarray):
        return 0 if v.dtype == np.bool_ else int(v.size)
    if isinstance(v, (float, int)) and not isinstance(v, bool):
        return 1
    return 0


def _structure(v, depth: int = 0):
    """The kinds and shapes of a tree, without its numbers (to spot repeated layers and heads)."""
    v = host(raw(v))
    if isinstance(v, (Record, tuple, Dict)) and depth >= MAX_NESTING:
        raise nesting_error("the value to show")
    if isinstance(v, Record):
        return tuple([(k, _structure(x, depth + 1)) for k, x in v.fields.items()])
    if isinstance(v, Dict):
        return ("{}",) + tuple([(k, _structure(x, depth + 1)) for k, x in v.items()])
    if isinstance(v, tuple):
        return ("()",) + tuple([_structure(x, depth + 1) for x in v])
    if isinstance(v, np.ndarray):
        return (v.shape, v.dtype == np.bool_)
    return type_name(v)


def _more_parts_than(v, n: int) -> bool:
    """Whether the tree v has more than n tuples, records and leaves (then its one-line form has
    more than n characters: each part writes at least one), counting no further than that."""
    stack, seen = [v], 0
    while stack:
        x = host(raw(stack.pop()))
        seen += 1
        if seen > n:
            return True
        if isinstance(x, Record):
            stack.extend(x.fields.values())
        elif isinstance(x, tuple):
            stack.extend(x)
        elif isinstance(x, Dict):
            for k, item in x.items():
                stack.extend((k, item))
    return False


def _node_text(v) -> str:
    if isinstance(v, Record):
        return f"record with {len(v.fields)} field{'s' * (len(v.fields) != 1)}"
    if isinstance(v, Dict):
        return f"dict of {len(v)} key{'s' * (len(v) != 1)}"
    return f"tuple of {len(v)}"


SHORT_SUBTREE = 40           # a nested record or tuple whose one-line form fits shows on one row


def _display_tree(v, width: int, height: int) -> str:
    """A record or tuple as a tree: one line per field (name, then its shape or value), nested
    records and tuples indented under theirs; a short matrix value follows its shape."""
    rows = []                        # (depth, name, text, value)

    def walk(node, depth):
        if depth > MAX_NESTING:
            raise nesting_error("the value to show")
        items = node.fields.items() if isinstance(node, Record) else \
            ((f"[{format_value(k, True)}]", x) for k, x in node.items()) if isinstance(node, Dict) else \
            ((f"[{i}]", x) for i, x in enumerate(node))
        first = None                 # a tuple's first nested item: later items of its structure say so
        for name, x in items:
            x = host(raw(x))
            if isinstance(x, (Record, tuple, Dict)):
                if not _more_parts_than(x, SHORT_SUBTREE):
                    line = format_value(x, True, depth)
                    if len(line) <= SHORT_SUBTREE and "\n" not in line:
                        rows.append((depth, name, line, None))
                        continue
                if isinstance(node, tuple):
                    if first is None:
                        first = (name, x, None)
                    else:
                        if first[2] is None:         # the first item's structure, once, when needed
                            first = (first[0], first[1], _structure(first[1], depth))
                        if _structure(x, depth) == first[2]:
                            rows.append((depth, name, f"{_node_text(x)}, shaped as {first[0]}", None))
                            continue
                rows.append((depth, name, _node_text(x), None))
                walk(x, depth + 1)
            else:
                rows.append((depth, name, _leaf_text(x), x))

    walk(v, 1)
    n = _count_numbers(v)
    head = f"{_node_text(v)}, {n:,} number{'s' * (n != 1)}:"
    # indentation past the width would be cut anyway: a deep tree's rows are not built past it
    name_width = min(max(2 * d + len(name) for d, name, _, _ in rows), width) if rows else 0
    room = max(height - 4, 6)
    more = len(rows) - (room - 1) if len(rows) > room else 0
    if more:
        rows = rows[:room - 1]
    lines = []
    for depth, name, text, value in rows:
        line = f"{'  ' * min(depth, width)}{name}".ljust(name_width) + GAP + text
        if isinstance(value, np.ndarray) and value.ndim >= 1 and value.size and \
                (value.ndim == 1 or value.shape[0] == 1):
            shown = format_array(value)
            if "\n" not in shown and len(line) + len(GAP) + len(shown) <= width:
                line += GAP + shown
        if len(line) > width:
            line = line[:width - 3] + "..."
        lines.append(line)
    if more:
        lines.append(f"  {V_ELLIPSIS} {more} more lines")
    return "\n".join([head] + lines)
