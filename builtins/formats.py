"""File formats behind the IO builtins (builtins/io.py): CSV cells and rows, JSON <-> tapeml values,
safetensors files. Helpers only: no builtin is declared here."""
from __future__ import annotations

import csv as _csv
import re
import json as _json
import math as _math

import numpy as np

from tapeml.array import backend as B
from tapeml.builtins.files import atomic_write, existing_file, read_limited, resolve_path
from tapeml.syntax.errors import IOErr, TypeErr
from tapeml.array.limits import FILE_NESTING
from tapeml.syntax.errors import ValueErr as _ValueErr
from tapeml.array.tape import raw
from tapeml.array.values import Dict, Record, describe
from tapeml.array.printer import format_value


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def matrix_from_file(a: np.ndarray, dtype=None):
    """A NumPy array read from a file as a matrix of the session: on its device (the one crossing,
    lang/array/backend.py), in `dtype` (a NumPy type; default the session's float type)."""
    if dtype is None:
        from tapeml.array.primitive_table import FLOAT
        dtype = FLOAT["dtype"]
    return B.new_matrix(a, dtype)

_FIRST = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+")
_PART = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[([0-9]+)\]|\.([0-9]+)")


def _parse_key(key: str, where: str) -> list:
    """An array's name as a path: PyTorch's state-dict names, 'heads.0.wq' -> ['heads', 0, 'wq'] and
    '0.weight' -> [0, 'weight'] (nn.Sequential), and tapeml's earlier 'heads[0].wq', '[1].w'."""
    parts: list = []
    pos = 0
    m = _FIRST.match(key)
    if m:
        parts.append(m.group(0) if not m.group(0).isdigit() else int(m.group(0)))
        pos = m.end()
    while pos < len(key):
        m = _PART.match(key, pos)
        if not m:
            raise IOErr(f"load(): {where} holds an array named '{key}', which is not a field path "
                        f"(like 'heads.0.wq' or '0.weight', PyTorch's state-dict names)")
        parts.append(m.group(1) if m.group(1) is not None else int(m.group(2) or m.group(3)))
        pos = m.end()
    if not parts:
        raise IOErr(f"load(): {where} holds an array with an empty name; it was not written by save()")
    return parts


def file_key(path: str) -> str:
    """The name an array is written under: its field path in PyTorch's state-dict spelling, a
    tuple item's index after a dot ('heads[0].wq' -> 'heads.0.wq', '[0].weight' -> '0.weight'), so
    torch's load_state_dict takes the file's names as they are."""
    return re.sub(r"\[([0-9]+)\]", r".\1", path).lstrip(".")


def flatten(value) -> list:
    """(key, ndarray) pairs of a record/tuple tree, in order (depth first, fields in order). A
    loop, not recursion, and at most FILE_NESTING levels: a 1e6-deep record is refused at once
    (each level's key is one longer: recursing built 1e6 ever longer keys, 7.7 GB)."""
    from tapeml.array import limits
    out = []
    stack = [(value, "", 0)]
    while stack:
        v, path, depth = stack.pop()
        r = B.to_numpy(raw(v))        # another backend's matrix: to NumPy (files are the same on every device)
        if isinstance(r, (Record, tuple)):
            if depth >= limits.FILE_NESTING:
                raise limits.file_nesting_error("save(): the value")
            if isinstance(r, Record):
                if not r.fields and path.endswith("]"):
                    continue        # an item without parameters (nn.Sequential's ReLU): no names, as in PyTorch
                if not r.fields:
                    raise TypeErr(f"save(): {path or 'the value'} is an empty record; checkpoints store matrices, "
                                  f"so every record needs at least one field")
                children = [(x, f"{path}.{k}" if path else k, depth + 1) for k, x in r.fields.items()]
            else:
                if not r:
                    raise TypeErr(f"save(): {path or 'the value'} is an empty tuple; checkpoints store matrices")
                children = [(x, f"{path}[{i}]", depth + 1) for i, x in enumerate(r)]
            stack.extend(reversed(children))
        elif isinstance(r, bool) or isinstance(r, np.bool_):
            out.append((path, np.array(bool(r))))
        elif isinstance(r, (float, int)):
            out.append((path, np.array(float(r), dtype=np.float64)))
        elif isinstance(r, np.ndarray):
            out.append((path, r))
        elif isinstance(r, Dict):
            raise TypeErr(f"save(): {path or 'the value'} is a dictionary; a checkpoint holds numbers and "
                          f"matrices in records and tuples (its names are field paths): make it a record, or "
                          f"write a dictionary of strings, numbers and lists with write_json")
        else:
            raise TypeErr(f"save(): {path} is {describe(r)}; a checkpoint holds numbers and matrices "
                          f"(in records and tuples)")
    return out


