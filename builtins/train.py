"""Training helpers: embedding, cross_entropy, sample, tree_map, read_text and small text utilities.

`embedding` and `cross_entropy` are *composites* over recorded primitives (`index`,
`log_softmax`, `sum`, ...): they have no gradient rule of their own (DESIGN.md rule 3).
`embedding` is a gather through the `index` primitive, whose VJP is `scatter_add`, so the
gradient rows of repeated ids add up. `cross_entropy` picks the target entries of
`log_softmax` (the log-sum-exp trick), so huge logits never overflow.
"""
from __future__ import annotations

import os

import numpy as np

from tapeml import ops
from tapeml.builtins.registry import P, builtin
from tapeml.errors import IOErr, IndexErr, LangError, ShapeError, TypeErr, ValueErr
from tapeml.tape import raw
from tapeml.values import Record, describe, format_value, shape_text

CAT = "Statistics & ML"


def _ids(ids, n: int, fname: str, what: str, bound_name: str) -> np.ndarray:
    """Validate a number or matrix of 0-based ids below n; return them as intp."""
    r = raw(ids)
    if isinstance(r, bool) or not isinstance(r, (float, int, np.ndarray)):
        raise TypeErr(f"{fname}(): {what} must be a number or a matrix of whole numbers, got {describe(ids)}")
    a = np.asarray(r, dtype=np.float64) if not (isinstance(r, np.ndarray) and r.dtype == np.bool_) else None
    if a is None:
        raise TypeErr(f"{fname}(): {what} must be whole numbers, got {describe(ids)}")
    if a.size:
        if not np.all(np.isfinite(a)) or np.any(a != np.floor(a)):
            bad = a[~np.isfinite(a) | (a != np.floor(a))].flat[0]
            raise IndexErr(f"{fname}(): {what} must be whole numbers, got {format_value(bad)}")
        if a.min() < 0 or a.max() > n - 1:
            bad = a[(a < 0) | (a > n - 1)].flat[0]
            raise IndexErr(f"{fname}(): {what} {format_value(bad)} is out of range: {bound_name} has {n} "
                           f"entries, so ids go from 0 to {n - 1}")
    return a.astype(np.intp)


@builtin("embedding", CAT, "Look up rows of a table by 0-based id: embedding(table, ids) is table[ids, :].",
         [P("table", "array", shape="[V, D]", doc="one row per token id"),
          P("ids", "array", shape="a number or [...]", doc="0-based ids, whole numbers in 0..V-1")],
         returns="[D] for one id, or [..., D] (one row per id)", differentiable=True,
         what="The token (or position) embedding of a transformer: each id picks its row of the table. "
              "With a matrix of ids (a batch of sequences) the result has one more axis.",
         how="A gather through the `index` primitive: out[i, :] = table[ids[i], :]. Its VJP is "
             "`scatter_add`, so when an id appears several times the gradients of its rows add up "
             "(as PyTorch's `nn.Embedding`). A composite with no gradient rule of its own.",
         errors=["IndexError when an id is not a whole number or lies outside 0..V-1",
                 "ShapeError when table is not a matrix"],
         examples=["table = [0.1, 0.2; 1.0, 2.0; 10.0, 20.0]\nembedding(table, [2, 0, 2])",
                   "table = [0.1, 0.2; 1.0, 2.0; 10.0, 20.0]\n"
                   "grad(fn(t) -> sum(embedding(t, [2, 0, 2])), table)"])
def embedding(table, ids):
    s = ops.shape_of(table)
    if len(s) != 2:
        raise ShapeError(f"embedding(): table must be a V x D matrix, got {describe(table)}")
    idx = _ids(ids, s[0], "embedding", "id", "the table")
    from tapeml import limits
    limits.check_elements(f"embedding() of {idx.size} ids into a {s[0]}x{s[1]} table", idx.shape + (s[1],))
    if idx.ndim == 0:
        return ops.index(table, idx=(int(idx),))
    return ops.index(table, idx=(idx,))


