#!/usr/bin/env python3
"""Check customgrad's built pkgdown site in a real browser.

Serves the site (docs/ by default) on localhost and opens every page in
headless Chromium, driven by Selenium. Fails when

* a page logs an error to the console, throws, or fails to load a resource
  (a 404, a blocked file, an integrity hash that does not match);
* an image does not show;
* a link inside the site leads to a missing page, file or anchor;
* an article shows no output of its code, or the training article fewer
  than its three plots (the vignettes were not run);
* the search box does not find op_custom_gradient's reference page.

Needs Debian's chromium, chromium-driver and python3-selenium
(tools/setup-system.sh); run with /usr/bin/python3.
Usage: tools/check-site.py [SITE] [--chromium PATH] [--chromedriver PATH]
"""

import argparse
import functools
import http.server
import pathlib
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service as ChromeService
from selenium.common.exceptions import TimeoutException, WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

# Flags for a headless Chromium on a closed network: no background
# connections, no sandbox (CI runs as root), a viewport wide enough for the
# navbar's search box.
CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--window-size=1280,1000",
]

# Chromium asks for /favicon.ico by itself where a page names no icon; the
# site never links it.
BROWSER_OWN_REQUESTS = ("/favicon.ico",)

SEARCH_QUERY = "op_custom_gradient"
SEARCH_TARGET = "reference/op_custom_gradient.html"


class Site:
    """The site served over HTTP on localhost."""

    def __init__(self, root):
        self.root = pathlib.Path(root).resolve()

        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_message(self, format, *args):
                pass

        handler = functools.partial(Handler, directory=str(self.root))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def pages(self):
        """Every HTML page of the site, as paths relative to its root."""
        return sorted(
            p.relative_to(self.root).as_posix() for p in self.root.rglob("*.html")
        )

    def status(self, url):
        """The HTTP status of a URL on the site."""
        request = urllib.request.Request(url, method="HEAD")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status
        except urllib.error.HTTPError as error:
            return error.code

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Browser:
    """Headless Chromium with one page, driven by Selenium (Debian's
    python3-selenium) through Debian's chromedriver."""

    def __init__(self, chromium, chromedriver):
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for flag in CHROMIUM_FLAGS:
            options.add_argument(flag)
        # Console messages, uncaught exceptions and failed loads, at every
        # level; errors() keeps the severe ones.
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        self.driver = webdriver.Chrome(
            service=ChromeService(executable_path=chromedriver), options=options
        )
        self.driver.set_script_timeout(30)
        self.driver.set_page_load_timeout(60)

    def open(self, url):
        """Load a page (until its load event); earlier log entries go."""
        self.driver.get_log("browser")
        self.driver.get(url)

    def evaluate(self, expression):
        """The value of a JavaScript expression; a promise is awaited."""
        return self.driver.execute_script(f"return ({expression});")

    def wait_for_page(self, path, timeout=30):
        """Wait until the location ends with `path` and the page has loaded."""
        WebDriverWait(self.driver, timeout).until(
            lambda driver: driver.execute_script(
                "return location.pathname.endsWith(arguments[0])"
                " && document.readyState === 'complete';",
                path,
            )
        )

    def errors(self):
        """What went wrong on the page since it was opened: console errors,
        uncaught exceptions, failed loads (Chromium logs each as SEVERE)."""
        return [
            entry["message"]
            for entry in self.driver.get_log("browser")
            if entry["level"] == "SEVERE"
            and not any(own in entry["message"] for own in BROWSER_OWN_REQUESTS)
        ]

    def close(self):
        self.driver.quit()


# Waits for MathJax, where a page loads it, to typeset; then reports what the
# checks need from the page. A formula MathJax did not typeset is left as
# TeX, \( ... \), in the text (code aside).
PAGE_REPORT = r"""
(async () => {
  if (window.MathJax && MathJax.Hub) {
    await new Promise(resolve => MathJax.Hub.Queue(resolve));
  }
  await new Promise(resolve => setTimeout(resolve, 100));
  const main = document.querySelector("main") || document.body;
  const texts = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
  let rawTex = 0;
  for (let node; (node = texts.nextNode());) {
    if (!node.parentElement.closest("code, pre, script") &&
        /\\\(|\\\[/.test(node.nodeValue)) {
      rawTex++;
    }
  }
  return {
    title: document.title,
    links: Array.from(document.querySelectorAll("a[href]"), a => a.href),
    ids: Array.from(document.querySelectorAll("[id], a[name]"),
                    e => e.id || e.getAttribute("name")),
    images: Array.from(document.images, i => ({
      src: i.currentSrc || i.src, shown: i.complete && i.naturalWidth > 0
    })),
    outputs: Array.from(document.querySelectorAll("main pre"))
      .filter(pre => pre.textContent.includes("#>")).length,
    untypeset: document.querySelectorAll(".MathJax_Error, merror").length + rawTex
  };
})()
"""


