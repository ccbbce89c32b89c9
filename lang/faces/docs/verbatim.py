"""What Markdown would eat, both ways: `escape` writes a declaration's prose into a generated page so
that the website prints it as written (`4*512*512` is not emphasis), and `missing` checks a built
page against its Markdown source: every code span, every line of a fenced block and every run of
text holding `*`, `_` or `^` must be found, as written, in the page's text.

The prose of a declaration (summary, what, how, returns, errors, a parameter's description) is
plain text with two kinds of Markdown its authors use on purpose: `code spans` and indented code
blocks (four spaces after a blank line). Both are kept as written; everywhere else the characters
Python-Markdown (with mkdocs.yml's extensions) would read as markup are escaped: a `*` or `_`
that could open or close emphasis (not one between two spaces, as in `a * b`, nor a `_` between
two letters or digits, as in `x_i`: those print as written); `$`
(arithmatex's formulas); a backslash before a character Markdown escapes; `](` and `][` (a link);
`<` before a letter, `/`, `!` or `?` (raw HTML); `&` that starts an entity; a `{` right after a
code span (attr_list would take it as attributes); and at the start of a line whatever would start
a heading, a quote, a list or a setext underline. Nothing else changes, so a page's source stays
readable: `^`, `|` (outside tables), `[0, pi]` and `a < b` are left alone.
"""
from __future__ import annotations

import html
import re

# Python-Markdown's escapable characters with those the extensions add (tables: |, arithmatex: $)
ESCAPABLE = set("\\`*_{}[]()#+-.!|<>$")
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
LINE_START = re.compile(r"^( {0,3})([#>]|[-+](?=\s|$)|\d+(?=[.)](\s|$))|=+\s*$|-+\s*$)")
WORD = re.compile(r"\w")


def _escape_prose(s: str, after_code: bool) -> str:
    """s (text between code spans) with its markup characters escaped; after_code: s follows a code span."""
    out = []
    for i, ch in enumerate(s):
        prev, nxt = s[i - 1] if i else "", s[i + 1] if i + 1 < len(s) else ""
        if ch in "*_" and (not prev.strip() and not nxt.strip()):
            out.append(ch)             # between spaces (a * b): neither opens nor closes emphasis
        elif ch == "_" and WORD.match(prev or " ") and WORD.match(nxt or " "):
            out.append(ch)             # inside a word (x_i)
        elif ch in "*_$":
            out.append("\\" + ch)
        elif ch == "\\":
            out.append("\\\\" if nxt in ESCAPABLE and nxt else "\\")
        elif ch == "]" and nxt in ("(", "["):
            out.append("\\]")
        elif ch == "<" and nxt and (nxt.isalpha() or nxt in "/!?"):
            out.append("&lt;")
        elif ch == "&" and re.match(r"&(#\d+|#x[0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);", s[i:]):
            out.append("&amp;")
        elif ch == "{" and i == 0 and after_code:
            out.append("\\{")
        else:
            out.append(ch)
    return "".join(out)


def _line_starts(s: str, at_line_start: bool) -> str:
    """Escape what would open a block at the start of each line of s (the first only if at_line_start)."""
    lines = s.split("\n")
    for k, line in enumerate(lines):
        if k == 0 and not at_line_start:
            continue
        m = LINE_START.match(line)
        if m:
            indent, mark = m.group(1), m.group(2)
            if mark[0].isdigit():      # "1. " / "1) ": escape the dot or parenthesis
                lines[k] = indent + mark + "\\" + line[len(indent) + len(mark):]
            else:
                lines[k] = indent + "\\" + line[len(indent):]
    return "\n".join(lines)


def _escape_paragraph(text: str, block: bool) -> str:
    out, pos = [], 0
    for m in list(CODE_SPAN.finditer(text)) + [None]:
        prose = _escape_prose(text[pos:m.start() if m else len(text)], pos > 0)
        out.append(_line_starts(prose, pos == 0 or text[pos - 1] == "\n") if block else prose)
        if m:
            out.append(m.group(0))
            pos = m.end()
    return "".join(out)


def escape(text: str, block: bool = True) -> str:
    """Prose for a generated page: code spans and indented code blocks as written, the rest escaped
    so that the built page shows it character for character (see the module docstring). block:
    the text starts a block of its own (a line starting '> ' would be a quote); not in a table cell."""
    lines = str(text).split("\n")
    out, para, in_code = [], [], False
    for k, line in enumerate(lines):
        blank = not line.strip()
        if line.startswith("    ") and not blank and (in_code or (k > 0 and not lines[k - 1].strip())):
            in_code = True             # an indented code block: only after a blank line
        elif not blank:
            in_code = False
        if in_code or blank:
            if para:
                out.append(_escape_paragraph("\n".join(para), block))
                para = []
            out.append(line)
        else:
            para.append(line)
    if para:
        out.append(_escape_paragraph("\n".join(para), block))
    return "\n".join(out)


def table_cell(text: str) -> str:
    """escape(text) for a table cell: on one line, with each '|' outside a code span escaped (a code
    span keeps its '|': Python-Markdown's tables do not split a cell inside backticks)."""
    s = escape(" ".join(str(text).split("\n")), block=False)
    out, pos = [], 0
    for m in CODE_SPAN.finditer(s):
        out += [s[pos:m.start()].replace("|", "\\|"), m.group(0)]
        pos = m.end()
    return "".join(out) + s[pos:].replace("|", "\\|")