@builtin("cross_entropy", CAT, "Mean next-token loss: -log softmax(logits)[target], averaged over positions.",
         [P("logits", "array", shape="[V] or [..., V]", doc="raw scores, one per class, per position"),
          P("targets", "array", shape="a number or [...]",
            doc="0-based class ids, one per position (logits without its last axis)")],
         returns="a number", differentiable=True,
         what="The classification and language-model loss: small when the model gives the true class a "
              "high probability at every position. A row of logits with target t costs "
              "-log(softmax(row)[t]); the rows are averaged.",
         how="L = -(1/N) sum_i log_softmax(z_i)[t_i], PyTorch's `F.cross_entropy(reduction=\"mean\")`. "
             "Composed from the `log_softmax` primitive (x - max(x) - log(sum(exp(x - max(x))))) and an "
             "`index` gather, so huge logits neither overflow nor give NaN: cross_entropy([1e8, 1e8], 0) is "
             "ln 2, and the gradient is (softmax(z) - onehot(t)) / N. A row holding +inf logits follows "
             "softmax's limit: its loss is ln k (k the number of +inf logits) when the target is one of "
             "them and +inf when it is not, and in both cases its gradient is 0 (no finite change of its "
             "logits changes the row).",
         errors=["ShapeError when targets do not match the logits without their last axis",
                 "IndexError when a target is not a whole number in 0..V-1"],
         examples=["cross_entropy([2.0, 1.0, 0.1], 0)",
                   "cross_entropy([1e8, 1e8], 0)",
                   "cross_entropy([1, 2, 3; 3, 2, 1], [2, 0])",
                   "cross_entropy([1 / 0, 1 / 0, 1], 0)\ncross_entropy([1 / 0, 1 / 0, 1], 2)",
                   "grad(fn(z) -> cross_entropy(z, 0), [-431, 279, 427])"])
def cross_entropy(logits, targets):
    s = ops.shape_of(logits)
    if not s:
        raise ShapeError("cross_entropy(): logits must be a vector of class scores or a matrix with one row "
                         "per position, got a number")
    t_shape = np.shape(raw(targets))
    if t_shape != s[:-1]:
        want = "a number" if len(s) == 1 else shape_text(s[:-1])
        raise ShapeError(f"cross_entropy(): logits are {shape_text(s)}, so targets must be {want} "
                         f"(one class id per position), got {describe(targets)}")
    v = s[-1]
    t = _ids(targets, v, "cross_entropy", "target", "the last axis of logits")
    lp = ops.log_softmax(logits, dim=-1)
    if len(s) == 1:
        return ops.neg(ops.index(lp, idx=(int(t),)))
    n = int(np.prod(s[:-1]))
    flat = ops.reshape(lp, shape=(n, v))
    picked = ops.index(flat, idx=(np.arange(n), t.reshape(-1)))
    return ops.div(ops.neg(ops.sum_(picked)), float(n))


@builtin("sample", "Random", "Draw one category per row from probabilities: an id in 0..V-1.",
         [P("probs", "array", shape="[V] or [N, V]", doc="non-negative weights; each row is normalized")],
         returns="a number for a vector, a vector of N ids for a matrix",
         what="Picks a class at random, class i with probability probs[i] / sum(probs); the "
              "sampling step of text generation (after softmax with a temperature).",
         how="Inverse-CDF sampling: u = rand() from the one seeded generator, then the first i whose "
             "cumulative sum exceeds u * sum(row); zero-weight classes are never drawn. Like "
             "PyTorch's `torch.multinomial(p, 1)`, rows need not sum to 1.",
         errors=["ValueError when a weight is negative or not finite, or a row sums to 0",
                 "ShapeError when probs is not a vector or a matrix"],
         examples=["seed(0)\nsample([0.1, 0.2, 0.7])", "sample([0, 0, 1; 1, 0, 0])"])
def sample(probs):
    from tapeml.builtins.random import rng
    p = np.asarray(raw(probs), dtype=np.float64)
    if p.ndim not in (1, 2) or p.shape[-1] == 0:
        raise ShapeError(f"sample(): probs must be a non-empty vector or a matrix (one row per draw), got "
                         f"{describe(probs)}")
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        raise ValueErr("sample(): probabilities must be finite and >= 0")
    rows = p.reshape(-1, p.shape[-1])
    c = np.cumsum(rows, axis=1)
    total = c[:, -1]
    if np.any(total <= 0):
        raise ValueErr("sample(): every row of probs must have a positive sum")
    u = rng().random(rows.shape[0]) * total
    out = np.array([min(int(np.searchsorted(ci, ui, side="right")), rows.shape[1] - 1)
                    for ci, ui in zip(c, u)], dtype=np.float64)
    # never pick a zero-weight class at the right edge (u == total after rounding)
    for i, k in enumerate(out.astype(int)):
        while rows[i, k] == 0 and k > 0:
            k -= 1
        out[i] = k
    return float(out[0]) if p.ndim == 1 else out


