"""The REPL's display (values.display_value): aligned grids with a shape header, wrapped long
vectors, trees for big records; `ans`; completion through tuple items; the collapsed trace of a
recursion. print and interpolation keep format_value's one-line form."""
import io

import numpy as np
import pytest

from support import PROMPT, ROOT, Terminal, echoed, fresh, run, run_ml
from tapeml.syntax.errors import trace_lines
from tapeml.faces import repl as R
from tapeml.array.display import display_value
from tapeml.array.printer import format_number, format_value


def test_grid_aligns_columns_on_the_decimal_point():
    m = np.array([[1.5, -2, 10], [0.25, 3, -100.125]])
    assert display_value(m) == ("2x3 matrix:\n"
                                " 1.5   -2    10\n"
                                " 0.25   3  -100.125")
    # the cells are format_number's text: the display is a layout, not a second formatter
    body = display_value(m).split("\n")[1:]
    assert [c for line in body for c in line.split()] == [format_number(x) for x in m.ravel()]


def test_exponents_words_and_float32():
    assert display_value(np.array([[1e-8, 1], [123456.5, -np.inf]])) == (
        "2x2 matrix:\n"
        "      1e-8     1\n"
        " 123456.5   -inf")
    m = np.array([[0.1, 2.5], [-1 / 3, 1e-5]])
    assert display_value(m.astype(np.float32)) == display_value(m) == (
        "2x2 matrix:\n"
        "  0.1        2.5\n"
        " -0.3333333  1e-5")


def test_bools_are_right_aligned_words():
    assert display_value(np.array([[True, False], [False, True]])) == (
        "2x2 bool matrix:\n"
        "  true  false\n"
        " false   true")


def test_empty_scalars_and_short_values_keep_the_one_line_form():
    for v in [np.zeros((2, 0)), np.zeros(0), np.zeros((0, 3)) > 0, np.array(2.5), np.array([1.0, 2.0]),
              np.array([[1.0, 2.0, 3.0]]), 3.0, True, None, (1.0, "a"), "text"]:
        want = format_value(v, True)
        assert display_value(v) == want
    assert display_value("a \"q\"") == '"a \\"q\\""'          # strings quoted, as the echo was


def test_rank_3_shows_each_slice_under_its_index():
    a = np.arange(1, 13.0).reshape(2, 3, 2)
    assert display_value(a) == ("2x3x2 array:\n"
                                "[0, :, :] =\n 1  2\n 3  4\n 5  6\n"
                                "[1, :, :] =\n  7   8\n  9  10\n 11  12")
    big = display_value(np.zeros((40, 4, 5)))
    lines = big.split("\n")
    assert lines[0] == "40x4x5 array:" and "[0, :, :] =" in lines and "[39, :, :] =" in lines
    assert "⋮" in lines and "[20, :, :] =" not in lines and len(lines) <= 24


def test_rows_elide_with_a_vertical_ellipsis_past_the_height():
    text = display_value(np.arange(60.0).reshape(30, 2), 80, 12)
    assert text == ("30x2 matrix:\n"
                    "  0   1\n  2   3\n  4   5\n"
                    "  ⋮   ⋮\n"
                    " 54  55\n 56  57\n 58  59")


def test_columns_elide_with_dots_past_the_width():
    text = display_value(np.arange(100.0).reshape(2, 50), 40, 24)
    assert text == ("2x50 matrix:\n"
                    "  0   1   2   3   4  ...  46  47  48  49\n"
                    " 50  51  52  53  54  ...  96  97  98  99")


def test_randn_20x30_fits_an_80x24_terminal():
    m = np.random.default_rng(0).standard_normal((20, 30))
    assert len(format_value(m)) > 6000                 # print's one line, as before
    text = display_value(m)
    lines = text.split("\n")
    assert lines[0] == "20x30 matrix:"
    assert len(lines) <= 24 and max(map(len, lines)) <= 80
    assert all("..." in line for line in lines[1:] if "⋮" not in line)
    first = lines[1].split()
    assert first[0] == format_number(m[0, 0]) and first[-1] == format_number(m[0, -1])
    assert lines[-1].split()[-1] == format_number(m[-1, -1])
    # the decimal points of a column line up
    points = {line.index(".", 1) for line in lines[1:] if "⋮" not in line and line.split()[0].find(".") > 0
              and len(line.split()[0]) > 2}
    assert len(points) == 1


