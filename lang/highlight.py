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

from tapeml.lexer import KEYWORDS

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
    filenames = ["*.ml"]
    mimetypes = ["text/x-tapeml"]
    url = "https://example.invalid/tapeml"

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
            (r"\n", Whitespace, "#pop:2"),
            include("code"),
        ],
    }
