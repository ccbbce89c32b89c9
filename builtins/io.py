"""IO: read_text and write_text; save and load parameter trees (records and tuples of matrices) as .npz checkpoints.

Format: a plain NumPy .npz (a zip of .npy files), one array per leaf, named by its field
path from the root: `tok`, `heads[0].wq`, `blocks[1].ln1_gamma`; a tuple at the root gives
keys `[0]`, `[1].w`, ... Numbers are stored as 0-d float64 arrays and come back as numbers.
Any NumPy can read the file (`numpy.load(path)["heads[0].wq"]`), and `load` never unpickles.

`save` writes to a temporary file in the target's directory and renames it over the target
(`os.replace`, atomic on POSIX and Windows), so a crash mid-write never leaves a
half-written checkpoint behind.
"""
from __future__ import annotations

import re
import zipfile
import zlib

import numpy as np

from tapeml.builtins.registry import P, builtin
from tapeml.builtins.files import atomic_write, existing_file, read_limited, resolve_path
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


@builtin("save", CAT, "Write a record or tuple of matrices to a .npz checkpoint, atomically.",
         [P("path", "string", doc="the file to write (relative paths start at the script's directory)"),
          P("value", doc="a record or tuple (nested) of numbers and matrices, e.g. model parameters")],
         returns="none", interp=True,
         what="Saves model parameters (or an optimizer state) so that load(path) gives back exactly the "
              "same values. Each matrix is stored under its field path, e.g. \"heads[0].wq\", so Python can "
              "read the file with numpy.load.",
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


@builtin("load", CAT, "Read a checkpoint written by save: the same record or tuple of matrices.",
         [P("path", "string", doc="a .npz file written by save (relative paths start at the script's directory)")],
         returns="the record or tuple that was saved", interp=True,
         what="The inverse of save: load(path) equals the value given to save, field for field and bit for bit.",
         how="numpy.load with allow_pickle=False (a checkpoint can never run code), then the tree is "
             "rebuilt from the field paths of the array names (\"heads[0].wq\" is field wq of item 0 of "
             "field heads). 0-d arrays come back as numbers. float32 and float64 matrices keep their "
             "precision (a float32 run resumes in float32); integer arrays become float64.",
         errors=["IOError when the file is missing, truncated, or not an .npz archive",
                 "IOError when an array name is not a field path (a file not written by save)"],
         examples=["save(\"/tmp/tapeml_doc_ckpt2.npz\", ([1, 2], {b = 0.5}))\n"
                   "load(\"/tmp/tapeml_doc_ckpt2.npz\")"])
def load(interp, path):
    full = existing_file("load", resolve_path(interp, path), "a checkpoint")
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


@builtin("read_text", "IO", "The contents of a UTF-8 text file as a string.",
         [P("path", "string", doc="a file path; relative paths start at the script's directory")],
         returns="string", interp=True,
         what="Reads a whole text file, e.g. the training text of a character-level language model.",
         how="Python's `open(path, encoding=\"utf-8\").read()`; line endings are kept as they are in the "
             "file. A relative path is resolved against the directory of the running script (as "
             "`import` does), or the current directory in the REPL and with -c.",
         errors=["IOError when the file does not exist, is a directory or not a regular file (a device such "
                 "as /dev/zero, a pipe), or is not valid UTF-8 (the message names the line and column)",
                 "ValueError when the file is larger than the string limit, 0.1 GB"],
         examples=["write_text(\"/tmp/tapeml_doc_text.txt\", \"to be, or not to be\\n\")\n"
                   "text = read_text(\"/tmp/tapeml_doc_text.txt\")\nlen(text)"])
def read_text(interp, path):
    full = existing_file("read_text", resolve_path(interp, path), "a file")
    try:
        with open(full, "rb") as f:
            data = read_limited(f, "read_text", full)
    except OSError as e:
        raise IOErr(f"read_text(): cannot read {full}: {e.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        from tapeml.lexer import utf8_error_place
        line, col = utf8_error_place(data, e.start)
        raise IOErr(f"read_text(): {full} is not UTF-8 text: byte 0x{data[e.start]:02X} at line {line}, "
                    f"column {col} cannot start or continue a character") from None


@builtin("write_text", "IO", "Write a string to a UTF-8 text file (replacing it), atomically.",
         [P("path", "string", doc="a file path; relative paths start at the script's directory"),
          P("text", "string")],
         returns="none", interp=True,
         what="Saves a string as a text file, replacing what was there, e.g. generated text or a log; "
              "read_text gives the same string back.",
         how="Writes to a temporary file in the same directory, then renames it over path (os.replace), "
             "so readers never see a half-written file. No newline is added.",
         errors=["IOError when the directory does not exist or cannot be written, or path is a directory",
                 "TypeError when path or text is not a string"],
         examples=["write_text(\"/tmp/tapeml_doc_text2.txt\", \"abc\")\nread_text(\"/tmp/tapeml_doc_text2.txt\")"])
def write_text(interp, path, text):
    atomic_write("write_text", resolve_path(interp, path), lambda f: f.write(text), binary=False)
    return None
