"""Strings & collections: text helpers (split, join, replace, ...) and the collection walkers
(map, filter, reduce, zip, enumerate, sort_by) over tuples, vectors and strings.

The collection builtins walk a value exactly as `for` does (docs/language.md, "for and while"):
a tuple gives its items, a vector its elements, a matrix its rows, a string its characters, a
number itself once. Items of a tracked matrix are taken through the `index` primitive, so
gradients flow through the function passed in. They return tuples.
"""
from __future__ import annotations

import numpy as np

from tapeml.array import limits, ops
from tapeml.array.backend import Matrix, xp_of
from tapeml.array.primitive_table import is_bool_array
from tapeml.builtins.registry import P, builtin
from tapeml.syntax.errors import KeyErr, LangError, TypeErr, ValueErr
from tapeml.array.ranges import EnumerateWalk, ValueWalk, Walk, ZipWalk, walkable
from tapeml.array.tape import Box, raw
from tapeml.array.values import _ABSENT, Dict, Record, describe
from tapeml.array.printer import key_text
from tapeml.builtins.lookup import checked_key, dict_arg, dict_key, index_of_any

CAT = "Strings & collections"
_SEQ = "a tuple, vector, matrix (its rows), string (its characters), dictionary (its keys) or number (once)"


# ---- walking a collection as `for` does ---------------------------------------------------------
def items_of(fname: str, xs, pname: str = "xs") -> ValueWalk:
    """The items `for` would visit in xs, keeping the tape (tracked matrices through `index`), as a
    walk: len() of them, made one at a time (a vector's numbers a chunk at a time, never a list of
    all). xs may already be a walk (the lazy form of enumerate or zip in a for loop)."""
    if isinstance(xs, ValueWalk):
        xs = xs.value
    elif isinstance(xs, Walk):
        return xs
    if not walkable(xs):
        raise TypeErr(f"{fname}(): {pname} must be {_SEQ}, got {describe(xs)}")
    return ValueWalk(xs)


def _call(ctx, fname: str, f, args: list, where: str):
    """Call f; an error inside it says which item of the walk it came from."""
    try:
        return ctx.call(f, *args)
    except LangError as e:
        if not getattr(e, "walk_where", None):          # the innermost walker names the item
            e.walk_where = where
            e.message += f" (in {fname}, at {where})"
        raise


# ---- strings ------------------------------------------------------------------------------------
@builtin("split", CAT, "Split a string into a tuple of strings at sep (no sep: at runs of whitespace).",
         [P("s", "string"), P("sep", "string", default=None, doc="the separator; none splits at runs of whitespace")],
         returns="a tuple of strings",
         what="Cuts text into pieces, e.g. the fields of a CSV line: split(\"1,2,3\", \",\"). Without sep, "
              "runs of whitespace (spaces, tabs, newlines) separate the words and leading or trailing "
              "whitespace gives no empty pieces, so split(\"  a  b \") is (\"a\", \"b\").",
         how="Python's `str.split`: with sep, every occurrence cuts (two in a row give an empty piece, and "
             "split(\"\", \",\") is (\"\",)); without sep, split(\"\") and split(\"   \") are (). The "
             "inverse of join(parts, sep) when sep is given.",
         errors=["ValueError when sep is the empty string",
                 "TypeError when s or sep is not a string"],
         examples=["split(\"1,2,,3\", \",\")", "split(\"  the quick\\tbrown  fox \")",
                   "split(\"a->b->c\", \"->\")"])
def split(s, sep):
    if sep == "":
        raise ValueErr("split(): sep must not be empty; to split a string into characters use "
                       "map(fn(c) -> c, s) or a for loop")
    return tuple(s.split(sep))


@builtin("join", CAT, "The strings of a tuple, joined with sep between them.",
         [P("parts", doc="a tuple (or vector, as for) of strings"), P("sep", "string", default="", doc="put between the parts")],
         returns="string",
         what="Builds one string from pieces: join((\"a\", \"b\"), \", \") is \"a, b\"; the inverse of "
              "split(s, sep). To join numbers, turn them into strings first: join(map(str, xs), \",\").",
         how="Python's `sep.join(parts)`; the result goes through the string size guard (0.1 GB).",
         errors=["TypeError naming the first item that is not a string",
                 "ValueError when the result would pass the string limit, 0.1 GB"],
         examples=["join((\"a\", \"b\", \"c\"), \", \")", "join(split(\"x y z\"), \"-\")",
                   "join(map(str, [1, 2.5, 3]), \",\")", "join((), \",\")"])
