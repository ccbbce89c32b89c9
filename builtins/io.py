"""IO: read_text and write_text; save and load parameter trees (records and tuples of matrices) as
.npz or .safetensors checkpoints.

Format: a plain NumPy .npz (a zip of .npy files) or a .safetensors file, one array per leaf,
named by its path from the root in PyTorch's state-dict spelling: `tok`, `heads.0.wq`,
`blocks.1.ln1_gamma`; a tuple at the root gives `0.weight`, `1.w`, ... (nn.Sequential's names),
and an empty record in a tuple (a layer without parameters) gives none. Numbers are stored as
0-d float64 arrays and come back as numbers. Any NumPy can read the file
(`numpy.load(path)["heads.0.wq"]`), torch's load_state_dict takes its names, and `load` never
unpickles; it reads tapeml's earlier names (`heads[0].wq`) too.

Every writer here (save, write_text, write_csv, write_json) goes through the one writer of
builtins/files.py (`atomic_write`): a temporary file renamed over the target, links followed,
mode and owner kept; its docstring and WRITER_HOW (the shared paragraph of their pages) say how.
"""
from __future__ import annotations

import array
import csv as _csv
import itertools
import json as _json
import os
import zipfile
import zlib

import numpy as np

from tapeml.builtins.registry import P, builtin, one_of
from tapeml.builtins.files import WRITER_ERRORS, WRITER_HOW, atomic_write, existing_file, note_written, resolve_path
from tapeml.array import backend as B
from tapeml.builtins.formats import (JSON_MAX_DEPTH, _csv_number, _csv_rows, _from_json, _is_header, _json_stack,
                                     _number_text, _read_utf8, _to_json, check_load_total, file_key, flatten,
                                     file_value, read_utf8, load_safetensors, matrix_from_file, save_safetensors, unflatten)
from tapeml.syntax.errors import IOErr, TypeErr
from tapeml.syntax.errors import ValueErr as _ValueErr
from tapeml.array.tape import raw
from tapeml.array.values import Dict, Record, describe
from tapeml.array.printer import format_value

CAT = "IO"


@builtin("save", CAT, "Write a record or tuple of matrices to a .npz or .safetensors checkpoint, atomically.",
         [P("path", "string", doc="the file to write: .safetensors for that format, else .npz (relative paths "
                                  "start at the script's directory)"),
          P("value", doc="a record or tuple (nested) of numbers and matrices, e.g. model parameters")],
         returns="none", context=True,
         what="Saves model parameters (or an optimizer state) so that load(path) gives back exactly the "
              "same values. Each matrix is stored under its path in PyTorch's state-dict spelling, e.g. "
              "\"heads.0.wq\" for heads[0].wq and \"0.weight\" for item 0 of a tuple (nn.Sequential's names), "
              "so Python reads the file with numpy.load and a PyTorch model takes it with load_state_dict. A "
              "path ending in .safetensors writes the safetensors format (Hugging Face's, no pickles) with "
              "the same names, which Python reads with safetensors.torch.load_file. An empty record in a "
              "tuple (a layer without parameters, as nn.ReLU's empty state dict) writes no names.",
         how="A NumPy .npz archive (uncompressed zip of .npy files in row-major order, no pickles); "
             "float64 values are stored bit for bit, and the file is byte for byte the same on every "
             "device (a torch:cuda run's checkpoint is a NumPy run's). " + WRITER_HOW,
         errors=["TypeError naming the path of a leaf that is not a number or matrix (a string, a function)",
                 "TypeError when value is not a record or tuple, or holds a dictionary (its keys are no field "
                 "paths: write_json writes one)",
                 "ValueError when value nests records and tuples more than 1000 deep",
                 WRITER_ERRORS],
         examples=["params = {w = [1, 2; 3, 4], heads = ({wq = [0.5, 0.25]},), step = 3}\n"
                   "save(\"/tmp/tapeml_doc_ckpt.npz\", params)\n"
                   "load(\"/tmp/tapeml_doc_ckpt.npz\")"])
