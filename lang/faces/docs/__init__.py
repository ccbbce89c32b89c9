"""The docs builder, a face (the core never imports it): `tapeml docs build` and `docs check`.

    tapeml docs build [--root DIR]   write docs/builtins/ from the registry; run docs/*.md blocks
    tapeml docs check [--root DIR] [--kernel NAME|none]
                                     rebuild into a temporary directory and compare; meanwhile
                                     build again as another machine would and compare (cross)
    tapeml docs site [--root DIR] [--out DIR]   the website from docs/ (site.py; tapeml[docs])
    tapeml docs serve [--root DIR] [--addr HOST:PORT]

What `build` writes (DIR defaults to the checkout that holds this package):
- docs/builtins/index.md: every builtin, grouped by category with counts, one line each; then the
  stdlib functions, documented by the comment above their `fn` (see collect.stdlib_entries).
- docs/builtins/<name>.md, one page per builtin and documented stdlib function, in this order:
  title and call shape, "What it is", the signature table, the examples (code, the exact output,
  the figure), the gradient check, "How it works", the errors.
- docs/builtins/img/<name>-<k>.png: the figure example k drew, if any.
- docs/*.md: each ```ml block is run and its output written in the ```text block right after it
  (the build owns that block and replaces it on every rebuild), followed by the figure it drew
  as ![...](img/<file>-<n>.png). The blocks of one file share one interpreter, like a notebook.
  A block fenced ```ml error must raise; its rendered error is its output. ```ml norun is shown
  and not run.

Running an example: a fresh Interpreter with its output captured; a top-level expression
statement that is not none and does not end in ';' is echoed as the REPL echoes it, with
display_value for 80x24 (strings quoted, big matrices as grids). Plots draw on matplotlib's Agg backend; every figure left open
by the example is saved. An example that raises fails the build (exit 1, naming the page and
the example): failing examples are never dropped.

The gradient check: for each builtin declared differentiable=True the build records the
arguments of the first call of that builtin in its first example. It fixes a pseudo-random
weight R shaped like the result (seeded by the builtin's name) and runs check_grad on
    t -> sum(name(args with t substituted) * R)
where t is the tuple of every argument whose parameter kind is array, tree, record or tuple and
that holds only float numbers and matrices (so x, gamma and beta of layer_norm; every weight of
transformer_block). The weighting by R makes the check see every output element (the sum of a
layer_norm row alone is constant). The largest relative error |tape - fd| / max(|tape|, |fd|, 1)
over all checked elements is printed on the page as a power of ten it stays below with a decade
to spare (run.error_bound: its digits are rounding noise); above 1e-6 fails the build.

`check` compares the rebuilt tree with the committed one: every page's text (the printed
gradient error is compared by its pass/fail, not its last digits, which depend on the BLAS),
every figure (equal bytes, or equal decoded pixels up to anti-aliasing noise, so a different
matplotlib patch release does not fail CI), missing pages and stale pages. Meanwhile a subprocess
builds the same docs as another machine would (cross: OpenBLAS kernel PRESCOTT, or each --kernel
NAME; NumPy's SIMD off; BLAS and LAPACK results moved by a rounding unit) and every line it prints
differently (gradient figures again by pass/fail) fails the check with the page and line: a page
must print no digit of rounding noise.

The package is split by job: collect (the doc model, shared with `help`), run (examples, figures,
the gradient check), render (pages, index, docs/*.md, `build`), check (compare, `main`), cross
(the other machine's build and the line-by-line comparison), site (`tapeml docs site|serve`: the
website, MkDocs with Material from ROOT/mkdocs.yml; mkdocs_hooks.py hands MkDocs its hooks).
Importing `tapeml.faces.docs` imports none of them; its names below are looked up on first use.
"""
from __future__ import annotations

import importlib

_WHERE = {
    "collect": ["DocsError", "Entry", "builtin_entries", "stdlib_entries",
                "params_from_signature", "parse_doc_comment", "comment_above", "all_entries"],
    "run": ["GRAD_TOLERANCE", "RunResult", "echo_text", "fresh_session", "finish", "reset_random", "run_code",
            "save_figures", "same_png", "gradient_check", "error_bound", "normalize_page", "format_error"],
    "render": ["GENERATED", "printed_bounds", "build_page", "build_index", "run_markdown", "build", "default_root"],
    "check": ["compare", "report", "main"],
    "cross": ["blas_core", "nudge_blas", "compare_builds"],
}
_MODULE = {name: mod for mod, names in _WHERE.items() for name in names}


def __getattr__(name):
    if name in _MODULE:
        return getattr(importlib.import_module(f"tapeml.faces.docs.{_MODULE[name]}"), name)
    raise AttributeError(f"module 'tapeml.faces.docs' has no attribute {name!r}")