def join(parts, sep):
    items = list(items_of("join", parts, "parts"))
    for i, x in enumerate(items):
        if not isinstance(raw(x), str):
            raise TypeErr(f"join(): parts[{i}] is {describe(x)}; join takes strings "
                          f"(turn numbers into strings with str, e.g. map(str, xs))")
    items = [raw(x) for x in items]
    limits.check_join("join(): the joined string", items + [sep] * max(len(items) - 1, 0))
    return sep.join(items)


@builtin("replace", CAT, "s with every occurrence of old replaced by new.",
         [P("s", "string"), P("old", "string", doc="the text to find (not empty)"), P("new", "string")],
         returns="string",
         what="Substitutes text everywhere it occurs, left to right, without overlaps: "
              "replace(\"a-b-c\", \"-\", \"+\") is \"a+b+c\".",
         how="Python's `str.replace` (all occurrences, scanning left to right); the size of the result "
             "is checked against the string limit before it is built.",
         errors=["ValueError when old is the empty string",
                 "ValueError when the result would pass the string limit, 0.1 GB",
                 "TypeError when an argument is not a string"],
         examples=["replace(\"a-b-c\", \"-\", \" + \")", "replace(\"aaa\", \"aa\", \"b\")",
                   "replace(\"héllo\", \"é\", \"e\")"])
def replace(s, old, new):
    if old == "":
        raise ValueErr("replace(): old must not be empty")
    if len(new) > len(old):
        n = s.count(old)
        limits.check_string_bytes("replace(): the result",
                                  limits.utf8_len(s) + n * (limits.utf8_len(new) - limits.utf8_len(old)))
    return s.replace(old, new)


def _case(fname: str, s: str, fn) -> str:
    if len(s) * 12 > limits.MAX_STRING_BYTES:     # a character may grow to 3, of up to 4 bytes each
        out = fn(s)
        limits.check_string_bytes(f"{fname}(): the result", limits.utf8_len(out))
        return out
    return fn(s)


@builtin("upper", CAT, "s in upper case.", [P("s", "string")], returns="string",
         what="Capitalizes every letter, Unicode included: upper(\"straße\") is \"STRASSE\".",
         how="Python's `str.upper` (the Unicode default case mapping; a character may become several, "
             "as ß becomes SS).",
         errors=["TypeError when s is not a string"],
         examples=["upper(\"Hello, world\")", "upper(\"straße\")"])
def upper(s):
    return _case("upper", s, str.upper)


@builtin("lower", CAT, "s in lower case.", [P("s", "string")], returns="string",
         what="Puts every letter in lower case, e.g. to compare words without regard to case.",
         how="Python's `str.lower` (the Unicode default case mapping).",
         errors=["TypeError when s is not a string"],
         examples=["lower(\"Hello, WORLD\")", "lower(\"ÀÉÎ\")"])
def lower(s):
    return _case("lower", s, str.lower)


@builtin("strip", CAT, "s without leading and trailing whitespace (or the characters in chars).",
         [P("s", "string"), P("chars", "string", default=None, doc="the characters to remove; none: whitespace")],
         returns="string",
         what="Trims a line read from a file: strip(\"  x \\n\") is \"x\". With chars, any of those "
              "characters is removed from both ends: strip(\"--a-b--\", \"-\") is \"a-b\".",
         how="Python's `str.strip` (whitespace is Unicode whitespace: spaces, tabs, newlines, ...).",
         errors=["TypeError when s or chars is not a string"],
         examples=["strip(\"  padded\\t\\n\")", "strip(\"--a-b--\", \"-\")", "strip(\"   \")"])
def strip(s, chars):
    return s.strip(chars)