def save(ctx, path, value):
    r = raw(value)
    if not isinstance(r, (Record, tuple, Dict)):
        raise TypeErr(f"save(): value must be a record or a tuple of matrices, got {describe(value)}")
    items = flatten(r)
    full = resolve_path(ctx, path)
    if full.endswith(".safetensors"):
        save_safetensors(full, items)
        return note_written(ctx, "save", path, full)

    def write(f):
        with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            for key, arr in items:
                with zf.open(file_key(key) + ".npy", "w", force_zip64=True) as member:
                    # row-major always: the file is the same whatever the memory layout (a transposed
                    # view, a column-major result of torch's linalg) and the device
                    np.lib.format.write_array(member, np.asarray(arr, order="C"), allow_pickle=False)
    atomic_write("save", full, write, binary=True)
    return note_written(ctx, "save", path, full)


def _declared_shape(data, key: str, full: str) -> tuple:
    """The shape an array's .npy header declares, read without reading the array: refused when
    its type is not a number type, when it alone passes the element limit (lang/array/limits.py), or
    when its entry in the zip holds fewer bytes than the header promises (a damaged file)."""
    from tapeml.array import limits
    from tapeml.array.number_text import format_gb
    name = key + ".npy" if key + ".npy" in data.zip.namelist() else key
    with data.zip.open(name) as member:
        version = np.lib.format.read_magic(member)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(member)
        else:
            shape, _, dtype = np.lib.format.read_array_header_2_0(member)
        start = member.tell()
    if dtype.hasobject:
        raise IOErr(f"load(): {full} holds pickled objects, which load() refuses to read")
    if dtype.kind not in "fbiu" or dtype.shape:
        # strings and records: refused before reading (a string type of 400 MB an element passed
        # the element count, and 10 of them were read, 4 GB, before the refusal)
        raise IOErr(f"load(): '{key}' in {full} has dtype {dtype}; checkpoints hold numbers")
    limits.check_elements(f"load(): '{key}' in {full}", shape)
    need = start + int(np.prod(shape, dtype=object)) * dtype.itemsize
    held = data.zip.getinfo(name).file_size
    if need > held:
        raise IOErr(f"load(): {full} is damaged or truncated: the array '{key}' needs {format_gb(need)} "
                    f"but its entry holds {format_gb(held)}")
    return shape


def _refuse_torch_pickle(full):
    """torch.save writes a zip holding a pickle (<name>/data.pkl), which load() does not run: say
    so, and how to write the same state dict in a format load() reads."""
    try:
        with zipfile.ZipFile(full) as z:
            pickled = any(n == "data.pkl" or n.endswith("/data.pkl") for n in z.namelist())
    except Exception:   # noqa: BLE001 - a damaged zip (any of zipfile's errors): load's own reading says so
        return
    if pickled:
        raise IOErr(f"load(): {full} is a PyTorch pickle (torch.save), which load() does not read (a pickle "
                    f"runs code); save the state dict as safetensors in Python: "
                    f"safetensors.torch.save_file(model.state_dict(), 'model.safetensors'), then load that")


