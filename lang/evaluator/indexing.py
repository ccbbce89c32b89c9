"""The evaluator's indexing: `x[i]`, `x[i, j]`, ranges, `:` and `end` inside brackets, on
matrices, numbers, tuples and strings (docs/language.md, "Indexing"). A part of the
Interpreter class (lang/evaluator/interpreter.py), kept in its own module by job."""
from __future__ import annotations

import difflib
import math
import sys

import numpy as np

from tapeml.syntax import ast as A
from tapeml.array import context, limits, ops
from tapeml.array.backend import ARRAYS, to_numpy
from tapeml.syntax.unparse import unparse
from tapeml.syntax.errors import IndexErr, KeyErr, LangError, TypeErr, ValueErr, caret_lines
from tapeml.array.tape import raw
from tapeml.array.values import _ABSENT, Dict, Record, describe, dict_key, shape_text
from tapeml.array.printer import format_value, key_text, not_whole_text

NEW_AXIS_HINT = "; none is not an index: NumPy's x[:, None] (a new axis of length 1) is expand_dims(x, dim)"


def _number(text: str):
    """The number a string spells ("3" -> 3.0), or None: for the hint of a missing key."""
    try:
        return float(text)
    except ValueError:
        return None


class Indexing:
    """Interpreter methods for index expressions (mixed into Interpreter)."""

    def eval_index(self, node, env):
        obj = self.eval(node.obj, env)
        r = raw(obj)
        t = type(r)
        if t is np.ndarray or t in ARRAYS:
            if r.ndim == 0:                 # zeros(): indexed as the number it holds
                obj, r = ops.reshape(obj, shape=(1,)), r.reshape(1)
            idx = self.index_tuple(r, node, env)
            return ops.index(obj, idx=idx)
        if type(r) is Dict:
            key = self.dict_key_of(node, env)
            value = r.get(key)
            if value is _ABSENT:
                raise self.missing_key(r, key, node)
            return value
        if isinstance(r, tuple):
            if len(node.indices) == 1 and not isinstance(node.indices[0], (A.Range, A.Colon)):
                i = self.tuple_position(r, node, env, picks=True)
                if type(i) is int:
                    return r[i]
                return tuple([r[j] for j in i])         # t[[0, 2]]: the items picked, as a tuple
            idx = self.index_tuple(np.empty(len(r)), node, env)
            picked = np.arange(len(r))[idx]
            return tuple(r[i] for i in np.atleast_1d(picked))
        if isinstance(r, str):
            idx = self.index_tuple(np.empty(len(r)), node, env)
            picked = np.arange(len(r))[idx]
            return "".join(r[i] for i in np.atleast_1d(picked))
        if isinstance(r, (float, int)) and not isinstance(r, bool):
            idx = self.index_tuple(np.zeros(1), node, env)
            return ops.index(ops.reshape(obj, shape=(1,)), idx=idx)
        if isinstance(r, Record):
            first = node.indices[0] if len(node.indices) == 1 else None
            if type(first) is A.String and len(first.parts) == 1 and first.parts[0] in r.fields:
                hint = f"; this record has the field: write .{first.parts[0]}"
            elif r.fields:
                hint = ("; a dictionary, read by key, is written {\"key\": value} (from Python: a "
                        "tapeml.Dict; read_json(path, objects=\"dict\") reads every object as one)")
            else:
                hint = ""
            raise TypeErr("records are read by field name (r.name), not by index" + hint, node.span)
        raise TypeErr(f"cannot index {describe(obj)}", node.span)

    def dict_key_of(self, node, env):
        """The key of `d[k]` (values.dict_key); several indices are one tuple key, as Python reads
        d[a, b]. `end`, `:` and ranges have no meaning for a dictionary."""
        items = node.indices
        keys = []
        self.end_stack.append(None)             # `end` is no position here (eval_end says so)
        try:
            for item in items:
                if type(item) in (A.Colon, A.Range):
                    raise IndexErr("a dictionary is read by key: ranges and ':' pick positions, which a "
                                   "dictionary does not have (its keys: keys(d))", item.span)
                keys.append(self.eval(item, env))
        finally:
            self.end_stack.pop()
        span = items[0].span.to(items[-1].span)
        try:
            return dict_key(keys[0] if len(keys) == 1 else tuple(keys))
        except LangError as e:
            raise e.with_span(span) from None

    def missing_key(self, d, key, node) -> LangError:
        span = node.indices[0].span.to(node.indices[-1].span)
        keys = d.keys()
        hint = ""
        if type(key) is str:
            close = difflib.get_close_matches(key, [k for k in keys if type(k) is str], 1)   # data, not names
            if close:
                hint = f"; did you mean {format_value(close[0], True)}?"
            elif _number(key) is not None and _number(key) in keys:
                hint = f"; it has the number key {format_value(_number(key))}"
        elif type(key) is float and format_value(key) in keys:
            hint = f"; it has the string key \"{format_value(key)}\""
        shown = ", ".join(key_text(k) for k in keys[:5]) + (", ..." if len(keys) > 5 else "")
        return KeyErr(f"the dictionary has no key {key_text(key)}{hint} "
                      f"({len(keys)} key{'s' * (len(keys) != 1)}{': ' + shown if keys else ''}); "
                      f"get(d, key, default) reads a key that may be missing", span)

    def tuple_position(self, t, node, env, picks: bool = False):
        if len(node.indices) != 1:
            raise IndexErr(f"a tuple takes one index, got {len(node.indices)}", node.span)
        stand_in = np.empty(len(t))
        try:
            idx = self.index_tuple(stand_in, node, env)
        except IndexErr as e:     # the checks ran on a stand-in vector: name the tuple instead
            e.message = e.message.replace(describe(stand_in), f"a tuple of {len(t)} item{'s' if len(t) != 1 else ''}")
            raise
        i = idx[0]
        if isinstance(i, (int, np.integer)):
            return int(i)
        if picks and isinstance(i, np.ndarray) and i.ndim == 1:
            return [int(j) for j in i]          # an index vector or a bool mask: the positions
        if picks and isinstance(i, slice):
            return list(range(len(t)))[i]
        raise IndexErr("use a single whole-number index to pick a tuple item", node.span)

    def index_tuple(self, arr: np.ndarray, node, env) -> tuple:
        """The NumPy index for `arr[...]`, after checking every part (0-based, inclusive ranges,
        `end`). Each index makes its own axis in order (several index vectors pick the sub-matrix
        of all their combinations); ops.orthogonal builds the NumPy index that means that."""
        items = node.indices
        shape = arr.shape if type(arr) is np.ndarray else tuple(arr.shape)
        if len(items) > max(len(shape), 1) and not (len(shape) == 0):
            new_axis = any(type(i) is A.NoneLit or (type(i) is A.Name and i.name == "None") for i in items)
            hint = NEW_AXIS_HINT if new_axis else ""
            raise IndexErr(f"{len(items)} indices for {describe(arr)}{hint}", node.span)
        out = []
        vectors = []        # the axes indexed by a vector of numbers (for the note of grid_note)
        for axis, item in enumerate(items):
            n = shape[axis] if axis < len(shape) else 1
            t = type(item)
            if t is A.Colon:
                out.append(slice(None))
                continue
            if t is A.Range:
                self.end_stack.append(n - 1)
                try:
                    out.append(self.range_index(item, n, env, arr))
                finally:
                    self.end_stack.pop()
                continue
            self.end_stack.append(n - 1)
            try:
                v = raw(self.eval(item, env))
            finally:
                self.end_stack.pop()
            if isinstance(v, (bool, np.bool_)):
                raise IndexErr("an index must be a number, a vector of numbers or a bool mask, got a bool",
                               item.span)
            if isinstance(v, (float, int)):
                out.append(self.whole_index(v, n, item.span, arr, axis))
                continue
            if type(v) in ARRAYS and type(v) is not np.ndarray:
                v = to_numpy(v)         # an index is checked and kept on the host (index_ops.device_index)
            if isinstance(v, np.ndarray):
                if v.dtype == np.bool_:
                    if len(items) == 1 and v.shape == shape and len(shape) > 1:
                        return (v,)
                    if v.ndim > 1 and v.shape == shape:
                        raise IndexErr(f"a bool mask of the full shape {shape_text(shape)} picks elements and "
                                       f"must be the only index; got {len(items)} indices", item.span)
                    if v.ndim > 1:
                        raise IndexErr(f"a {shape_text(v.shape)} bool mask covers some axes of {describe(arr)} "
                                       f"but not all; a mask is either a bool vector for one axis or the "
                                       f"array's full shape, alone in the brackets", item.span)
                    if v.ndim != 1 or v.shape[0] != n:
                        raise IndexErr(f"a bool mask must match the indexed axis: mask {shape_text(v.shape)}, "
                                       f"axis of length {n}", item.span)
                    out.append(np.flatnonzero(v))
                    continue
                if v.ndim > 1:      # PyTorch's C[X]: a row of C per id of the matrix X
                    raise IndexErr(f"an index vector must be a vector, got {describe(v)}; for a row per id "
                                   f"(PyTorch's C[X] with a matrix X) write embedding(C, X)", item.span)
                ints = np.asarray(v, dtype=np.float64)
                if ints.size and (not np.all(np.isfinite(ints)) or np.any(ints != np.floor(ints))):
                    bad = ints[~np.isfinite(ints) | (ints != np.floor(ints))][0]
                    raise IndexErr(f"indices must be whole numbers, got {not_whole_text(bad)}", item.span)
                if ints.size and (ints.min() < 0 or ints.max() > n - 1):
                    bad = ints[(ints < 0) | (ints > n - 1)][0]
                    raise IndexErr(f"index {format_value(bad)} is out of range for {self.axis_text(arr, axis)}",
                                   item.span)
                out.append(ints.astype(np.intp))
                vectors.append(axis)
                continue
            raise IndexErr(f"an index must be a number, a vector or a bool mask, got {describe(v)}"
                           + (NEW_AXIS_HINT if v is None else ""), item.span)
        if any(type(o) is np.ndarray for o in out):   # index vectors can pick more elements than arr has
            n = math.prod(shape[len(out):])
            for i, o in enumerate(out):
                n *= len(range(*o.indices(shape[i]))) if isinstance(o, slice) else getattr(o, "size", 1)
            if n > limits.max_elements():
                raise limits.elements_error(f"indexing {describe(arr)}", n).with_span(node.span)
        if vectors and len(items) > 1 and context.LIVE["notes"]:
            self.grid_note(node, items, out, vectors, shape)
        return ops.orthogonal(out, shape)

    def grid_note(self, node, items, parts, vectors, shape) -> None:
        """The one-time note (per source line, on standard error) for the NumPy idiom of pairs,
        P[arange(n), ys]: one axis indexed by its whole range 0..n-1 (a range or a vector equal to
        ':'), another by a vector of the same length n >= 2. tapeml's grid rule picks the n x n
        grid there; the note names the rule and take_along. The result is not changed."""
        for i, p in enumerate(parts):
            if i >= len(shape) or shape[i] < 2 or type(items[i]) is A.Colon:
                continue
            n = shape[i]
            whole = (p == slice(0, n, 1)) if type(p) is slice else (
                i in vectors and p.size == n and bool(np.all(p == np.arange(n))))
            if not whole:
                continue
            j = next((j for j in vectors if j != i and parts[j].size == n), None)
            if j is None:
                continue
            span = node.span
            lines = (self.sources.get(span.file) or "").split("\n")
            key = (span.file, span.line, lines[span.line - 1] if 0 < span.line <= len(lines) else "")
            if key in self.noted:
                return
            self.noted.add(key)
            obj, ids = self.written(node.obj, lines), self.written(items[j], lines)
            each = "row" if (len(shape), i) == (2, 0) else "column" if (len(shape), i) == (2, 1) else "position"
            numpy = ", ".join(f"arange({n})" if k == i else ":" if type(it) is A.Colon else self.written(it, lines)
                              for k, it in enumerate(items))
            message = (f"{span}: note: this index picks the {n}x{n} grid, every {each} with every index of "
                       f"{ids} (each index picks along its own axis), not {n} pairs as NumPy's "
                       f"{obj}[{numpy}] would; for one element per {each} "
                       + (f"write take_along({obj}, {ids}, dim={j})" if len(shape) == 2 else
                          "use take_along(x, ids, dim) (help(\"take_along\"))")
                       + ", and put_along or add_along to write them. "
                       "notes(false) or TAPEML_NOTES=0 turns these notes off")
            stream = self.err if self.err is not None else sys.stderr
            stream.write("\n".join([message] + caret_lines(span, self.sources.get(span.file))) + "\n")
            return

    @staticmethod
    def written(node, lines) -> str:
        """The source text of an expression when it lies on one line, else its unparsed form."""
        sp = node.span
        if sp is not None and sp.line == sp.end_line and 0 < sp.line <= len(lines):
            text = lines[sp.line - 1][sp.col - 1:sp.end_col - 1]
            if text:
                return text
        return unparse(node)

    def axis_text(self, arr, axis):
        if arr.ndim <= 1:
            return f"{describe(arr)}" if arr.ndim == 1 else "a number"
        return f"axis {axis} of length {arr.shape[axis]} ({describe(arr)})"

    def whole_index(self, v, n, span, arr, axis) -> int:
        if not math.isfinite(v) or not float(v).is_integer():
            raise IndexErr(f"indices must be whole numbers, got {not_whole_text(v)}", span)
        if v < 0 or v > n - 1:
            hint = negative_hint(v) if v < 0 else " (indices start at 0; the last is 'end')" if v == n else ""
            raise IndexErr(f"index {format_value(v)} is out of range for {self.axis_text(arr, axis)}{hint}", span)
        return int(v)

    def range_index(self, item, n, env, arr):
        start = self.range_bound(item.start, env, "start")
        stop = self.range_bound(item.stop, env, "end")
        step = 1.0 if item.step is None else self.range_bound(item.step, env, "step")
        for v in (start, stop, step):
            if not math.isfinite(v) or not float(v).is_integer():
                raise IndexErr(f"index ranges need whole numbers, got {not_whole_text(v)}", item.span)
        if step == 0:
            raise ValueErr("a range step cannot be 0", item.span)
        start, stop, step = int(start), int(stop), int(step)
        empty = (stop < start) if step > 0 else (stop > start)
        if empty:
            if stop < 0 <= start and step > 0 and negative_literal(item.stop):     # Python's x[1:-1]
                lines = (self.sources.get(item.span.file) or "").splitlines()
                a = self.written(item.start, lines)
                if stop < -2 ** 53:     # x[1:-1e300]: no translation with a 301-digit number
                    raise IndexErr(f"the range {a}:{format_value(float(stop))} is empty: tapeml does not "
                                   f"count from the end", item.span)
                raise IndexErr(f"the range {a}:{stop} is empty: tapeml does not count from the end; "
                               f"Python's [{a}:{stop}] is [{a}:end{stop}] here (a:b includes b)", item.span)
            return slice(0, 0)
        for v in (start, stop):
            if v < 0 or v > n - 1:
                raise IndexErr(f"index {format_value(float(v))} is out of range for {describe(arr)}"
                               + (negative_hint(v) if v < 0 else
                                  " (indices start at 0; the last is 'end')" if v == n else ""), item.span)
        end = stop + 1 if step > 0 else (stop - 1 if stop > 0 else None)
        return slice(start, end, step)

    def eval_end(self, node, env):
        if self.end_stack and self.end_stack[-1] is None:
            raise IndexErr("'end' means the last position, and a dictionary's keys are not positions",
                           node.span)
        if not self.end_stack:
            raise IndexErr("'end' only means the last index inside brackets", node.span)
        return float(self.end_stack[-1])

    def eval_colon(self, node, env):
        raise IndexErr("a bare ':' only means a whole axis inside brackets", node.span)


def negative_hint(v) -> str:
    """Said with a negative index: tapeml does not count from the end (Python's x[-1] is x[end])."""
    if v < -2 ** 53:        # x[-1e300]: Python's index would be a 301-digit number; no translation to show
        return " (indices start at 0 and do not count from the end)"
    back = -int(v) - 1
    return (f" (indices start at 0 and do not count from the end: Python's [{int(v)}] is "
            f"[end{f'-{back}' if back else ''}] here)")


def negative_literal(node) -> bool:
    """A written negative number (-1), as a range's end is in Python's x[1:-1]."""
    return type(node) is A.Unary and node.op == "-" and type(node.operand) is A.Number