@builtin("startswith", CAT, "Whether s begins with prefix.",
         [P("s", "string"), P("prefix", "string")], returns="bool",
         what="Tests the start of a string, e.g. to skip comment lines: startswith(line, \"#\"). Every "
              "string starts with \"\".",
         how="Python's `str.startswith`.",
         errors=["TypeError when s or prefix is not a string"],
         examples=["startswith(\"# comment\", \"#\")", "startswith(\"abc\", \"abcd\")"])
def startswith(s, prefix):
    return s.startswith(prefix)


@builtin("endswith", CAT, "Whether s ends with suffix.",
         [P("s", "string"), P("suffix", "string")], returns="bool",
         what="Tests the end of a string, e.g. a file name's extension: endswith(path, \".csv\"). Every "
              "string ends with \"\".",
         how="Python's `str.endswith`.",
         errors=["TypeError when s or suffix is not a string"],
         examples=["endswith(\"data.csv\", \".csv\")", "endswith(\"data.csv\", \".json\")"])
def endswith(s, suffix):
    return s.endswith(suffix)


@builtin("contains", CAT, "Whether item is a key of a dictionary, a substring of a string, an item of a tuple, or an element of a matrix.",
         [P("container", doc="a dictionary, a string, a tuple, or a number or matrix"), P("item", doc="the value to look for")],
         returns="bool",
         what="Membership: contains(d, \"a\") is true when the dictionary d has the key \"a\", "
              "contains(\"hello\", \"ell\") is true (a substring), contains((1, \"a\"), \"a\") is "
              "true (an item, compared as == compares), contains([1, 2, 3], 2) is true (an element). "
              "tapeml has no `in` operator: `k in d` (Python) is contains(d, k).",
         how="A dictionary: whether it has the key (Python's `key in d`; numbers by value, so 1 and 1.0 are "
             "one key; an item that cannot be a key, a matrix or a bool, is not one: false). "
             "A string: Python's `item in s` (\"\" is in every string). A tuple: an item equal to item as `==` "
             "says (numbers by value, strings, tuples and records by content). A matrix: any element "
             "equal to the number item, over all elements whatever the rank (NumPy's `item in x`); "
             "NaN is never contained, as NaN == NaN is false. Any other item (a string, a matrix) is "
             "not an element of a matrix: false.",
         errors=["TypeError when container is a string and item is not",
                 "TypeError when container is not a dictionary, string, tuple, number or matrix"],
         examples=["counts = {\"the\": 3, (1, 2): 1}\ncontains(counts, \"the\")\ncontains(counts, (1, 2))\n"
                   "contains(counts, \"cat\")", "contains(\"hello\", \"ell\")", "contains((1, \"a\", [2, 3]), [2, 3])",
                   "contains([1, 2, 3], 2)", "contains([1, 2; 3, 4], 5)"])
def contains(container, item):
    c = raw(container)
    if isinstance(c, Dict):
        try:
            key = dict_key(item)
        except LangError:          # a matrix, a bool, nan: never a key
            return False
        return c.has(key)
    return index_of_any("contains", container, item) is not None


@builtin("index_of", CAT, "The 0-based position of the first occurrence of item in a string, tuple or vector; none when absent.",
         [P("container", doc="a string, a tuple or a vector"), P("item", doc="the value to look for")],
         returns="a number, or none",
         what="Finds where something is: index_of(\"hello\", \"l\") is 2, index_of((\"a\", \"b\"), \"b\") is 1, "
              "index_of([5, 7], 9) is none. Test the result with `== none` before using it as an index.",
         how="As contains compares (a substring for a string, counted in characters; an equal item for "
             "a tuple; an equal element for a vector). Positions start at 0, as tapeml's indexing. "
             "Python's `str.find` and `tuple.index` (but none, not an error, when absent); NumPy has no "
             "single function (`np.flatnonzero(x == v)[0]`), MATLAB's `find(x == v, 1)` is 1-based.",
         errors=["TypeError when container is a matrix of rank 2 or more (a position would need several indices; "
                 "use nonzero-style code with find over rows)",
                 "TypeError when container is a string and item is not",
                 "TypeError when container is not a string, tuple, number or vector"],
         examples=["index_of(\"hello\", \"l\")", "index_of((\"a\", \"b\"), \"b\")", "index_of([5, 7, 5], 5)",
                   "index_of([5, 7], 9)", "index_of(\"naïve\", \"v\")"])
