"""What the kernel shows for a value (lang/faces/kernel.py): an execute_result's mime bundle,
text/plain always (values.display_value at 80 columns) and text/html for matrices and records."""
from __future__ import annotations

import html

import numpy as np

from tapeml.array.tape import raw
from tapeml.array.values import Record, host, shape_text
from tapeml.array.display import _edge_indices, _leaf_text, display_value
from tapeml.array.printer import _scalar, format_value

HTML_MAX_ROWS = 20          # a larger matrix shows its first and last rows with a ⋮ row between
HTML_MAX_COLS = 20          # likewise for columns, with a ... column
HTML_MAX_FIELDS = 50        # a record's fields in the table
TABLE_STYLE = "font-family: monospace; text-align: right"


def html_value(v) -> str | None:
    """An HTML table for a matrix (a vector as one row) or a record, or None for other values.
    The cells are the printer's numbers (values.format_number); a large matrix shows its first
    and last rows and columns, with ⋮ and ... between; the caption gives the shape. A matrix of
    any device is read on the host (values.host)."""
    v = host(raw(v))
    if isinstance(v, np.ndarray) and v.ndim in (1, 2) and v.size > 0:
        return _html_matrix(v)
    if isinstance(v, Record):
        return _html_record(v)
    return None


def _html_matrix(a: np.ndarray) -> str:
    is_bool = a.dtype == np.bool_
    kind = "bool " if is_bool else ""
    caption = f"{a.shape[0]}-element {kind}vector" if a.ndim == 1 else f"{shape_text(a.shape)} {kind}matrix"
    m = a.reshape(1, -1) if a.ndim == 1 else a
    rows = _edge_indices(m.shape[0], HTML_MAX_ROWS)
    cols = _edge_indices(m.shape[1], HTML_MAX_COLS)
    out = [f'<table style="{TABLE_STYLE}">', f"<caption>{html.escape(caption)}</caption>"]
    for i in rows:
        cells = []
        for j in cols:
            if i is None:
                text = "⋱" if j is None else "⋮"
            else:
                text = "…" if j is None else _scalar(m[i, j], is_bool)
            cells.append(f"<td>{html.escape(text)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _html_record(r: Record) -> str:
    names = list(r.fields)
    caption = f"record, {len(names)} field{'s' * (len(names) != 1)}"
    out = [f'<table style="font-family: monospace; text-align: left">',
           f"<caption>{html.escape(caption)}</caption>"]
    for name in names[:HTML_MAX_FIELDS]:
        value = host(raw(r.fields[name]))
        text = _leaf_text(value) if isinstance(value, np.ndarray) else format_value(value, True)
        if len(text) > 80:
            text = text[:77] + "..."
        out.append(f"<tr><td>{html.escape(name)}</td><td>{html.escape(text)}</td></tr>")
    if len(names) > HTML_MAX_FIELDS:
        out.append(f"<tr><td>⋮</td><td>{len(names) - HTML_MAX_FIELDS} more fields</td></tr>")
    out.append("</table>")
    return "\n".join(out)


def mime_bundle(value) -> dict:
    """The data of an execute_result for `value`: text/plain always, text/html for matrices
    and records."""
    data = {"text/plain": display_value(value)}
    page = html_value(value)
    if page is not None:
        data["text/html"] = page
    return data