def test_a_long_vector_wraps_under_its_length():
    text = display_value(np.arange(1.0, 31.0), 40, 24)
    assert text == ("30-element vector:\n"
                    "  1   2   3   4   5   6   7   8   9  10\n"
                    " 11  12  13  14  15  16  17  18  19  20\n"
                    " 21  22  23  24  25  26  27  28  29  30")
    huge = display_value(np.arange(1e6))
    lines = huge.split("\n")
    assert lines[0] == "1000000-element vector:" and len(lines) <= 24 and "⋮" in lines[len(lines) // 2]
    assert lines[-1].split()[-1] == "999999" and lines[1].split()[0] == "0"


def test_a_wide_one_row_matrix_becomes_a_grid():
    text = display_value(np.arange(200.0).reshape(1, 200))
    assert text.startswith("1x200 matrix:\n 0  1  2  3") and "..." in text and text.endswith("199")


def test_a_weights_record_shows_a_tree_of_fields_with_shapes():
    w = echoed("transformer_block_init(8, 2, mlp_ratio=2, seed=0)")[-1]
    text = display_value(w)
    lines = text.split("\n")
    assert lines[0] == "record with 10 fields, 600 numbers:"
    assert lines[1:4] == ["  heads      tuple of 2", "    [0]      record with 7 fields", "      wq     8x4 matrix"]
    assert "    [1]      record with 7 fields, shaped as [0]" in lines
    assert "  w1         8x16 matrix" in lines
    assert "  ln1_gamma  8-element vector  [1, 1, 1, 1, 1, 1, 1, 1]" in lines
    assert len(lines) <= 24 and max(map(len, lines)) <= 80
    assert run_ml("w = transformer_block_init(8, 2, mlp_ratio=2, seed=0)\nprint(param_count(w))") == (0, "600\n")
    # small records stay on one line
    assert display_value(echoed("{w = [1, 2; 3, 4], b = 1}")[-1]) == "{w = [1, 2; 3, 4], b = 1}"


def test_print_and_interpolation_keep_the_one_line_form():
    code, out = run_ml('m = reshape(1:6, 2, 3)\nprint(m)\nprint("m = {m}")\nprint(str(m))')
    assert out == "[1, 2, 3; 4, 5, 6]\nm = [1, 2, 3; 4, 5, 6]\n[1, 2, 3; 4, 5, 6]\n"


# ---- in the session ------------------------------------------------------------------------------

def run_entries(*entries, interp=None):
    interp = interp or fresh()
    buf = io.StringIO()
    repl = R.Repl(interp, session=None, out=buf, err=buf)
    for e in entries:
        repl.handle(e)
    return interp, buf.getvalue() + interp.out.getvalue()


def test_the_session_echoes_the_display_for_its_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    monkeypatch.setenv("LINES", "24")
    _, out = run_entries("reshape(0:99, 2, 50)")
    assert out == ("2x50 matrix:\n"
                   "  0   1   2   3   4  ...  46  47  48  49\n"
                   " 50  51  52  53  54  ...  96  97  98  99\n")


def test_ans_holds_the_last_echoed_value(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    interp, out = run_entries("2 + 3", "ans * 10", "x = 7", "ans", "ans + 1;", "ans")
    assert out == "5\n50\n50\n50\n"
    interp, out = run_entries("[1, 2; 3, 4]", "ans'", interp=interp)
    assert out.endswith("2x2 matrix:\n 1  3\n 2  4\n")


def test_completion_after_an_indexed_tuple_item():
    interp = run('w = {heads = ({wq = 1, wk = 2}, {wq = 3, wv = 4}), n = 2}\nt = (1, {a = 1})')
    names = lambda text: [c.text for c in R.completions(text, interp)]
    assert names("w.heads[0].") == ["wq", "wk"]
    assert names("y = f(w.heads[1].w") == ["wq", "wv"]
    assert names("w.heads[ 1 ].wv") == ["wv"]
    assert names("t[1].") == ["a"]
    assert names("w.heads[2].") == [] and names("t[0].") == [] and names("w.n[0].") == []


def test_trace_lines_collapse_runs_and_cycles():
    a, b, c = ("f", "x.ml:5:3"), ("g", "x.ml:9:1"), ("h", "x.ml:2:2")
    assert trace_lines([a, a]) == ["  called from x.ml:5:3 in f"] * 2
    assert trace_lines([a] * 981 + [b]) == ["  called from x.ml:5:3 in f", "  ... the same call 980 more times",
                                            "  called from x.ml:9:1 in g"]
    assert trace_lines([a] * 1000, dropped=19000)[-1] == \
        "  ... the same call 999 more times, and 19000 more calls further out"
    assert trace_lines([a, b], dropped=1)[-1] == "  called from x.ml:9:1 in g, and 1 more call further out"
    assert trace_lines([a, c] * 4 + [b]) == ["  called from x.ml:5:3 in f", "  called from x.ml:2:2 in h",
                                             "  ... the same 2 calls 3 more times", "  called from x.ml:9:1 in g"]
    distinct = [(f"f{i}", f"x.ml:{i}:1") for i in range(25)]
    lines = trace_lines(distinct)
    assert len(lines) == 21 and lines[-1] == "  ... and 5 more calls"


def test_grid_display_in_a_real_terminal_of_its_size(tmp_path):
    """The real `tapeml` in a 40x14 pseudo-terminal: the echo is laid out for that size, `ans`
    holds it, and print keeps the one-line form."""
    with Terminal(tmp_path, size=(14, 40)) as p:
        p.expect(PROMPT)
        p.send(b"reshape(0:99, 20, 5) * 1.5\r")
        m = p.expect(rb"20x5 matrix:\r\n((?:.*\r\n){9})")
        rows = m.group(1).decode().split("\r\n")[:9]
        assert rows == ["   0      1.5    3      4.5    6",
                        "   7.5    9     10.5   12     13.5",
                        "  15     16.5   18     19.5   21",
                        "  22.5   24     25.5   27     28.5",
                        "   ⋮      ⋮      ⋮      ⋮      ⋮",
                        " 120    121.5  123    124.5  126",
                        " 127.5  129    130.5  132    133.5",
                        " 135    136.5  138    139.5  141",
                        " 142.5  144    145.5  147    148.5"]
        p.expect(PROMPT)
        p.send(b"print(ans[1:2, 0:1])\r")
        p.expect(rb"\[7\.5, 9; 15, 16\.5\]\r\n")
        p.expect(PROMPT)
        p.send(b"1:40\r")
        m = p.expect(rb"40-element vector:\r\n(.*)\r\n")
        assert m.group(1).decode() == "  1   2   3   4   5   6   7   8   9  10"
        p.expect(PROMPT)
        p.send(b":quit\r")
        assert p.exit_code() == 0


def test_the_repl_pages_display_example_is_what_an_80x24_terminal_shows():
    """docs/repl.md shows sin(reshape(1:600, 20, 30)) as the session lays it out (issue 29 item 6)."""
    from pathlib import Path
    from support import run
    page = (Path(ROOT) / "docs" / "repl.md").read_text(encoding="utf-8")
    prompt = "ml> sin(reshape(1:600, 20, 30))\n"
    shown = page[page.index(prompt) + len(prompt):page.index("ml> transformer_block_init")]
    value = run("x = sin(reshape(1:600, 20, 30))").get_variable("x")
    assert shown == display_value(value, 80, 24) + "\n"
