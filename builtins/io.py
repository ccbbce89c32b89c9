"""IO: save and load parameter trees (records and tuples of matrices) as .npz checkpoints.

Format: a plain NumPy .npz (a zip of .npy files), one array per leaf, named by its field
path from the root: `tok`, `heads[0].wq`, `blocks[1].ln1_gamma`; a tuple at the root gives
keys `[0]`, `[1].w`, ... Numbers are stored as 0-d float64 arrays and come back as numbers.
Any NumPy can read the file (`numpy.load(path)["heads[0].wq"]`), and `load` never unpickles.

`save` writes to a temporary file in the target's directory and renames it over the target
(`os.replace`, atomic on POSIX and Windows), so a crash mid-write never leaves a
half-written checkpoint behind.
"""
from __future__ import annotations

import os
import re
import zipfile
import zlib

import numpy as np

from tapeml.builtins.registry import P, builtin
from tapeml.builtins.train import resolve_path
from tapeml.errors import IOErr, TypeErr
from tapeml.tape import raw
from tapeml.values import Record, describe

CAT = "IO"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PART = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[([0-9]+)\]")


def flatten(value, path: str = "") -> list:
    """(key, ndarray) pairs of a record/tuple tree, in order."""
    r = raw(value)
    if isinstance(r, Record):
        if not r.fields:
            raise TypeErr(f"save(): {path or 'the value'} is an empty record; checkpoints store matrices, "
                          f"so every record needs at least one field")
        out = []
        for k, v in r.fields.items():
            out.extend(flatten(v, f"{path}.{k}" if path else k))
        return out
    if isinstance(r, tuple):
        if not r:
            raise TypeErr(f"save(): {path or 'the value'} is an empty tuple; checkpoints store matrices")
        out = []
        for i, v in enumerate(r):
            out.extend(flatten(v, f"{path}[{i}]"))
        return out
    if isinstance(r, bool) or isinstance(r, np.bool_):
        return [(path, np.array(bool(r)))]
    if isinstance(r, (float, int)):
        return [(path, np.array(float(r), dtype=np.float64))]
    if isinstance(r, np.ndarray):
        return [(path, r)]
    raise TypeErr(f"save(): {path} is {describe(r)}; a checkpoint holds numbers and matrices "
                  f"(in records and tuples)")


def _parse_key(key: str, where: str) -> list:
    """'heads[0].wq' -> ['heads', 0, 'wq']; '[1].w' -> [1, 'w']."""
    parts: list = []
    pos = 0
    m = _NAME.match(key)
    if m:
        parts.append(m.group(0))
        pos = m.end()
    while pos < len(key):
        m = _PART.match(key, pos)
        if not m:
            raise IOErr(f"load(): {where} holds an array named '{key}', which is not a field path "
                        f"(like 'heads[0].wq'); it was not written by save()")
        parts.append(m.group(1) if m.group(1) is not None else int(m.group(2)))
        pos = m.end()
    if not parts:
        raise IOErr(f"load(): {where} holds an array with an empty name; it was not written by save()")
    return parts


def unflatten(items: list, where: str):
    """Rebuild the tree from (key, value) pairs written by `flatten` (in order)."""
    root: dict | None = None

    def container(kind):
        return {"kind": kind, "items": {}}

    for key, value in items:
        parts = _parse_key(key, where)
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

    def build(node):
        if not isinstance(node, dict):
            return node
        if node["kind"] == "record":
            return Record({k: build(v) for k, v in node["items"].items()})
        n = len(node["items"])
        if sorted(node["items"]) != list(range(n)):
            raise IOErr(f"load(): {where} has a tuple with missing items "
                        f"(indices {sorted(node['items'])})")
        return tuple(build(node["items"][i]) for i in range(n))

    if root is None:
        raise IOErr(f"load(): {where} holds no arrays")
    return build(root)


def atomic_write(fname: str, full: str, write, binary: bool) -> None:
    """Write a file through a temporary file in the same directory, then rename it over `full`
    (os.replace): a crash or kill never leaves a half-written file. `write(f)` fills the file."""
    import tempfile
    directory = os.path.dirname(os.path.abspath(full))
    if not os.path.isdir(directory):
        raise IOErr(f"{fname}(): the directory {directory} does not exist")
    if os.path.isdir(full):
        raise IOErr(f"{fname}(): {full} is a directory")
    if os.path.lexists(full) and not os.path.isfile(full):
        # the rename would put a regular file in place of a device (/dev/null), a pipe or a socket
        raise IOErr(f"{fname}(): {full} is not a regular file (it is a device, a pipe or a socket); "
                    f"only regular files are written")
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(full) + ".", suffix=".tmp", dir=directory)
    except OSError as e:
        raise IOErr(f"{fname}(): cannot write in {directory}: {e.strerror}") from None
    try:
        with (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="")) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, full)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise IOErr(f"{fname}(): cannot write {full}: {e.strerror or e}") from None
        raise


