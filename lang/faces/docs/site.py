"""The docs website: `tapeml docs site` and `tapeml docs serve` (needs the extra tapeml[docs]).

    tapeml docs site [--root DIR] [--out DIR]     build the static site (default DIR/build/site)
    tapeml docs serve [--root DIR] [--addr HOST:PORT]
                                                  preview it, rebuilt when a page changes

The site is MkDocs with the Material theme, configured by ROOT/mkdocs.yml and built from ROOT/docs
as `tapeml docs build` left it (the pages are not rebuilt or checked here: `docs check` is the gate
for stale pages and failing examples). The build is strict: a broken link, a link to a missing
heading, a missing figure, or a page in docs/ that the navigation leaves out fails it.

What depends on the builtins is added by the hooks below (mkdocs.yml names mkdocs_hooks.py, which
imports them), so `mkdocs build` alone builds the same site:
- on_config: the navigation's "Builtins" entry becomes the builtin index followed by one section
  per category (registry.CATEGORIES order) and one for the standard library, a page per function;
  a "Source" section follows it.
- on_files: one page per file that declares a builtin or a documented stdlib function
  (source/builtins/ml/layers.py.md ...), the file highlighted with numbered lines that can be
  linked to; left out of the search index, so a search finds the documentation, not the code.
- on_page_markdown: each builtin page gets a link to its declaration on that source page (the
  line of its `@builtin(` or of its `fn`); a builtin's page is boosted in the search.
- on_page_content: formulas, written $...$ or $$...$$ in a page and marked by pymdownx.arithmatex,
  become MathML (latex2mathml) that the browser lays out itself: no script, no font or file
  fetched from a CDN, so the site reads the same offline.
"""
from __future__ import annotations

import html
import inspect
import logging
import os
import re
import sys
import time

log = logging.getLogger("mkdocs.plugins.tapeml")


try:                        # (without the extra this module still imports: `docs site` says what is missing)
    from mkdocs.plugins import event_priority
except ImportError:
    def event_priority(priority):
        return lambda f: f

SOURCE_DIR = "source"          # where the declaration files' pages go in the site
SEARCH_BOOST = 2               # a builtin's own page ranks above pages that mention it


# ---- what the site adds: from the doc model --------------------------------------------------
def code_root() -> str:
    """The folder the declaration files' paths are relative to: the checkout tapeml runs from (the
    one holding builtins/ and stdlib/), so a path reads as in the repository."""
    import tapeml.builtins
    return os.path.dirname(os.path.dirname(os.path.abspath(tapeml.builtins.__file__)))


def _entries():
    from tapeml.faces.docs.collect import all_entries
    return all_entries()


def declaration(entry, root: str | None = None) -> tuple[str, int] | None:
    """(file relative to root with '/', line) where `entry` is declared: a builtin's `@builtin(`
    line, a stdlib function's `fn` line; None when the file is not under root (code_root())."""
    root = root or code_root()
    if entry.source == "stdlib":
        import tapeml.stdlib
        path = os.path.join(os.path.dirname(os.path.abspath(tapeml.stdlib.__file__)), os.path.basename(entry.file))
        try:
            with open(path, encoding="utf-8") as f:
                lines = f.read().split("\n")
        except OSError:
            return None
        pat = re.compile(rf"^fn\s+{re.escape(entry.name)}\s*\(")
        line = next((i + 1 for i, text in enumerate(lines) if pat.match(text)), 1)
        rel = os.path.relpath(path, root)
        return (None if rel.startswith("..") else (rel.replace(os.sep, "/"), line))
    fn = inspect.unwrap(entry.builtin.fn)
    module = sys.modules.get(getattr(fn, "__module__", ""), None)
    path = getattr(module, "__file__", None)
    if path is None:
        return None
    path = os.path.abspath(path)
    rel = os.path.relpath(path, root)
    if rel.startswith(".."):
        return None            # tapeml is installed from somewhere else than this checkout
    # the `@builtin("name", ...)` line; a function wrapped by another decorator starts elsewhere
    with open(path, encoding="utf-8") as f:
        text = f.read()
    m = re.search(rf"""\bbuiltin\(\s*["']{re.escape(entry.name)}["']""", text)
    code = getattr(fn, "__code__", None)
    line = text.count("\n", 0, m.start()) + 1 if m else (code.co_firstlineno if code else 1)
    return rel.replace(os.sep, "/"), line