def unflatten(items: list, where: str):
    """Rebuild the tree from (key, value) pairs written by `flatten` (in order)."""
    root: dict | None = None

    def container(kind):
        return {"kind": kind, "items": {}}

    from tapeml.array import limits
    for key, value in items:
        parts = _parse_key(key, where)
        if len(parts) > limits.FILE_NESTING:
            raise IOErr(f"load(): {where} nests records and tuples more than {limits.FILE_NESTING} deep "
                        f"(an array name of {len(parts)} parts)")
        kind = "record" if isinstance(parts[0], str) else "tuple"
        if root is None:
            root = container(kind)
        node = root
        for i, part in enumerate(parts):
            want = "record" if isinstance(part, str) else "tuple"
            if node["kind"] != want:
                raise IOErr(f"load(): {where} mixes record fields and tuple items at '{key}'")
            last = i == len(parts) - 1
            if last:
                if part in node["items"]:
                    raise IOErr(f"load(): {where} holds '{key}' twice")
                node["items"][part] = value
            else:
                nxt = parts[i + 1]
                child = node["items"].get(part)
                if child is None:
                    child = container("record" if isinstance(nxt, str) else "tuple")
                    node["items"][part] = child
                elif not isinstance(child, dict):
                    raise IOErr(f"load(): {where} holds both a matrix and a tree at '{key}'")
                node = child

    def build(top):
        """The value of a node: children first, in a loop (no recursion, whatever the depth)."""
        done: dict = {}
        stack = [(top, False)]
        while stack:
            node, ready = stack.pop()
            if not ready:
                stack.append((node, True))
                stack.extend((c, False) for c in node["items"].values() if isinstance(c, dict))
                continue
            items = {k: done.pop(id(v)) if isinstance(v, dict) else v for k, v in node["items"].items()}
            if node["kind"] == "record":
                done[id(node)] = Record(items)
                continue
            # PyTorch's order; an index with no arrays (nn.Sequential's ReLU at 1 in '0.weight',
            # '2.weight') is an empty record, as the ReLU's own state dict is empty: t[2] is model[2]
            n = max(items) + 1
            if n > 2 * len(items) + 1000:       # '0.w' and '1000000000.w': not a list of layers
                raise IOErr(f"load(): {where} has a tuple of {len(items)} items numbered up to {n - 1}: too "
                            f"many missing to be a list")
            done[id(node)] = tuple(items[i] if i in items else Record({}) for i in range(n))
        return done[id(top)]

    if root is None:
        raise IOErr(f"load(): {where} holds no arrays")
    return build(root)


def _read_utf8(fname: str, ctx, path: str) -> tuple[str, str]:
    """(resolved path, text) of a UTF-8 file, through the size guard; a BOM is dropped."""
    full, text = read_utf8(fname, ctx, path)
    return full, text[1:] if text.startswith("\ufeff") else text


def read_utf8(fname: str, ctx, path: str) -> tuple[str, str]:
    """(resolved path, text) of a UTF-8 file, through the size guard, a BOM kept (read_text's
    text is the file's); IOError when it cannot be read or is not UTF-8, naming the first bad byte."""
    full = existing_file(fname, resolve_path(ctx, path), "a file")
    try:
        with open(full, "rb") as f:
            data = read_limited(f, fname, full)
    except OSError as e:
        raise IOErr(f"{fname}(): cannot read {full}: {e.strerror}") from None
    try:
        return full, data.decode("utf-8")
    except UnicodeDecodeError as e:
        from tapeml.syntax.lexer import utf8_error_place
        line, col = utf8_error_place(data, e.start)
        raise IOErr(f"{fname}(): {full} is not UTF-8 text: byte 0x{data[e.start]:02X} at line {line}, "
                    f"column {col} cannot start or continue a character") from None


def _csv_number(cell: str):
    """The float a CSV cell spells, or None (Python's float, without its '_' digit separators)."""
    if "_" in cell:
        return None
    try:
        return float(cell)
    except ValueError:
        return None