@builtin("load", CAT, "Read a .npz or .safetensors checkpoint (save's, or a PyTorch state dict's): a record or tuple of matrices.",
         [P("path", "string", doc="a .npz or .safetensors file, written by save or from a PyTorch state dict "
                                  "(relative paths start at the script's directory)"),
          P("dtype", "string", None, doc="\"float32\" or \"float64\": every float matrix converted to it "
            "(none: each as stored)", check=one_of("float32", "float64"),
            constraint='"float32", "float64" or none')],
         returns="the record or tuple that was saved", context=True,
         what="The inverse of save: load(path) equals the value given to save, field for field and bit for bit. "
              "It reads a PyTorch model's weights too, saved from Python with "
              "safetensors.torch.save_file(model.state_dict(), path) (or numpy.savez): the numbered names of "
              "an nn.Sequential (\"0.weight\", \"0.bias\", \"2.weight\") become a tuple of records in "
              "PyTorch's order, sd[0].weight being model[0].weight (tapeml counts from 0 as PyTorch does), "
              "with an empty record for a layer without parameters (the ReLU at 1); save writes the same "
              "names back, for load_state_dict.",
         how="numpy.load with allow_pickle=False (a checkpoint can never run code; a torch.save .pt file "
             "is a pickle and is not read), then the tree is rebuilt from the array names: \"heads.0.wq\" "
             "(and tapeml's earlier \"heads[0].wq\") is field wq of item 0 of field heads. 0-d arrays come "
             "back as numbers. float32 and float64 matrices keep their "
             "precision (a float32 run resumes in float32); integer arrays become float64. A path ending in "
             ".safetensors is read with the safetensors library (numpy API), its size guard checking "
             "every shape before a tensor is read; the field order of a file written by save is kept (in "
             "its metadata; another file's names come in the library's sorted order); "
             "bfloat16 and float16 tensors are widened exactly to float64. The matrices are made on the "
             "session's device (set_device), whichever device saved the file. dtype converts every matrix "
             "stored as floats, as a float32 run of float64 weights wants (float64 wins in arithmetic, so "
             "kept float64 weights would run the whole model in float64); integer arrays (ids) stay "
             "float64, exact.",
         errors=["IOError when the file is a PyTorch pickle (torch.save's .pt: the message says how to write "
                 "safetensors instead)",
                 "IOError when the file is missing, truncated, or not an .npz archive or a .safetensors file "
                 "(a damaged .safetensors file: the tensor whose shape and offsets disagree is named)",
                 "IOError when an array name is not a field path (\"heads.0.wq\", \"0.weight\"), an array "
                 "holds strings, records or pickled objects, or the names nest more than 1000 deep",
                 "ValueError when an array, or all of them together, would pass the element limit: counted "
                 "from the file's headers before any array is read, so a small compressed file that would "
                 "expand to gigabytes (a zip bomb) is refused at once"],
         examples=["save(\"/tmp/tapeml_doc_ckpt2.npz\", ([1, 2], {b = 0.5}))\n"
                   "load(\"/tmp/tapeml_doc_ckpt2.npz\")",
                   "save(\"/tmp/tapeml_doc_ckpt3.npz\", {w = [1, 2]})   # float64\n"
                   "dtype(load(\"/tmp/tapeml_doc_ckpt3.npz\", dtype = \"float32\").w)",
                   "# an nn.Sequential(Linear, ReLU, Linear)'s names: 0.weight, 0.bias, 2.weight, 2.bias\n"
                   "save(\"/tmp/tapeml_doc_seq.safetensors\", ({weight = [1, 2; 3, 4], bias = [0, 1]}, {}, "
                   "{weight = [1, 1], bias = 0.5}))\n"
                   "sd = load(\"/tmp/tapeml_doc_seq.safetensors\")\nsd[2].weight\nsd[1]"])
def load(ctx, path, dtype):
    target = None if dtype is None else np.float32 if dtype == "float32" else np.float64
    full = existing_file("load", resolve_path(ctx, path), "a checkpoint")
    if full.endswith(".safetensors"):
        return load_safetensors(full, target)
    if not zipfile.is_zipfile(full):
        raise IOErr(f"load(): {full} is not a checkpoint (.npz archive written by save); it may be "
                    f"truncated or another kind of file")
    _refuse_torch_pickle(full)
    items = []
    try:
        with np.load(full, allow_pickle=False) as data:
            if not isinstance(data, np.lib.npyio.NpzFile):
                raise IOErr(f"load(): {full} is not an .npz archive")
            # the size guard, from the headers before any array is read: each array, then all of
            # them together (a small compressed file can expand past the limit: a zip bomb)
            check_load_total(full, [_declared_shape(data, key, full) for key in data.files])
            for key in data.files:
                items.append((key, data[key]))
    except IOErr:
        raise
    except ValueError as e:
        if "pickle" in str(e).lower():
            raise IOErr(f"load(): {full} holds pickled objects, which load() refuses to read") from None
        raise IOErr(f"load(): {full} is damaged or not a checkpoint written by save()") from None
    except (OSError, EOFError, zipfile.BadZipFile, KeyError, NotImplementedError, RuntimeError,
            zlib.error, OverflowError, MemoryError):
        # corrupted headers: an unknown compression method, an "encrypted" flag, a broken stream
        raise IOErr(f"load(): {full} is damaged or truncated") from None
    return unflatten([(key, file_value(a, key, full, target)) for key, a in items], full)


