"""Language errors: every failure a user can cause is a LangError with a kind and a Span.

`render(error, source)` turns one into the message users see:

    script.ml:3:12: ShapeError: ...
      3 | y = [1, 2] @ [1, 2, 3]
        |            ^
      called from script.ml:7:1 in f

InternalError is reserved for bugs in tapeml itself.
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass


@dataclass(frozen=True)
class Span:
    """A place in a source: 1-based line and column of the first character, and the end
    (line, column one past the last character). `file` is the name shown to users."""
    file: str
    line: int
    col: int
    end_line: int
    end_col: int

    def to(self, other: "Span") -> "Span":
        """The span from the start of self to the end of other."""
        return Span(self.file, self.line, self.col, other.end_line, other.end_col)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


MAX_TRACE = 1000        # the most calls an error's call chain keeps (a runaway recursion has 20,000)


class LangError(Exception):
    """A user-facing error. `kind` is what users see (SyntaxError, ShapeError, ...)."""
    kind = "Error"

    def __init__(self, message: str, span: Span | None = None):
        super().__init__(message)
        self.message = message
        self.span = span
        self.trace: list[tuple[str, Span]] = []   # (function name, call site), innermost first
        self.trace_dropped = 0                     # calls past MAX_TRACE: counted, not kept

    def add_call(self, name: str, span: "Span") -> None:
        """Record a call the error passed through (innermost first): the first MAX_TRACE only;
        the rest are counted."""
        if len(self.trace) < MAX_TRACE:
            self.trace.append((name, span))
        else:
            self.trace_dropped += 1

    @property
    def trace_truncated(self) -> bool:
        """More calls than MAX_TRACE: the outer ones were counted, not kept."""
        return self.trace_dropped > 0

    def blamed(self) -> tuple["Span | None", str]:
        """(where the error is blamed, the first line's text after it): the error's own place, or,
        for one raised inside a standard-library function, the user's call of that function
        ("TypeError in decode(): ..."), as `render` shows it first."""
        k = _first_user_call(self)
        if k is None:
            return self.span, f"{self.kind}: {self.message}"
        name, site = self.trace[k]
        said = self.message.startswith(f"{name}(): ")     # the stdlib's own checks name it already
        return site, f"{self.kind}: {self.message}" if said else f"{self.kind} in {name}(): {self.message}"

    @property
    def line(self) -> int | None:
        """The 1-based line where the error is blamed (None when it has no place): for an error
        raised inside the standard library, the line of the user's call (`blamed`)."""
        span = self.blamed()[0]
        return span.line if span else None

    @property
    def column(self) -> int | None:
        """The 1-based column where the error is blamed (None when it has no place)."""
        span = self.blamed()[0]
        return span.col if span else None

    @property
    def file(self) -> str | None:
        """The source's name as users see it ("<string>", a path), or None."""
        span = self.blamed()[0]
        return span.file if span else None

    def with_span(self, span: Span | None) -> "LangError":
        if self.span is None and span is not None:
            self.span = span
        return self

    def __str__(self) -> str:
        """The first line of the rendered error (render): its place, kind and message."""
        span, text = self.blamed()
        return f"{span}: {text}" if span else text



class LangSyntaxError(LangError):
    kind = "SyntaxError"


class IncompleteInput(LangSyntaxError):
    """The input ended inside a bracket, block or string: more lines would complete it."""


class NameErr(LangError):
    kind = "NameError"


class TypeErr(LangError):
    kind = "TypeError"


class ShapeError(LangError):
    kind = "ShapeError"


class IndexErr(LangError):
    kind = "IndexError"


class ValueErr(LangError):
    kind = "ValueError"


class KeyErr(LangError, KeyError):
    """A dictionary has no such key (also a Python KeyError, for the Python API's callers)."""
    kind = "KeyError"


class RecursionErr(LangError):
    kind = "RecursionError"


class IOErr(LangError):
    kind = "IOError"


class NaNErr(LangError):
    """check_nan is on and an operation made a NaN or an infinity (lang/array/diagnostics.py)."""
    kind = "NaNError"


class Interrupted(LangError):
    kind = "Interrupted"


class InternalError(Exception):
    """A bug in tapeml, never the user's fault."""


def caret_lines(span: Span, source: str | None) -> list[str]:
    """The source line of `span` with a caret run under the blamed part."""
    if source is None:
        return []
    lines = source.split("\n")            # the lexer counts lines by \n only
    if not (1 <= span.line <= len(lines)):
        return []
    text = lines[span.line - 1].replace("\t", " ").rstrip("\r")
    end = span.end_col if span.end_line == span.line else len(text) + 1
    col = span.col
    width = max(1, min(end, len(text) + 1) - col)
    if len(text) > 120:                   # a long line: a window around the caret
        start = max(0, col - 60)
        shown = text[start:start + 120]
        prefix = "..." if start > 0 else ""
        suffix = "..." if start + 120 < len(text) else ""
        text = prefix + shown + suffix
        col = col - start + len(prefix)
        width = min(width, 120 - (col - len(prefix)) + 1)
    gutter = str(span.line)
    pad, under = text[:col - 1], text[col - 1:col - 1 + width]
    return [f"  {gutter} | {text}", f"  {' ' * len(gutter)} | {' ' * _columns(pad)}{'^' * max(1, _columns(under))}"]


def _columns(s: str) -> int:
    """The terminal columns s takes: 2 for an East Asian wide or full-width character (CJK, most
    emoji), 0 for a combining mark, 1 otherwise, so that the caret lands under the blamed text."""
    if s.isascii():
        return len(s)
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in s)