def index_of(container, item):
    c = raw(container)
    if isinstance(c, Matrix) and c.ndim >= 2:
        raise TypeErr(f"index_of(): container must be a string, tuple or vector, got {describe(container)}; "
                      f"a position in a matrix needs several indices")
    i = index_of_any("index_of", container, item)
    return None if i is None else float(i)


@builtin("lines", CAT, "The lines of a string as a tuple, without their line endings.",
         [P("s", "string")], returns="a tuple of strings",
         what="Cuts text read from a file into lines: lines(\"a\\nb\\n\") is (\"a\", \"b\"). A final line "
              "ending does not start an empty line; lines(\"\") is ().",
         how="Lines end at \"\\n\" or \"\\r\\n\" (the \"\\r\" is removed too); other characters (a lone "
             "\"\\r\", form feeds, Unicode line separators) stay inside lines, unlike Python's "
             "`splitlines`. An empty line in the middle gives an empty string.",
         errors=["TypeError when s is not a string"],
         examples=["lines(\"first\\nsecond\\n\\nfourth\\n\")", "lines(\"a\" + from_char_codes([13, 10]) + \"b\")", "lines(\"\")", "lines(\"no newline\")"])
def lines(s):
    if s == "":
        return ()
    parts = s.split("\n")
    if parts[-1] == "":
        parts.pop()
    return tuple(p[:-1] if p.endswith("\r") else p for p in parts)


@builtin("reverse", CAT, "A string, tuple, vector or matrix (its rows) in reverse order.",
         [P("xs", doc="a string, tuple, vector or matrix")],
         returns="the same kind as xs",
         what="The items in the opposite order: a string's characters, a tuple's items, a vector's elements, "
              "a matrix's rows (the first axis, as `for` walks it). A number is itself.",
         how="A matrix is reversed through the index primitive (x[end:-1:0] in effect), so gradients flow "
             "through it; NumPy's `x[::-1]` / `np.flip(x, 0)`, PyTorch's `torch.flip(x, [0])`.",
         errors=["TypeError when xs is a record, a bool, none or a function"],
         examples=["reverse(\"stressed\")", "reverse((1, \"a\", [2]))", "reverse([1, 2, 3])",
                   "reverse([1, 2; 3, 4])", "grad(fn(v) -> sum(reverse(v) * [1, 2, 3]), [0, 0, 0])"])
def reverse(xs):
    r = raw(xs)
    if isinstance(r, str):
        return r[::-1]
    if isinstance(r, tuple):
        return r[::-1]
    if isinstance(r, Matrix) and r.ndim >= 1:
        if type(xs) is Box:
            return ops.index(xs, idx=(slice(None, None, -1),))
        return r[::-1].copy() if type(r) is np.ndarray else xp_of(r).flip(r, axis=0)
    if isinstance(r, (float, int, Matrix)) and not isinstance(r, bool):
        return xs
    raise TypeErr(f"reverse(): xs must be a string, tuple, vector or matrix, got {describe(xs)}")


@builtin("sort_by", CAT, "The items of xs sorted by key(item), ascending and stable, as a tuple.",
         [P("xs", doc=_SEQ), P("key", "function", doc="maps an item to a number or a string")],
         returns="a tuple of the items of xs", context=True,
         what="Orders things by a computed key: sort_by(words, len) sorts words by length, "
              "sort_by(records, fn(r) -> r.loss) sorts results by their loss. Items with equal keys keep "
              "their order (a stable sort), so sorting by one key and then another sorts by both.",
         how="Python's `sorted(items, key=key)` (stable; keys compared with <). Numbers sort numerically, "
             "strings by code point. For descending order, reverse the result or negate a numeric key. "
             "The items are walked as `for` walks xs and keep the tape.",
         errors=["TypeError when a key is not a number or a string, or keys mix numbers and strings",
                 "ValueError when a key is NaN (it has no place in an order)",
                 "errors raised inside key, naming the item"],
         examples=["sort_by((\"ccc\", \"a\", \"bb\"), len)", "sort_by([3, -1, 2], fn(x) -> -x)",
                   "runs = ({name = \"a\", loss = 0.3}, {name = \"b\", loss = 0.1})\n"
                   "map(fn(r) -> r.name, sort_by(runs, fn(r) -> r.loss))"])
