"""The Pygments lexer for tapeml, used by the REPL and registered as the Pygments plugin `tapeml`
(pyproject.toml, [project.entry-points."pygments.lexers"]), so docs and other tools can use it:

    from pygments.lexers import get_lexer_by_name
    get_lexer_by_name("tapeml")

Keywords come from the tokenizer's KEYWORDS set and builtin names from the builtin registry, so
the highlighter never disagrees with the language about which words are special.
"""
from __future__ import annotations

from pygments.lexer import RegexLexer, bygroups, include, words
from pygments.token import (Comment, Keyword, Name, Number, Operator, Punctuation, String,
                            Text, Whitespace)

from tapeml.syntax.lexer import KEYWORDS

CONSTANTS = ("true", "false", "none")
DECLARATIONS = ("fn",)
NAMESPACE = ("import",)
WORD_OPERATORS = ("and", "or", "not", "in")


def _builtin_names() -> tuple[str, ...]:
    from tapeml.builtins import REGISTRY  # registers every builtin module
    return tuple(sorted(REGISTRY))


_PLAIN_KEYWORDS = tuple(sorted(KEYWORDS - set(CONSTANTS) - set(DECLARATIONS) - set(NAMESPACE)
                               - set(WORD_OPERATORS)))


class TapemlLexer(RegexLexer):
    """tapeml source: keywords, numbers, strings with `{...}` interpolation, comments, builtins."""
    name = "tapeml"
    aliases = ["tapeml"]
    # `*.ml` is OCaml's extension too: tapeml claims it only as an alias pattern, so that
    # guess_lexer_for_filename decides by analyse_text (OCaml source scores 0 here and wins the
    # tie as the primary pattern's owner); get_lexer_by_name("tapeml") is how tools pick us.
    filenames = []
    alias_filenames = ["*.ml"]
    mimetypes = ["text/x-tapeml"]
    url = "https://example.invalid/tapeml"

    def analyse_text(text):
        """How much `text` looks like tapeml (0 to 1): `fn name(...)` ... `end` blocks, `#`
        comments, `[1, 2; 3, 4]` literals, calls of builtins; 0 for OCaml's `(* *)`, `let`, `;;`."""
        return _tapeml_score(text)

    tokens = {
        "root": [
            (r"[ \t\r]+", Whitespace),
            (r"\n", Whitespace),
            (r"\\\n", Text),
            (r"#.*?$", Comment.Single),
            include("code"),
        ],
        "code": [
            (r'"', String.Double, "string"),
            # numbers: 12, 1.5, .5, 3., 1e-9, 2.5E+3
            (r"(\d+\.\d*|\.\d+)([eE][+-]?\d+)?|\d+[eE][+-]?\d+", Number.Float),
            (r"\d+", Number.Integer),
            (r"(fn)(\s+)([A-Za-z_]\w*)", bygroups(Keyword.Declaration, Whitespace, Name.Function)),
            (words(DECLARATIONS, prefix=r"\b", suffix=r"\b"), Keyword.Declaration),
            (words(NAMESPACE, prefix=r"\b", suffix=r"\b"), Keyword.Namespace),
            (words(CONSTANTS, prefix=r"\b", suffix=r"\b"), Keyword.Constant),
            (words(WORD_OPERATORS, prefix=r"\b", suffix=r"\b"), Operator.Word),
            (words(_PLAIN_KEYWORDS, prefix=r"\b", suffix=r"\b"), Keyword),
            (r"(\.)([A-Za-z_]\w*)", bygroups(Punctuation, Name.Attribute)),
            (words(_builtin_names(), prefix=r"\b", suffix=r"\b"), Name.Builtin),
            (r"[A-Za-z_]\w*", Name),
            (r"==|!=|<=|>=|\+=|-=|\*=|/=|->|[-+*/%@^<>=']", Operator),
            (r"[(),;:.\[\]]", Punctuation),
            (r"\{", Punctuation, "brace"),
            (r"\}", Punctuation),
            (r"[ \t\r]+", Whitespace),
            (r"\n", Whitespace),
            (r"#.*?$", Comment.Single),
            (r".", Text),  # anything else (the language reports it; the highlighter goes on)
        ],
        "brace": [  # a record literal inside code: `{` ... `}`
            (r"\}", Punctuation, "#pop"),
            include("code"),
        ],
        "string": [
            (r'"', String.Double, "#pop"),
            (r'\\[nt"\\{}]', String.Escape),
            (r"\\.", String.Escape),
            (r"\{\{|\}\}", String.Escape),
            (r"\{", String.Interpol, "interpolation"),
            (r'[^"\\{}\n]+', String.Double),
            (r"\}", String.Double),
            (r"\n", Whitespace, "#pop"),  # strings end at the line; the lexer reports it
        ],
        "interpolation": [
            (r"\}", String.Interpol, "#pop"),
            (r":[^{}()\[\]\"\n]*(?=\})", String.Interpol),    # a format spec: "{x:.3f}"
            (r"\n", Whitespace, "#pop:2"),
            include("code"),
        ],
    }


import re as _re

_OCAML = _re.compile(r"\(\*|;;|^\s*let\s|^\s*(module|open)\s+[A-Z]|^\s*type\s+\w+\s*=|^\s*match\s"
                     r"|^\s*val\s+\w+\s*:|\blet\s+rec\b|\bfun\s+\w+\s*->|\bwith\s*\|?\s*$", _re.M)
_COMMENT_LINE = _re.compile(r"^\s*#.*$", _re.M)
_TAPEML_HINTS = (
    (_re.compile(r"^\s*fn\s+[A-Za-z_]\w*\s*\(", _re.M), 0.3),     # fn name(
    (_re.compile(r"^\s*end\s*(#.*)?$", _re.M), 0.2),                # a block's end
    (_re.compile(r"^\s*#", _re.M), 0.1),                             # a comment line
    (_re.compile(r"\[[^\]\n]*;[^\]\n]*\]"), 0.2),                 # a matrix literal [1, 2; 3, 4]
    (_re.compile(r"^\s*[A-Za-z_]\w*(\s*,\s*[A-Za-z_]\w*)*\s*=[^=]", _re.M), 0.1),   # x = ...
    (_re.compile(r"\b(print|zeros|ones|randn|softmax|layer_norm|grad|value_and_grad|"
                 r"transformer_block|plot|matmul|reshape|sum|mean)\("), 0.3),
    (_re.compile(r"\bfn\s*\([^)]*\)\s*->"), 0.2),                  # fn(x) -> ...
)


def _tapeml_score(text: str) -> float:
    if not text.strip() or _OCAML.search(_COMMENT_LINE.sub("", text)):
        return 0.0
    return min(0.99, sum(weight for pattern, weight in _TAPEML_HINTS if pattern.search(text)))
