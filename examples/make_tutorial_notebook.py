"""Write examples/tutorial.ipynb from the first sections of docs/tutorial.md and run it.

    python examples/make_tutorial_notebook.py      (needs the jupyter extra, nbclient, nbformat,
                                                    and the kernel installed: tapeml kernel install)

Prose becomes markdown cells, each ```ml block a code cell; the notebook is executed with the
tapeml kernel so it is stored with its outputs (tests/faces/test_kernel.py runs it again and compares).
"""
from __future__ import annotations

import os
import re
import sys

SECTIONS = 3            # the tutorial's first sections: matrices, a dense layer, attention
HERE = os.path.dirname(os.path.abspath(__file__))
TUTORIAL = os.path.join(HERE, "..", "docs", "tutorial.md")
NOTEBOOK = os.path.join(HERE, "tutorial.ipynb")


def cells_from_markdown(text: str, sections: int = SECTIONS) -> list[tuple[str, str]]:
    """('markdown' | 'code', source) for the text up to the start of section `sections + 1`:
    ```ml blocks are code; their ```text outputs and figure links are left out (the kernel
    makes them)."""
    stop = re.search(rf"^## {sections + 1}\.", text, re.M)
    text = text[:stop.start()] if stop else text
    cells, prose = [], []
    parts = re.split(r"^```(\w*)\n(.*?)^```\n", text, flags=re.M | re.S)
    # re.split with two groups: [prose, lang, body, prose, lang, body, ...]
    for i in range(0, len(parts), 3):
        chunk = re.sub(r"^!\[figure drawn by .*\)\n", "", parts[i], flags=re.M)
        if chunk.strip():
            cells.append(("markdown", chunk.strip()))
        if i + 2 < len(parts) and parts[i + 1] == "ml":
            cells.append(("code", parts[i + 2].rstrip("\n")))
    return cells


def build() -> None:
    import nbformat
    from nbclient import NotebookClient
    with open(TUTORIAL, encoding="utf-8") as f:
        cells = cells_from_markdown(f.read())
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "tapeml", "display_name": "tapeml", "language": "tapeml"}
    for i, (kind, source) in enumerate(cells):
        cell = (nbformat.v4.new_markdown_cell if kind == "markdown" else nbformat.v4.new_code_cell)(source)
        cell["id"] = f"cell-{i}"
        nb.cells.append(cell)
    NotebookClient(nb, kernel_name="tapeml", timeout=60).execute()
    nbformat.write(nb, NOTEBOOK)


if __name__ == "__main__":
    build()
    sys.exit(0)
