"""`tapeml docs check`: compare a fresh build with the committed docs/; and the CLI's `main`
for `tapeml docs build|check` (see tapeml.faces.docs)."""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time

from tapeml.faces.docs import cross
from tapeml.faces.docs.collect import DocsError, all_entries
from tapeml.faces.docs.render import GENERATED_IMG, build, default_root
from tapeml.faces.docs.run import normalize_page, same_png


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
    kernels = None
    while "--root" in args or "--kernel" in args:
        opt = "--root" if "--root" in args else "--kernel"
        i = args.index(opt)
        if i + 1 >= len(args):
            print(f"tapeml docs: {opt} needs {'a directory' if opt == '--root' else 'an OpenBLAS kernel name or none'}",
                  file=sys.stderr)
            return 2
        if opt == "--root":
            root = args[i + 1]
        else:
            kernels = (kernels or []) + [k for k in args[i + 1].split(",") if k and k.lower() != "none"]
        del args[i:i + 2]
    unknown = next((a for a in args[1:] if a.startswith("-")), None) if args else None
    if unknown or (kernels is not None and args and args[0] == "build"):
        what = f"unknown option '{unknown}'" if unknown else "--kernel is an option of check, not build"
        print(f"tapeml docs {args[0]}: {what}", file=sys.stderr)
    if len(args) != 1 or args[0] not in ("build", "check") or (kernels is not None and args[0] != "check"):
        print("usage: tapeml docs build [--root DIR] | tapeml docs check [--root DIR] [--kernel NAME|none]\n"
              "       tapeml docs site [--root DIR] [--out DIR] | tapeml docs serve [--root DIR] [--addr HOST:PORT]",
              file=sys.stderr)
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
    return check(root, list(cross.DEFAULT_KERNELS) if kernels is None else kernels, t0)


def check(root: str, kernels: list[str], t0: float) -> int:
    """Build into a temporary directory and compare with root/docs; meanwhile the same build runs
    in a subprocess per kernel (tapeml.faces.docs.cross) and must print the very same pages."""
    tmp = tempfile.mkdtemp(prefix="tapeml-docs-check-")
    children = []
    notes = []
    cross_problems = []
    try:
        children = [cross.start(k, root) for k in kernels]      # they build while this process does
        failures = build(tmp, source_root=root)
        report(failures)
        problems = compare(os.path.join(root, "docs"), os.path.join(tmp, "docs"))
        for c in children:
            found, note = cross.finish(c, os.path.join(tmp, "docs"))
            cross_problems += found
            notes.append(note)
        for p in problems + cross_problems:
            print(f"docs: {p}", file=sys.stderr)
    finally:
        for c in children:
            c.close()
        shutil.rmtree(tmp, ignore_errors=True)
    for n in notes:
        print(f"docs: the second build ran under {n}", file=sys.stderr if cross_problems else sys.stdout)
    if cross_problems:
        print(f"docs: {cross.FIX}", file=sys.stderr)
    if failures or problems or cross_problems:
        print(f"docs: check FAILED ({len(failures)} failing example{'s' * (len(failures) != 1)}, "
              f"{len(problems)} stale or missing file{'s' * (len(problems) != 1)}, "
              f"{len(cross_problems)} page{'s' * (len(cross_problems) != 1)} that differ{'s' * (len(cross_problems) == 1)} "
              f"on another machine)", file=sys.stderr)
        return 1
    print(f"docs: check passed in {time.perf_counter() - t0:.1f}s"
          + (f"; the build{'s' * (len(kernels) != 1)} as {'another machine' if len(kernels) == 1 else f'{len(kernels)} other machines'} "
             f"printed the same pages" if kernels else ""))
    return 0