def _csv_problem(msg: str) -> str:
    """Python's csv module's words for a malformed file, in tapeml's."""
    if "expected after" in msg:
        return "a quoted field must end at its closing quote, before the next ',' or the end of the line"
    if "end of data" in msg:
        return "a quote is opened and never closed"
    if "NUL" in msg:
        return "a NUL character in the text"
    if "field limit" in msg:
        return "a field longer than 131072 characters"
    return "a quote in the wrong place"


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def _csv_rows(fname: str, full: str, text: str):
    """(line number, fields) of each non-blank row, one at a time (csv module: quoted fields may
    hold commas): a reader keeps one row of strings, not the whole file's (28x the file's size)."""
    # lines sliced one at a time (a StringIO would copy the text at 4 bytes a character),
    # split as a file opened with newline="" splits them: at \n, \r\n or \r, the ends kept
    reader = _csv.reader((m.group(0) for m in _LINE.finditer(text)), strict=True)
    try:
        for fields_ in reader:
            if fields_ and not (len(fields_) == 1 and fields_[0].strip() == ""):
                yield reader.line_num, fields_
    except _csv.Error as e:
        raise IOErr(f"{fname}(): {full} line {reader.line_num}: malformed CSV ({_csv_problem(str(e))})") from None


def _is_header(fields_) -> bool:
    return any(_csv_number(c) is None for c in fields_)


def _exact_int(x: float) -> bool:
    """Whether x is a whole number an int holds exactly (below 2^53 in magnitude), -0.0 not (it
    keeps its sign as a float)."""
    return x.is_integer() and abs(x) < 2.0 ** 53 and not (x == 0 and _math.copysign(1, x) < 0)


def _number_text(x: float) -> str:
    """The shortest text float() reads back as exactly x: 3 for 3.0, -0.0 kept, 0.1, 1e-300."""
    if _exact_int(x):
        return str(int(x))
    return repr(x)


def is_name(k: str) -> bool:
    """A name the language can write (r.name): ASCII letters, digits and _, not a keyword."""
    from tapeml.syntax.lexer import KEYWORDS
    return k.isascii() and k.isidentifier() and k not in KEYWORDS


