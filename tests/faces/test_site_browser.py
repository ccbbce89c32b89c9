"""The docs website in a real browser: headless Chromium (Debian's `chromium` and
`chromium-driver`, driven by Selenium; nothing downloads a browser) against the site built from
this checkout and served on 127.0.0.1. The home page loads with no console error; searching
"layer norm" lists layer_norm first, and its page shows its executed output and its figure; a
builtin is found by words of its summary; formulas are laid out; every tab of the top bar shows
whole at 1280 px; every page of the navigation
answers 200 and logs no console error; a screenshot of the transformer_block page is kept in
build/test-artifacts/ (TAPEML_TEST_ARTIFACTS=DIR elsewhere).

Skips, saying why, without the extra tapeml[docs], Selenium or Chromium; TAPEML_REQUIRE_BROWSER=1
(set by .ci/run once it has installed Chromium) turns those skips into failures."""
import functools
import http.server
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import urllib.request

import pytest

from support import ROOT

pytestmark = pytest.mark.slow     # it builds the whole website (the built_site fixture) before the browser opens it

ARTIFACTS = os.environ.get("TAPEML_TEST_ARTIFACTS") or os.path.join(ROOT, "build", "test-artifacts")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--window-size=1280,1000"]


def _skip(reason):
    if os.environ.get("TAPEML_REQUIRE_BROWSER") == "1":
        pytest.fail(f"TAPEML_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


def browser_paths():
    """(chromium, chromedriver) from TAPEML_CHROMIUM / TAPEML_CHROMEDRIVER or PATH; None if absent."""
    chromium = shutil.which(os.environ.get("TAPEML_CHROMIUM") or "chromium") or shutil.which("chromium-browser")
    driver = shutil.which(os.environ.get("TAPEML_CHROMEDRIVER") or "chromedriver")
    return (chromium, driver) if chromium and driver else None


class SiteServer(http.server.ThreadingHTTPServer):
    """The built site on 127.0.0.1, nothing cached by the browser. While `light_search` is set the
    search index is served empty (its config kept): every page's search then starts at once, and
    the sweep over all pages costs a third of the time (the index is one file, the same for every
    page, and the search tests use the whole of it)."""
    light_search = False

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], ConnectionError):   # the browser moved on mid-download
            super().handle_error(request, client_address)


class SiteHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def end_headers(self):
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def do_GET(self):
        if self.server.light_search and self.path.split("?")[0].endswith("/search/search_index.json"):
            with open(os.path.join(self.directory, "search", "search_index.json"), encoding="utf-8") as f:
                body = json.dumps({"config": json.load(f)["config"], "docs": []}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()


@pytest.fixture(scope="module")
def server(built_site):
    server = SiteServer(("127.0.0.1", 0), functools.partial(SiteHandler, directory=built_site))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def base_url(server):
    return f"http://127.0.0.1:{server.server_address[1]}/"


@pytest.fixture(scope="module")
def browser(base_url):
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _skip("the browser test needs selenium (the extra tapeml[dev])")
    paths = browser_paths()
    if paths is None:
        _skip("no Chromium here: apt-get install chromium chromium-driver (Debian's packages)")
    os.environ.setdefault("SE_OFFLINE", "true")      # Selenium Manager never fetches a driver
    profile = tempfile.mkdtemp(prefix="tapeml-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = paths[0]
    for flag in CHROMIUM_FLAGS + [f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=paths[1]))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def console_errors(driver):
    """The console's errors since the last call (a failed load, a script exception)."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def wait(driver, condition, what, timeout=30):
    from selenium.webdriver.support.ui import WebDriverWait
    return WebDriverWait(driver, timeout, poll_frequency=0.1).until(condition, message=f"waiting for {what}")


def search(driver, base_url, query):
    """Type query in the site's search box; the result pages' paths, best first."""
    from selenium.webdriver.common.by import By
    driver.get(base_url)
    box = driver.find_element(By.CSS_SELECTOR, "input.md-search__input")
    box.click()
    box.send_keys(query)

    seen = {"links": None, "since": 0.0}

    def settled(d):       # results come as each key is typed: wait until they stay the same for 1 s
        meta = d.find_element(By.CSS_SELECTOR, ".md-search-result__meta").text
        links = [a.get_attribute("href") for a in
                 d.find_elements(By.CSS_SELECTOR, ".md-search-result__item > a.md-search-result__link")]
        if not (re.match(r"^\d+ matching document", meta) and links):
            return False
        if links != seen["links"]:
            seen["links"], seen["since"] = links, time.monotonic()
            return False
        return links if time.monotonic() - seen["since"] >= 1.0 else False
    links = wait(driver, settled, f"search results for {query!r}")
    return [re.sub(r"^https?://[^/]+/", "", a).split("?")[0].split("#")[0] for a in links]


def first_output(name):
    """The first ```text block of docs/builtins/NAME.md: what example 1 printed."""
    with open(os.path.join(ROOT, "docs", "builtins", f"{name}.md"), encoding="utf-8") as f:
        return re.search(r"^```text\n(.*?)\n```$", f.read(), re.S | re.M).group(1)


def test_home_page_loads_with_no_console_error(browser, base_url):
    browser.get(base_url)
    assert browser.title.startswith("tapeml")
    assert "reverse-mode tape" in browser.find_element("css selector", "article").text
    assert console_errors(browser) == []


def test_searching_layer_norm_lists_it_first_and_its_page_shows_output_and_figure(browser, base_url):
    from selenium.webdriver.common.by import By
    found = search(browser, base_url, "layer norm")
    assert found[0] == "builtins/layer_norm/", found[:5]
    browser.find_element(By.CSS_SELECTOR, ".md-search-result__item > a.md-search-result__link").click()
    wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, "article h1").text == "layer_norm", "the layer_norm page")
    article = browser.find_element(By.CSS_SELECTOR, "article")
    for line in first_output("layer_norm").split("\n"):
        assert line.strip() in article.text
    figures = article.find_elements(By.CSS_SELECTOR, 'img[src*="img/layer_norm-"]')
    assert figures, "the layer_norm page shows no figure"
    for img in figures:
        browser.execute_script("arguments[0].scrollIntoView()", img)
        wait(browser, lambda d: d.execute_script("return arguments[0].complete", img), "the figure to load")
        assert browser.execute_script("return arguments[0].naturalWidth", img) > 0, img.get_attribute("src")
    link = article.find_element(By.PARTIAL_LINK_TEXT, "builtins/ml/layers.py, line")
    assert re.search(r"/source/builtins/ml/layers\.py/#L-\d+$", link.get_attribute("href"))
    assert console_errors(browser) == []


@pytest.mark.parametrize("query, name", [("Moore-Penrose pseudo-inverse", "pinv"),
                                         ("singular value decomposition", "svd"),
                                         ("heat map colour bar", "imshow")])
def test_a_builtin_is_found_by_words_of_its_summary(browser, base_url, query, name):
    from tapeml.builtins import REGISTRY
    assert all(w.lower() in REGISTRY[name].summary.lower() for w in query.split())
    found = search(browser, base_url, query)
    assert f"builtins/{name}/" in found[:3], found[:5]


def test_formulas_are_laid_out(browser, base_url):
    browser.get(base_url + "tutorial/")
    sizes = browser.execute_script(
        "return [...document.querySelectorAll('div.arithmatex math')].map(m => m.getBoundingClientRect())"
        ".map(r => [r.width, r.height])")
    assert len(sizes) >= 2 and all(w > 100 and h > 20 for w, h in sizes), sizes
    assert console_errors(browser) == []


def test_every_tab_of_the_top_bar_shows_whole_at_1280_px(browser, base_url):
    """The last tab was cut ("Archi") at 1280 px: each tab's label lies inside the window, inside
    the bar's visible box, and is not clipped by a scrolled list; the labels are the navigation's."""
    size = browser.get_window_size()
    browser.set_window_size(1280, 1000)
    try:
        _tabs_show_whole(browser, base_url)
    finally:            # the browser is shared: the next test (the navigation's sweep) sees its own size
        browser.set_window_size(size["width"], size["height"])


def _tabs_show_whole(browser, base_url):
    browser.get(base_url)
    width = browser.execute_script("return window.innerWidth")
    assert width == 1280, width
    tabs = browser.execute_script("""
        const list = document.querySelector('.md-tabs__list'), box = list.getBoundingClientRect();
        return {list: [box.left, box.right, list.scrollWidth, list.clientWidth],
                view: document.documentElement.clientWidth,
                tabs: [...list.querySelectorAll('.md-tabs__item > a')].map(a => {
                    const r = a.getBoundingClientRect();
                    return [a.textContent.trim(), r.left, r.right, r.width, a.scrollWidth, a.clientWidth,
                            getComputedStyle(a).visibility];
                })};""")
    left, right, scroll_width, client_width = tabs["list"]
    assert scroll_width <= client_width + 1, tabs          # nothing scrolled out of the bar
    labels = [t[0] for t in tabs["tabs"]]
    assert labels[0] == "Home" and labels[-1] == "Architecture" and "Builtins" in labels and "Source" in labels
    for label, l, r, w, sw, cw, visibility in tabs["tabs"]:
        assert w > 0 and visibility == "visible", label
        assert left - 0.5 <= l and r <= min(right, tabs["view"]) + 0.5, (label, l, r, tabs["list"], tabs["view"])
        assert sw <= cw + 1, label                           # the label is not cut inside its link
    assert console_errors(browser) == []


def test_every_page_in_the_navigation_answers_200_with_no_console_error(browser, base_url, server):
    browser.get(base_url)
    # (read again until the navigation is there: in a whole-suite run one read found no link yet)
    deadline = time.monotonic() + 15
    while True:
        urls = browser.execute_script(
            "return [...new Set([...document.querySelectorAll('nav.md-nav--primary a.md-nav__link[href]')]"
            ".map(a => a.href.split('#')[0]))]")
        if len(urls) > 200 or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    assert len(urls) > 200 and base_url + "builtins/transformer_block/" in urls
    for url in urls:
        with urllib.request.urlopen(url, timeout=10) as r:
            assert r.status == 200, url
    t0 = time.perf_counter()
    bad = {}
    server.light_search = True
    try:
        for url in urls:
            browser.get(url)
            errors = console_errors(browser)
            if errors:
                bad[url] = errors
    finally:
        server.light_search = False
    assert bad == {}
    print(f"{len(urls)} pages of the navigation opened in Chromium in {time.perf_counter() - t0:.1f}s")


def test_a_screenshot_of_the_transformer_block_page_is_kept(browser, base_url):
    from selenium.webdriver.common.by import By
    browser.get(base_url + "builtins/transformer_block/")
    assert browser.find_element(By.CSS_SELECTOR, "article h1").text == "transformer_block"
    os.makedirs(ARTIFACTS, exist_ok=True)
    path = os.path.join(ARTIFACTS, "transformer_block.png")
    assert browser.save_screenshot(path)
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(path) > 20_000
    assert console_errors(browser) == []
    print(f"screenshot: {path}")