def sort_by(ctx, xs, key):
    items = list(items_of("sort_by", xs))
    keys = []
    kind = None
    for i, x in enumerate(items):
        k = raw(_call(ctx, "sort_by", key, [x], f"item {i}"))
        if isinstance(k, Matrix) and k.ndim == 0 and not is_bool_array(k):
            k = float(k)
        if isinstance(k, str):
            this = "string"
        elif isinstance(k, (float, int)) and not isinstance(k, bool):
            this = "number"
            if k != k:
                raise ValueErr(f"sort_by(): the key of item {i} is NaN, which has no place in an order")
        else:
            raise TypeErr(f"sort_by(): key must give a number or a string, got {describe(k)} for item {i}")
        if kind is not None and this != kind:
            raise TypeErr(f"sort_by(): key gave a {kind} for item 0 and a {this} for item {i}; "
                          f"keys must all be numbers or all strings")
        kind = this
        keys.append(k)
    order = sorted(range(len(items)), key=keys.__getitem__)
    return tuple(items[i] for i in order)


# ---- collections --------------------------------------------------------------------------------
_WALK = ("The items are those `for` visits: a tuple's items, a vector's elements, a matrix's rows, "
         "a string's characters, a dictionary's keys, a number once. Items of a tracked matrix are taken with the index "
         "primitive, so gradients flow through f into xs and into anything f closes over.")


@builtin("map", CAT, "A tuple of f(item) for each item of xs.",
         [P("f", "function", doc="called with one item"), P("xs", doc=_SEQ)],
         returns="a tuple, one result per item", context=True,
         what="Applies a function to every item: map(fn(x) -> x ^ 2, [1, 2, 3]) is (1, 4, 9). The result "
              "is always a tuple (its items may be anything); vector(r) makes a tuple of numbers a vector, "
              "stack(r) a tuple of vectors a matrix.",
         how=_WALK + " f is called in order, first item first (Python's `map`, materialized).",
         errors=["TypeError when f is not a function or xs cannot be walked (a record, none, a bool)",
                 "errors raised inside f, naming the item"],
         examples=["map(fn(x) -> x ^ 2, [1, 2, 3])", "map(upper, (\"a\", \"b\"))",
                   "map(fn(row) -> sum(row), [1, 2; 3, 4])", "map(len, split(\"to be or not\"))",
                   "grad(fn(w) -> sum(map(fn(x) -> x * w, [1, 2, 3])[2]), 0.5)"])
def map_(ctx, f, xs):
    return tuple(_call(ctx, "map", f, [x], f"item {i}") for i, x in enumerate(items_of("map", xs)))


@builtin("filter", CAT, "A tuple of the items of xs for which f(item) is true.",
         [P("f", "function", doc="called with one item; returns true or false"), P("xs", doc=_SEQ)],
         returns="a tuple of the items kept, in order", context=True,
         what="Keeps the items that pass a test: filter(fn(x) -> x > 0, [3, -1, 2]) is (3, 2).",
         how=_WALK + " f must return true or false, as an `if` condition must.",
         errors=["TypeError when f returns something other than true or false (naming the item)",
                 "TypeError when f is not a function or xs cannot be walked",
                 "errors raised inside f, naming the item"],
         examples=["filter(fn(x) -> x > 0, [3, -1, 2])",
                   "filter(fn(w) -> not startswith(w, \"#\"), (\"a\", \"# note\", \"b\"))",
                   "grad(fn(v) -> reduce(fn(a, x) -> a + x ^ 2, filter(fn(x) -> x > 0, v), 0), [3, -1, 2])"])
