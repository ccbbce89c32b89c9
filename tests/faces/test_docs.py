"""The docs builder (lang/faces/docs/) and the plotting builtins: every builtin documented and
run, the index complete, `tapeml docs check` catching a hand-edited output, figures
deterministic, the seed program on the transformer_block page."""
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from support import ROOT, fresh, output_of, page_of_square_with_vjp, run

from tapeml.faces import docs as docgen
from tapeml.builtins import REGISTRY, plot

DOCS = os.path.join(ROOT, "docs")

GOLDEN_SEED_OUTPUT = (
    "layer_norm (scale-invariant per row): [-1.224736, 0, 1.224736; -1.224745, 0, 1.224745]\n"
    "attention output: [2.872, 3.872; 3.25, 4.25; 2.872, 3.872]\n"
    "multi_head_attention with 1 identity head matches plain self-attention: true\n"
    "transformer_block: [1, -1; -1, 1; 1, -1]")


def test_every_builtin_has_a_summary_and_an_example():
    missing = [f"{e.name}: {'no summary' if not e.summary.strip() else 'no example'}"
               for e in docgen.all_entries() if not e.summary.strip() or not e.examples]
    assert missing == []


def test_every_builtin_has_a_category_the_index_knows():
    from tapeml.builtins.registry import CATEGORIES
    assert {b.category for b in REGISTRY.values()} <= set(CATEGORIES)


def _index_rows(text):
    """Builtin names listed in the category sections of an index (not the stdlib section)."""
    rows, in_stdlib = [], False
    for line in text.split("\n"):
        if line.startswith("## "):
            in_stdlib = line.startswith("## Standard library")
        m = re.match(r"^\| \[`([^`]+)`\]\(\1\.md\) \|", line)
        if m and not in_stdlib:
            rows.append(m.group(1))
    return rows


def test_generated_index_lists_every_builtin_once_with_counts():
    text = docgen.build_index(docgen.all_entries())
    rows = _index_rows(text)
    assert len(rows) == len(REGISTRY)
    assert sorted(rows) == sorted(REGISTRY)
    assert f"{len(REGISTRY)} builtins in " in text
    for cat in {b.category for b in REGISTRY.values()}:
        n = sum(b.category == cat for b in REGISTRY.values())
        assert f"## {cat} ({n})" in text


def test_committed_index_has_as_many_builtins_as_the_registry():
    path = os.path.join(DOCS, "builtins", "index.md")
    with open(path, encoding="utf-8") as f:
        rows = _index_rows(f.read())
    assert len(rows) == len(REGISTRY), "docs/builtins/index.md is stale: run `tapeml docs build`"


def test_transformer_block_page_starts_with_the_seed_program_and_prints_the_golden_output():
    first = REGISTRY["transformer_block"].examples[0]
    with open(os.path.join(ROOT, "examples", "seed_statistics_ml.ml"), encoding="utf-8") as f:
        assert first == f.read().rstrip("\n")
    res = docgen.run_code(first, "<seed>")
    assert res.error is None
    assert res.output == GOLDEN_SEED_OUTPUT


def test_run_code_echoes_bare_expressions_like_the_repl():
    res = docgen.run_code('x = 2\nx + 1\n"text"\nprint("printed")\nx;\nnone', "<t>")
    assert (res.output, res.error) == ('3\n"text"\nprinted', None)


def test_run_code_reports_a_failing_example():
    res = docgen.run_code("[1, 2] @ [1, 2, 3]", "<t>")
    assert res.error.startswith("<t>:1:8: ShapeError:")


def test_a_failing_example_fails_the_page():
    e = docgen.Entry("demo", "Core", "A demo.", [], examples=["1 + 1", "undefined_name"])
    failures = []
    page = docgen.build_page(e, "/nonexistent-img-dir", failures)
    assert [f.where for f in failures] == ["demo.md example 2"]
    assert "NameError: undefined name 'undefined_name'" in failures[0].message
    assert "```text\n2\n```" in page