# ---- the check: the built page shows what its source says -----------------------------------------
FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})[^\n]*\n(.*?)^\1?\2[ \t]*$", re.S | re.M)
MATH = re.compile(r"\$\$.*?\$\$|(?<!\\)\$(?!\s)(?:\\.|[^\\$\n])+?(?<!\s)\$|\\\(.*?\\\)|\\\[.*?\\\]", re.S)
LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\([^)\s]*(?:\s+\"[^\"]*\")?\)")
TAG = re.compile(r"</?[A-Za-z][^>\n]*>|<!--.*?-->", re.S)
UNESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|<>$])")
SPECIAL = re.compile(r"[*_^]")
EMPHASIS_OPEN = re.compile(r"^[(\"']?([*_]{1,3})(?=[^\s*_])")
EMPHASIS_CLOSE = re.compile(r"(?<=[^\s*_\\])([*_]{1,3})[)\]\"'.,:;!?]*$")
LIST_MARK = re.compile(r"^\s{0,12}(?:[-+*]|\d+[.)])\s+|^\s{0,3}(?:>\s?|#{1,6}\s+)")
SEP = "\x00"


def page_text(content: str) -> str:
    """The text a reader sees in a built page's HTML (formulas left out), its white space collapsed."""
    content = re.sub(r"<math\b.*?</math>", " ", content, flags=re.S)
    return " ".join(html.unescape(TAG.sub("", content)).split())


def _flat(s: str) -> str:
    return " ".join(s.split())


def _literal(token: str) -> str:
    return html.unescape(UNESCAPE.sub(r"\1", token))


def _unmarked(token: str) -> str:
    """A token without emphasis its author meant (`*slot*`, `**Choice:**`), escapes undone."""
    token = EMPHASIS_OPEN.sub(lambda m: m.group(0)[:len(m.group(0)) - len(m.group(1))], token)
    token = EMPHASIS_CLOSE.sub(lambda m: m.group(0)[len(m.group(1)):], token)
    return _literal(token)


def _blocks(markdown: str):
    """(kind, text): the fenced blocks' lines ("code") and the other blocks ("text"), raw HTML
    blocks (a block whose first line starts with '<') left out."""
    pos = 0
    for m in FENCE.finditer(markdown):
        yield from _text_blocks(markdown[pos:m.start()])
        for line in m.group(3).split("\n"):
            if line.strip():
                yield "code", line
        pos = m.end()
    yield from _text_blocks(markdown[pos:])


def _text_blocks(text: str):
    for block in re.split(r"\n[ \t]*\n", text):
        if not block.strip() or block.lstrip().startswith("<"):
            continue
        lines = block.split("\n")
        if all(line.lstrip().startswith("|") for line in lines if line.strip()):
            for line in lines:      # a table: each cell on its own (split at '|' outside code spans)
                yield from (("text", c) for c in _cells(line))
            continue
        yield "text", "\n".join(LIST_MARK.sub("", line) for line in lines)


def _cells(line: str) -> list[str]:
    cells, cur, pos = [], "", 0
    for m in list(CODE_SPAN.finditer(line)) + [None]:
        part = line[pos:m.start()] if m else line[pos:]
        bits = re.split(r"(?<!\\)\|", part)
        cur += bits[0]
        for b in bits[1:]:
            cells.append(cur)
            cur = b
        if m:
            cur += m.group(0)
            pos = m.end()
    cells.append(cur)
    return [c for c in cells if c.strip() and not re.fullmatch(r"\s*:?-{3,}:?\s*", c)]


def expected(markdown: str) -> list[tuple[str, ...]]:
    """What must appear, as written, in the page built from markdown: every code span's text, every
    line of a fenced block, and each run of text (a word with its neighbours) holding *, _ or ^.
    Each item is a tuple of the forms that count: a run as written (escapes undone), and the same
    run without the emphasis its author meant (`*slot*` shows as slot)."""
    out = []
    for kind, text in _blocks(markdown):
        if kind == "code":
            out.append((_flat(text),))
            continue
        spans = []

        def span(m):
            spans.append(_flat(m.group(2)))
            return SEP
        text = CODE_SPAN.sub(span, text)
        out += [(x,) for x in spans if x]
        text = MATH.sub(SEP, text)
        text = LINK.sub(lambda m: SEP if m.group(0).startswith("!") else m.group(1), text)   # link text; no image
        text = TAG.sub(SEP, text)
        for part in text.split(SEP):
            words = part.split()
            for i, w in enumerate(words):
                if SPECIAL.search(w) and SPECIAL.search(_unmarked(w)):
                    near = words[max(0, i - 1):i + 2]
                    forms = (_flat(" ".join(_literal(x) for x in near)), _flat(" ".join(_unmarked(x) for x in near)))
                    out.append(tuple(dict.fromkeys(forms)))
    return out


def missing(markdown: str, content: str) -> list[str]:
    """What `expected(markdown)` lists that the built page's HTML (content) does not show, each as
    its source writes it (escapes undone)."""
    text = page_text(content)
    out = []
    for forms in expected(markdown):
        if not any(f in text for f in forms) and forms[0] not in out:
            out.append(forms[0])
    return out