def filter_(ctx, f, xs):
    out = []
    for i, x in enumerate(items_of("filter", xs)):
        keep = raw(_call(ctx, "filter", f, [x], f"item {i}"))
        if isinstance(keep, np.bool_):
            keep = bool(keep)
        if keep is not True and keep is not False:
            raise TypeErr(f"filter(): f must return true or false, got {describe(keep)} for item {i}")
        if keep:
            out.append(x)
    return tuple(out)


@builtin("reduce", CAT, "Fold xs into one value: acc = f(acc, item) for each item, starting from init.",
         [P("f", "function", doc="called as f(acc, item)"), P("xs", doc=_SEQ), P("init", doc="the first acc")],
         returns="the last acc (init when xs is empty)", context=True,
         what="Combines all items into one: reduce(fn(a, x) -> a + x, [1, 2, 3], 0) is 6, "
              "reduce(fn(a, x) -> a @ x, (m1, m2, m3), eye(n)) chains products.",
         how=_WALK + " A left fold, first item first (Python's `functools.reduce(f, xs, init)`); init is "
             "required, so an empty xs gives init.",
         errors=["TypeError when f is not a function or xs cannot be walked",
                 "errors raised inside f, naming the item"],
         examples=["reduce(fn(a, x) -> a + x, [1, 2, 3], 0)", "reduce(fn(a, s) -> \"{a}{s}\", (\"x\", \"y\"), \">\")",
                   "reduce(fn(a, x) -> a * x, (), 1)",
                   "grad(fn(v) -> reduce(fn(a, x) -> a * x, v, 1), [2, 3, 4])"])
def reduce_(ctx, f, xs, init):
    acc = init
    for i, x in enumerate(items_of("reduce", xs)):
        acc = _call(ctx, "reduce", f, [acc, x], f"item {i}")
    return acc


def _zip_walks(seqs) -> list:
    if not seqs:
        raise TypeErr("zip() needs at least one sequence")
    walked = [items_of("zip", s, f"argument {j}") for j, s in enumerate(seqs)]
    n = len(walked[0])
    for j, w in enumerate(walked[1:], 1):
        if len(w) != n:
            raise ValueErr(f"zip(): argument 0 has {n} item{'s' * (n != 1)} and argument {j} has "
                           f"{len(w)}; zip needs equal lengths")
    return walked


def zip_walk(seqs):
    """zip(...) as a for loop's iterable: the tuples made one at a time."""
    return ZipWalk(_zip_walks(seqs))


def enumerate_walk(xs):
    """enumerate(...) as a for loop's iterable: the pairs made one at a time."""
    return EnumerateWalk(items_of("enumerate", xs))


@builtin("zip", CAT, "A tuple of tuples: the i-th items of every argument together.",
         [P("seqs", variadic=True, walked=True,
            doc="two or more (or one) tuples, vectors, matrices or strings, of equal length")],
         returns="a tuple of N tuples (N the common length)",
         what="Pairs up sequences item by item: zip([1, 2], (\"a\", \"b\")) is ((1, \"a\"), (2, \"b\")), e.g. to "
              "walk inputs and targets together: for p in zip(xs, ys) ... p[0] ... p[1].",
         how=_WALK + " Unlike Python's `zip`, which stops at the shortest, the lengths must be equal (Python's "
             "`zip(..., strict=True)`): a length mismatch is usually a bug. As the iterable of a `for` loop "
             "the tuples are made one at a time (ranges in it are never made into vectors).",
         errors=["ValueError naming the lengths when they differ",
                 "TypeError when given no sequence, or one that cannot be walked"],
         examples=["zip([1, 2], (\"a\", \"b\"))", "zip(\"ab\", [1, 2; 3, 4])", "zip((), [])",
                   "grad(fn(w) -> reduce(fn(a, p) -> a + p[0] * p[1], zip(w, [1, 2]), 0), [5, 6])"],
         walk=zip_walk)
def zip_(seqs):
    return tuple(zip(*_zip_walks(seqs)))


