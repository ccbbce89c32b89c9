"""How a number is written in every printed value and message: `format_number` (the printer's
7 significant digits, whole numbers below 2^53 in full) and `format_gb` (sizes in messages). Below
values.py and the printer (printer.py), which both write numbers this way.
"""
from __future__ import annotations

import math

WHOLE_LIMIT = 2.0 ** 53    # whole numbers below this magnitude print every digit


def format_number(x) -> str:
    """A whole number below 2^53 in magnitude with all its digits (18915328); any other number
    with up to 7 significant digits, the exponent without '+' or leading zeros (1.234568e-8).
    A fraction that rounds to 7 digits alone takes the exponent form (1234567.5 prints
    1.234568e6, not 1234568), so 7 or more digits without '.' or 'e' are exactly that number;
    noise around a small whole number still prints short (0.99999999 prints 1)."""
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x.is_integer() and abs(x) < WHOLE_LIMIT:
        return str(int(x))            # -0.0 prints as 0
    s = "%.7g" % x
    if len(s.lstrip("-")) >= 7 and "e" not in s and "." not in s:     # a fraction that would look whole
        mant, exp = ("%.6e" % x).split("e")
        s = f"{mant.rstrip('0').rstrip('.')}e{exp}"
    if "e" in s:
        mant, exp = s.split("e")
        sign = "-" if exp[0] == "-" else ""
        s = f"{mant}e{sign}{exp[1:].lstrip('0') or '0'}"
    return s


def format_gb(nbytes) -> str:
    """A size for messages: gigabytes to 3 significant digits, as the printer writes them ('8000 GB')."""
    return f"{format_number(float(f'{nbytes / 1e9:.3g}'))} GB"
