"""Applying a format spec to a value: "{x:.3f}", "{n:5d}", "{s:>8}" (docs/language.md, Strings).

The front end parses and checks a spec (syntax/formatspec.py: `parse_spec`, `spec_of`); here a
parsed `Spec` is applied to a value when the string is built. Numbers take every part (d b o x X
need a whole number; e E f F g G % any; no type keeps the one printer's digits, with a precision
alone meaning g); strings, bools and none take fill, alignment, width and precision (their printed
words, cut to the precision); a matrix takes a number's spec for each element, laid out by the one
printer (printer.format_array). Errors are LangErrors in tapeml's words; the caller attaches the
spec's span.
"""
from __future__ import annotations

import math

import numpy as np

from tapeml.array import limits
from tapeml.array.backend import to_numpy
from tapeml.array.tape import raw
from tapeml.array.printer import format_array, format_number
from tapeml.array.values import describe
from tapeml.syntax.errors import TypeErr, ValueErr
from tapeml.syntax.formatspec import GRAMMAR, WHOLE_TYPES, Spec


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
    r = to_numpy(raw(v))         # another backend's matrix is read on the host (the one boundary)
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
