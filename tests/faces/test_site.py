"""The docs website (`tapeml docs site`, lang/faces/docs/site.py, mkdocs.yml), read as files: every
documented function has its page in the navigation, linked to the line of the file that declares
it; ```ml blocks are coloured by tapeml's own lexer; formulas are MathML; nothing is loaded from
another host; and the strict build fails on a broken link, a missing figure, a link to a missing
heading and a page left out of the navigation. tests/faces/test_site_browser.py opens the site in
Chromium. Both skip where the extra tapeml[docs] is not installed."""
import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import site_extra_missing
from support import ROOT, run_cli

from tapeml.faces.docs import all_entries


def read(site, page):
    with open(os.path.join(site, page), encoding="utf-8") as f:
        return f.read()


@pytest.mark.slow
def test_every_function_has_a_page_in_the_navigation_by_category(built_site):
    from tapeml.builtins.registry import CATEGORIES
    home = read(built_site, "index.html")
    nav = home[home.index('md-nav--primary'):]
    for e in all_entries():
        assert os.path.isfile(os.path.join(built_site, "builtins", e.name, "index.html")), e.name
        assert f'href="builtins/{e.name}/"' in nav, e.name
    # the categories in the registry's order, then the standard library
    labels = re.findall(r'<label class="md-nav__link"[^>]*>\s*<span class="md-ellipsis">\s*([^<]+?)\s*</span>', nav)
    cats = [c for c in CATEGORIES if any(e.category == c and e.source == "builtin" for e in all_entries())]
    assert [x.replace("&amp;", "&") for x in labels if x.replace("&amp;", "&") in cats + ["Standard library"]] \
        == cats + ["Standard library"]
    for page in ("language", "tutorial", "repl", "python", "performance", "architecture", "builtins"):
        assert os.path.isfile(os.path.join(built_site, page, "index.html")), page


@pytest.mark.slow
def test_each_builtin_page_links_to_the_line_that_declares_it(built_site):
    for e in all_entries():
        page = read(built_site, f"builtins/{e.name}/index.html")
        m = re.search(r'declared in <a href="\.\./\.\./source/([^"]+)/#L-(\d+)">([^<]+), line (\d+)</a>', page)
        assert m, e.name
        path, line = m.group(1), int(m.group(2))
        assert m.group(3) == path and int(m.group(4)) == line
        assert f'id="L-{line}"' in read(built_site, f"source/{path}/index.html"), e.name
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            declared = f.read().split("\n")[line - 1]
        if e.source == "stdlib":
            assert declared.startswith(f"fn {e.name}("), (e.name, declared)
        else:     # the `@builtin("name", ...)` line, or the one of a loop declaring a family (abs, exp, ...)
            assert "builtin(" in declared, (e.name, declared)


@pytest.mark.slow
def test_ml_blocks_are_coloured_by_tapemls_own_lexer(built_site):
    page = read(built_site, "builtins/layer_norm/index.html")
    block = page[page.index('<div class="language-ml highlight">'):]
    block = block[:block.index("</code></pre></div>")]
    # layer_norm is a builtin to tapeml's lexer (Name.Builtin, class nb); Pygments has no `ml`
    assert '<span class="nb">layer_norm</span>' in block
    assert '<span class="mf">1e-5</span>' in block or '<span class="mf">1e-5' in block


@pytest.mark.slow
def test_formulas_are_mathml_and_nothing_comes_from_another_host(built_site):
    tutorial = read(built_site, "tutorial/index.html")
    assert tutorial.count('<math xmlns="http://www.w3.org/1998/Math/MathML" display="block">') >= 2
    assert '<math xmlns="http://www.w3.org/1998/Math/MathML" display="inline">' in tutorial
    assert "\\frac" not in tutorial.split('<div class="md-content"')[1]
    loads = re.compile(r'<(?:script|img|iframe|source)\b[^>]*\bsrc="(https?:)?//|'
                       r'<link\b[^>]*\brel="(?:stylesheet|preload|modulepreload|preconnect)"[^>]*\bhref="(https?:)?//')
    for dirpath, _, files in os.walk(built_site):
        for f in files:
            if f.endswith(".html"):
                text = read(dirpath, f)
                assert not loads.search(text), os.path.join(dirpath, f)


@pytest.mark.slow
def test_source_pages_are_not_searched_and_builtin_pages_are_boosted(built_site):
    import json
    index = json.loads(read(built_site, "search/search_index.json"))
    docs = index["docs"]
    assert not [d["location"] for d in docs if d["location"].startswith("source/")]
    boosts = {d["location"]: d.get("boost") for d in docs if "#" not in d["location"]}
    assert boosts["builtins/layer_norm/"] > 1 and boosts.get("tutorial/") in (None, 1)