def check_pages(browser, site):
    """Open every page; return the problems and what each page holds."""
    problems = []
    reports = {}
    for page in site.pages():
        url = site.base + page
        try:
            browser.open(url)
            report = browser.evaluate(PAGE_REPORT)
            time.sleep(0.2)  # late loads and timers
        except WebDriverException as error:
            problems.append(f"{page}: {error.msg}")
            continue
        reports[page] = report
        problems += [f"{page}: {error}" for error in browser.errors()]
        problems += [
            f"{page}: image not shown: {image['src']}"
            for image in report["images"]
            if not image["shown"]
        ]
        if report["untypeset"]:
            n = report["untypeset"]
            problems.append(f"{page}: {n} formulas MathJax did not typeset")
        is_article = page.startswith("articles/") and page != "articles/index.html"
        if is_article and report["outputs"] == 0:
            problems.append(f"{page}: no output of its code: the article was not run")
    plots = len(reports.get("articles/training.html", {}).get("images", []))
    if plots < 3:
        problems.append(f"articles/training.html: {plots} images, not its 3 plots")
    return problems, reports


def check_links(site, reports):
    """Every link inside the site must lead to a page, file or anchor."""
    problems = []
    statuses = {}
    for page, report in sorted(reports.items()):
        for link in sorted(set(report["links"])):
            if not link.startswith(site.base):
                continue  # outside the site: not checked offline
            parsed = urllib.parse.urlsplit(link)
            target = urllib.parse.unquote(parsed.path[1:]) or "index.html"
            if target.endswith("/"):
                target += "index.html"
            if target in reports:
                if parsed.fragment and parsed.fragment not in reports[target]["ids"]:
                    problems.append(f"{page}: link to a missing anchor: {link}")
                continue
            path = urllib.parse.urlunsplit(parsed._replace(fragment="", query=""))
            if path not in statuses:
                statuses[path] = site.status(path)
            if statuses[path] != 200:
                status = statuses[path]
                problems.append(f"{page}: broken link (HTTP {status}): {link}")
    return problems


def check_search(browser, site):
    """Type the query into the navbar's search box, as a reader would, and
    follow the suggestion that leads to op_custom_gradient's page."""
    browser.open(site.base + "index.html")
    browser.driver.find_element(By.CSS_SELECTOR, "#search-input").click()
    # Focusing the box fetches the index; a query typed before it is there
    # finds nothing, as it would for a reader.
    wait = WebDriverWait(browser.driver, 20, poll_frequency=0.1)
    try:
        wait.until_not(
            lambda _: browser.evaluate(
                "document.querySelector('#search-input').classList.contains('loading')"
            )
        )
    except TimeoutException:
        return ["search: the index did not load within 20 s"]
    browser.driver.find_element(By.CSS_SELECTOR, "#search-input").send_keys(
        SEARCH_QUERY
    )
    try:
        suggestions = wait.until(
            lambda _: browser.evaluate(
                "Array.from(document.querySelectorAll('.aa-suggestion'), el =>"
                " JSON.parse(jQuery(el).data('aaDatum') || '{}').path || '')"
            )
        )
    except TimeoutException:
        return [f"search: no suggestions for {SEARCH_QUERY}"]
    hits = [
        i for i, path in enumerate(suggestions) if path.endswith("/" + SEARCH_TARGET)
    ]
    if not hits:
        got = ", ".join(suggestions)
        return [f"search: no suggestion leads to {SEARCH_TARGET}; got {got}"]
    browser.driver.find_elements(By.CSS_SELECTOR, ".aa-suggestion")[hits[0]].click()
    try:
        browser.wait_for_page("/" + SEARCH_TARGET)
    except TimeoutException:
        location = browser.evaluate("location.pathname")
        return [f"search: the suggestion opened {location}, not {SEARCH_TARGET}"]
    return [f"search: {error}" for error in browser.errors()]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "site", nargs="?", default="docs", help="the built site (default: docs)"
    )
    parser.add_argument(
        "--chromium", default="/usr/bin/chromium", help="the browser to drive"
    )
    parser.add_argument(
        "--chromedriver",
        default="/usr/bin/chromedriver",
        help="the WebDriver server for that browser",
    )
    args = parser.parse_args()

    if not pathlib.Path(args.site, "index.html").exists():
        sys.exit(f"check-site: no site in {args.site}: run `make site`")
    site = Site(args.site)
    browser = Browser(args.chromium, args.chromedriver)
    try:
        problems, reports = check_pages(browser, site)
        problems += check_links(site, reports)
        problems += check_search(browser, site)
    finally:
        browser.close()
        site.close()
    links = sum(len(r["links"]) for r in reports.values())
    images = sum(len(r["images"]) for r in reports.values())
    print(
        f"check-site: {len(reports)} pages, {links} links, {images} images"
        f" in {args.site}; searched for {SEARCH_QUERY}"
    )
    for problem in problems:
        print("  " + problem)
    if problems:
        sys.exit(f"check-site: {len(problems)} problems")
    print("check-site: all pages load without errors, links and search work")


if __name__ == "__main__":
    main()