def source_page(path: str) -> str:
    """The site's page for declaration file `path` (relative to the docs)."""
    return f"{SOURCE_DIR}/{path}.md"


def _declarations() -> dict:
    """{entry name: (file, line)}."""
    out = {}
    for e in _entries():
        d = declaration(e)
        if d is None:
            log.warning(f"tapeml: no declaration file under {code_root()} for '{e.name}'")
        else:
            out[e.name] = d
    return out


def on_config(config):
    """The navigation by category and the Source section (see the module docstring)."""
    from tapeml.builtins.registry import CATEGORIES
    entries = _entries()
    decls = _declarations()
    builtins = [e for e in entries if e.source == "builtin"]
    stdlib = [e for e in entries if e.source == "stdlib"]
    section = ["builtins/index.md"]
    for c in CATEGORIES:
        group = [{e.name: f"builtins/{e.name}.md"} for e in builtins if e.category == c]
        if group:
            section.append({c: group})
    if stdlib:
        section.append({"Standard library": [{e.name: f"builtins/{e.name}.md"} for e in stdlib]})
    files = sorted({f for f, _ in decls.values()}, key=lambda f: (f.startswith("stdlib/"), f))
    nav = []
    for item in config.nav or []:
        if isinstance(item, dict) and list(item.values()) == ["builtins/index.md"]:
            nav.append({list(item)[0]: section})
            nav.append({"Source": [{f: source_page(f)} for f in files]})
        else:
            nav.append(item)
    config.nav = nav
    # what the later hooks read, for this build: where each function is declared, its summary
    config.extra["tapeml_declarations"] = decls
    config.extra["tapeml_entries"] = {e.name: " ".join(e.summary.split()) for e in entries}
    config.extra["tapeml_summaries"] = {}          # {page url: summary}, filled page by page
    return config


def on_files(files, config):
    """A page per declaration file, generated (it is not written into docs/)."""
    from mkdocs.structure.files import File
    root = code_root()
    decls = config.extra["tapeml_declarations"]
    by_file: dict[str, list] = {}
    for name, (path, line) in decls.items():
        by_file.setdefault(path, []).append((line, name))
    for path, names in by_file.items():
        with open(os.path.join(root, path), encoding="utf-8") as f:
            text = f.read()
        files.append(File.generated(config, source_page(path), content=_source_markdown(path, text, sorted(names))))
    return files


def _source_markdown(path: str, text: str, names: list) -> str:
    """The page of a declaration file: the names it declares, then the file highlighted (tapeml's
    own lexer for .ml) with numbered lines, line N carrying the anchor L-N. The code is raw HTML
    written by Pygments, so MkDocs sees the anchors and checks every link to them."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer
    from tapeml.faces.highlight import TapemlLexer
    up = "../" * path.count("/") + "../"          # from source/<path>.md back to the docs root
    lang, lexer = ("tapeml", TapemlLexer()) if path.endswith(".ml") else ("python", PythonLexer())
    listed = ", ".join(f"[`{n}`]({up}builtins/{n}.md) (line {line})" for line, n in names)
    code = highlight(text, lexer, HtmlFormatter(cssclass=f"language-{lang} highlight", linenos="inline",
                                                lineanchors="L", anchorlinenos=True, wrapcode=True))
    return "\n".join(["---", "search:", "  exclude: true", "---", "", f"# {path}", "",
                      f"The file that declares {listed}. Each one's page links to its line here.", "",
                      code.strip(), ""])


SOURCE_LINE = re.compile(r"^(\[Builtin index\]\(index\.md\) · .*)$", re.M)


def on_page_markdown(markdown, page, config, files):
    """A builtin's page: the link to its declaration, and its search boost."""
    src = page.file.src_uri
    if not (src.startswith("builtins/") and src.count("/") == 1) or src == "builtins/index.md":
        return markdown
    name = src[len("builtins/"):-len(".md")]
    decl = config.extra["tapeml_declarations"].get(name)
    if decl is None:
        return markdown
    path, line = decl
    link = f"[{path}, line {line}](../{source_page(path)}#L-{line})"
    page.meta.setdefault("search", {}).setdefault("boost", SEARCH_BOOST)
    config.extra["tapeml_summaries"][page.url] = config.extra["tapeml_entries"][name]
    new, n = SOURCE_LINE.subn(lambda m: f"{m.group(1)} · declared in {link}", markdown, count=1)
    if n == 0:
        new = markdown.replace("\n", f"\n\nDeclared in {link}.\n", 1) if "\n" in markdown else markdown
    return new