@builtin("enumerate", CAT, "A tuple of (index, item) pairs, the index counting from 0.",
         [P("xs", doc=_SEQ, walked=True)], returns="a tuple of 2-tuples",
         what="Pairs each item with its position: enumerate((\"a\", \"b\")) is ((0, \"a\"), (1, \"b\")).",
         how=_WALK + " Indices start at 0, as tapeml's indexing (Python's `enumerate`). As the iterable of a "
             "`for` loop (`for i, x in enumerate(1:n)`) the pairs are made one at a time and a range in it "
             "is never made into a vector, as Python's lazy `enumerate`.",
         errors=["TypeError when xs cannot be walked (a record, none, a bool, a function)"],
         examples=["enumerate((\"a\", \"b\"))", "for p in enumerate([10, 20])\n    print(p[0], p[1])\nend"],
         walk=enumerate_walk)
def enumerate_(xs):
    return tuple(EnumerateWalk(items_of("enumerate", xs)))


@builtin("fields", CAT, "The field names of a record, as a tuple of strings in order.",
         [P("record", "record")], returns="a tuple of strings",
         what="Lists what a record holds, e.g. to walk a parameter record generically: "
              "fields({w = 1, b = 2}) is (\"w\", \"b\").",
         how="The record's fields in their order (the order they were written or added); Python's "
             "`dict.keys()`.",
         errors=["TypeError when record is not a record"],
         examples=["fields({w = [1, 2], b = 0.5})", "fields({})"])
def fields(record):
    return tuple(raw(record).fields)


@builtin("has_field", CAT, "Whether a record has a field of that name.",
         [P("record", "record"), P("name", "string")], returns="bool",
         what="Tests for an optional field before reading it: has_field(layer, \"bias\").",
         how="Python's `name in record` on the record's fields.",
         errors=["TypeError when record is not a record or name is not a string"],
         examples=["has_field({w = 1}, \"w\")", "has_field({w = 1}, \"b\")"])
def has_field(record, name):
    return name in raw(record).fields


# ---- dictionaries (their checks in builtins/lookup.py) ------------------------------------------
@builtin("dict", CAT, "A dictionary: empty, or of (key, value) pairs, or of a record's fields.",
         [P("pairs", default=None, doc="none (an empty dictionary), a tuple of (key, value) pairs (as zip "
                                       "gives them), a record, or a dictionary")],
         returns="a dictionary",
         what="Builds a dictionary when the literal {key: value, ...} does not fit: dict() is the empty one "
              "(as {:}), dict(zip(names, values)) pairs two sequences up, dict(r) keys a record's values by "
              "their field names. Keys are strings, numbers or tuples of those; the values anything.",
         how="Python's `dict(pairs)`: the pairs in order, a key given twice keeping its first place and its "
             "last value. Numbers are keys by value (1 and 1.0 are one key). The items are walked as `for` "
             "walks them.",
         errors=["TypeError naming the first item that is not a (key, value) pair",
                 "TypeError for a key that is not a string, number or tuple of those (a matrix, a bool)",
                 "ValueError for a nan key"],
         examples=["dict()", "dict(((\"a\", 1), (\"b\", 2)))", "dict(zip((\"x\", \"y\"), [10, 20]))",
                   "dict({lr = 0.1, steps = 100})"])
def dict_(pairs):
    r = raw(pairs)
    if r is None:
        return Dict()
    if isinstance(r, Dict):
        return r
    if isinstance(r, Record):
        return Dict(r.fields)
    if not walkable(r) or isinstance(r, str):
        raise TypeErr(f"dict(): pairs must be a tuple of (key, value) pairs, a record or none, got {describe(pairs)}")
    out = {}
    for i, item in enumerate(items_of("dict", pairs, "pairs")):
        p = raw(item)
        if not isinstance(p, tuple) or len(p) != 2:
            raise TypeErr(f"dict(): item {i} of pairs is {describe(item)}; each item must be a (key, value) pair")
        out[checked_key("dict", p[0])] = p[1]
    return Dict(out)


@builtin("keys", CAT, "The keys of a dictionary, as a tuple in insertion order.",
         [P("d", doc="a dictionary")], returns="a tuple",
         what="Lists what a dictionary holds: keys({\"a\": 1, \"b\": 2}) is (\"a\", \"b\"). `for k in d` walks "
              "the same keys.",
         how="Python's `list(d.keys())`, as a tuple: the order the keys were first set.",
         errors=["TypeError when d is not a dictionary"],
         examples=["keys({\"a\": 1, (1, 2): 3})", "keys({:})"])