@builtin("save", CAT, "Write a record or tuple of matrices to a .npz checkpoint, atomically.",
         [P("path", "string", doc="the file to write (relative paths start at the script's directory)"),
          P("value", doc="a record or tuple (nested) of numbers and matrices, e.g. model parameters")],
         returns="none", interp=True,
         what="Saves model parameters (or an optimizer state) so that load(path) gives back exactly the "
              "same values. Each matrix is stored under its field path, e.g. \"heads[0].wq\", so Python can "
              "read the file with numpy.load. A path ending in .safetensors writes the safetensors format "
              "(Hugging Face's, no pickles) with the same names, which Python reads with "
              "safetensors.numpy.load_file.",
         how="A NumPy .npz archive (uncompressed zip of .npy files, no pickles), written to a temporary "
             "file in the same directory and renamed over `path` with os.replace: a crash while saving "
             "leaves the old file (or none), never a half-written one. float64 values are stored bit for "
             "bit.",
         errors=["TypeError naming the path of a leaf that is not a number or matrix (a string, a function)",
                 "TypeError when value is not a record or tuple",
                 "IOError when the directory does not exist or cannot be written"],
         examples=["params = {w = [1, 2; 3, 4], heads = ({wq = [0.5, 0.25]},), step = 3}\n"
                   "save(\"/tmp/tapeml_doc_ckpt.npz\", params)\n"
                   "load(\"/tmp/tapeml_doc_ckpt.npz\")"])