def page_text_of(site, page):
    from tapeml.faces.docs.verbatim import page_text
    html = read(site, page)
    return page_text(html[html.index('<article'):html.index('</article>')])


@pytest.mark.slow
def test_formulas_in_a_builtins_prose_print_as_written(built_site):
    """`*` in a declaration's prose was read as emphasis: transformer_decoder_block_init showed
    "4512512 + 4512" for 4*512*512 + 4*512. The text the browser shows, from the built HTML."""
    entries = {e.name: e for e in all_entries()}
    cases = {"transformer_decoder_block_init": ["two attentions of 4*512*512 + 4*512, a feed-forward of "
                                                "2*512*2048 + 2048 + 512 and three norms of 2*512."],
             "transformer_block_init": ["(4*32*32 + 4*32 attention, 2*2*32 norms, 32*128 + 128 + 128*32 + 32",
                                        "rms_norm records have no ln*_beta"],
             "kron": ["Returns: [m*p, n*q] (a vector", "reshape(a[m, 1, n, 1] * b[1, p, 1, q], [m*p, n*q])"],
             "multi_head_attention": ["in_proj_weight[h*d_k:(h+1)*d_k]'"],
             "transformer_block": ["ln1_*/ln2_* are", "(gain ln*_gamma, bias ln*_beta)"],
             "cumsum": ["sum_{j >= i} g_j."],
             "clip_grad_norm": ["torch.nn.utils.clip_grad_norm_: coef = min(max_norm / (grad_norm(grads) + 1e-6), 1)"],
             "check_grad": ["(times max(1, |x|))"]}
    for name, wanted in cases.items():
        text = page_text_of(built_site, f"builtins/{name}/index.html")
        e = entries[name]
        declared = " ".join(" ".join([e.what, e.how, e.returns, *[p.doc or "" for p in e.params]]).split())
        for w in wanted:
            assert w.replace("Returns: ", "") in declared, (name, w)       # the declaration says it so
            assert w in text, (name, w)


@pytest.mark.slow
def test_every_page_shows_each_code_span_and_formula_as_its_source_writes_it(built_site):
    """verbatim.expected over every page's Markdown (docs/*.md and docs/builtins/*.md), against the
    built page's text: each code span, each line of a fenced block and each run of text holding *,
    _ or ^ is there (the strict build checks the same, page by page, in site.on_page_content)."""
    from tapeml.faces.docs.verbatim import expected, page_text
    checked, lost = 0, []
    for folder in ("", "builtins"):
        for f in sorted(os.listdir(os.path.join(ROOT, "docs", folder))):
            if not f.endswith(".md") or f.startswith("_"):
                continue
            with open(os.path.join(ROOT, "docs", folder, f), encoding="utf-8") as fh:
                markdown = fh.read()
            url = (f"{folder}/" if folder else "") + ("" if f == "index.md" else f[:-3] + "/") + "index.html"
            text = page_text(read(built_site, url))
            for forms in expected(markdown):
                checked += 1
                if not any(x in text for x in forms):
                    lost.append((f, forms[0]))
    assert lost == [] and checked > 5000, (lost[:10], checked)


@pytest.mark.skipif(site_extra_missing() is not None, reason="the docs website needs the extra tapeml[docs]")
def test_the_verbatim_check_names_what_markdown_ate():
    """The check against Python-Markdown with the site's extensions: emphasis the author meant
    passes; 4*512*512 and a*b*c outside a code span do not; escape() gives prose that passes, and
    leaves code spans, indented code, x_i, a * b and [0, pi] as written."""
    import markdown as md
    from tapeml.faces.docs.verbatim import escape, missing, table_cell

    def html(text):
        return md.markdown(text, extensions=["tables", "attr_list", "md_in_html", "pymdownx.superfences",
                                             "pymdownx.arithmatex"])
    meant = "A *slot* and **Choice:** the `x_1` of $x_i^2$, and [a link](x.md) to `f(a * b)`."
    assert missing(meant, html(meant)) == []
    eaten = "two attentions of 4*512*512 + 4*512 and a*b*c here"
    assert missing(eaten, html(eaten)) == ["of 4*512*512 +", "+ 4*512 and", "and a*b*c here"]
    prose = ("Costs 4*512*512 + 4*512; `a*b*c` stays; x_i and a * b and [0, pi] too; the _x_ and s_{n-1},\n"
             "# not a heading, <b>not bold</b>, $5$ and a\\*b; `x`{.c}\n\n    h = norm1(x + a*b*c)\n\nend]()")
    out = escape(prose)
    assert "`a*b*c`" in out and "x_i and a * b and [0, pi]" in out and "\n    h = norm1(x + a*b*c)\n" in out
    assert missing(out, html(out)) == []
    shown = " ".join(html(out).split())
    assert "Costs 4*512*512 + 4*512;" in shown and "the _x_ and s_{n-1}," in shown and "# not a heading," in shown
    assert "&lt;b&gt;not bold&lt;/b&gt;, $5$ and a\\*b; <code>x</code>{.c}" in shown and "end]()" in shown
    assert table_cell("`a | b` or |x|\nnext") == "`a | b` or \\|x\\| next"
    assert table_cell(">= 0") == ">= 0" and escape(">= 0") == "\\>= 0"


