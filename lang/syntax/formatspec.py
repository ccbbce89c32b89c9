"""Format specs in interpolation: "{x:.3f}", "{n:5d}", "{s:>8}" (docs/language.md, Strings).

The spec is Python's format mini-language, [[fill]align][sign][#][0][width][grouping][.precision][type],
checked when the program is parsed (`parse_spec`, here: the front end reads a spec and needs no
value) and applied to a value when the string is built (`apply_spec`, in array/formatting.py, with
the one printer). Numbers take every part (d b o x X need a whole number; e E f F g G % any; no type
keeps the one printer's digits, with a precision alone meaning g); strings, bools and none take
fill, alignment, width and precision (their printed words, cut to the precision); a matrix takes
a number's spec for each element, laid out by the one printer (values.format_array). Errors are
LangErrors at the spec's span, in tapeml's words.
"""
from __future__ import annotations

import re
from typing import NamedTuple

from tapeml.syntax.errors import LangSyntaxError

_SPEC = re.compile(r"(?:(?P<fill>.)?(?P<align>[<>=^]))?(?P<sign>[-+ ])?(?P<alt>#)?(?P<zero>0)?"
                   r"(?P<width>\d+)?(?P<grouping>[,_])?(?:\.(?P<precision>\d+))?(?P<type>[A-Za-z%])?\Z", re.S)
_CODE_LIKE = re.compile(r"[A-Za-z_]\w|[A-Za-z_]$|:|\s\S|[()\[\]]")
WHOLE_TYPES = frozenset("dboxX")     # need a whole number
REAL_TYPES = frozenset("eEfFgG%")
MAX_FIELD = 1000                # the largest width or precision
GRAMMAR = "[[fill]align][sign][#][0][width][,][.precision][type], e.g. .3f, 8.2e, >10, +d"
TYPES = ("the types are d b o x X (whole numbers), e E f F g G % (any number) and s (strings; "
         "the default)")
WHOLE_LIMIT = 2.0 ** 53


class Spec(NamedTuple):
    text: str
    fill: str
    align: str
    sign: str
    alt: bool
    zero: bool
    width: int
    grouping: str
    precision: int | None
    type: str


def _short(text: str) -> str:
    """A spec as quoted in a message: at most 40 characters."""
    return text if len(text) <= 40 else text[:37] + "..."


def parse_spec(text: str, span) -> Spec:
    """The parts of the spec `text` (the characters between ':' and '}'), or a SyntaxError at `span`."""
    # a spec that reads like code was most likely meant as a range: "{0:n}" for "{(0:n)}"
    hint = ("; a range inside an interpolation needs parentheses, \"{(a:b)}\", since a ':' at the "
            "top level of the braces starts a format spec") if _CODE_LIKE.search(text) else ""
    m = _SPEC.match(text)
    if m is None:
        raise LangSyntaxError(f"the format spec '{text}' is not one tapeml reads; a spec is {GRAMMAR}{hint}", span)
    g = m.groupdict()
    kind = g["type"] or ""
    if kind and kind not in WHOLE_TYPES | REAL_TYPES | {"s"}:
        raise LangSyntaxError(f"unknown format type '{kind}' in '{text}'; {TYPES}{hint}", span)
    for part in ("width", "precision"):
        digits = (g[part] or "").lstrip("0") or "0"
        # compared by length first: int() of more than 4,300 digits is Python's ValueError
        if len(digits) > len(str(MAX_FIELD)) or int(digits) > MAX_FIELD:
            shown = digits if len(digits) <= 20 else f"of {len(digits)} digits"
            raise LangSyntaxError(f"the {part} {shown} in the format spec '{_short(text)}' is past the "
                                  f"limit of {MAX_FIELD}", span)
    if kind in WHOLE_TYPES and g["precision"] is not None:
        raise LangSyntaxError(f"the format spec '{text}' gives a precision to the whole-number type "
                              f"'{kind}'; use f for digits after the point (.2f)", span)
    if kind == "s" and (g["sign"] or g["alt"] or g["zero"] or g["grouping"] or g["align"] == "="):
        raise LangSyntaxError(f"the format spec '{text}' has a number's parts (sign, #, 0, grouping "
                              f"or '=') with the string type 's'", span)
    if kind in ("b", "o", "x", "X") and g["grouping"] == ",":
        raise LangSyntaxError(f"the format spec '{text}' groups with ',' in base '{kind}'; use '_'", span)
    return Spec(text, g["fill"] or "", g["align"] or "", g["sign"] or "", bool(g["alt"]),
                bool(g["zero"]), int(g["width"] or 0), g["grouping"] or "",
                None if g["precision"] is None else int(g["precision"]), kind)


_CACHE: dict = {}


def spec_of(text: str) -> Spec:
    """The parsed spec of `text`, which parse_spec has already accepted (the parser checks it)."""
    spec = _CACHE.get(text)
    if spec is None:
        spec = _CACHE[text] = parse_spec(text, None)
    return spec
