"""The tokenizer: source text -> list[Token], each token with its Span.

Newlines end statements only outside brackets and not after a binary operator or a comma;
the lexer drops the others, so the parser sees one NEWLINE per statement end. A string token's
value is a list of parts: plain text, or the token list of an interpolated `{expr}`.
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from tapeml.syntax.errors import IncompleteInput, LangSyntaxError, Span

# --- token kinds ----------------------------------------------------------------------
# literals and names
NUMBER, STRING, NAME = "NUMBER", "STRING", "NAME"
# layout
NEWLINE, EOF = "NEWLINE", "EOF"
# Block keywords, the one list: a block opens with an opener, may continue with `elif`/`else`,
# and closes with `end`. The parser (where a statement list stops) and the REPL (indent,
# auto-dedent) derive theirs from these.
BLOCK_OPENERS = ("fn", "if", "for", "while")
BLOCK_CONTINUERS = ("elif", "else")
BLOCK_CLOSER = "end"
BLOCK_END = (BLOCK_CLOSER,) + BLOCK_CONTINUERS     # the words that end a block's statements
# keywords: their kind is their own text. The Pygments lexer imports this set.
KEYWORDS = frozenset(BLOCK_OPENERS + BLOCK_END
                     + ("in", "return", "break", "continue", "true", "false", "none", "and", "or", "not",
                        "import"))
# operators and punctuation, longest first so that `==` wins over `=`
OPERATORS = ["==", "!=", "<=", ">=", "+=", "-=", "*=", "/=", "->",
             "+", "-", "*", "/", "%", "@", "^", "<", ">", "=", ":", ",", ";", ".", "'",
             "(", ")", "[", "]", "{", "}"]
_OPS_BY_FIRST: dict = {}   # first character -> the operators starting with it, longest first
for _op in OPERATORS:
    _OPS_BY_FIRST.setdefault(_op[0], []).append(_op)
# after these a newline does not end the statement
CONTINUES = frozenset(["+", "-", "*", "/", "%", "@", "^", "==", "!=", "<", "<=", ">", ">=",
                       "=", "+=", "-=", "*=", "/=", "->", ":", ",", ".", "and", "or", "not"])
# a token of these kinds ends a value, so a following `'` is a transpose
ENDS_VALUE = frozenset([NUMBER, STRING, NAME, ")", "]", "}", "'", "end", "true", "false", "none"])
OPENERS = {"(": ")", "[": "]", "{": "}"}
MAX_STRING_NESTING = 50   # "{"{"..."}"}": each level is a nested scanner (Python recursion)
CLOSERS = {")": "(", "]": "[", "}": "{"}

# Characters that look like ASCII operators but are not, with the ASCII one to use.
LOOKALIKES = {
    "\u2212": "-", "\u2013": "-", "\u2014": "-", "\u2010": "-", "\u2011": "-",
    "\uff03": "#", "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u2018": "'", "\u2019": "'",
    "\u00d7": "*", "\u22c5": "*", "\u00b7": "*", "\u2215": "/", "\u00f7": "/",
    "\u00a0": "a space", "\uff08": "(", "\uff09": ")", "\uff0c": ",", "\uff1d": "=",
    "\uff3b": "[", "\uff3d": "]", "\uff1b": ";", "\uff1a": ":", "\u2264": "<=", "\u2265": ">=",
    "\u2260": "!=",
}
# ASCII spellings from other languages, with what tapeml writes instead
FOREIGN = {"**": "^", "&&": "and", "||": "or", "~=": "!=", ".*": "*", "./": "/", ".^": "^",
           "!": "not", "&": "and", "|": "or", "~": "not", "'": None}
# what each means on masks: said with the replacement ('~mask' is 'not mask', elementwise)
FOREIGN_MASK = {"!": "not mask", "~": "not mask", "&": "a and b", "|": "a or b"}


def _digit(ch: str) -> bool:
    """An ASCII digit (str.isdigit also accepts '²' and other scripts' digits)."""
    return "0" <= ch <= "9"

# Python's string prefixes: f"..." r"..." b"..." (tapeml's strings interpolate without one)
STRING_PREFIXES = {"f", "r", "b", "u", "rb", "br", "fr", "rf"}

# Names from other languages, with what tapeml writes instead.
FOREIGN_WORDS = {"True": "'true'", "False": "'false'", "None": "'none'", "null": "'none'", "nil": "'none'",
                   "def": "'fn name(args) ... end'", "function": "'fn name(args) ... end'",
                   "lambda": "'fn(x) -> expression'", "elseif": "'elif'", "endif": "'end'",
                   "endfor": "'end'", "endwhile": "'end'", "endfunction": "'end'", "pass": "nothing (an empty block)",
                   "self": "no methods: pass the record as an argument", "np": "builtins directly (zeros, sum, ...)",
                   "numpy": "builtins directly (zeros, sum, ...)", "torch": "builtins directly (zeros, sum, ...)",
                   "then": "nothing after the condition: the block starts on the next line",
                   "do": "nothing after the condition: the block starts on the next line"}


def char_text(ch: str) -> str:
    """A character as a message names it: 'x' when it prints, its code point and name when it
    does not or is not ASCII ('é' (U+00E9 LATIN SMALL LETTER E WITH ACUTE), U+0000 (NULL))."""
    name = unicodedata.name(ch, "")
    if not name and unicodedata.category(ch) == "Cc":
        name = CONTROL_NAMES.get(ord(ch), "a control character")
    if ch.isascii() and ch.isprintable():
        return f"'{ch}'"
    if ch.isprintable():
        return f"'{ch}' (U+{ord(ch):04X} {name or 'unnamed'})"
    return f"U+{ord(ch):04X} ({name or 'unnamed'})"


CONTROL_NAMES = {0: "NULL", 7: "BELL", 8: "BACKSPACE", 11: "LINE TABULATION", 12: "FORM FEED",
                 27: "ESCAPE", 127: "DELETE"}


def utf8_error_place(data: bytes, start: int) -> tuple[int, int]:
    """The 1-based line and column (in characters) of byte `start` of UTF-8 `data`."""
    before = data[:start].decode("utf-8", errors="replace")
    line = before.count("\n") + 1
    return line, len(before) - (before.rfind("\n") + 1) + 1


def decode_source(data: bytes, filename: str) -> str:
    """The text of a script from its bytes: UTF-8, a leading byte-order mark dropped. A byte that
    is not UTF-8 (a Latin-1 file) is a SyntaxError at its line and column."""
    data = data.removeprefix(b"\xef\xbb\xbf")      # a UTF-8 byte-order mark from some editors
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line, col = utf8_error_place(data, e.start)
        err = LangSyntaxError(f"the file is not UTF-8 text: byte 0x{data[e.start]:02X} cannot start or continue a "
                              f"character here (a Latin-1 or other legacy encoding?); save the file as UTF-8",
                              Span(filename, line, col, line, col + 1))
        err.source = data.decode("utf-8", errors="replace")   # for the caret line
        raise err from None


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    value: object
    span: Span
    space_before: bool = False

    def __repr__(self):
        return f"Token({self.kind!r}, {self.text!r}, {self.span.line}:{self.span.col})"


class Lexer:
    """A cursor scanner (advance / peek / match) over one source text."""

    def __init__(self, source: str, filename: str = "<input>", pos: int = 0, line: int = 1, col: int = 1):
        self.src = source
        self.file = filename
        self.pos, self.line, self.col = pos, line, col
        self.tokens: list[Token] = []
        self.brackets: list[Token] = []
        self.nesting = 0          # how many interpolated strings enclose this scanner

    # cursor helpers
    def peek(self, k: int = 0) -> str:
        p = self.pos + k
        return self.src[p] if p < len(self.src) else ""

    def advance(self) -> str:
        ch = self.src[self.pos]
        self.pos += 1
        if ch == "\n":
            self.line += 1
            self.col = 1
        else:
            self.col += 1
        return ch

    def at_end(self) -> bool:
        return self.pos >= len(self.src)

    def span_from(self, line: int, col: int) -> Span:
        return Span(self.file, line, col, self.line, self.col)

    def here(self, width: int = 1) -> Span:
        return Span(self.file, self.line, self.col, self.line, self.col + width)

    def error(self, message: str, span: Span | None = None, incomplete: bool = False):
        cls = IncompleteInput if incomplete else LangSyntaxError
        return cls(message, span or self.here())

    # the scanner
    def run(self, stop_at_brace: bool = False) -> list[Token]:
        space = True
        while not self.at_end():
            ch = self.peek()
            if ch in " \t\r":
                self.advance()
                space = True
                continue
            if ch == "#":
                while not self.at_end() and self.peek() != "\n":
                    self.advance()
                continue
            if ch == "\\" and self.peek(1) == "\n":
                self.advance(); self.advance()
                space = True
                continue
            if ch == "\n":
                line, col = self.line, self.col
                self.advance()
                space = True
                if self.brackets or stop_at_brace:
                    continue
                prev = self.tokens[-1] if self.tokens else None
                if prev is None or prev.kind in (NEWLINE, ";") or prev.kind in CONTINUES:
                    continue
                self.tokens.append(Token(NEWLINE, "\n", None, Span(self.file, line, col, line, col + 1)))
                continue
            if stop_at_brace and ch in "}:" and not self.brackets:    # a top-level ':' starts a format spec
                return self.tokens
            self.scan_token(space)
            space = False
        if stop_at_brace:
            raise self.error("unterminated '{' in string interpolation", self.here(), incomplete=False)
        if self.brackets:
            b = self.brackets[-1]
            raise self.error(f"'{b.text}' opened at {b.span.line}:{b.span.col} is never closed",
                             b.span, incomplete=True)
        line, col = self.line, self.col
        if self.tokens and self.tokens[-1].kind in CONTINUES - {"not"} - {"."}:
            t = self.tokens[-1]
            raise self.error(f"the input ends after '{t.text}'; an operand must follow", t.span,
                             incomplete=True)
        self.tokens.append(Token(EOF, "", None, Span(self.file, line, col, line, col)))
        return self.tokens

    def add(self, kind: str, text: str, value, line: int, col: int, space: bool) -> Token:
        tok = Token(kind, text, value, self.span_from(line, col), space)
        self.tokens.append(tok)
        return tok

    def scan_token(self, space: bool) -> None:
        line, col = self.line, self.col
        ch = self.peek()
        if _digit(ch) or (ch == "." and _digit(self.peek(1)) and not self.prev_ends_value()):
            self.scan_number(line, col, space)
        elif ch.isascii() and (ch.isalpha() or ch == "_"):
            start = self.pos
            while not self.at_end() and self.peek().isascii() and (self.peek().isalnum() or self.peek() == "_"):
                self.advance()
            text = self.src[start:self.pos]
            if self.peek() == '"' and text.lower() in STRING_PREFIXES:     # Python's f"...", r"..."
                raise self.error(f"tapeml strings take no prefix: write \"...\" without the '{text}'"
                                 + ("; every string interpolates: \"{x}\" (and \"{{\" for a brace)"
                                    if "f" in text.lower() else ""), self.span_from(line, col))
            self.add(text if text in KEYWORDS else NAME, text, text, line, col, space)
        elif ch == '"':
            self.scan_string(line, col, space)
        elif ch == "'":
            if not self.prev_ends_value():
                raise self.error("strings use double quotes: write \"...\" (a ' only means transpose, "
                                 "right after a value)")
            self.advance()
            self.add("'", "'", None, line, col, space)
        else:
            self.scan_operator(line, col, space)

    def prev_ends_value(self) -> bool:
        return bool(self.tokens) and self.tokens[-1].kind in ENDS_VALUE

    def exponent_at(self, k: int) -> int:
        """The length of an exponent (e3, E-07) starting k characters ahead, or 0."""
        if self.peek(k) not in ("e", "E"):
            return 0
        j = k + 1
        if self.peek(j) in ("+", "-"):
            j += 1
        if not _digit(self.peek(j)):
            return 0
        while _digit(self.peek(j)):
            j += 1
        return j - k

    def scan_number(self, line: int, col: int, space: bool) -> None:
        """number := digits ["." [digits]] [exponent] | "." digits [exponent];
        exponent := ("e" | "E") ["+" | "-"] digits. A "." followed by a name (other than an
        exponent) is not part of the number: `1.e3` is 1000, `x.e3` and `1.5.e3` read a field."""
        start = self.pos
        while _digit(self.peek()):
            self.advance()
        if self.peek() == "." and _digit(self.peek(1)):
            self.advance()
            while _digit(self.peek()):
                self.advance()
        elif self.peek() == "." and (self.exponent_at(1) or not (self.peek(1).isalpha() or self.peek(1) == "_")):
            self.advance()   # `3.` is 3.0 and `1.e3` is 1000
        for _ in range(self.exponent_at(0)):
            self.advance()
        text = self.src[start:self.pos]
        nxt = self.peek()
        if nxt == "_" and (_digit(self.peek(1)) or self.peek(1) == "_"):
            j = self.pos
            while j < len(self.src) and (_digit(self.src[j]) or self.src[j] == "_"):
                j += 1
            whole = self.src[start:j]
            raise self.error(f"numbers are written without '_' separators: write {whole.replace('_', '')} "
                             f"for {whole}", self.here())
        if nxt and nxt.isascii() and (nxt.isalpha() or nxt == "_"):
            raise self.error(f"a name cannot follow the number {text} directly; "
                             f"did you mean {text} * {nxt}...?", self.here())
        self.add(NUMBER, text, float(text), line, col, space)

    def scan_string(self, line: int, col: int, space: bool) -> None:
        self.advance()  # opening quote
        parts: list = []
        buf: list[str] = []
        while True:
            if self.at_end() or self.peek() == "\n":
                raise self.error("unterminated string: a string must close with \" on the line "
                                 "it starts (use \\n for a newline)", Span(self.file, line, col, line, col + 1))
            ch = self.peek()
            if ch == '"':
                self.advance()
                break
            if ch == "\\":
                esc_line, esc_col = self.line, self.col
                self.advance()
                e = self.peek()
                table = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "{": "{", "}": "}"}
                if e not in table or not e:
                    shown = f"'\\{e}'" if e.isprintable() else f"'\\' followed by {char_text(e)}"
                    raise self.error(f"unknown escape {shown} in string; the escapes are \\n \\t \\\" \\\\",
                                     Span(self.file, esc_line, esc_col, esc_line, esc_col + 2))
                self.advance()
                buf.append(table[e])
                continue
            if ch == "{" and self.peek(1) == "{":
                self.advance(); self.advance()
                buf.append("{")
                continue
            if ch == "}" and self.peek(1) == "}":
                self.advance(); self.advance()
                buf.append("}")
                continue
            if ch == "}":
                raise self.error("a single '}' in a string; write '}}' for a literal brace")
            if ch == "{":
                if buf:
                    parts.append("".join(buf))
                    buf = []
                open_line, open_col = self.line, self.col
                self.advance()
                if self.nesting >= MAX_STRING_NESTING:
                    raise self.error(f"nesting too deep: strings interpolated inside strings more than "
                                     f"{MAX_STRING_NESTING} levels deep")
                sub = Lexer(self.src, self.file, self.pos, self.line, self.col)
                sub.nesting = self.nesting + 1
                try:
                    toks = sub.run(stop_at_brace=True)
                except LangSyntaxError as err:
                    if "unterminated '{'" in err.message or sub.at_end():
                        raise self.error("unterminated '{' in string interpolation: close it with '}'",
                                         Span(self.file, open_line, open_col, open_line, open_col + 1))
                    raise
                self.pos, self.line, self.col = sub.pos, sub.line, sub.col
                end_span = self.here()
                spec = spec_span = None
                if self.peek() == ":":
                    spec, spec_span = self.format_spec(open_line, open_col)
                self.advance()  # the closing brace
                if not toks:
                    what = ("an interpolation needs an expression before its format spec"
                            if spec is not None else "empty '{}' in string; write '{{}}' for literal braces")
                    raise self.error(what, Span(self.file, open_line, open_col, self.line, self.col))
                toks.append(Token(EOF, "", None, end_span))
                part = (toks, Span(self.file, open_line, open_col, self.line, self.col))
                parts.append(part if not spec else part + (spec, spec_span))
                continue
            buf.append(self.advance())
        if buf or not parts:
            parts.append("".join(buf))
        text = self.src_between(line, col)
        self.add(STRING, text, parts, line, col, space)

    def format_spec(self, open_line: int, open_col: int):
        """The characters of a format spec, from the ':' (at the cursor) to the '}' (left at the
        cursor), and their span: "{x:.3f}" gives ".3f" (formatspec.py reads it)."""
        self.advance()          # the ':'
        line, col, start = self.line, self.col, self.pos
        while True:
            ch = self.peek()
            if ch == "}":
                break
            if ch in ('"', "\n", ""):
                raise self.error("unterminated format spec in string interpolation: close it with '}'",
                                 Span(self.file, open_line, open_col, open_line, open_col + 1))
            if ch in "{\\":
                raise self.error(f"a format spec cannot hold '{ch}' (a spec is plain characters such "
                                 f"as .3f or >8, up to the '}}')")
            self.advance()
        return self.src[start:self.pos], Span(self.file, line, col, self.line, self.col)

    def src_between(self, line: int, col: int) -> str:
        return ""  # the raw text of strings is not needed; parts carry the content

    def scan_operator(self, line: int, col: int, space: bool) -> None:
        ch = self.peek()
        if ch in LOOKALIKES:
            name = unicodedata.name(ch, "unknown")
            ascii_ = LOOKALIKES[ch]
            use = ascii_ if ascii_ == "a space" else f"'{ascii_}'"
            raise self.error(f"look-alike character '{ch}' (U+{ord(ch):04X} {name}) at column {col}; "
                             f"use {use} instead")
        two = ch + self.peek(1)
        if two == "//":
            raise self.error("'//' is not a tapeml operator: comments start with '#', and floor division "
                             "is floor(a / b)", self.here(2))
        if ch == "%" and (not self.tokens or self.tokens[-1].kind in (NEWLINE, ";")):
            raise self.error("'%' does not start a comment in tapeml; comments start with '#'")
        if two in FOREIGN and two not in OPERATORS:
            raise self.error(f"'{two}' is not a tapeml operator; write '{FOREIGN[two]}'", self.here(2))
        for op in _OPS_BY_FIRST.get(ch, ()):
            if self.src.startswith(op, self.pos):
                break
        else:
            if ch in FOREIGN and FOREIGN[ch]:
                raise self.error(f"'{ch}' is not a tapeml operator; write '{FOREIGN[ch]}'"
                                 + (f" (on bool matrices it works elementwise: {FOREIGN_MASK[ch]})"
                                    if ch in FOREIGN_MASK else ""))
            hint = ""
            if ch == "\\" and self.nesting > 0:     # "{\"a\": 1}": the brace opened an interpolation
                hint = "; inside a string '{' starts an interpolation: write '{{' for a literal brace"
            raise self.error(f"unexpected character {char_text(ch)}"
                             + ("" if ch.isascii() and ch.isprintable() else " outside a string") + hint)
        if op in ("+", "-") and self.brackets and self.brackets[-1].text == "[" and space \
                and self.peek(1) not in (" ", "\t", "\n", "") and self.prev_ends_value():
            prev = self.tokens[-1].text
            raise self.error(f"ambiguous '{op}' inside brackets: matrix elements need commas; write "
                             f"'[{prev}, {op}...]' for two elements or '[{prev} {op} ...]' for a difference")
        if op == ":" and not self.brackets:
            k = 1
            while self.peek(k) in (" ", "\t", "\r"):
                k += 1
            if self.peek(k) in ("\n", "#", ""):
                raise self.error("a ':' at the end of a line: tapeml blocks take no ':' (write "
                                 "'if x > 0', 'for i in 0:n-1' or 'fn f(x)' and close the block with "
                                 "'end'); a range a:b keeps its end on the same line")
        for _ in op:
            self.advance()
        tok = self.add(op, op, None, line, col, space)
        if op in OPENERS:
            self.brackets.append(tok)
        elif op in CLOSERS:
            if not self.brackets:
                raise self.error(f"unmatched '{op}': there is no open '{CLOSERS[op]}' before it", tok.span)
            opener = self.brackets.pop()
            if opener.text != CLOSERS[op]:
                raise self.error(f"'{opener.text}' opened at {opener.span.line}:{opener.span.col} "
                                 f"is closed by '{op}'; expected '{OPENERS[opener.text]}'", tok.span)


def tokenize(source: str, filename: str = "<input>") -> list[Token]:
    """Split `source` into tokens. Raises LangSyntaxError (IncompleteInput when more input
    would complete it: an open bracket, or a trailing binary operator)."""
    return Lexer(source, filename).run()