def copy_checkout(tmp_path):
    """What `docs site` reads: mkdocs.yml, its hooks file and docs/."""
    root = tmp_path / "root"
    shutil.copytree(os.path.join(ROOT, "docs"), root / "docs")
    shutil.copy(os.path.join(ROOT, "mkdocs.yml"), root / "mkdocs.yml")
    hooks = root / "lang" / "faces" / "docs"
    hooks.mkdir(parents=True)
    shutil.copy(os.path.join(ROOT, "lang", "faces", "docs", "mkdocs_hooks.py"), hooks)
    return root


@pytest.mark.slow
@pytest.mark.skipif(site_extra_missing() is not None, reason="the docs website needs the extra tapeml[docs]")
def test_the_strict_build_fails_on_each_kind_of_problem(tmp_path):
    """A missing figure, a page left out of the navigation, a broken link, a link to a missing
    heading, a formula that would not render and one Markdown would eat: each is named, and the
    build fails."""
    root = copy_checkout(tmp_path)
    docs = root / "docs"
    (docs / "img" / "tutorial-6.png").unlink()                                    # a missing figure
    (docs / "orphan.md").write_text("# Not in the navigation\n")                   # a page left out
    with open(docs / "repl.md", "a", encoding="utf-8") as f:
        f.write("\nSee [the missing page](nowhere.md) and [a heading](tutorial.md#no-such-heading).\n"
                "\nA formula with a command that is not rendered: $\\notacommand x$.\n"
                "\nA formula Markdown reads as emphasis: two attentions of 4*512*512 + 4*512.\n")
    r = subprocess.run([sys.executable, "-m", "tapeml", "docs", "site", "--root", str(root),
                        "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    err = r.stderr
    assert "img/tutorial-6.png" in err and "tutorial.md" in err                  # the figure, by page
    assert "orphan.md" in err and "not included in the \"nav\"" in err
    assert "'nowhere.md'" in err and "repl.md" in err
    assert "#no-such-heading" in err
    assert "repl.md: the formula '\\\\notacommand x' uses \\notacommand, which is not rendered" in err
    assert ("repl.md: the page does not show 'of 4*512*512 +' as its source writes it (Markdown read it as "
            "markup: escape it, or write it in a code span)") in err
    assert "+ 4*512." not in err            # the second * was left as written: only the run that lost its *
    assert "docs site: FAILED: Aborted with 6 warnings in strict mode!" in err


def test_usage_errors():
    code, out = run_cli(["docs", "site", "--bogus"])
    assert code == 2 and "unknown option '--bogus'" in out and "usage: tapeml docs site" in out
    code, out = run_cli(["docs", "site", "--out"])
    assert code == 2 and "--out needs a value" in out
    code, out = run_cli(["docs", "serve", "--out", "x"])
    assert code == 2 and "unknown option '--out'" in out
    # build and check say which word was wrong too, not only the usage
    code, out = run_cli(["docs", "build", "--bogus"])
    assert code == 2 and "tapeml docs build: unknown option '--bogus'" in out and "usage: tapeml docs build" in out
    code, out = run_cli(["docs", "build", "--kernel", "none"])
    assert code == 2 and "--kernel is an option of check, not build" in out


def test_without_the_extra_it_says_what_to_install(monkeypatch):
    """Every package of the extra missing (as after the README's install, which has no [docs]);
    then only some (as after a partial one)."""
    for mod in ("mkdocs", "material", "pymdownx", "latex2mathml"):
        monkeypatch.setitem(sys.modules, mod, None)            # import mod now fails
    code, out = run_cli(["docs", "site"])
    assert code == 1
    assert out.strip() == ('tapeml docs: the site needs mkdocs, mkdocs-material, pymdown-extensions, latex2mathml: '
                           'install the extra, pip install -e ".[docs]"')
    if importlib.util.find_spec("material") and importlib.util.find_spec("pymdownx"):
        monkeypatch.delitem(sys.modules, "material")
        monkeypatch.delitem(sys.modules, "pymdownx")
        code, out = run_cli(["docs", "site"])
        assert out.strip() == 'tapeml docs: the site needs mkdocs, latex2mathml: install the extra, pip install -e ".[docs]"'