@builtin("read_text", "IO", "The contents of a UTF-8 text file as a string.",
         [P("path", "string", doc="a file path; relative paths start at the script's directory")],
         returns="string", context=True,
         what="Reads a whole text file, e.g. the training text of a character-level language model.",
         how="Python's `open(path, encoding=\"utf-8\").read()`; line endings are kept as they are in the "
             "file. A relative path is resolved against the directory of the running script (as "
             "`import` does), or the current directory in the REPL and with -c.",
         errors=["IOError when the file does not exist, is a directory or not a regular file (a device such "
                 "as /dev/zero, a pipe), or is not valid UTF-8 (the message names the line and column)",
                 "ValueError when the file is larger than the string limit, 0.1 GB"],
         examples=["write_text(\"/tmp/tapeml_doc_text.txt\", \"to be, or not to be\\n\")\n"
                   "text = read_text(\"/tmp/tapeml_doc_text.txt\")\nlen(text)"])
def read_text(ctx, path):
    return read_utf8("read_text", ctx, path)[1]


@builtin("write_text", "IO", "Write a string to a UTF-8 text file (replacing it), atomically.",
         [P("path", "string", doc="a file path; relative paths start at the script's directory"),
          P("text", "string")],
         returns="none", context=True,
         what="Saves a string as a text file, replacing what was there, e.g. generated text or a log; "
              "read_text gives the same string back.",
         how="The text is written as UTF-8; no newline is added. " + WRITER_HOW,
         errors=[WRITER_ERRORS, "TypeError when path or text is not a string"],
         examples=["write_text(\"/tmp/tapeml_doc_text2.txt\", \"abc\")\nread_text(\"/tmp/tapeml_doc_text2.txt\")"])
def write_text(ctx, path, text):
    atomic_write("write_text", full := resolve_path(ctx, path), lambda f: f.write(text), binary=False)
    note_written(ctx, "write_text", path, full)
    return None