def test_gradient_check_of_layer_norm_is_tiny_and_covers_every_float_argument():
    e = next(x for x in docgen.all_entries() if x.name == "layer_norm")
    checks = docgen.gradient_check(e, e.examples[0], "layer_norm.md")
    assert [name for name, _ in checks] == ["x", "gamma", "beta"]
    assert all(err is not None and err < 1e-6 for _, err in checks)


def test_gradient_check_fails_the_build_on_a_wrong_gradient():
    from tapeml.array import ops
    # x^2 with the VJP g * x instead of 2 g x
    page, failures = page_of_square_with_vjp("wrong_square", lambda g, x: ops.mul(g, x))
    assert [f.where for f in failures] == ["wrong_square.md gradient check (example 1)"]
    assert "x: largest relative error" in failures[0].message
    assert "(FAILS)" in page


def test_markdown_blocks_get_their_output_replaced_not_duplicated():
    text = ("# t\n\n```ml\nx = 2\nx * 3\n```\n\n```text\nstale output\nof two lines\n```\n\nprose\n\n"
            "```ml error\n1 < 2 < 3\n```\n\n```ml norun\nnot tapeml at all\n```\n\n```text\nkept\n```\n")
    failures = []
    once = docgen.run_markdown(text, "t.md", "/nonexistent-img-dir", failures)
    twice = docgen.run_markdown(once, "t.md", "/nonexistent-img-dir", failures)
    assert failures == []
    assert once == twice
    assert "stale output" not in once
    assert "```ml\nx = 2\nx * 3\n```\n\n```text\n6\n```\n\nprose" in once
    assert "t.md:15:7: SyntaxError: comparisons do not chain" in once   # its line in the rebuilt file
    assert "```ml norun\nnot tapeml at all\n```\n\n```text\nkept\n```" in once


def test_markdown_block_that_should_raise_but_does_not_fails():
    failures = []
    docgen.run_markdown("```ml error\n1 + 1\n```\n", "t.md", "/nonexistent-img-dir", failures)
    assert len(failures) == 1 and "raised no error" in failures[0].message


# An example (or a page) that changes a setting leaves it to no later one: each starts with the
# float type, the generator, the diagnostics and the notes a new session has (context.restart).
CHANGES_EVERYTHING = 'set_dtype("float32")\nseed(3)\ncheck_nan(true)\nnotes(false)\nprint(dtype([1, 2] / 3))'
CLEAN = 'print(dtype([1, 2] / 3))\nx = [0, 2]\nprint(log(x))\nr = rand()'


def test_each_example_starts_with_the_defaults():
    from tapeml.array import context, diagnostics
    first = docgen.run_code(CHANGES_EVERYTHING, "<example 1>")
    assert (first.output, first.error) == ("float32", None)
    second = docgen.run_code(CLEAN, "<example 2>")
    assert (second.output, second.error) == ("float64\n[-inf, 0.6931472]", None)     # no NaNError
    assert not diagnostics.current().active and context.LIVE["dtype"] is np.float64


def test_each_page_starts_with_the_defaults():
    failures = []
    docgen.run_markdown("```ml\n" + CHANGES_EVERYTHING + "\n```\n", "a.md", "/nonexistent-img-dir", failures)
    page = docgen.run_markdown("```ml\n" + CLEAN + "\nprint(r)\n```\n", "b.md", "/nonexistent-img-dir", failures)
    assert failures == []
    seeded = float(np.random.default_rng(0).random())       # run_markdown seeds each page with 0
    assert f"```text\nfloat64\n[-inf, 0.6931472]\n{seeded:.7g}\n```" in page


def test_the_device_of_one_example_is_not_the_next_ones():
    pytest.importorskip("torch")
    first = docgen.run_code('set_device("torch:cpu")\nprint(device())\nx = zeros(2)', "<example 1>")
    assert (first.output, first.error) == ("torch:cpu", None)
    second = docgen.run_code('print(device())\nset_device("torch:cpu")\nprint(device())', "<example 2>")
    assert (second.output, second.error) == ("numpy\ntorch:cpu", None)


