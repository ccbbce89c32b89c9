"""The Pygments lexer: registered as the plugin `tapeml`, and it classifies each part of the
language the way the tokenizer and the builtin registry do."""
import glob
import os

import pytest
from pygments.lexers import get_lexer_by_name, get_lexer_for_filename, guess_lexer_for_filename
from pygments.token import Comment, Error, Keyword, Name, Number, Operator, Punctuation, String

from support import ROOT, SHARED
from tapeml.faces.highlight import TapemlLexer
from tapeml.syntax.lexer import KEYWORDS


def tokens(src):
    return [(t, v) for t, v in TapemlLexer().get_tokens(src) if v.strip()]


def test_registered_as_a_pygments_plugin():
    lexer = get_lexer_by_name("tapeml")
    assert type(lexer).__name__ == "TapemlLexer"
    assert lexer.name == "tapeml" and lexer.aliases == ["tapeml"]
    # *.ml is OCaml's too: tapeml claims it as an alias pattern, decided by analyse_text
    assert lexer.filenames == [] and lexer.alias_filenames == ["*.ml"]
    assert type(get_lexer_for_filename("model.ml")).__name__ == "OcamlLexer"


OCAML_SOURCES = [
    "(* factorial *)\nlet rec fact n = if n = 0 then 1 else n * fact (n - 1)\n"
    "let () = print_endline (string_of_int (fact 5))\n",
    "let x = 1\n",
    'print_string "hello";;\n',
    "type shape = Circle of float | Square of float\n",
    "open Printf\nmodule M = struct let y = 2 end\n",
    "let f = function\n  | 0 -> 1\n  | n -> n\n",
]


@pytest.mark.parametrize("source", OCAML_SOURCES)
def test_guess_for_ml_file_picks_ocaml_for_ocaml_source(source):
    assert TapemlLexer.analyse_text(source) == 0.0
    assert type(guess_lexer_for_filename("a.ml", source)).__name__ == "OcamlLexer"


def test_guess_for_ml_file_picks_tapeml_for_every_tapeml_program():
    files = sorted(glob.glob(os.path.join(ROOT, "examples", "*.ml")) +
                   glob.glob(os.path.join(ROOT, "stdlib", "*.ml")) +
                   glob.glob(os.path.join(ROOT, "tests", "golden", "*.ml")))
    assert len(files) > 20
    wrong = [f for f in files
             if type(guess_lexer_for_filename(f, open(f, encoding="utf-8").read())).__name__ != "TapemlLexer"]
    assert wrong == []
    for small in ("x = [1, 2; 3, 4]\nprint(x)\n", "fn f(x)\n  return x + 1\nend\n", "print(softmax(randn(3)))"):
        assert 0 < TapemlLexer.analyse_text(small) < 1
        assert type(guess_lexer_for_filename("a.ml", small)).__name__ == "TapemlLexer"


def test_pygmentize_by_name_still_works():
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "pygments", "-l", "tapeml", "-f", "raw"],
                         input="fn f(x) -> x + 1\n", capture_output=True, text=True, check=True).stdout
    assert "Token.Keyword.Declaration\t'fn'" in out and "Token.Name.Function\t'f'" in out


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


def test_format_spec_in_interpolation():
    got = tokens('"{x:.3f} {a[1:2]}"')
    assert got == [
        (String.Double, '"'), (String.Interpol, "{"), (Name, "x"), (String.Interpol, ":.3f"),
        (String.Interpol, "}"), (String.Interpol, "{"), (Name, "a"),      # (blanks are left out)
        (Punctuation, "["), (Number.Integer, "1"), (Punctuation, ":"), (Number.Integer, "2"),
        (Punctuation, "]"), (String.Interpol, "}"), (String.Double, '"'),
    ]
