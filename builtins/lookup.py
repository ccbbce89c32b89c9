"""Lookup helpers of the Strings & collections builtins (builtins/strings.py): membership and
position in strings, tuples and matrices (contains, index_of), and the checks of the dictionary
builtins (the dictionary argument, its key)."""
from __future__ import annotations

import numpy as np

from tapeml.array.backend import to_numpy
from tapeml.syntax.errors import LangError, TypeErr
from tapeml.array.tape import raw
from tapeml.array.values import Dict, Record, describe, dict_key, values_equal


def array_item(item) -> float | bool | None:
    """The number (or bool) to look for in an array, or None when it cannot be an element."""
    r = to_numpy(raw(item))
    if isinstance(r, (bool, np.bool_)):
        return bool(r)
    if isinstance(r, (float, int)):
        return float(r)
    if isinstance(r, np.ndarray) and r.ndim == 0:
        return r.item()
    return None


def index_of_any(fname: str, container, item):
    """The first index (a flat one for a matrix), or None; shared by contains and index_of. Another
    backend's matrices are read on the host (a lookup answers with Python values)."""
    c = to_numpy(raw(container))
    if isinstance(c, str):
        if not isinstance(raw(item), str):
            raise TypeErr(f"{fname}(): item must be a string when container is a string, got {describe(item)}")
        i = c.find(raw(item))
        return None if i < 0 else i
    if isinstance(c, tuple):
        ri = to_numpy(raw(item))
        for i, x in enumerate(c):
            rx = to_numpy(raw(x))
            if isinstance(ri, np.ndarray) or isinstance(rx, np.ndarray):
                if isinstance(ri, np.ndarray) and isinstance(rx, np.ndarray) and values_equal(rx, ri):
                    return i
            elif isinstance(ri, (bool, np.bool_)) != isinstance(rx, (bool, np.bool_)):
                continue                                 # true is not 1
            elif values_equal(rx, ri):
                return i
        return None
    if isinstance(c, (float, int, np.ndarray)) and not isinstance(c, bool):
        a = np.asarray(c)
        v = array_item(item)
        if v is None or (isinstance(v, bool) != (a.dtype == np.bool_)):
            return None
        hits = np.flatnonzero(a.ravel() == v)
        return int(hits[0]) if hits.size else None
    hint = "; a record's fields: has_field(r, name)" if isinstance(c, Record) else ""
    raise TypeErr(f"{fname}(): container must be a {'dictionary, ' if fname == 'contains' else ''}string, tuple, "
                  f"number or matrix, got {describe(container)}{hint}")


def dict_arg(fname: str, d, pname: str = "d") -> Dict:
    r = raw(d)
    if isinstance(r, Dict):
        return r
    hint = ""
    if isinstance(r, Record):
        hint = {"keys": "; a record's field names: fields(r)", "items": "; dict(r) is a dictionary of its fields",
                "values": "; dict(r) is a dictionary of its fields",
                "get": "; a record's field: r.name (has_field(r, name) first when it may be missing)",
                "remove": "; a record's fields are fixed: build a new one"}.get(fname, "")
    raise TypeErr(f"{fname}(): {pname} must be a dictionary, got {describe(d)}{hint}")


def checked_key(fname: str, key):
    try:
        return dict_key(key)
    except LangError as e:
        e.message = f"{fname}(): {e.message}"
        raise
