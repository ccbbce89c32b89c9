"""Parser traps from other matrix languages (issue 9), with the decided behaviour.
Error tests assert the kind, a message fragment and line:col."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tapeml.syntax.errors import LangError, LangSyntaxError

from support import error_of, output_of


def where(err: LangError) -> tuple:
    return err.kind, err.span.line, err.span.col


# ---- precedence -----------------------------------------------------------------------------
@pytest.mark.parametrize("expr, shown", [
    ("-2^2", "-4"), ("2^-1", "0.5"), ("2^3^2", "512"), ("-x^2", "-9"), ("(-2)^2", "4"),
    ("2^-1^2", "0.5"), ("-2^-2", "-0.25"), ("[1 - 2]", "[-1]"), ("[1, -2]", "[1, -2]"), ("[1 -2 + 3]", None),
])
def test_power_and_sign_precedence(expr, shown):
    if shown is None:     # `[1 -2 + 3]`: the ambiguous sign is refused even inside a longer sum
        assert error_of(f"x = 3\nprint({expr})").kind == "SyntaxError"
        return
    assert output_of(f"x = 3\nprint({expr})") == shown + "\n"


def test_matrix_elements_need_commas():
    err = error_of("x = [1 -2]")
    assert where(err) == ("SyntaxError", 1, 8)
    assert "matrix elements need commas" in err.message and "'[1, -...]'" in err.message \
        and "'[1 - ...]'" in err.message
    err = error_of("a = 1\nb = 2\ny = [a -b]")
    assert where(err) == ("SyntaxError", 3, 8)
    assert "[a, -...]" in err.message
    err = error_of("y = [1 2]")
    assert where(err) == ("SyntaxError", 1, 8) and "matrix elements need commas" in err.message


def test_comparisons_do_not_chain():
    err = error_of("print(3 > 2 > 1)")
    assert where(err) == ("SyntaxError", 1, 13)
    assert "comparisons do not chain" in err.message and "'a > b and b > c'" in err.message
    assert output_of("print(3 > 2 and 2 > 1)") == "true\n"


# ---- quotes ---------------------------------------------------------------------------------
def test_double_transpose_is_the_matrix():
    assert output_of("x = [1, 2; 3, 4]\nprint(x'')") == "[1, 2; 3, 4]\n"
    assert output_of("x = [1, 2; 3, 4]\nprint(x')") == "[1, 3; 2, 4]\n"
    assert output_of("print([1, 2]')") == "[1; 2]\n"
    assert output_of("x = [1, 2]\nprint(x''')") == "[1; 2]\n"


def test_an_apostrophe_inside_a_string_is_text():
    assert output_of('print("it\'s")') == "it's\n"
    assert output_of('s = "it\'s"\nprint(len(s), "{s}!")') == "4 it's!\n"


def test_single_quoted_strings_are_refused():
    err = error_of("s = 'abc'")
    assert where(err) == ("SyntaxError", 1, 5) and "strings use double quotes" in err.message


# ---- look-alike characters ------------------------------------------------------------------
@pytest.mark.parametrize("source, char, code, line, col, ascii_", [
    ("x = 1 \u2212 2", "\u2212", "U+2212", 1, 7, "'-'"),
    ("x = 1\n\uff03 a comment", "\uff03", "U+FF03", 2, 1, "'#'"),
    ("x = \u201chi\u201d", "\u201c", "U+201C", 1, 5, "'\"'"),
    ("y = 2 \u00d7 3", "\u00d7", "U+00D7", 1, 7, "'*'"),
])
def test_look_alike_characters_name_the_character_code_point_and_column(source, char, code, line, col, ascii_):
    err = error_of(source)
    assert where(err) == ("SyntaxError", line, col)
    assert f"'{char}' ({code}" in err.message and f"at column {col}" in err.message
    assert f"use {ascii_} instead" in err.message


def test_look_alikes_inside_strings_are_kept():
    assert output_of('print("1 \u2212 2 \uff03 \u201cq\u201d")') == "1 \u2212 2 \uff03 \u201cq\u201d\n"


# ---- Unicode round trip ---------------------------------------------------------------------
UNICODE = ["h\u00e9llo", "\u2603 snow", "\U0001F600 emoji", "\u4e2d\u6587", "e\u0301 combining",
           "\u200b zero width", "\u05e9\u05dc\u05d5\u05dd", "tab\tin"]


@pytest.mark.parametrize("text", UNICODE)
def test_unicode_in_strings_round_trips_through_print_and_interpolation(text):
    literal = text.replace("\t", "\\t")
    result = output_of(f's = "{literal}"\nprint(s)\nprint("<{{s}}>")\nprint(("{literal}",), {{k = s}})')
    assert result == f'{text}\n<{text}>\n("{literal}",) {{k = "{literal}"}}\n'
    assert result.encode("utf-8") == (f'{text}\n<{text}>\n("{literal}",) {{k = "{literal}"}}\n').encode("utf-8")


def test_unicode_round_trips_byte_for_byte_through_the_cli(tmp_path):
    text = "".join(UNICODE[:7])
    path = tmp_path / "u.ml"
    path.write_text(f's = "{text}"\nprint(s)\nprint("{{s}}|{{s}}")\n', encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "tapeml.faces.cli", str(path)], capture_output=True, timeout=60,
                          env={"PYTHONIOENCODING": "utf-8", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{text}\n{text}|{text}\n".encode("utf-8")


# ---- numbers and names ----------------------------------------------------------------------
def test_non_ascii_digits_are_not_numbers():
    err = error_of("x = \u00b2")           # superscript two: str.isdigit() says yes
    assert where(err) == ("SyntaxError", 1, 5) and "U+00B2" in err.message
    err = error_of("x = \u0663")           # Arabic-Indic three
    assert where(err) == ("SyntaxError", 1, 5) and "U+0663" in err.message


def test_a_number_glued_to_a_name():
    err = error_of("x = 2x")
    assert where(err) == ("SyntaxError", 1, 6) and "did you mean 2 * x" in err.message


def test_a_parenthesised_tuple_of_names_destructures_as_python_does():
    """`(a, b) = pair` is `a, b = pair` (a Python habit); fields and indexes are targets too."""
    assert output_of("t = (1, 2, 3)\n(p, q, s) = t\nprint(p, q, s)\nr = {a = 0}\nm = [0, 0]\n"
                     "(r.a, m[1]) = (q, s)\nprint(r.a, m)\n(x, y) = [5, 6]\nprint(x + y)\n(z,) = (7,)\nprint(z)\n"
                     "for (u, v) in ((1, 2), (3, 4))\n  print(u * v)\nend") == "1 2 3\n2 [0, 3]\n11\n7\n2\n12\n"