def test_figures_are_byte_identical_when_redrawn(tmp_path):
    code = 'x = linspace(0, 1, 20)\nplot(x, x ^ 2, label="sq")\nlegend()\nimshow([1, 2; 3, 4])'
    paths = []
    for k in range(2):
        res = docgen.run_code(code, "<fig>")
        assert res.error is None and len(res.figures) == 1
        paths.append(os.path.join(tmp_path, docgen.save_figures(res.figures, str(tmp_path), f"f{k}")[0]))
    with open(paths[0], "rb") as a, open(paths[1], "rb") as b:
        data = a.read()
        assert data == b.read()
    assert b"matplotlib" not in data.lower()     # no version metadata in the PNG


def test_matplotlib_is_imported_only_when_a_plot_is_drawn():
    code = ("import sys; from tapeml.evaluator.interpreter import Interpreter; i = Interpreter(); "
            "i.run('x = sum([1, 2])'); print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_show_in_a_script_saves_a_png_and_says_where(tmp_path, monkeypatch):
    monkeypatch.setattr(plot, "_mode", "script")
    monkeypatch.chdir(tmp_path)                 # into the current directory, not /tmp
    (tmp_path / "tapeml-figure-1.png").write_bytes(b"the user's file")
    monkeypatch.setattr(plot, "_shown", 0)
    m = re.fullmatch(r"figure saved to (.+\.png)\n", output_of("plot([1, 2, 3])\nshow()"))
    assert m and m.group(1) == str(tmp_path / "tapeml-figure-2.png")   # never overwrites a file
    assert open(m.group(1), "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "tapeml-figure-1.png").read_bytes() == b"the user's file"
    assert plot.open_figures() == []


def test_savefig_after_show_warns_instead_of_writing_a_blank_image(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(plot, "_mode", "script")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(plot, "_shown", 0)
    interp = run('plot([1, 2, 3])\nshow()\nsavefig("after.png")')
    assert not (tmp_path / "after.png").exists()
    err = capsys.readouterr().err
    assert "warning: savefig(): the figure was already shown" in err and "tapeml-figure-1.png" in err
    assert "Call savefig before show()" in err
    # drawing again makes a new figure, and savefig writes it
    run('plot([3, 2, 1])\nsavefig("again.png")', interp)
    assert (tmp_path / "again.png").read_bytes()[:4] == b"\x89PNG"
    plot.close_all()


def test_each_drawing_after_show_starts_a_fresh_figure(monkeypatch):
    """In a session with a window, show() leaves its figure open; the next plot must not draw
    on its axes (the tutorial's heat map and loss curve shared one axes)."""
    monkeypatch.setattr(plot, "_mode", "repl")
    monkeypatch.setattr(plot, "_display_available", lambda: True)
    monkeypatch.setattr(plot, "_to_window", lambda: True)      # Agg stands in for the window
    plot.close_all()
    interp = run("imshow([1, 2; 3, 4])\nshow()")
    assert len(plot.open_figures()) == 1
    run("plot([1, 2, 3])\ntitle(\"loss\")", interp)
    first, second = plot.open_figures()
    assert len(first.axes) == 2 and len(first.axes[0].images) == 1 and not first.axes[0].lines
    assert len(second.axes) == 1 and len(second.axes[0].lines) == 1
    assert second.axes[0].get_title() == "loss"
    run("show()\nxlabel(\"step\")\nshow()\nsubplot(1, 2, 0)\nplot([1, 2])", interp)
    figs = plot.open_figures()
    assert len(figs) == 4 and figs[2].axes[0].get_xlabel() == "step" and not figs[2].axes[0].lines
    assert len(figs[3].axes) == 1 and len(figs[3].axes[0].lines) == 1
    plot.close_all()


def test_plot_errors_are_language_errors():
    from tapeml.syntax.errors import IndexErr, ShapeError, ValueErr
    for code, kind in (("plot([1, 2], [1, 2, 3])", ShapeError), ("subplot(1, 2, 2)", IndexErr),
                       ("figure()\nlegend()", ValueErr), ("imshow(zeros(2, 2, 2))", ShapeError)):
        with pytest.raises(kind):
            run(code)
    plot.close_all()


@pytest.mark.slow
@pytest.mark.numpy_only       # the committed pages are NumPy's: the device pages print numpy
def test_docs_check_fails_when_an_expected_output_is_edited(tmp_path):
    """The acceptance test: a hand edit of one example's output in a copy of docs/ is caught, and
    nothing else differs. Run as the command (its own process, the CLI's call depth: the page
    showing a runaway recursion's error reads as the CLI prints it)."""
    shutil.copytree(DOCS, tmp_path / "docs")
    page = tmp_path / "docs" / "builtins" / "relu.md"
    text = page.read_text(encoding="utf-8")
    edited = text.replace("```text\n[0, 0, 0.5, 1.5]\n```", "```text\n[0, 0, 0.5, 1.25]\n```", 1)
    assert edited != text, "relu.md no longer has the expected first output"
    page.write_text(edited, encoding="utf-8")
    res = subprocess.run([sys.executable, "-m", "tapeml", "docs", "check", "--root", str(tmp_path)],
                         capture_output=True, text=True, timeout=600, env={**os.environ, "TAPEML_PROGRESS": "0"})
    assert res.returncode == 1
    assert "docs: docs/builtins/relu.md: differs from the build" in res.stderr
    assert "-[0, 0, 0.5, 1.25]" in res.stderr and "+[0, 0, 0.5, 1.5]" in res.stderr
    # meanwhile the same build ran in a subprocess as another machine (OpenBLAS's PRESCOTT kernel,
    # NumPy's SIMD off, BLAS results moved by a rounding unit) and printed every page the same
    # (issue 25: no digit of rounding noise on any page)
    assert "docs: the second build ran under OPENBLAS_CORETYPE=PRESCOTT" in res.stdout
    assert res.stderr.strip().split("\n")[-1] == ("docs: check FAILED (0 failing examples, 1 stale or missing file, "
                                                  "0 pages that differ on another machine)")


def test_the_cross_machine_comparison_names_the_page_and_line(tmp_path):
    """A digit that moves with the machine (qr's Q' Q printed -6.184396e-17 with one BLAS kernel and
    -1.087595e-16 with another) fails the check, naming the page and the line; the gradient bounds
    are compared by pass/fail (they carry their own margin, docs.run.error_bound)."""
    from tapeml.faces.docs import cross
    here, there = tmp_path / "here", tmp_path / "out" / "docs"
    for base, noise, grad in ((here, "-6.184396e-17", "< 1e-9"), (there, "-1.087595e-16", "< 1e-10")):
        (base / "builtins").mkdir(parents=True)
        (base / "builtins" / "qr.md").write_text(
            f"# qr\n\n```text\n2x2 matrix:\n  1  {noise}\n  {noise}  1\n```\n"
            f"| `A` | {grad} (passes) |\n", encoding="utf-8")
        (base / "builtins" / "relu.md").write_text("# relu\n[0, 0, 0.5, 1.5]\n", encoding="utf-8")
    (there.parent / "machine.json").write_text('{"core": "Katmai", "simd": []}', encoding="utf-8")
    problems = cross.compare_builds(str(here), str(there), "OPENBLAS_CORETYPE=PRESCOTT")
    assert len(problems) == 1
    assert problems[0].startswith("docs/builtins/qr.md: differs on the other machine (OPENBLAS_CORETYPE=PRESCOTT)")
    assert "docs/builtins/qr.md:5: here '1  -6.184396e-17', there '1  -1.087595e-16'" in problems[0]
    assert "docs/builtins/qr.md:6:" in problems[0] and "qr.md:8" not in problems[0]
    # the same through `finish`, as `docs check` collects a finished subprocess's build
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    child = cross.Child("PRESCOTT", str(there.parent), proc, "OPENBLAS_CORETYPE=PRESCOTT")
    found, note = cross.finish(child, str(here))
    assert found == problems and "OPENBLAS_CORETYPE=PRESCOTT: OpenBLAS core Katmai, NumPy SIMD baseline only" in note
    assert not there.parent.exists()          # the subprocess's build is removed


@pytest.mark.numpy_only       # the committed pages are NumPy's: the device pages print numpy
def test_nudged_blas_moves_rounding_noise_and_keeps_exact_results():
    """The other machine's BLAS (docs.cross.nudge_blas, in a subprocess: it patches NumPy) moves
    what is rounding noise (the off-diagonal of Q' Q, the smallest singular value of a singular
    matrix) and keeps what every BLAS computes exactly (a product of whole numbers, the zeros
    LAPACK writes below R's diagonal) and what is rounded (round(Q' Q, 10))."""
    code = ("import sys, io\n"
            "from tapeml.faces.docs import cross\n"
            "if sys.argv[1] == 'nudge': cross.nudge_blas()\n"
            "from tapeml.evaluator.interpreter import Interpreter\n"
            "import numpy as np\n"
            "out = io.StringIO()\n"
            "Interpreter(out=out).run(sys.argv[2], '<t>')\n"
            "print(out.getvalue(), end='')\n"
            "print(np.linalg.svd(np.array([[1.0, 2.0], [2.0, 4.0]]), compute_uv=False)[1])\n")
    src = ("Q, R = qr([1, 2; 3, 4; 5, 6])\nprint(Q' @ Q)\nprint(round(Q' @ Q, 10))\nprint(R)\n"
           "print([1, 2; 3, 4] @ [5; 6])\nprint([0.5, 0; 0, 0.25] @ zeros(2, 2))")
    outs = {}
    for how in ("plain", "nudge"):
        res = subprocess.run([sys.executable, "-c", code, how, src], capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        outs[how] = res.stdout.split("\n")
    plain, nudged = outs["plain"], outs["nudge"]
    assert plain[0] != nudged[0]                       # Q' Q: the noise moved
    assert plain[1:5] == nudged[1:5] == ["[1, 0; 0, 1]", plain[2], "[17; 39]", "[0, 0; 0, 0]"]
    assert plain[2].startswith("[-5.91608, -7.437357; 0, ") or plain[2].startswith("[5.91608, 7.437357; 0, ")
    assert float(plain[5]) != float(nudged[5]) and abs(float(nudged[5])) < 1e-15   # the smallest singular value


def test_the_other_machine_runs_another_openblas_kernel_without_numpy_simd():
    """The second build's environment really changes what NumPy computes with: OPENBLAS_CORETYPE
    picks another OpenBLAS kernel (read back from OpenBLAS itself) and NumPy's dispatched SIMD is
    off. Only where NumPy's BLAS is OpenBLAS on x86-64 (the kernel names are x86's)."""
    import json
    import platform
    from tapeml.faces.docs import cross
    if platform.machine().lower() not in ("x86_64", "amd64") or cross.blas_core() is None:
        pytest.skip("NumPy's BLAS here is not an x86-64 OpenBLAS whose kernel can be read")
    code = "import json; from tapeml.faces.docs.cross import machine; print(json.dumps(machine()))"
    other = {}
    for kernel in ("PRESCOTT", "SANDYBRIDGE"):
        res = subprocess.run([sys.executable, "-c", code], env=cross.other_env(kernel), capture_output=True,
                             text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        other[kernel] = json.loads(res.stdout)
    assert other["PRESCOTT"]["core"] != other["SANDYBRIDGE"]["core"]     # the variable reaches OpenBLAS
    assert other["PRESCOTT"]["simd"] == [] == other["SANDYBRIDGE"]["simd"]


def test_every_builtin_and_stdlib_function_has_what_how_and_errors():
    """Every page has a "What it is" paragraph, a "How it works" paragraph and its errors, written
    in the declaration (not the summary standing in for them)."""
    from tapeml.faces.docs.collect import stdlib_entries
    STDLIB_DOCS = {e.name: e for e in stdlib_entries()}

    def blank(v):
        return not (v.strip() if isinstance(v, str) else v and all(str(x).strip() for x in v))
    missing = [f"{n}: no {k}" for n, b in REGISTRY.items() for k in ("what", "how", "errors")
               if blank(getattr(b, k))]
    missing += [f"stdlib {n}: no {k}" for n, d in STDLIB_DOCS.items() for k in ("what", "how", "errors")
                if blank(getattr(d, k) or "")]
    assert missing == []


def test_every_stdlib_parameter_is_described_and_every_result_named():
    """A stdlib function's page and help() list each parameter with its kind and what it is, as a
    builtin's do; the descriptions name only parameters the signature has."""
    missing = []
    for entry in docgen.stdlib_entries():
        name, params = entry.name, entry.params
        missing += [f"{name}({p.name})" for p in params if not p.doc or p.kind == "any" and p.name != "params"]
        if not entry.returns.strip():
            missing.append(f"{name}: returns")
    assert missing == []
    with pytest.raises(docgen.DocsError, match="describes a parameter 'y' it does not have"):
        docgen.parse_doc_comment("f", "x", ["# Sum.", "# param y (number): no such parameter"], "stdlib/t.ml")
    from tapeml.builtins.help import help_text
    text = help_text("adamw_step")
    assert "Parameters" in text and "weight_decay  number" in text and "default 0.01" in text


def test_a_stdlib_doc_comment_is_read_field_by_field():
    """The structured comment above a stdlib `fn` (docs.collect.stdlib_entries): summary, params
    with kind and shape (defaults from the fn line as written), returns, prose continued on
    indented lines, one error per line, multi-line examples."""
    comment = ["# Scale x.", "#", "# param x (array, [N]): the values", "# param k (number): the factor,",
               "#     > 0", "# returns: x * k", "# what: Multiplies", "#     every element.",
               "# how: x * k.", "# error: TypeError one", "# error: ValueError two",
               "# example:", "#     y = [1, 2]", "#     scale(y, 2)", "# example:", "#     scale(1)"]
    e = docgen.parse_doc_comment("scale", "x, k = 1.0", comment, "stdlib/t.ml")
    assert (e.name, e.summary, e.signature, e.returns, e.what, e.how, e.file, e.source) == (
        "scale", "Scale x.", "scale(x, k=1.0)", "x * k", "Multiplies every element.", "x * k.",
        "stdlib/t.ml", "stdlib")
    assert [(p.name, p.kind, p.shape, p.doc, str(p.default)) for p in e.params][1] == (
        "k", "number", "", "the factor, > 0", "1.0")
    assert (e.params[0].kind, e.params[0].shape, e.params[0].required) == ("array", "[N]", True)
    assert e.errors == ["TypeError one", "ValueError two"]
    assert e.examples == ["y = [1, 2]\nscale(y, 2)", "scale(1)"]


def test_every_public_stdlib_function_has_a_doc_comment_and_no_other_table_exists():
    entries = {e.name: e for e in docgen.stdlib_entries()}
    root = os.path.join(ROOT, "stdlib")
    for f in os.listdir(root):
        if f.endswith(".ml"):
            names = re.findall(r"^fn ([a-zA-Z]\w*)\(", open(os.path.join(root, f), encoding="utf-8").read(), re.M)
            assert all(entries[n].file == f"stdlib/{f}" and entries[n].summary for n in names), f
    assert not os.path.exists(os.path.join(root, "docs.py"))


def test_gradient_figures_print_as_a_stable_bound():
    """The gradient check prints a power of ten the error stays below with a decade to spare, at
    most the tolerance: the error's digits move up to 2.5 times between the machines `docs check`
    compares, and dense's b (9.99e-11) printed as its own decade, "< 1e-10", would flip to
    "< 1e-9" on one of them. A rebuild keeps the bound the committed page printed while it is 3 to
    1000 times the error, so noise (5e-10 one run, 6e-10 the next) changes no page, and a bound
    too tight for another machine's noise is recomputed."""
    b = docgen.error_bound
    assert [b(5.3e-10), b(6.1e-10), b(1e-10), b(9.99e-11), b(0.0), b(3e-8), b(3e-7), b(1e-6)] == [
        "< 1e-8", "< 1e-8", "< 1e-8", "< 1e-9", "0", "< 1e-6", "< 1e-6", "< 1e-5"]
    for err in (9.99e-11, 1e-10, 3.3e-12, 4.2e-9):       # room above the error: 10 to 100 times it
        assert 10 * err < float(b(err)[2:]) <= 100 * err
    assert b(0.98e-9, "1e-8") == "< 1e-8"          # kept: still true
    assert b(1.1e-11, "1e-8") == "< 1e-8"          # kept: still true, at most 1000x loose
    assert b(1.02e-9, "1e-9") == "< 1e-7"          # no longer true: recomputed, a decade to spare
    assert b(9.99e-11, "1e-10") == "< 1e-9"        # true but too tight: recomputed
    assert b(5e-12, "1e-8") == "< 1e-10"           # too loose: recomputed
    page = "| `x` | < 1e-9 (passes) |\n| `w` | 5e-10 (passes) |\n| `y` | 3e-3 (FAILS) |\n"
    assert docgen.printed_bounds(page) == {"x": "1e-9"}


@pytest.mark.slow
@pytest.mark.numpy_only       # the committed pages are NumPy's: the device pages print numpy
def test_docs_build_on_a_clean_copy_changes_no_file_twice(tmp_path):
    """`tapeml docs build` in a copy of the committed docs/ rewrites every page and figure with
    the same text (figures: the same pixels), and a second build in a row does too, this one as
    another machine runs it (OpenBLAS's PRESCOTT kernel, NumPy's SIMD off: issue 25, where qr's
    page printed other rounding noise on another CPU). Run as the command (its own process, the
    CLI's call depth), as a user runs it."""
    from tapeml.faces.docs import cross
    root = ROOT
    shutil.copytree(os.path.join(root, "docs"), tmp_path / "docs")
    for env in (None, cross.other_env("PRESCOTT")):
        res = subprocess.run([sys.executable, "-m", "tapeml", "docs", "build", "--root", str(tmp_path)],
                             capture_output=True, text=True, timeout=300, env=env)
        assert res.returncode == 0, res.stderr[-2000:]
        changed = []
        for dirpath, _, files in os.walk(os.path.join(root, "docs")):
            for f in files:
                a = os.path.join(dirpath, f)
                b = os.path.join(tmp_path, os.path.relpath(a, root))
                if not os.path.exists(b):
                    changed.append(f"{f}: removed by the build")
                elif f.endswith(".png"):
                    if not docgen.same_png(a, b):
                        changed.append(f)
                elif open(a, "rb").read() != open(b, "rb").read():
                    changed.append(f)
        assert changed == []


def test_help_shares_the_doc_model_and_runs_examples_in_the_asking_session():
    """help reads stdlib docs through docs.collect (the builder's doc model) and runs the example
    in a fresh interpreter of the asking session's kind; with no session it shows the code only."""
    from tapeml.builtins.help import help_text, stdlib_table
    assert set(stdlib_table()) == {e.name for e in docgen.stdlib_entries()}
    with_session = help_text("len", fresh()).split("Example\n")[1].split("\n")
    without = help_text("len").split("Example\n")[1].split("\n")
    assert len(with_session) == len(without) + 1 and with_session[:len(without)] == without
    assert with_session[-1].strip() == docgen.run_code(REGISTRY["len"].examples[0], "<len>").output.split("\n")[-1]
    help_src = open(os.path.join(ROOT, "builtins", "help.py"), encoding="utf-8").read()
    assert "tapeml.evaluator.interpreter" not in help_src and "docs.run" not in help_src and "docs.render" not in help_src