def _tree_map(interp, f, trees, path):
    """`path` is where this subtree sits in the trees: "" at the top, then ".w", "[0].wq", ..."""
    first = raw(trees[0])
    if isinstance(first, Record):
        for j, t in enumerate(trees[1:], 1):
            r = raw(t)
            if not isinstance(r, Record) or list(r.fields) != list(first.fields):
                raise ValueErr(f"tree_map(): tree {j} differs from tree 0 at {_where(path)}: "
                               f"{_shape_desc(first)} vs {_shape_desc(r)}")
        return Record({k: _tree_map(interp, f, [raw(t).fields[k] for t in trees], f"{path}.{k}")
                       for k in first.fields})
    if isinstance(first, tuple):
        for j, t in enumerate(trees[1:], 1):
            r = raw(t)
            if not isinstance(r, tuple) or len(r) != len(first):
                raise ValueErr(f"tree_map(): tree {j} differs from tree 0 at {_where(path)}: "
                               f"{_shape_desc(first)} vs {_shape_desc(r)}")
        return tuple(_tree_map(interp, f, [raw(t)[i] for t in trees], f"{path}[{i}]")
                     for i in range(len(first)))
    for j, t in enumerate(trees[1:], 1):
        if isinstance(raw(t), (Record, tuple)):
            raise ValueErr(f"tree_map(): tree {j} differs from tree 0 at {_where(path)}: "
                           f"{_shape_desc(first)} vs {_shape_desc(raw(t))}")
    try:
        return interp.call(f, list(trees), {}, None)
    except LangError as e:
        if path and not getattr(e, "tree_path", None):    # the innermost tree_map names the leaf
            e.tree_path = path
            e.message += f" (in tree_map, at the leaf {path} of the trees)"
        raise


def _where(path: str) -> str:
    return f"the leaf or subtree {path}" if path else "the top level"


def _shape_desc(r):
    if isinstance(r, Record):
        return "a record with fields " + (", ".join(r.fields) or "none")
    return describe(r)


@builtin("tree_map", "Core", "Apply f leaf by leaf to records and tuples of the same structure.",
         [P("f", "function", doc="called with one leaf from each tree"),
          P("trees", variadic=True, doc="one or more records/tuples (nested) of the same structure")],
         returns="a tree of the same structure holding f's results", interp=True,
         what="Maps a function over the leaves (numbers, matrices, anything that is not a record or a "
              "tuple) of parameter trees. With several trees, f gets the matching leaves of all of "
              "them: tree_map(fn(p, g) -> p - 0.1 * g, params, grads) is one SGD step.",
         how="Walks the first tree; at a record it requires the same field names in the same order in "
             "every tree, at a tuple the same length, then calls f on the leaves (JAX's "
             "`jax.tree_util.tree_map`).",
         errors=["ValueError naming the path where the trees' structures differ",
                 "TypeError when f is not a function"],
         examples=["tree_map(fn(x) -> 2 * x, {a = 1, b = ([1, 2], 3)})",
                   "p = {w = [1, 2], b = 0.5}\ng = {w = [0.1, 0.1], b = 1}\n"
                   "tree_map(fn(p, g) -> p - 0.5 * g, p, g)"])
def tree_map(interp, f, trees):
    if not trees:
        raise TypeErr("tree_map() needs at least one tree after the function")
    return _tree_map(interp, f, list(trees), "")


