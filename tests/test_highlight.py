"""The Pygments lexer: registered as the plugin `tapeml`, and it classifies each part of the
language the way the tokenizer and the builtin registry do."""
import glob
import os

import pytest
from pygments.lexers import get_lexer_by_name, get_lexer_for_filename
from pygments.token import Comment, Error, Keyword, Name, Number, Operator, Punctuation, String

from conftest import ROOT, SHARED
from tapeml.highlight import TapemlLexer
from tapeml.lexer import KEYWORDS


def tokens(src):
    return [(t, v) for t, v in TapemlLexer().get_tokens(src) if v.strip()]


def test_registered_as_a_pygments_plugin():
    lexer = get_lexer_by_name("tapeml")
    assert type(lexer).__name__ == "TapemlLexer"
    assert lexer.name == "tapeml" and lexer.aliases == ["tapeml"] and lexer.filenames == ["*.ml"]
    assert type(get_lexer_for_filename("model.ml", "x = 1")).__name__ == "TapemlLexer"


def test_kinds_of_tokens():
    got = tokens('# a comment\nfn f(x, eps=1e-5)\n  y = layer_norm(x.w, [1, 2.5]) \' 2\n'
                 '  return y\nend\nz = true and not none')
    assert got == [
        (Comment.Single, "# a comment"),
        (Keyword.Declaration, "fn"), (Name.Function, "f"), (Punctuation, "("), (Name, "x"),
        (Punctuation, ","), (Name, "eps"), (Operator, "="), (Number.Float, "1e-5"), (Punctuation, ")"),
        (Name, "y"), (Operator, "="), (Name.Builtin, "layer_norm"), (Punctuation, "("), (Name, "x"),
        (Punctuation, "."), (Name.Attribute, "w"), (Punctuation, ","), (Punctuation, "["),
        (Number.Integer, "1"), (Punctuation, ","), (Number.Float, "2.5"), (Punctuation, "]"),
        (Punctuation, ")"), (Operator, "'"), (Number.Integer, "2"),
        (Keyword, "return"), (Name, "y"), (Keyword, "end"),
        (Name, "z"), (Operator, "="), (Keyword.Constant, "true"), (Operator.Word, "and"),
        (Operator.Word, "not"), (Keyword.Constant, "none"),
    ]


def test_string_interpolation_parts():
    got = tokens('print("mean {mean(x) + {a = 1}.a} and {{braces}} \\n")')
    assert got == [
        (Name.Builtin, "print"), (Punctuation, "("), (String.Double, '"'), (String.Double, "mean "),
        (String.Interpol, "{"), (Name.Builtin, "mean"), (Punctuation, "("), (Name, "x"),
        (Punctuation, ")"), (Operator, "+"), (Punctuation, "{"), (Name, "a"), (Operator, "="),
        (Number.Integer, "1"), (Punctuation, "}"), (Punctuation, "."), (Name.Attribute, "a"),
        (String.Interpol, "}"), (String.Double, " and "), (String.Escape, "{{"),
        (String.Double, "braces"), (String.Escape, "}}"), (String.Escape, "\\n"), (String.Double, '"'),
        (Punctuation, ")"),
    ]


def test_every_keyword_and_builtin_is_recognized():
    from tapeml.builtins import REGISTRY
    for kw in KEYWORDS:
        (tok, value), = tokens(kw)
        assert tok in Keyword or tok in Operator.Word, kw
    for name in REGISTRY:
        assert tokens(name) == [(Name.Builtin, name)]
    assert tokens("layer_norms") == [(Name, "layer_norms")]    # whole words only
    assert tokens("endx") == [(Name, "endx")]


def test_text_round_trips_and_unterminated_string_does_not_derail():
    src = 'x = "open\ny = 1\n'
    lexer = TapemlLexer()
    assert "".join(v for _, v in lexer.get_tokens(src)) == src
    assert (Name, "y") in tokens(src)                          # the next line lexes normally


def test_a_one_row_matrix_literal_is_punctuation():
    assert tokens("[1, 2;]") == [(Punctuation, "["), (Number.Integer, "1"), (Punctuation, ","),
                                 (Number.Integer, "2"), (Punctuation, ";"), (Punctuation, "]")]


PROGRAMS = sorted(glob.glob(os.path.join(ROOT, "examples", "*.ml")) +
                  glob.glob(os.path.join(ROOT, "stdlib", "*.ml")) +
                  glob.glob(os.path.join(SHARED, "golden", "*.ml")))


@pytest.mark.parametrize("path", PROGRAMS, ids=[os.path.basename(p) for p in PROGRAMS])
def test_real_programs_have_no_error_tokens(path):
    with open(path, encoding="utf-8") as f:
        src = f.read()
    toks = list(TapemlLexer().get_tokens(src))
    assert not [v for t, v in toks if t in Error]
    assert "".join(v for _, v in toks).rstrip("\n") == src.rstrip("\n")
