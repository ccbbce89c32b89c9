"""`tapeml docs check`: compare a fresh build with the committed docs/; and the CLI's `main`
for `tapeml docs build|check` (see tapeml.docs)."""
from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import time

import numpy as np

from tapeml.docs.collect import DocsError, all_entries
from tapeml.docs.render import GENERATED_IMG, build, default_root


GRAD_ROW = re.compile(r"^(\| `[A-Za-z_0-9]+` \| )(?:< )?[-+.e0-9]+ \((passes|FAILS)\) \|$", re.M)


def normalize_page(text: str) -> str:
    """The page with the gradient errors' digits hidden (their pass/fail is kept)."""
    return GRAD_ROW.sub(lambda m: f"{m.group(1)}({m.group(2)}) |", text)


def same_png(a: str, b: str) -> bool:
    with open(a, "rb") as fa, open(b, "rb") as fb:
        if fa.read() == fb.read():
            return True
    from tapeml.builtins import plot
    plot.plt()
    import matplotlib.image as mpimg
    try:
        x, y = mpimg.imread(a), mpimg.imread(b)
    except Exception:  # not a readable PNG
        return False
    if x.shape != y.shape:
        return False
    diff = np.abs(x.astype(np.float64) - y.astype(np.float64)).max(axis=-1)
    return float(np.mean(diff > 0.1)) < 0.002     # under 0.2% of pixels visibly different


def _files(base: str) -> set[str]:
    out = set()
    if not os.path.isdir(base):
        return out
    for dirpath, _, files in os.walk(base):
        for f in files:
            if f.endswith((".md", ".png")):
                out.add(os.path.relpath(os.path.join(dirpath, f), base))
    return out


def compare(committed_docs: str, built_docs: str) -> list[str]:
    """Differences between the committed docs/ and a fresh build, one line each."""
    problems = []
    built = {f for f in _files(built_docs) if f.startswith("builtins" + os.sep) or os.sep not in f
             or f.startswith("img" + os.sep)}
    stems = [f[:-3] for f in built if os.sep not in f and f.endswith(".md")]

    def generated_img(f):
        name = f[len("img" + os.sep):]
        return GENERATED_IMG.match(name) and any(name.startswith(s + "-") for s in stems)
    have = {f for f in _files(committed_docs) if f.startswith("builtins" + os.sep)
            or (f.startswith("img" + os.sep) and generated_img(f)) or (os.sep not in f and f in built)}
    for f in sorted(built - have):
        what = "has no page" if f.endswith(".md") else "has no committed figure"
        problems.append(f"docs/{f}: {what} (run `tapeml docs build`)")
    for f in sorted(have - built):
        problems.append(f"docs/{f}: stale (the build no longer makes it; run `tapeml docs build`)")
    for f in sorted(built & have):
        a, b = os.path.join(committed_docs, f), os.path.join(built_docs, f)
        if f.endswith(".png"):
            if not same_png(a, b):
                problems.append(f"docs/{f}: the figure differs from what the example draws now")
            continue
        with open(a, encoding="utf-8") as fa, open(b, encoding="utf-8") as fb:
            old, new = fa.read(), fb.read()
        if normalize_page(old) != normalize_page(new):
            problems.append(f"docs/{f}: differs from the build:\n" + short_diff(old, new, f))
    return problems


def short_diff(old: str, new: str, name: str, limit: int = 20) -> str:
    import difflib
    d = list(difflib.unified_diff(old.split("\n"), new.split("\n"), f"committed/{name}", f"built/{name}",
                                  n=1, lineterm=""))
    if len(d) > limit:
        d = d[:limit] + [f"... ({len(d) - limit} more diff lines)"]
    return "\n".join("    " + x for x in d)


def report(failures: list[DocsError]) -> None:
    for f in failures:
        print(f"docs: FAILED {f.where}: {f.message}", file=sys.stderr)


def main(argv: list[str]) -> int:
    args = list(argv)
    root = None
    if "--root" in args:
        i = args.index("--root")
        if i + 1 >= len(args):
            print("tapeml docs: --root needs a directory", file=sys.stderr)
            return 2
        root = args[i + 1]
        del args[i:i + 2]
    if len(args) != 1 or args[0] not in ("build", "check"):
        print("usage: tapeml docs build|check [--root DIR]", file=sys.stderr)
        return 2
    root = os.path.abspath(root or default_root())
    t0 = time.perf_counter()
    if args[0] == "build":
        failures = build(root)
        n = len(all_entries())
        if failures:
            report(failures)
            print(f"docs: build FAILED ({len(failures)} problem{'s' * (len(failures) != 1)})", file=sys.stderr)
            return 1
        print(f"docs: built {n} pages and ran the docs/*.md blocks in {time.perf_counter() - t0:.1f}s")
        return 0
    tmp = tempfile.mkdtemp(prefix="tapeml-docs-check-")
    try:
        failures = build(tmp, source_root=root)
        report(failures)
        problems = compare(os.path.join(root, "docs"), os.path.join(tmp, "docs"))
        for p in problems:
            print(f"docs: {p}", file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures or problems:
        print(f"docs: check FAILED ({len(failures)} failing example{'s' * (len(failures) != 1)}, "
              f"{len(problems)} stale or missing file{'s' * (len(problems) != 1)})", file=sys.stderr)
        return 1
    print(f"docs: check passed in {time.perf_counter() - t0:.1f}s")
    return 0