@event_priority(-100)      # after the search plugin has written its index
def on_post_build(config):
    """The search index gets each function's summary as a field of its own (`summary`, boosted in
    mkdocs.yml like a title), so a builtin is found by words of its summary as by its name."""
    import json
    path = os.path.join(config.site_dir, "search", "search_index.json")
    if not os.path.isfile(path):
        return
    with open(path, encoding="utf-8") as f:
        index = json.load(f)
    summaries = config.extra["tapeml_summaries"]
    for doc in index["docs"]:
        if doc["location"] in summaries:
            doc["summary"] = summaries[doc["location"]]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(index, f, ensure_ascii=False, separators=(",", ":"))


MATH = re.compile(r'<(span|div) class="arithmatex">(.*?)</\1>', re.S)


def on_page_content(content, page, config, files):
    """Formulas to MathML (see the module docstring); a formula that does not parse, or uses a
    command the converter does not know, fails the strict build. So does a page that does not show
    what its source says (verbatim.missing: a code span, a line of code, a run of text holding
    `*`, `_` or `^` that Markdown read as markup)."""
    from tapeml.faces.docs.verbatim import missing
    if "arithmatex" in content:
        content = MATH.sub(lambda m: _mathml(m.group(1), html.unescape(m.group(2)), page.file.src_uri), content)
    if not page.file.src_uri.startswith(SOURCE_DIR + "/"):       # a declaration file's page is code
        lost = missing(page.markdown or "", content)
        for run in lost[:SHOWN_MISSING]:
            log.warning(f"{page.file.src_uri}: the page does not show {run!r} as its source writes it "
                        f"(Markdown read it as markup: escape it, or write it in a code span)")
        if len(lost) > SHOWN_MISSING:
            log.warning(f"{page.file.src_uri}: ... and {len(lost) - SHOWN_MISSING} more")
    return content


SHOWN_MISSING = 5          # runs named per page, then a count


def _mathml(tag: str, tex: str, where: str) -> str:
    from latex2mathml.converter import convert
    tex = tex.strip()
    display = "block" if tag == "div" else "inline"
    for left, right in (("\\(", "\\)"), ("\\[", "\\]"), ("$$", "$$"), ("$", "$")):
        if tex.startswith(left) and tex.endswith(right):
            tex = tex[len(left):len(tex) - len(right)]
            break
    try:
        mathml = convert(tex, display=display)
    except Exception as e:       # latex2mathml raises its own exceptions for bad input
        log.warning(f"{where}: the formula {tex!r} does not parse: {type(e).__name__} {e}")
        return html.escape(tex)
    unknown = re.search(r">(\\[A-Za-z]+)<", mathml)      # a command latex2mathml passed through as text
    if unknown:
        log.warning(f"{where}: the formula {tex!r} uses {unknown.group(1)}, which is not rendered")
    return f'<{tag} class="arithmatex">{mathml}</{tag}>'


# ---- the commands ------------------------------------------------------------------------------
USAGE = ("usage: tapeml docs site [--root DIR] [--out DIR] | "
         "tapeml docs serve [--root DIR] [--addr HOST:PORT]")


def _need_mkdocs() -> str | None:
    missing = []
    for mod, pkg in (("mkdocs", "mkdocs"), ("material", "mkdocs-material"), ("pymdownx", "pymdown-extensions"),
                     ("latex2mathml", "latex2mathml")):
        try:
            __import__(mod)
        except ImportError:
            missing.append(pkg)
    if missing:
        return (f"tapeml docs: the site needs {', '.join(missing)}: install the extra, "
                f"pip install -e \".[docs]\"")
    return None