def save(interp, path, value):
    r = raw(value)
    if not isinstance(r, (Record, tuple)):
        raise TypeErr(f"save(): value must be a record or a tuple of matrices, got {describe(value)}")
    items = flatten(r)
    full = resolve_path(interp, path)
    if full.endswith(".safetensors"):
        return save_safetensors(full, items)

    def write(f):
        with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            for key, arr in items:
                with zf.open(key + ".npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, np.asarray(arr), allow_pickle=False)
    atomic_write("save", full, write, binary=True)
    return None


def _check_header(data, key: str, full: str) -> None:
    """Refuse an array whose .npy header claims more elements than the limit (lang/limits.py)."""
    from tapeml import limits
    name = key + ".npy" if key + ".npy" in data.zip.namelist() else key
    with data.zip.open(name) as member:
        version = np.lib.format.read_magic(member)
        if version == (1, 0):
            shape = np.lib.format.read_array_header_1_0(member)[0]
        else:
            shape = np.lib.format.read_array_header_2_0(member)[0]
    limits.check_elements(f"load(): '{key}' in {full}", shape)


def existing_file(fname: str, full: str, what: str) -> str:
    """`full` when it names a file; an IOError naming the resolved path otherwise."""
    if not os.path.exists(full):
        raise IOErr(f"{fname}(): no file at {full}")
    if os.path.isdir(full):
        raise IOErr(f"{fname}(): {full} is a directory, not {what}")
    if not os.path.isfile(full):        # /dev/zero, a pipe, a socket: no end, or no size to check
        raise IOErr(f"{fname}(): {full} is not a regular file (it is a device, a pipe or a socket)")
    return full


@builtin("load", CAT, "Read a checkpoint written by save: the same record or tuple of matrices.",
         [P("path", "string", doc="a .npz file written by save (relative paths start at the script's directory)")],
         returns="the record or tuple that was saved", interp=True,
         what="The inverse of save: load(path) equals the value given to save, field for field and bit for bit.",
         how="numpy.load with allow_pickle=False (a checkpoint can never run code), then the tree is "
             "rebuilt from the field paths of the array names (\"heads[0].wq\" is field wq of item 0 of "
             "field heads). 0-d arrays come back as numbers. float32 and float64 matrices keep their "
             "precision (a float32 run resumes in float32); integer arrays become float64. A path ending in "
             ".safetensors is read with the safetensors library (numpy API), its size guard checking "
             "every shape before a tensor is read; Hugging Face names such as \"layers.0.wq\" are read "
             "as layers[0].wq, and the field order of a file written by save is kept (in its metadata); "
             "bfloat16 and float16 tensors are widened exactly to float64.",
         errors=["IOError when the file is missing, truncated, or not an .npz archive",
                 "IOError when an array name is not a field path (a file not written by save)"],
         examples=["save(\"/tmp/tapeml_doc_ckpt2.npz\", ([1, 2], {b = 0.5}))\n"
                   "load(\"/tmp/tapeml_doc_ckpt2.npz\")"])
def load(interp, path):
    full = existing_file("load", resolve_path(interp, path), "a checkpoint")
    if full.endswith(".safetensors"):
        return load_safetensors(full)
    if not zipfile.is_zipfile(full):
        raise IOErr(f"load(): {full} is not a checkpoint (.npz archive written by save); it may be "
                    f"truncated or another kind of file")
    items = []
    try:
        with np.load(full, allow_pickle=False) as data:
            if not isinstance(data, np.lib.npyio.NpzFile):
                raise IOErr(f"load(): {full} is not an .npz archive")
            for key in data.files:
                _check_header(data, key, full)        # the size guard, before the array is read
                items.append((key, data[key]))
    except IOErr:
        raise
    except ValueError as e:
        if "pickle" in str(e).lower():
            raise IOErr(f"load(): {full} holds pickled objects, which load() refuses to read") from None
        raise IOErr(f"load(): {full} is damaged or not a checkpoint written by save()") from None
    except (OSError, EOFError, zipfile.BadZipFile, KeyError, NotImplementedError, RuntimeError,
            zlib.error, OverflowError, MemoryError) as e:
        # corrupted headers: an unknown compression method, an "encrypted" flag, a broken stream
        raise IOErr(f"load(): {full} is damaged or truncated") from None
    out = []
    for key, a in items:
        if a.dtype.kind not in "fb" and a.dtype.kind not in "iu":
            raise IOErr(f"load(): '{key}' in {full} has dtype {a.dtype}; checkpoints hold numbers")
        if a.dtype.kind in "iu" or (a.dtype.kind == "f" and a.dtype not in (np.float32, np.float64)):
            a = a.astype(np.float64)     # float32 and float64 come back as stored (a float32 run resumes float32)
        out.append((key, float(a) if a.ndim == 0 and a.dtype.kind == "f" else
                    bool(a) if a.ndim == 0 else a))
    return unflatten(out, full)


# ==== issue 20 (strings owner): CSV, JSON, safetensors, file_exists ================================
# Kept as one block at the end of the file (issue 18 moves read_text/write_text and the file helpers
# here concurrently). Readers go through read_limited (the string limit, lang/limits.py) and
# existing_file; writers through atomic_write (temporary file + rename; non-regular targets refused).
import csv as _csv
import io as _io
import json as _json
import math as _math

from tapeml.errors import ValueErr as _ValueErr
from tapeml.values import format_value


def _read_utf8(fname: str, interp, path: str) -> tuple[str, str]:
    """(resolved path, text) of a UTF-8 file, through the size guard; a BOM is dropped."""
    from tapeml.builtins.train import read_limited
    full = existing_file(fname, resolve_path(interp, path), "a file")
    try:
        with open(full, "rb") as f:
            data = read_limited(f, fname, full)
    except OSError as e:
        raise IOErr(f"{fname}(): cannot read {full}: {e.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        from tapeml.lexer import utf8_error_place
        line, col = utf8_error_place(data, e.start)
        raise IOErr(f"{fname}(): {full} is not UTF-8 text: byte 0x{data[e.start]:02X} at line {line}, "
                    f"column {col} cannot start or continue a character") from None
    return full, text[1:] if text.startswith("\ufeff") else text


def _csv_number(cell: str):
    """The float a CSV cell spells, or None (Python's float, without its '_' digit separators)."""
    if "_" in cell:
        return None
    try:
        return float(cell)
    except ValueError:
        return None


def _csv_rows(fname: str, full: str, text: str) -> list:
    """(line number, fields) of each non-blank row (csv module: quoted fields may hold commas)."""
    rows = []
    reader = _csv.reader(_io.StringIO(text, newline=""), strict=True)
    try:
        for fields_ in reader:
            if fields_ and not (len(fields_) == 1 and fields_[0].strip() == ""):
                rows.append((reader.line_num, fields_))
    except _csv.Error as e:
        raise IOErr(f"{fname}(): {full} line {reader.line_num}: malformed CSV ({e})") from None
    return rows


def _is_header(fields_) -> bool:
    return any(_csv_number(c) is None for c in fields_)


@builtin("read_csv", CAT, "The numbers of a CSV file as a matrix (a header row is skipped).",
         [P("path", "string", doc="a CSV file; relative paths start at the script's directory"),
          P("header", default="auto", doc="\"auto\": the first row is a header when one of its fields is not a "
            "number; true: the first row is a header; false: there is none")],
         returns="[rows, columns]", interp=True,
         what="Loads a table of numbers, e.g. a data set: each line a row, fields separated by commas. The "
              "result is always a matrix (a single column gives an N x 1 matrix; take m[:, 0] for a vector). "
              "Read the column names with csv_header(path).",
         how="Python's `csv` reader (comma-separated, double quotes around a field that holds a comma) and "
             "`float` for each field, so \"1e-3\", \"-0.0\", \"nan\" and \"inf\" are read as Python reads them "
             "and every float64 written by write_csv comes back bit for bit. Spaces around a number are "
             "ignored; blank lines are skipped; a UTF-8 byte order mark is dropped. The matrix is in the "
             "session's float type (float64 unless set_dtype changed it). Like NumPy's `loadtxt(path, "
             "delimiter=\",\", ndmin=2)` with the header detection of pandas' `read_csv`; an empty cell is "
             "an error here, not NaN as in pandas.",
         errors=["IOError naming the line and column of a field that is not a number (an empty one included)",
                 "IOError naming the line when a row has a different number of fields than the first row",
                 "IOError when the file does not exist, is not UTF-8, or is malformed CSV (an unclosed quote)",
                 "ValueError when header is not \"auto\", true or false, or the file passes the string limit (0.1 GB)"],
         examples=["write_text(\"/tmp/tapeml_doc_read.csv\", \"x,y\\n1,2\\n3,4.5\\n\")\n"
                   "read_csv(\"/tmp/tapeml_doc_read.csv\")",
                   "csv_header(\"/tmp/tapeml_doc_read.csv\")"])
def read_csv(interp, path, header):
    from tapeml import limits, ops
    header = bool(header) if isinstance(header, np.bool_) else header
    if not (header is True or header is False or (isinstance(header, str) and header == "auto")):
        raise _ValueErr(f"read_csv(): header must be \"auto\", true or false, got {format_value(header, True)}")
    full, text = _read_utf8("read_csv", interp, path)
    rows = _csv_rows("read_csv", full, text)
    if rows and (header is True or (header == "auto" and _is_header(rows[0][1]))):
        rows = rows[1:]
    if not rows:
        return np.zeros((0, 0), dtype=ops.FLOAT["dtype"])
    width = len(rows[0][1])
    limits.check_elements(f"read_csv(): {full}", (len(rows), width))
    out = np.empty((len(rows), width), dtype=np.float64)
    first_line = rows[0][0]
    for r, (line, fields_) in enumerate(rows):
        if len(fields_) != width:
            raise IOErr(f"read_csv(): {full} line {line} has {len(fields_)} field{'s' * (len(fields_) != 1)}, "
                        f"but line {first_line} has {width}; every row needs the same number")
        for c, cell in enumerate(fields_):
            x = _csv_number(cell)
            if x is None:
                shown = "an empty field" if cell.strip() == "" else f"\"{cell}\", which is not a number"
                raise IOErr(f"read_csv(): {full} line {line}, column {c + 1}: {shown}")
            out[r, c] = x
    return ops.as_float(out)


@builtin("csv_header", CAT, "The fields of a CSV file's first row, as a tuple of strings.",
         [P("path", "string", doc="a CSV file; relative paths start at the script's directory")],
         returns="a tuple of strings", interp=True,
         what="The column names of a table read with read_csv: csv_header(path)[j] names column j of "
              "read_csv(path). The first (non-blank) row is returned as it is written, whether or not it "
              "is numbers; an empty file gives ().",
         how="Python's `csv` reader on the first non-blank row; quotes around a field are removed.",
         errors=["IOError when the file does not exist, is not UTF-8, or is malformed CSV"],
         examples=["write_csv(\"/tmp/tapeml_doc_head.csv\", [1, 2; 3, 4], header=(\"width\", \"height, cm\"))\n"
                   "csv_header(\"/tmp/tapeml_doc_head.csv\")"])
def csv_header(interp, path):
    full, text = _read_utf8("csv_header", interp, path)
    rows = _csv_rows("csv_header", full, text)
    return tuple(rows[0][1]) if rows else ()


def _number_text(x: float) -> str:
    """The shortest text float() reads back as exactly x: 3 for 3.0, -0.0 kept, 0.1, 1e-300."""
    if x.is_integer() and abs(x) < 2.0 ** 53 and not (x == 0 and _math.copysign(1, x) < 0):
        return str(int(x))
    return repr(x)


@builtin("write_csv", CAT, "Write a matrix to a CSV file (replacing it), every float64 exactly.",
         [P("path", "string", doc="the file to write; relative paths start at the script's directory"),
          P("m", "array", shape="a number, [N] or [N, M]", doc="a vector is written as one column"),
          P("header", "tuple", default=None, doc="column names, one string per column")],
         returns="none", interp=True,
         what="Saves a table of numbers that read_csv (or any spreadsheet, pandas, NumPy) reads back: one "
              "line per row, fields separated by commas, an optional first line of names.",
         how="Each number is written as Python's `repr` of the float64 (the shortest text that reads back "
             "as the same float, so read_csv(path) equals m bit for bit, -0.0, 1e-300, nan and inf "
             "included); whole numbers below 2^53 are written without \".0\". A float32 matrix is "
             "widened to float64 first (exact). Names holding a comma or a quote are quoted (Python's "
             "`csv` writer). Lines end with \"\\n\". The file is written to a temporary file and renamed "
             "over path, as save does. A vector becomes one column (N rows), as NumPy's `savetxt` writes "
             "it; a number a 1 x 1 table; bools are written as 1 and 0.",
         errors=["ValueError when header does not have one string per column",
                 "ShapeError when m has more than 2 axes",
                 "IOError when the directory does not exist or cannot be written, or path is not a regular file"],
         examples=["write_csv(\"/tmp/tapeml_doc_w.csv\", [1, 0.1; -0.0, 1e-300], header=(\"a\", \"b\"))\n"
                   "print(read_text(\"/tmp/tapeml_doc_w.csv\"))\n"
                   "all(read_csv(\"/tmp/tapeml_doc_w.csv\") == [1, 0.1; -0.0, 1e-300])"])
def write_csv(interp, path, m, header):
    from tapeml.errors import ShapeError
    a = np.asarray(raw(m))
    if a.ndim > 2:
        raise ShapeError(f"write_csv(): m must be a number, vector or matrix, got {describe(m)}")
    a = a.astype(np.float64).reshape((1, 1) if a.ndim == 0 else (-1, 1) if a.ndim == 1 else a.shape)
    names = None
    if header is not None:
        names = list(raw(header))
        bad = next((i for i, x in enumerate(names) if not isinstance(raw(x), str)), None)
        if bad is not None:
            raise _ValueErr(f"write_csv(): header[{bad}] is {describe(names[bad])}; header must hold strings")
        if len(names) != a.shape[1]:
            raise _ValueErr(f"write_csv(): header has {len(names)} name{'s' * (len(names) != 1)} but m has "
                            f"{a.shape[1]} column{'s' * (a.shape[1] != 1)}")
    full = resolve_path(interp, path)

    def write(f):
        if names is not None:
            _csv.writer(f, lineterminator="\n").writerow(names)
        for row in a.tolist():
            f.write(",".join(_number_text(x) for x in row) + "\n")
    atomic_write("write_csv", full, write, binary=False)
    return None


def _from_json(v, full: str, where: str):
    """A parsed JSON value as a tapeml value (see read_json)."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, (int, float)):
        try:
            return float(v)
        except OverflowError:
            raise IOErr(f"read_json(): {full}: the number at {where or 'the top'} is too large for a "
                        f"float64") from None
    if isinstance(v, dict):
        return Record({k: _from_json(x, full, f"{where}.{k}" if where else k) for k, x in v.items()})
    shape = _json_shape(v)
    if shape is not None:
        from tapeml import limits, ops
        limits.check_elements(f"read_json(): the array at {where or 'the top'} of {full}", shape)
        try:
            return ops.as_float(np.array(v, dtype=np.float64))
        except OverflowError:
            raise IOErr(f"read_json(): {full}: a number in the array at {where or 'the top'} is too "
                        f"large for a float64") from None
    return tuple(_from_json(x, full, f"{where}[{i}]") for i, x in enumerate(v))


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


@builtin("read_json", CAT, "A JSON file as a tapeml value: objects are records, arrays of numbers matrices.",
         [P("path", "string", doc="a JSON file; relative paths start at the script's directory")],
         returns="a record, tuple, matrix, number, string, bool or none", interp=True,
         what="Loads configuration and results, e.g. a model's config.json: cfg = read_json(path), then "
              "cfg.n_heads.",
         how="Python's `json` parser, then: an object becomes a record (its keys the field names, in file "
             "order; a key that is not a name is still listed by fields(r) and readable with has_field, "
             "but not with r.key); a non-empty rectangular list of numbers (nested to any depth, "
             "[1, 2] or [[1, 2], [3, 4]]) becomes a vector or matrix in the session's float type; any "
             "other list (mixed items, ragged rows, bools, an empty list) becomes a tuple; numbers become "
             "numbers, strings strings, true/false bools, null none. NaN and Infinity (which Python "
             "writes, though JSON has no such numbers) are read too.",
         errors=["IOError naming the line and column of a JSON syntax error",
                 "IOError when the file does not exist or is not UTF-8",
                 "ValueError when the file passes the string limit (0.1 GB) or an array the element limit"],
         examples=["write_text(\"/tmp/tapeml_doc.json\", \"{{\\\"n_heads\\\": 4, \\\"dims\\\": [64, 128], \\\"name\\\": \\\"tiny\\\", \\\"w\\\": [[1, 2], [3, 4]], \\\"tags\\\": [\\\"a\\\", 1]}}\")\n"
                   "cfg = read_json(\"/tmp/tapeml_doc.json\")\ncfg.n_heads * 2\ncfg.w\ncfg.tags"])
def read_json(interp, path):
    full, text = _read_utf8("read_json", interp, path)
    # The C parser recurses on the C stack, checked only against the recursion limit, which the
    # CLI raises for deep tapeml recursion: parse under a limit of JSON_MAX_DEPTH more levels, so
    # a deeply nested file is a RecursionError here, not a segfault.
    try:
        with _json_stack():
            return _from_json(_json.loads(text), full, "")
    except _json.JSONDecodeError as e:
        raise IOErr(f"read_json(): {full} line {e.lineno}, column {e.colno}: {e.msg}") from None
    except RecursionError:
        raise IOErr(f"read_json(): {full} nests arrays or objects too deeply (up to {JSON_MAX_DEPTH} levels are "
                    f"always read)") from None


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


JSON_MAX_DEPTH = 1000       # arrays/objects inside each other, read or written


def _json_number(x: float, where: str):
    if not _math.isfinite(x):
        raise _ValueErr(f"write_json(): {where or 'value'} is {format_value(x)}, which JSON cannot hold "
                        f"(it has no NaN or infinity)")
    return int(x) if x.is_integer() and abs(x) < 2.0 ** 53 and not (x == 0 and _math.copysign(1, x) < 0) else x


def _to_json(v, where: str, depth: int = 0):
    r = raw(v)
    if depth > JSON_MAX_DEPTH:      # json.dumps recurses on the C stack
        raise _ValueErr(f"write_json(): the value nests tuples and records more than {JSON_MAX_DEPTH} deep")
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
    raise TypeErr(f"write_json(): {where or 'value'} is {describe(r)}; JSON holds records, tuples, "
                  f"matrices, numbers, strings, bools and none")


@builtin("write_json", CAT, "Write a value as a JSON file (replacing it): records as objects, matrices as nested lists.",
         [P("path", "string", doc="the file to write; relative paths start at the script's directory"),
          P("value", doc="a record, tuple, matrix, number, string, bool or none (nested)")],
         returns="none", interp=True,
         what="Saves results or a configuration where other tools can read them; read_json gives back an "
              "equal value for records, numbers, strings, bools, none, non-empty vectors and matrices, and "
              "tuples that do not look like a vector (a tuple of numbers comes back as a vector).",
         how="Python's `json` writer with UTF-8 text (no \\u escapes), on one line plus a newline: a record "
             "becomes an object, a tuple a list, a vector a list, a matrix nested lists (row-major), none "
             "null. Numbers are written as Python's `repr` (exact for float64); whole numbers below 2^53 "
             "without \".0\". Written to a temporary file and renamed over path, as save does.",
         errors=["ValueError naming the place of a NaN or infinite number (JSON has none)",
                 "TypeError naming the place of a function or other value JSON cannot hold",
                 "IOError when the directory does not exist or cannot be written, or path is not a regular file"],
         examples=["write_json(\"/tmp/tapeml_doc_w.json\", {name = \"run 1\", loss = 0.25, w = [1, 2; 3, 4], tags = (\"a\", true, none)})\n"
                   "print(read_text(\"/tmp/tapeml_doc_w.json\"))\nread_json(\"/tmp/tapeml_doc_w.json\").w"])
def write_json(interp, path, value):
    with _json_stack():
        text = _json.dumps(_to_json(value, ""), ensure_ascii=False, allow_nan=False) + "\n"
    from tapeml import limits
    limits.check_string_bytes("write_json(): the JSON text", limits.utf8_len(text))
    atomic_write("write_json", resolve_path(interp, path), lambda f: f.write(text), binary=False)
    return None


@builtin("file_exists", CAT, "Whether path names an existing file (a directory gives false).",
         [P("path", "string", doc="relative paths start at the script's directory")],
         returns="bool", interp=True,
         what="Tests for a file before reading it, e.g. to resume from a checkpoint when there is one: "
              "if file_exists(\"ckpt.npz\") params = load(\"ckpt.npz\") end.",
         how="Python's `os.path.isfile` on the resolved path: true for a regular file (or a link to one); "
             "false for a directory, a device, a pipe, a broken link or nothing.",
         errors=["TypeError when path is not a string"],
         examples=["write_text(\"/tmp/tapeml_doc_exists.txt\", \"x\")\nfile_exists(\"/tmp/tapeml_doc_exists.txt\")",
                   "file_exists(\"/tmp/no/such/file\")", "file_exists(\"/tmp\")"])
def file_exists(interp, path):
    return os.path.isfile(resolve_path(interp, path))


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
        tensors[key] = np.array(a, order="C")       # (ascontiguousarray would make a 0-d array 1-d)
    blob = st_save(tensors, metadata={_ORDER_KEY: _json.dumps([k for k, _ in items])})
    atomic_write("save", full, lambda f: f.write(blob), binary=True)


def load_safetensors(full: str):
    """The tree in a .safetensors file: the keys are save's field paths (Hugging Face's
    'layers.0.wq' is read as layers[0].wq); the size guard sees every shape before reading."""
    from tapeml import limits
    try:
        from safetensors import safe_open
        with safe_open(full, framework="np") as f:
            keys = list(f.keys())
            meta = f.metadata() or {}
            dtypes = {}
            for k in keys:
                sl = f.get_slice(k)
                limits.check_elements(f"load(): '{k}' in {full}", tuple(sl.get_shape()))
                dtypes[k] = sl.get_dtype()
            tensors = {k: f.get_tensor(k) for k in keys if dtypes[k] != "BF16"}
        if len(tensors) < len(keys):
            tensors.update(_bf16_tensors(full, [k for k in keys if dtypes[k] == "BF16"]))
    except (IOErr, _ValueErr):
        raise
    except Exception as e:          # safetensors_rust.SafetensorError, a truncated or foreign file
        what = str(e).split("\n")[0]
        if "data type" in what.lower() or "dtype" in what.lower() or "not supported" in what.lower():
            raise IOErr(f"load(): {full} holds a tensor of a type tapeml cannot read (float64, float32, "
                        f"float16, bfloat16, integers and bools are read)") from None
        raise IOErr(f"load(): {full} is damaged or not a .safetensors file ({what})") from None
    order = keys
    try:
        saved = _json.loads(meta.get(_ORDER_KEY, "null"))
        if isinstance(saved, list) and sorted(saved) == sorted(keys):
            order = saved
    except ValueError:
        pass
    out = []
    for key in order:
        a = tensors[key]
        if a.dtype.kind not in "fbiu":
            raise IOErr(f"load(): '{key}' in {full} has dtype {a.dtype}; checkpoints hold numbers")
        if a.dtype.kind in "iu" or (a.dtype.kind == "f" and a.dtype not in (np.float32, np.float64)):
            a = a.astype(np.float64)
        value = float(a) if a.ndim == 0 and a.dtype.kind == "f" else bool(a) if a.ndim == 0 else a
        out.append((re.sub(r"\.([0-9]+)(?=\.|$)", r"[\1]", key), value))
    return unflatten(out, full)


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