def keys(d):
    return dict_arg("keys", d).keys()


@builtin("values", CAT, "The values of a dictionary, as a tuple in the order of its keys.",
         [P("d", doc="a dictionary")], returns="a tuple",
         what="The values alone, e.g. to sum counts: sum(values(counts)) (a tuple of numbers sums as a "
              "vector); vector(values(d)) makes them a vector.",
         how="Python's `list(d.values())`, as a tuple; tracked values keep their gradients.",
         errors=["TypeError when d is not a dictionary"],
         examples=["values({\"a\": 1, \"b\": 2})", "sum(values({\"a\": 1, \"b\": 2}))"])
def values(d):
    return dict_arg("values", d).values()


@builtin("items", CAT, "The (key, value) pairs of a dictionary, as a tuple in insertion order.",
         [P("d", doc="a dictionary")], returns="a tuple of 2-tuples",
         what="Walks keys and values together: for k, v in items(d) ... end. dict(items(d)) is d again.",
         how="Python's `list(d.items())`, as a tuple of pairs.",
         errors=["TypeError when d is not a dictionary"],
         examples=["items({\"a\": 1, \"b\": 2})",
                   "for k, v in items({\"x\": 1, \"y\": 2})\n    print(k, v * 10)\nend"])
def items(d):
    return dict_arg("items", d).items()


@builtin("get", CAT, "The value of key in a dictionary, or default when it has no such key.",
         [P("d", doc="a dictionary"), P("key", doc="a string, number or tuple of those"),
          P("default", default=None, doc="what to give when key is missing")],
         returns="the value, or default",
         what="Reads a key that may be missing without an error, e.g. counting: "
              "counts[w] = get(counts, w, 0) + 1. d[key] is the same read, but a missing key is a KeyError.",
         how="Python's `d.get(key, default)`.",
         errors=["TypeError when d is not a dictionary, or key is not a string, number or tuple of those"],
         examples=["counts = {\"a\": 2}\nget(counts, \"a\", 0)\nget(counts, \"b\", 0)",
                   "get({(1, 2): \"pair\"}, (1, 2))"])
def get(d, key, default):
    v = dict_arg("get", d).get(checked_key("get", key), _ABSENT)
    return default if v is _ABSENT else v


@builtin("remove", CAT, "A dictionary without one of its keys.",
         [P("d", doc="a dictionary"), P("key", doc="a key d has")],
         returns="a dictionary",
         what="Drops a key: d = remove(d, \"tmp\"). Like every value, d itself is unchanged, so assign the "
              "result back (Python's `del d[key]`).",
         how="A new dictionary of the other items, in their order (O(len(d))).",
         errors=["KeyError when d has no such key",
                 "TypeError when d is not a dictionary, or key is not a string, number or tuple of those"],
         examples=["d = {\"a\": 1, \"b\": 2, \"c\": 3}\nd = remove(d, \"b\")\nd"])
def remove(d, key):
    r = dict_arg("remove", d)
    k = checked_key("remove", key)
    if not r.has(k):
        raise KeyErr(f"remove(): the dictionary has no key {key_text(k)}")
    return r.without(k)


@builtin("tuple", CAT, "The items of a vector, string, dictionary or tuple, as a tuple.",
         [P("xs", doc=_SEQ)], returns="a tuple",
         what="Makes a tuple of the items `for` would visit: tuple([1, 2]) is (1, 2), e.g. to use a vector's "
              "numbers as a dictionary key (keys are strings, numbers or tuples). The inverse of vector(t).",
         how=_WALK + " Python's `tuple(xs)`.",
         errors=["TypeError when xs cannot be walked (a record, none, a bool, a function)"],
         examples=["tuple([3, 4])", "tuple(\"ab\")", "d = {:}\nd[tuple([1, 2])] = \"pair\"\nd"])
def tuple_(xs):
    return tuple(items_of("tuple", xs))