def _logging(command: str = "site", level: int = logging.WARNING) -> None:
    """MkDocs's messages from `level` up on stderr (a warning fails the strict build)."""
    logger = logging.getLogger("mkdocs")
    for h in [h for h in logger.handlers if getattr(h, "_tapeml", False)]:
        logger.removeHandler(h)
    h = logging.StreamHandler(sys.stderr)
    h.setFormatter(logging.Formatter(f"docs {command}: %(levelname)s %(message)s"))
    h.setLevel(level)
    h._tapeml = True
    logger.addHandler(h)
    logger.setLevel(logging.INFO)          # MkDocs counts the warnings through its own handler


def build_site(root: str, out: str | None = None) -> tuple[int, str]:
    """Build the site of root into out (default: site_dir of mkdocs.yml); returns the number of
    pages and the site's directory. Raises SiteError."""
    from mkdocs import exceptions
    from mkdocs.commands.build import build
    from mkdocs.config import load_config
    _logging()
    config_file = os.path.join(root, "mkdocs.yml")
    if not os.path.isfile(config_file):
        raise SiteError(f"no mkdocs.yml in {root}")
    if not os.path.isfile(os.path.join(root, "docs", "builtins", "index.md")):
        raise SiteError(f"{root}/docs has no builtin pages: run `tapeml docs build` first")
    kwargs = {"site_dir": os.path.abspath(out)} if out else {}
    try:
        config = load_config(config_file=config_file, strict=True, **kwargs)
        config.plugins.on_startup(command="build", dirty=False)
        try:
            build(config)
        finally:
            config.plugins.on_shutdown()
    except (exceptions.Abort, exceptions.ConfigurationError) as e:
        raise SiteError(str(e)) from None
    site_dir = config.site_dir
    return sum(f == "index.html" for _, _, fs in os.walk(site_dir) for f in fs), site_dir


class SiteError(Exception):
    pass


def main(argv: list[str]) -> int:
    """`tapeml docs site|serve ...`"""
    from tapeml.faces.docs.render import default_root
    args = list(argv)
    if not args or args[0] not in ("site", "serve"):
        print(USAGE, file=sys.stderr)
        return 2
    command, args = args[0], args[1:]
    opts = {"--root": None, "--out": None, "--addr": None}
    allowed = ("--root", "--out") if command == "site" else ("--root", "--addr")
    while args:
        opt = args.pop(0)
        name, eq, value = opt.partition("=")
        if name not in allowed:
            print(f"tapeml docs {command}: unknown option '{opt}'\n{USAGE}", file=sys.stderr)
            return 2
        if not eq:
            if not args:
                print(f"tapeml docs {command}: {name} needs a value\n{USAGE}", file=sys.stderr)
                return 2
            value = args.pop(0)
        opts[name] = value
    problem = _need_mkdocs()
    if problem:
        print(problem, file=sys.stderr)
        return 1
    root = os.path.abspath(opts["--root"] or default_root())
    if command == "serve":
        return serve(root, opts["--addr"])
    t0 = time.perf_counter()
    try:
        pages, site_dir = build_site(root, opts["--out"])
    except SiteError as e:
        print(f"docs site: FAILED: {e}", file=sys.stderr)
        return 1
    shown = os.path.relpath(site_dir)
    shown = site_dir if shown.startswith("..") else shown
    print(f"docs site: built {pages} pages into {shown} in {time.perf_counter() - t0:.1f}s; read it served "
          f"(python -m http.server -d {shown}), or preview with `tapeml docs serve`")
    return 0


def serve(root: str, addr: str | None) -> int:
    from mkdocs import exceptions
    from mkdocs.commands.serve import serve as mkdocs_serve
    _logging("serve", logging.INFO)       # the address, each rebuild and its warnings
    kwargs = {"dev_addr": addr} if addr else {}
    try:        # not strict: a page being edited may have a broken link for a while; `site` is strict
        mkdocs_serve(config_file=os.path.join(root, "mkdocs.yml"), livereload=True, strict=False, **kwargs)
    except (exceptions.Abort, exceptions.ConfigurationError) as e:
        print(f"docs serve: FAILED: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0