def render(error: LangError, sources: dict[str, str] | str | None = None) -> str:
    """The full message of a language error: place, kind, message, source line, caret, call chain.

    `sources` maps file names to their text (or is the text of the error's own file)."""
    def source_of(span):
        if isinstance(sources, dict):
            return sources.get(span.file)
        return sources
    out = []
    trace = error.trace
    user = _first_user_call(error)
    if user is not None:
        # raised inside a stdlib function: blame the user's call of it, where the fix is
        k = user
        site, text = error.blamed()
        out.append(f"{site}: {text}")
        out.extend(caret_lines(site, source_of(site)))
        inner = f" in {trace[k - 1][0]}" if k > 0 else ""
        out.append(f"  raised inside the standard library at {error.span}{inner}")
        trace = trace[k + 1:]
    elif error.span is not None:
        out.append(f"{error.span}: {error.kind}: {error.message}")
        out.extend(caret_lines(error.span, source_of(error.span)))
    else:
        out.append(f"{error.kind}: {error.message}")
    out.extend(trace_lines(trace, getattr(error, "trace_dropped", 0)))
    return "\n".join(out)


TRACE_LINES = 20        # the most call-chain lines an error shows


def trace_lines(trace, dropped: int = 0) -> list[str]:
    """The call chain, innermost first. A recursion's repeated frames (the same call, or the
    same cycle of up to 4 calls, as in mutual recursion) show once, then '... the same call N
    more times'; past TRACE_LINES lines the rest is counted. `dropped`: the calls further out
    that the error counted but did not keep (past MAX_TRACE), said with their true number."""
    keys = [(name, str(site)) for name, site in trace]
    lines, i, n = [], 0, len(trace)
    further = f", and {dropped} more call{'s' * (dropped != 1)} further out" if dropped else ""
    while i < n:
        if len(lines) >= TRACE_LINES:
            lines.append(f"  ... and {n - i + dropped} more call{'s' * (n - i + dropped != 1)}")
            return lines
        period, reps = 1, 1
        for p in range(1, 5):
            r = 1
            while keys[i + r * p:i + (r + 1) * p] == keys[i:i + p]:
                r += 1
            if r >= 3 and r * p > period * reps:
                period, reps = p, r
        for name, site in trace[i:i + period]:
            lines.append(f"  called from {site} in {name}")
        if reps >= 3:
            again = reps - 1
            what = "the same call" if period == 1 else f"the same {period} calls"
            lines.append(f"  ... {what} {again} more time{'s' * (again != 1)}")
            i += reps * period
        else:
            i += period
    if dropped:
        lines[-1] += further
    return lines


def _first_user_call(error: LangError) -> int | None:
    """For an error raised inside the stdlib, the index in the trace of the call that entered the
    stdlib from the user's code; None for an error in the user's own code."""
    if error.span is None or not str(error.span.file).startswith(STDLIB_PREFIX):
        return None
    for k, (_name, site) in enumerate(error.trace):
        if site is not None and not str(site.file).startswith(STDLIB_PREFIX):
            return k
    return None


STDLIB_PREFIX = "<stdlib>"


def close_names(word: str, names, n: int = 1) -> list[str]:
    """Up to n of `names` that `word` looks like a typo of, best first: difflib's similar names
    (ratio 0.75 or more) within a small edit distance (one edit for a name of up to five letters, two up to eight,
    three beyond; a swap of neighbours is one edit), so 'sofmax' finds 'softmax' but 'int' finds
    neither 'print' nor 'inv', and 'foo' not 'floor'. Every "did you mean" of the language asks here."""
    import difflib
    limit = 1 if len(word) <= 5 else 2 if len(word) <= 8 else 3
    return [c for c in difflib.get_close_matches(word, list(names), max(n, 5), 0.75)
            if _edit_distance(word.lower(), c.lower()) <= limit][:n]


def _edit_distance(a: str, b: str) -> int:
    """Optimal string alignment distance: insertions, deletions, substitutions, adjacent swaps."""
    prev2, prev = None, list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[len(b)]