@builtin("tree_leaves", "Core", "The leaves of a record/tuple tree as a flat tuple, in field order.",
         [P("tree", doc="a record or tuple (nested), or a single leaf")],
         returns="a tuple of leaves",
         what="Flattens a nested record or tuple (parameters, gradients) into one tuple of its leaves, so a "
              "loop can visit every matrix, e.g. for a global gradient norm. A value that is neither a record "
              "nor a tuple is its own single leaf.",
         errors=["none: any value is accepted (a leaf gives a 1-tuple, an empty tuple gives ())"],
         how="Depth-first over record fields in their order and tuple items in order (JAX's "
             "`jax.tree_util.tree_leaves`). Useful to reduce over all parameters, e.g. a gradient norm.",
         examples=["tree_leaves({a = 1, b = ([1, 2], 3)})",
                   "g = {w = [3, 0], b = 4}\ntotal = 0\nfor l in tree_leaves(g)\n"
                   "    total = total + sum(l^2)\nend\nsqrt(total)"])
def tree_leaves(tree):
    out = []

    def walk(v):
        r = raw(v)
        if isinstance(r, Record):
            for x in r.fields.values():
                walk(x)
        elif isinstance(r, tuple):
            for x in r:
                walk(x)
        else:
            out.append(v)
    walk(tree)
    return tuple(out)


def resolve_path(interp, path: str) -> str:
    """A relative path is taken from the running script's directory (like import); in -c and
    the REPL that is the current directory."""
    if os.path.isabs(path):
        return path
    base = interp.dir_stack[-1] if getattr(interp, "dir_stack", None) else os.getcwd()
    return os.path.join(base, path)


def read_limited(f, fname: str, full: str) -> bytes:
    """The bytes of an open file, refused before reading when it is past the string limit
    (lang/limits.py), and never more than the limit read even if the file grows meanwhile."""
    from tapeml import limits
    size = os.fstat(f.fileno()).st_size
    data = b""
    if size <= limits.MAX_STRING_BYTES:
        data = f.read(limits.MAX_STRING_BYTES + 1)
        size = len(data)
    limits.check_string_bytes(f"{fname}(): the text of {full}", size)
    return data


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
    from tapeml.builtins.io import existing_file
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
    from tapeml.builtins.io import atomic_write
    atomic_write("write_text", resolve_path(interp, path), lambda f: f.write(text), binary=False)
    return None


# ---- small text and conversion helpers used by stdlib/text.ml --------------------------------
@builtin("char_codes", "Core", "The Unicode code point of each character of a string, as a vector.",
         [P("s", "string")], returns="[len(s)]",
         what="The Unicode number of each character: char_codes(\"A\") is [65]. The raw material of the "
              "character tokenizer (char_vocab, encode).",
         errors=["TypeError when s is not a string"],
         how="Python's `ord` of each character, as float64 (a char tokenizer's raw ids).",
         examples=["char_codes(\"Hi!\")"])
def char_codes(s):
    return np.fromiter((ord(c) for c in s), dtype=np.float64, count=len(s))


@builtin("from_char_codes", "Core", "The string whose characters have the given code points.",
         [P("codes", "array", shape="a number or [N]", doc="whole numbers in 0..1114111")],
         returns="string",
         what="The string spelled by a vector of Unicode code points (or one code point); "
              "from_char_codes(char_codes(s)) is s.",
         how="Python's `chr` of each element, joined; the inverse of char_codes.",
         errors=["ValueError when a code is not a whole number in 0..1114111, or is a surrogate (55296..57343)",
                 "ValueError when the string would pass the string limit, 0.1 GB",
                 "ShapeError when codes is a matrix rather than a vector",
                 "TypeError when codes is not a number or matrix"],
         examples=["from_char_codes([72, 105, 33])"])
def from_char_codes(codes):
    a = np.atleast_1d(np.asarray(raw(codes), dtype=np.float64))
    if a.ndim != 1:
        raise ShapeError(f"from_char_codes(): codes must be a vector, got {describe(codes)}")
    if a.size and (not np.all(np.isfinite(a)) or np.any(a != np.floor(a)) or a.min() < 0 or a.max() > 0x10FFFF):
        raise ValueErr("from_char_codes(): codes must be whole numbers in 0..1114111")
    surrogate = (a >= 0xD800) & (a <= 0xDFFF)
    if surrogate.any():     # halves of UTF-16 pairs: no character, and no UTF-8 text can hold one
        raise ValueErr(f"from_char_codes(): {format_value(a[surrogate][0])} is a surrogate code point "
                       f"(55296..57343, U+D800..U+DFFF), which is not a character")
    from tapeml import limits
    if a.size > limits.MAX_STRING_BYTES // 4:      # its UTF-8 size: 1 to 4 bytes a code
        limits.check_string_bytes("from_char_codes(): the string", a.size + int((a >= 0x80).sum())
                                  + int((a >= 0x800).sum()) + int((a >= 0x10000).sum()))
    return "".join(map(chr, a.astype(np.int64).tolist()))