def _from_json(v, full: str, where: str, objects: str = "auto"):
    """A parsed JSON value as a tapeml value (see read_json): an object is a record when every key
    is a name and `objects` is "auto", else a dictionary."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, (int, float)):     # read_json parses every number as a float (parse_int=float)
        return float(v)
    if isinstance(v, dict):
        if objects == "auto" and all(is_name(k) for k in v):
            return Record({k: _from_json(x, full, f"{where}.{k}" if where else k, objects) for k, x in v.items()})
        return Dict({k: _from_json(x, full, f"{where}[{format_value(k, True)}]", objects) for k, x in v.items()})
    shape = _json_shape(v)
    if shape is not None:
        from tapeml.array import limits
        limits.check_elements(f"read_json(): the array at {where or 'the top'} of {full}", shape)
        return matrix_from_file(np.array(v, dtype=np.float64))
    return tuple(_from_json(x, full, f"{where}[{i}]", objects) for i, x in enumerate(v))


def _json_shape(v):
    """The shape of a non-empty rectangular nested list of numbers (not bools), else None."""
    shape = []
    level = [v]
    while True:
        first = level[0]
        if isinstance(first, list):
            n = len(first)
            if n == 0:
                return None
            nxt = []
            for x in level:
                if not isinstance(x, list) or len(x) != n:
                    return None
                nxt.extend(x)
            shape.append(n)
            level = nxt
        else:
            for x in level:
                if isinstance(x, bool) or not isinstance(x, (int, float)):
                    return None
            return tuple(shape)


class _json_stack:
    """Run with the recursion limit at JSON_MAX_DEPTH levels (two frames each, plus slack) above
    the current depth, whatever the CLI set it to: deeper JSON is a RecursionError, not a crash."""
    def __enter__(self):
        import sys
        frames, f = 0, sys._getframe()
        while f is not None:
            frames, f = frames + 1, f.f_back
        self.old = sys.getrecursionlimit()
        sys.setrecursionlimit(frames + 2 * JSON_MAX_DEPTH + 500)

    def __exit__(self, *exc):
        import sys
        sys.setrecursionlimit(self.old)
        return False


JSON_MAX_DEPTH = FILE_NESTING    # arrays/objects inside each other, read or written


def _json_number(x: float, where: str):
    if not _math.isfinite(x):
        raise _ValueErr(f"write_json(): {where or 'value'} is {format_value(x)}, which JSON cannot hold "
                        f"(it has no NaN or infinity)")
    return int(x) if _exact_int(x) else x


def _to_json(v, where: str, depth: int = 0):
    r = B.to_numpy(raw(v))
    if depth > JSON_MAX_DEPTH:      # json.dumps recurses on the C stack
        from tapeml.array import limits
        raise limits.file_nesting_error("write_json(): the value")
    if r is None or isinstance(r, (bool, str)):
        return r
    if isinstance(r, np.bool_):
        return bool(r)
    if isinstance(r, (float, int)):
        return _json_number(float(r), where)
    if isinstance(r, np.ndarray):
        if r.dtype == np.bool_:
            return r.tolist()
        flat = r.astype(np.float64)
        if flat.size and not np.all(np.isfinite(flat)):
            bad = tuple(int(i) for i in np.argwhere(~np.isfinite(flat))[0])
            raise _ValueErr(f"write_json(): {where or 'value'}{list(bad)} is {format_value(flat[bad])}, "
                            f"which JSON cannot hold (it has no NaN or infinity)")
        conv = np.vectorize(lambda x: _json_number(float(x), where), otypes=[object]) if flat.size else None
        return conv(flat).tolist() if conv is not None else flat.tolist()
    if isinstance(r, tuple):
        return [_to_json(x, f"{where}[{i}]", depth + 1) for i, x in enumerate(r)]
    if isinstance(r, Record):
        return {k: _to_json(x, f"{where}.{k}" if where else k, depth + 1) for k, x in r.fields.items()}
    if isinstance(r, Dict):
        out = {}
        for k, x in r.items():
            if type(k) is not str:
                raise TypeErr(f"write_json(): {where or 'value'} has the key {format_value(k, True)}; the keys of "
                              f"a JSON object are strings")
            out[k] = _to_json(x, f"{where}[{format_value(k, True)}]", depth + 1)
        return out
    raise TypeErr(f"write_json(): {where or 'value'} is {describe(r)}; JSON holds records, dictionaries, tuples, "
                  f"matrices, numbers, strings, bools and none")


def check_load_total(full: str, shapes: list) -> None:
    """Refuse a checkpoint whose arrays together pass the element limit (each one alone is
    checked by name too), counted from the file's headers before any array is read: a small
    compressed file (a zip bomb) that would expand past the limit is refused at once."""
    import os
    from tapeml.array import limits
    from tapeml.array.number_text import format_gb
    total = sum(_math.prod(s) for s in shapes)
    if total > limits.max_elements():
        raise limits.elements_error(f"load(): {full}, a file of {format_gb(os.path.getsize(full))}, holds "
                                    f"{len(shapes)} arrays that together", total)


# ---- .safetensors in save/load ---------------------------------------------------------------------
_ORDER_KEY = "tapeml.order"        # metadata: the keys in save order (safetensors sorts them)


def save_safetensors(full: str, items: list) -> None:
    """Write (key, array) pairs as a .safetensors file (through atomic_write)."""
    from safetensors.numpy import save as st_save
    tensors = {}
    for key, arr in items:
        a = np.asarray(arr)
        if a.dtype.kind not in "fb":
            a = a.astype(np.float64)
        tensors[file_key(key)] = np.array(a, order="C")       # (ascontiguousarray would make a 0-d array 1-d)
    blob = st_save(tensors, metadata={_ORDER_KEY: _json.dumps(list(tensors))})
    atomic_write("save", full, lambda f: f.write(blob), binary=True)


def load_safetensors(full: str, target=None):
    """The tree in a .safetensors file: the keys are save's field paths (Hugging Face's
    'layers.0.wq' is read as layers[0].wq); the size guard sees every shape before reading."""
    from tapeml.array import limits
    try:
        from safetensors import safe_open
        with safe_open(full, framework="np") as f:
            keys = list(f.keys())
            meta = f.metadata() or {}
            dtypes, shapes = {}, []
            for k in keys:
                sl = f.get_slice(k)
                shapes.append(tuple(sl.get_shape()))
                limits.check_elements(f"load(): '{k}' in {full}", shapes[-1])
                dtypes[k] = sl.get_dtype()
            check_load_total(full, shapes)
            tensors = {k: f.get_tensor(k) for k in keys if dtypes[k] != "BF16"}
        if len(tensors) < len(keys):
            tensors.update(_bf16_tensors(full, [k for k in keys if dtypes[k] == "BF16"]))
    except (IOErr, _ValueErr):
        raise
    except Exception as e:          # safetensors_rust.SafetensorError, a truncated or foreign file
        what = str(e).split("\n")[0]
        why = _safetensors_fault(full)
        if why:
            raise IOErr(f"load(): {full} is damaged: {why}") from None
        if "data type" in what.lower() or "dtype" in what.lower() or "not supported" in what.lower():
            raise IOErr(f"load(): {full} holds a tensor of a type tapeml cannot read (float64, float32, "
                        f"float16, bfloat16, integers and bools are read)") from None
        raise IOErr(f"load(): {full} is damaged or not a .safetensors file") from None
    order = keys
    try:
        saved = _json.loads(meta.get(_ORDER_KEY, "null"))
        if isinstance(saved, list) and sorted(saved) == sorted(keys):
            order = saved
    except ValueError:
        pass
    out = [(key, file_value(tensors[key], key, full, target)) for key in order]
    return unflatten(out, full)


_ST_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8,
             "U32": 4, "U16": 2, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "C64": 8}


def _safetensors_fault(full: str) -> str | None:
    """What is wrong in a .safetensors file's header, read by hand (the library's error says only
    'invalid shape, data type, or offset'): a tensor whose shape and type need more or fewer bytes
    than its offsets hold, or whose data runs past the file's end. None when none is found."""
    import os
    import struct
    from tapeml.array.values import shape_text
    try:
        size = os.path.getsize(full)
        with open(full, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            if n > size - 8:
                return None         # no header to read: not a .safetensors file, or cut inside its header
            header = _json.loads(f.read(n))
    except (OSError, struct.error, ValueError):
        return None
    if not isinstance(header, dict):
        return None
    data = size - 8 - n
    for key, info in header.items():
        if key == "__metadata__" or not isinstance(info, dict):
            continue
        try:
            shape, (start, end), kind = tuple(info["shape"]), info["data_offsets"], info["dtype"]
            need = _math.prod(shape) * _ST_BYTES[kind]
        except (KeyError, TypeError, ValueError):
            continue
        if end - start != need:
            return (f"the tensor '{key}' has the shape {shape_text(shape)} of {kind} ({need} bytes), but its "
                    f"data offsets hold {end - start} bytes")
        if end > data:
            return f"the tensor '{key}' ends at byte {end} of the data, which has {data} bytes (a truncated file?)"
    return None


def file_value(a, key: str, full: str, target=None):
    """One array of a checkpoint as a value: a 0-d array a number (or bool), else a matrix on the
    session's device. Integer arrays become float64 (ids stay exact whatever target says); float16
    and bfloat16 are widened to float64; float32 and float64 keep their precision (a float32 run
    resumes in float32), or every float array takes `target` when it is given (load's dtype)."""
    if a.dtype.kind not in "fbiu":
        raise IOErr(f"load(): '{key}' in {full} has dtype {a.dtype}; checkpoints hold numbers")
    if a.dtype.kind == "f" and target is not None:
        a = a.astype(target)
    elif a.dtype.kind in "iu" or (a.dtype.kind == "f" and a.dtype not in (np.float32, np.float64)):
        a = a.astype(np.float64)
    return float(a) if a.ndim == 0 and a.dtype.kind == "f" else bool(a) if a.ndim == 0 else \
        matrix_from_file(a, a.dtype)


def _bf16_tensors(full: str, keys: list) -> dict:
    """bfloat16 tensors (NumPy has no such type) read from the file's own header and widened
    exactly to float64: a bfloat16 is the top half of a float32."""
    import struct
    with open(full, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = _json.loads(f.read(n))
        out = {}
        for k in keys:
            info = header[k]
            start, end = info["data_offsets"]
            f.seek(8 + n + start)
            bits = np.frombuffer(f.read(end - start), dtype="<u2").astype(np.uint32) << 16
            out[k] = bits.view(np.float32).astype(np.float64).reshape(info["shape"])
    return out
