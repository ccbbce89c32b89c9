"""Format specs in interpolation: "{x:.3f}", "{n:5d}", "{s:>8}" (docs/language.md, Strings).

The spec is Python's format mini-language, [[fill]align][sign][#][0][width][grouping][.precision][type],
checked when the program is parsed (`parse_spec`) and applied to a value when the string is built
(`apply_spec`). Numbers take every part (d b o x X need a whole number; e E f F g G % any; no type
keeps the one printer's digits, with a precision alone meaning g); strings, bools and none take
fill, alignment, width and precision (their printed words, cut to the precision); a matrix takes
a number's spec for each element, laid out by the one printer (values.format_array). Errors are
LangErrors at the spec's span, in tapeml's words.
"""
from __future__ import annotations

import math
import re
from typing import NamedTuple

import numpy as np

from . import limits
from .errors import LangSyntaxError, TypeErr, ValueErr
from .values import describe, format_array, format_number

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
        if g[part] is not None and int(g[part]) > MAX_FIELD:
            raise LangSyntaxError(f"the {part} {int(g[part])} in the format spec '{text}' is past the "
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


def _pad(body: str, sign: str, spec: Spec, default_align: str) -> str:
    """`sign` + `body` filled to the spec's width; '=' (or a 0 flag) pads between sign and digits."""
    fill, align = spec.fill or " ", spec.align
    if not align:
        if spec.zero:
            fill, align = spec.fill or "0", "="
        else:
            align = default_align
    n = spec.width - len(sign) - len(body)
    if n <= 0:
        return sign + body
    if align == "=":
        return sign + fill * n + body
    text = sign + body
    if align == "<":
        return text + fill * n
    if align == ">":
        return fill * n + text
    left = n // 2
    return fill * left + text + fill * (n - left)


def _group(digits: str, sep: str) -> str:
    """'1234567.5' -> '1,234,567.5' (the integer part only; an exponent form is left alone)."""
    if not sep or "e" in digits or not digits[:1].isdigit():
        return digits
    whole, dot, frac = digits.partition(".")
    out = []
    while len(whole) > 3:
        out.insert(0, whole[-3:])
        whole = whole[:-3]
    return sep.join([whole] + out) + dot + frac


def _python_format(x, text: str, spec: Spec) -> str:
    try:
        return format(x, text)
    except ValueError:          # a combination parse_spec lets through and Python refuses
        raise TypeErr(f"the format spec '{spec.text}' does not apply to a number; a spec is {GRAMMAR}") from None


def format_number_spec(x: float, spec: Spec) -> str:
    kind = spec.type
    if kind == "s":
        raise TypeErr("the format type 's' is for strings, got a number; leave the type out or use g")
    if kind in WHOLE_TYPES:
        if not (math.isfinite(x) and float(x).is_integer()):
            raise ValueErr(f"the format type '{kind}' needs a whole number, got {format_number(x)}; "
                           f"round it first (round(x)) or use f (.0f)")
        return _python_format(int(x), spec.text, spec)
    if kind or spec.precision is not None:
        return _python_format(float(x), spec.text if kind else spec.text + "g", spec)
    # no type and no precision: the one printer's digits, placed as the spec says
    text = format_number(x)
    negative = text.startswith("-")
    body = _group(text.lstrip("-"), spec.grouping)
    sign = "-" if negative else "+" if spec.sign == "+" else " " if spec.sign == " " else ""
    if spec.alt and "." not in body and "e" not in body and body[:1].isdigit():
        body += "."
    return _pad(body, sign, spec, ">")


def format_word_spec(word: str, what: str, spec: Spec) -> str:
    """A string, or a bool or none by its printed word: fill, alignment, width and precision."""
    if spec.type and spec.type != "s":
        raise TypeErr(f"the format type '{spec.type}' needs a number, got {what}")
    if spec.sign or spec.alt or spec.grouping or spec.align == "=" or (spec.zero and not spec.align):
        raise TypeErr(f"the format spec '{spec.text}' has a number's parts (sign, #, 0, grouping or '='), "
                      f"which do not apply to {what}; {what} takes fill, alignment, width and precision "
                      f"(e.g. >8, ^10, .3)")
    if spec.precision is not None:
        word = word[:spec.precision]
    fill = spec.fill or ("0" if spec.zero else " ")
    return _pad(word, "", spec._replace(fill=fill, zero=False), "<")


def apply_spec(v, spec: Spec) -> str:
    """The text of `v` under `spec` (the span is attached by the caller)."""
    from .tape import raw
    r = raw(v)
    if isinstance(r, np.ndarray) and r.ndim == 0:
        r = r[()]
    if r is None:
        return format_word_spec("none", "none", spec)
    if r is True or r is False or isinstance(r, np.bool_):
        return format_word_spec("true" if r else "false", "a bool", spec)
    if isinstance(r, str):
        return format_word_spec(r, "a string", spec)
    if isinstance(r, (float, int, np.floating, np.integer)):
        return format_number_spec(float(r), spec)
    if isinstance(r, np.ndarray):
        if r.size == 0:
            return format_array(r)
        per = max(spec.width, (spec.precision or 0) + 30)
        limits.check_string_bytes("the formatted matrix", r.size * (per + 2))
        if r.dtype == np.bool_:
            cells = [format_word_spec("true" if b else "false", "a bool matrix", spec) for b in r.flat]
        else:
            cells = [format_number_spec(x, spec) for x in r.astype(np.float64).flat]
        return format_array(np.array(cells, dtype=object).reshape(r.shape))
    raise TypeErr(f"a format spec applies to a number, a string, a bool or a matrix, not {describe(v)}"
                  + ("; format the items one by one, e.g. \"{t[0]:.2f}\"" if isinstance(r, tuple) else ""))