@builtin("unique", "Arrays", "The distinct elements of x, sorted ascending, as a vector.",
         [P("x", "array", shape="any")], returns="[K]",
         what="Each distinct value of x once, in increasing order, as a vector whatever the shape of x: e.g. "
              "the character codes a text uses, or the classes present among targets.",
         errors=["TypeError when x is not a number or matrix"],
         how="NumPy's `unique` over all elements (flattened); NaN sorts last.",
         examples=["unique([3, 1, 3, 2, 1])"])
def unique(x):
    return np.unique(np.asarray(raw(x), dtype=np.float64))


@builtin("num", "Core", "The number a string spells: num(\"3.5\") is 3.5 (the inverse of str for numbers).",
         [P("s", "any", doc="a string such as \"12\", \"1e-3\", \"inf\"; a number is returned as it is")],
         returns="number",
         what="Reads a number from text, e.g. a command-line argument from ARGS; surrounding spaces are "
              "ignored and a number passes through unchanged.",
         how="Python's `float` of the stripped string (script arguments in ARGS are strings).",
         errors=["ValueError when the string is not a number",
                 "TypeError when s is neither a string nor a number"],
         examples=["num(\"1e-3\") * 2", "num(\"600\") + 1"])
def num(s):
    r = raw(s)
    if isinstance(r, (float, int)) and not isinstance(r, bool):
        return float(r)
    if not isinstance(r, str):
        raise TypeErr(f"num(): s must be a string, got {describe(s)}")
    try:
        return float(r.strip())
    except ValueError:
        raise ValueErr(f"num(): \"{r}\" is not a number") from None


@builtin("error", "Core", "Stop the program with a ValueError carrying the message.",
         [P("message", "string")], returns="never returns",
         what="Stops the program with your own message, e.g. when an argument of a tapeml function fails a "
              "check; the report shows the call site and the chain of calls like any built-in error.",
         errors=["ValueError carrying message, always (that is its purpose)",
                 "TypeError when message is not a string"],
         how="Raises a ValueError at the call site; the usual error report (place, source line, the "
             "chain of calls) follows. For checks in tapeml code, e.g. the stdlib's argument checks.",
         examples=["fn safe_div(a, b)\n    if b == 0\n        error(\"safe_div: b must not be 0\")\n    end\n"
                   "    return a / b\nend\nsafe_div(1, 2)"])
def error(message):
    raise ValueErr(message or "error() was called with an empty message")


@builtin("append", "Core", "A new tuple: the items of t followed by item.",
         [P("t", "tuple"), P("item", doc="any value")], returns="a tuple one longer than t",
         what="Builds tuples step by step, e.g. a stack of block weights in a loop (tuples are immutable "
              "values, so t itself is unchanged).",
         how="Python's t + (item,).",
         errors=["TypeError when t is not a tuple (a vector grows with [v, item] or concat)"],
         examples=["append((1, 2), 3)", "blocks = ()\nfor i in 0:2\n    blocks = append(blocks, i * 10)\nend\nblocks"])
def append(t, item):
    return tuple(raw(t)) + (item,)


@builtin("clock", "Core", "Seconds on a monotonic clock; subtract two readings to time a piece of code.",
         [], returns="number",
         what="A timer reading in seconds, to measure how long code takes: t0 = clock(), then clock() - t0. "
              "Only differences mean something; the origin is arbitrary.",
         errors=["TypeError when given an argument: clock() takes none"],
         how="Python's `time.perf_counter()`: monotonic, sub-microsecond resolution, arbitrary origin.",
         examples=["t0 = clock()\nclock() - t0 >= 0"])
def clock():
    import time
    return time.perf_counter()