@builtin("read_csv", CAT, "The numbers of a CSV file as a matrix (a header row is skipped).",
         [P("path", "string", doc="a CSV file; relative paths start at the script's directory"),
          P("header", default="auto", doc="\"auto\": the first row is a header when one of its fields is not a "
            "number; true: the first row is a header; false: there is none")],
         returns="[rows, columns]", context=True,
         what="Loads a table of numbers, e.g. a data set: each line a row, fields separated by commas. The "
              "result is always a matrix (a single column gives an N x 1 matrix; take m[:, 0] for a vector). "
              "Read the column names with csv_header(path); a table with text columns is read by "
              "read_columns(path), by column name.",
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
def read_csv(ctx, path, header):
    from tapeml.array import limits
    header = bool(header) if isinstance(header, np.bool_) else header
    if not (header is True or header is False or (isinstance(header, str) and header == "auto")):
        raise _ValueErr(f"read_csv(): header must be \"auto\", true or false, got {format_value(header, True)}")
    full, text = _read_utf8("read_csv", ctx, path)
    rows = _csv_rows("read_csv", full, text)
    first = next(rows, None)
    if first is not None and (header is True or (header == "auto" and _is_header(first[1]))):
        first = next(rows, None)
    if first is None:
        return matrix_from_file(np.zeros((0, 0)))
    first_line, width = first[0], len(first[1])
    # one row of strings at a time into 8 bytes a number (a list of all rows took 28x the file)
    values = array.array("d")
    plain = "_" not in text                     # then float() reads every cell as _csv_number does
    n = 0
    for line, fields_ in itertools.chain([first], rows):
        if len(fields_) != width:
            raise IOErr(f"read_csv(): {full} line {line} has {len(fields_)} field{'s' * (len(fields_) != 1)}, "
                        f"but line {first_line} has {width}; every row needs the same number")
        try:
            row = [float(cell) for cell in fields_] if plain else [_csv_number(cell) for cell in fields_]
        except ValueError:
            row = [None]
        if None in row:
            c, cell = next((c, cell) for c, cell in enumerate(fields_) if _csv_number(cell) is None)
            shown = "an empty field" if cell.strip() == "" else f"\"{cell}\", which is not a number"
            hint = "" if cell.strip() == "" else "; read_columns(path) reads a table with text columns"
            raise IOErr(f"read_csv(): {full} line {line}, column {c + 1}: {shown}{hint}")
        values.extend(row)
        n += 1
        if len(values) > limits.MAX_ELEMENTS:
            limits.check_elements(f"read_csv(): {full}", (n, width))
    limits.check_elements(f"read_csv(): {full}", (n, width))
    return matrix_from_file(np.frombuffer(values, dtype=np.float64).reshape(n, width))


@builtin("csv_header", CAT, "The fields of a CSV file's first row, as a tuple of strings.",
         [P("path", "string", doc="a CSV file; relative paths start at the script's directory")],
         returns="a tuple of strings", context=True,
         what="The column names of a table read with read_csv: csv_header(path)[j] names column j of "
              "read_csv(path). The first (non-blank) row is returned as it is written, whether or not it "
              "is numbers; an empty file gives ().",
         how="Python's `csv` reader on the first non-blank row; quotes around a field are removed.",
         errors=["IOError when the file does not exist, is not UTF-8, or is malformed CSV"],
         examples=["write_csv(\"/tmp/tapeml_doc_head.csv\", [1, 2; 3, 4], header=(\"width\", \"height, cm\"))\n"
                   "csv_header(\"/tmp/tapeml_doc_head.csv\")"])
def csv_header(ctx, path):
    full, text = _read_utf8("csv_header", ctx, path)
    first = next(_csv_rows("csv_header", full, text), None)        # the first row only
    return tuple(first[1]) if first is not None else ()


@builtin("read_columns", CAT, "The columns of a CSV file by name: numbers as vectors, text as tuples of strings.",
         [P("path", "string", doc="a CSV file whose first row names the columns; relative paths start at the "
                                  "script's directory")],
         returns="a dictionary: column name -> vector or tuple of strings", context=True,
         what="Loads a table that mixes numbers and text in one call, e.g. a data set with a label column: "
              "t = read_columns(path), then t[\"age\"] is a vector and t[\"name\"] a tuple of strings. "
              "keys(t) gives the names in file order. read_csv reads a table of numbers only, as one matrix.",
         how="Python's `csv` reader, as read_csv reads (quotes around a field holding a comma, blank lines "
             "skipped, a UTF-8 byte order mark dropped). The first row gives the names. A column is numbers "
             "when each of its cells is a number or empty and at least one is a number (an empty cell is nan, "
             "as pandas reads it): a vector in the session's float type. Any other column is a tuple of its "
             "cells as written. Like pandas' `read_csv(path)` followed by a dict of its columns.",
         errors=["IOError naming the line when a row has a different number of fields than the header",
                 "IOError naming a column name given twice",
                 "IOError when the file does not exist, is not UTF-8, or is malformed CSV (an unclosed quote)",
                 "ValueError when the file passes the string limit (0.1 GB) or the table the element limit"],
         examples=["write_text(\"/tmp/tapeml_doc_cols.csv\", \"name,age,height cm\\nana,31,1.62\\nbo,,1.80\\ncy,45,1.75\\n\")\n"
                   "t = read_columns(\"/tmp/tapeml_doc_cols.csv\")\nt[\"name\"]\nt[\"age\"]\nmean(t[\"height cm\"])\nkeys(t)"])
def read_columns(ctx, path):
    from tapeml.array import limits
    full, text = _read_utf8("read_columns", ctx, path)
    rows = _csv_rows("read_columns", full, text)
    first = next(rows, None)
    if first is None:
        return Dict()
    head_line, names = first
    seen = {}
    for j, name in enumerate(names):
        if name in seen:
            raise IOErr(f"read_columns(): {full} line {head_line}: the column name \"{name}\" is given twice "
                        f"(columns {seen[name] + 1} and {j + 1}); names must differ to be keys")
        seen[name] = j
    width = len(names)
    cols = [[] for _ in names]
    n = 0
    for line, fields_ in rows:
        if len(fields_) != width:
            raise IOErr(f"read_columns(): {full} line {line} has {len(fields_)} field{'s' * (len(fields_) != 1)}, "
                        f"but the header (line {head_line}) names {width}; every row needs the same number")
        for col, cell in zip(cols, fields_):
            col.append(cell)
        n += 1
        if n * width > limits.MAX_ELEMENTS:
            limits.check_elements(f"read_columns(): {full}", (n, width))
    out = {}
    for name, col in zip(names, cols):
        numbers = [None if cell.strip() == "" else _csv_number(cell) for cell in col]
        blanks = sum(1 for cell in col if cell.strip() == "")
        if blanks < len(col) and all(x is not None or cell.strip() == "" for x, cell in zip(numbers, col)):
            out[name] = matrix_from_file(np.array([np.nan if x is None else x for x in numbers], dtype=np.float64))
        else:
            out[name] = tuple(col)
    return Dict(out)


@builtin("write_csv", CAT, "Write a matrix to a CSV file (replacing it), every float64 exactly.",
         [P("path", "string", doc="the file to write; relative paths start at the script's directory"),
          P("m", "array", shape="a number, [N] or [N, M]", doc="a vector is written as one column"),
          P("header", "tuple", default=None, doc="column names, one string per column")],
         returns="none", context=True,
         what="Saves a table of numbers that read_csv (or any spreadsheet, pandas, NumPy) reads back: one "
              "line per row, fields separated by commas, an optional first line of names.",
         how="Each number is written as Python's `repr` of the float64 (the shortest text that reads back "
             "as the same float, so read_csv(path) equals m bit for bit, -0.0, 1e-300, nan and inf "
             "included); whole numbers below 2^53 are written without \".0\". A float32 matrix is "
             "widened to float64 first (exact). Names holding a comma or a quote are quoted (Python's "
             "`csv` writer). Lines end with \"\\n\". A vector becomes one column (N rows), as NumPy's "
             "`savetxt` writes it; a number a 1 x 1 table; bools are written as 1 and 0. " + WRITER_HOW,
         errors=["ValueError when header does not have one string per column",
                 "ShapeError when m has more than 2 axes", WRITER_ERRORS],
         examples=["write_csv(\"/tmp/tapeml_doc_w.csv\", [1, 0.1; -0.0, 1e-300], header=(\"a\", \"b\"))\n"
                   "print(read_text(\"/tmp/tapeml_doc_w.csv\"))\n"
                   "all(read_csv(\"/tmp/tapeml_doc_w.csv\") == [1, 0.1; -0.0, 1e-300])"])
def write_csv(ctx, path, m, header):
    from tapeml.syntax.errors import ShapeError
    a = np.asarray(B.to_numpy(raw(m)))
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
    full = resolve_path(ctx, path)

    def write(f):
        if names is not None:
            _csv.writer(f, lineterminator="\n").writerow(names)
        for row in a.tolist():
            f.write(",".join(_number_text(x) for x in row) + "\n")
    atomic_write("write_csv", full, write, binary=False)
    note_written(ctx, "write_csv", path, full)
    return None


# Python's json parser's words for a syntax error, in tapeml's (its own text never reaches a user)
_JSON_PROBLEMS = [
    ("Expecting value", "a value was expected (a number, a string, a list, an object, true, false or null)"),
    ("Expecting ':' delimiter", "a ':' was expected after the key"),
    ("Expecting ',' delimiter", "a ',' was expected between two items"),
    ("Expecting property name", "a key in double quotes was expected (JSON keys are quoted, and a ',' needs "
                                "an item after it)"),
    ("Unterminated string", "a string starts here and is never closed"),
    ("Extra data", "more text follows the end of the JSON value"),
    ("Invalid control character", "a control character (a tab or a line break) inside a string; write \\t or \\n"),
    ("Invalid \\uXXXX escape", "a \\u escape needs four hexadecimal digits"),
    ("Invalid \\escape", "an escape JSON does not have (its escapes are \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)"),
    ("Illegal trailing comma", "a ',' before the closing bracket (JSON allows no trailing comma)"),
]


def _json_problem(msg: str) -> str:
    return next((ours for theirs, ours in _JSON_PROBLEMS if msg.startswith(theirs)), "this is not valid JSON")


@builtin("read_json", CAT, "A JSON file as a tapeml value: objects are records (or dictionaries), arrays of numbers matrices.",
         [P("path", "string", doc="a JSON file; relative paths start at the script's directory"),
          P("objects", "string", "auto", check=one_of("auto", "dict"), constraint='one of "auto", "dict"',
            doc="\"auto\": an object whose keys are all names is a record, any other a dictionary; "
                "\"dict\": every object is a dictionary")],
         returns="a record, dictionary, tuple, matrix, number, string, bool or none", context=True,
         what="Loads configuration and results, e.g. a model's config.json: cfg = read_json(path), then "
              "cfg.n_heads. An object keyed by data rather than names (model names such as \"gpt2-medium\", "
              "a vocabulary, numbers as text) comes back as a dictionary, read as d[\"gpt2-medium\"]; "
              "objects=\"dict\" makes every object one (so the kind does not depend on the keys a file has).",
         how="Python's `json` parser, then: an object becomes a record when every key is a name (ASCII "
             "letters, digits and _, not a keyword; its keys the field names, in file order), else a "
             "dictionary with the keys as strings, in file order; a non-empty rectangular list of numbers (nested to any depth, "
             "[1, 2] or [[1, 2], [3, 4]]) becomes a vector or matrix in the session's float type; any "
             "other list (mixed items, ragged rows, bools, an empty list) becomes a tuple; numbers become "
             "numbers, strings strings, true/false bools, null none. NaN and Infinity (which Python "
             "writes, though JSON has no such numbers) are read too. Every number is read as the float64 "
             "it spells, integers of any length included (a number past 1.8e308, 1e999 or an integer of "
             "400 digits, is inf).",
         errors=["IOError naming the line and column of a JSON syntax error",
                 "IOError when the file does not exist or is not UTF-8",
                 "ValueError when objects is not \"auto\" or \"dict\"",
                 "ValueError when the file passes the string limit (0.1 GB) or an array the element limit"],
         examples=["write_text(\"/tmp/tapeml_doc.json\", \"{{\\\"n_heads\\\": 4, \\\"dims\\\": [64, 128], \\\"name\\\": \\\"tiny\\\", \\\"w\\\": [[1, 2], [3, 4]], \\\"tags\\\": [\\\"a\\\", 1]}}\")\n"
                   "cfg = read_json(\"/tmp/tapeml_doc.json\")\ncfg.n_heads * 2\ncfg.w\ncfg.tags",
                   "write_text(\"/tmp/tapeml_doc_models.json\", \"{{\\\"gpt2\\\": 124, \\\"gpt2-medium\\\": 350}}\")\n"
                   "sizes = read_json(\"/tmp/tapeml_doc_models.json\")\nsizes[\"gpt2-medium\"]\nkeys(sizes)"])
def read_json(ctx, path, objects):
    full, text = _read_utf8("read_json", ctx, path)
    # The C parser recurses on the C stack, checked only against the recursion limit, which the
    # CLI raises for deep tapeml recursion: parse under a limit of JSON_MAX_DEPTH more levels, so
    # a deeply nested file is a RecursionError here, not a segfault.
    try:
        with _json_stack():
            # parse_int=float: an integer of any length is read as the float64 it spells (5,000
            # digits give inf, as 1e999 does), never through int(), which stops at 4,300 digits
            return _from_json(_json.loads(text, parse_int=float), full, "", objects)
    except _json.JSONDecodeError as e:
        raise IOErr(f"read_json(): {full} line {e.lineno}, column {e.colno}: {_json_problem(e.msg)}") from None
    except RecursionError:
        raise IOErr(f"read_json(): {full} nests arrays or objects too deeply (up to {JSON_MAX_DEPTH} levels are "
                    f"always read)") from None


@builtin("write_json", CAT, "Write a value as a JSON file (replacing it): records and dictionaries as objects, matrices as nested lists.",
         [P("path", "string", doc="the file to write; relative paths start at the script's directory"),
          P("value", doc="a record, dictionary (string keys), tuple, matrix, number, string, bool or none (nested)")],
         returns="none", context=True,
         what="Saves results or a configuration where other tools can read them; read_json gives back an "
              "equal value for records, dictionaries with string keys that are not all names, numbers, strings, bools, none, non-empty vectors and matrices, and "
              "tuples that do not look like a vector (a tuple of numbers comes back as a vector).",
         how="Python's `json` writer with UTF-8 text (no \\u escapes), on one line plus a newline: a record "
             "or a dictionary becomes an object (in its order), a tuple a list, a vector a list, a matrix nested lists (row-major), none "
             "null. Numbers are written as Python's `repr` (exact for float64); whole numbers below 2^53 "
             "without \".0\". " + WRITER_HOW,
         errors=["ValueError naming the place of a NaN or infinite number (JSON has none)",
                 "TypeError naming the place of a function or other value JSON cannot hold",
                 "TypeError naming a dictionary key that is not a string (JSON object keys are strings)",
                 "ValueError when value nests records and tuples more than 1000 deep", WRITER_ERRORS],
         examples=["write_json(\"/tmp/tapeml_doc_w.json\", {name = \"run 1\", loss = 0.25, w = [1, 2; 3, 4], tags = (\"a\", true, none)})\n"
                   "print(read_text(\"/tmp/tapeml_doc_w.json\"))\nread_json(\"/tmp/tapeml_doc_w.json\").w",
                   "write_json(\"/tmp/tapeml_doc_w2.json\", {\"gpt2-medium\": {n_layer = 24}, \"gpt2\": {n_layer = 12}})\n"
                   "print(read_text(\"/tmp/tapeml_doc_w2.json\"))\nread_json(\"/tmp/tapeml_doc_w2.json\")[\"gpt2-medium\"].n_layer"])
def write_json(ctx, path, value):
    with _json_stack():
        text = _json.dumps(_to_json(value, ""), ensure_ascii=False, allow_nan=False) + "\n"
    from tapeml.array import limits
    limits.check_string_bytes("write_json(): the JSON text", limits.utf8_len(text))
    atomic_write("write_json", full := resolve_path(ctx, path), lambda f: f.write(text), binary=False)
    note_written(ctx, "write_json", path, full)
    return None


@builtin("file_exists", CAT, "Whether path names an existing file (a directory gives false).",
         [P("path", "string", doc="relative paths start at the script's directory")],
         returns="bool", context=True,
         what="Tests for a file before reading it, e.g. to resume from a checkpoint when there is one: "
              "if file_exists(\"ckpt.npz\") params = load(\"ckpt.npz\") end.",
         how="Python's `os.path.isfile` on the resolved path: true for a regular file (or a link to one); "
             "false for a directory, a device, a pipe, a broken link or nothing.",
         errors=["TypeError when path is not a string"],
         examples=["write_text(\"/tmp/tapeml_doc_exists.txt\", \"x\")\nfile_exists(\"/tmp/tapeml_doc_exists.txt\")",
                   "file_exists(\"/tmp/no/such/file\")", "file_exists(\"/tmp\")"])
def file_exists(ctx, path):
    return os.path.isfile(resolve_path(ctx, path))


