#!/usr/bin/env python3
"""Check customgrad's built pkgdown site in a real browser.

Serves the site (docs/ by default) on localhost and opens every page in
headless Chromium, driven over the Chrome DevTools Protocol. Fails when

* a page logs an error to the console, throws, or fails to load a resource
  (a 404, a blocked file, an integrity hash that does not match);
* an image does not show;
* a link inside the site leads to a missing page, file or anchor;
* an article shows no output of its code, or the training article fewer
  than its three plots (the vignettes were not run);
* the search box does not find op_custom_gradient's reference page.

Needs Debian's chromium and python3-websocket (tools/setup-system.sh); run
with /usr/bin/python3. Usage: tools/check-site.py [SITE] [--chromium PATH]
"""

import argparse
import functools
import http.server
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import websocket

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
    "--remote-debugging-port=0",
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
    """Headless Chromium with one page, driven over the DevTools Protocol."""

    def __init__(self, chromium):
        self.profile = tempfile.mkdtemp(prefix="customgrad-site-")
        self.process = subprocess.Popen(
            [
                chromium,
                *CHROMIUM_FLAGS,
                "--user-data-dir=" + self.profile,
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.next_id = 0
        self.events = []
        try:
            port = self._devtools_port()
            self.socket = websocket.create_connection(
                self._page_socket_url(port), timeout=30, suppress_origin=True
            )
            for domain in ("Page", "Runtime", "Log", "Network"):
                self.call(domain + ".enable")
        except BaseException:
            self.close()
            raise

    def _devtools_port(self):
        # Chromium writes the port it chose to DevToolsActivePort.
        port_file = pathlib.Path(self.profile, "DevToolsActivePort")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                status = self.process.returncode
                raise RuntimeError(f"chromium exited with status {status}")
            if port_file.exists():
                lines = port_file.read_text().splitlines()
                if lines and lines[0].strip():
                    return int(lines[0])
            time.sleep(0.1)
        raise RuntimeError("chromium did not open its DevTools port within 60 s")

    def _page_socket_url(self, port):
        url = f"http://127.0.0.1:{port}/json/list"
        with urllib.request.urlopen(url, timeout=10) as response:
            targets = json.load(response)
        for target in targets:
            if target.get("type") == "page":
                return target["webSocketDebuggerUrl"]
        raise RuntimeError("chromium has no page to drive")

    def _receive(self, timeout):
        """One message, or None after `timeout` seconds; events are kept."""
        self.socket.settimeout(max(timeout, 0.01))
        try:
            message = json.loads(self.socket.recv())
        except websocket.WebSocketTimeoutException:
            return None
        if "method" in message:
            self.events.append(message)
        return message

    def call(self, method, timeout=30, **params):
        self.next_id += 1
        call_id = self.next_id
        self.socket.send(
            json.dumps({"id": call_id, "method": method, "params": params})
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = self._receive(deadline - time.monotonic())
            if message is not None and message.get("id") == call_id:
                if "error" in message:
                    error = message["error"].get("message")
                    raise RuntimeError(f"{method}: {error}")
                return message.get("result", {})
        raise RuntimeError(f"{method}: no answer within {timeout} s")

    def wait_for(self, method, timeout=30):
        """Wait for an event, looking first at those already received."""
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for event in self.events[seen:]:
                if event["method"] == method:
                    return event
            seen = len(self.events)
            if time.monotonic() >= deadline:
                raise RuntimeError(f"no {method} within {timeout} s")
            self._receive(deadline - time.monotonic())

    def settle(self, seconds):
        """Keep receiving events for a while (late loads, timers)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self._receive(deadline - time.monotonic())

    def evaluate(self, expression, timeout=30):
        """The value of a JavaScript expression; a promise is awaited."""
        result = self.call(
            "Runtime.evaluate",
            timeout=timeout,
            expression=expression,
            returnByValue=True,
            awaitPromise=True,
        )
        if "exceptionDetails" in result:
            error = describe_exception(result["exceptionDetails"])
            raise RuntimeError(f"JavaScript failed: {error}")
        return result["result"].get("value")

    def open(self, url, timeout=60):
        """Load a page; the events it causes are in self.events."""
        self.events = []
        result = self.call("Page.navigate", url=url)
        if result.get("errorText"):
            raise RuntimeError(f"{url}: {result['errorText']}")
        self.wait_for("Page.loadEventFired", timeout)

    def click(self, selector, index=0):
        """Click the middle of an element a CSS selector finds (the first by
        default), as a mouse would."""
        x, y = self.evaluate(
            f"(() => {{ const element = document.querySelectorAll("
            f"{json.dumps(selector)})[{index}];"
            " const r = element.getBoundingClientRect();"
            " return [r.left + r.width / 2, r.top + r.height / 2]; })()"
        )
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call(
                "Input.dispatchMouseEvent",
                type=kind,
                x=x,
                y=y,
                button="left",
                clickCount=1,
            )

    def errors(self):
        """What went wrong on the page: console errors, uncaught exceptions,
        failed loads."""
        requests = {}
        found = []
        for event in self.events:
            method, params = event["method"], event["params"]
            if event_url(event, requests).endswith(BROWSER_OWN_REQUESTS):
                continue
            if method == "Network.requestWillBeSent":
                requests[params["requestId"]] = params["request"]["url"]
            elif method == "Runtime.exceptionThrown":
                found.append(
                    "uncaught: " + describe_exception(params["exceptionDetails"])
                )
            elif method == "Runtime.consoleAPICalled" and params["type"] in (
                "error",
                "assert",
            ):
                text = " ".join(
                    str(arg.get("value", arg.get("description", "")))
                    for arg in params["args"]
                )
                found.append(f"console.{params['type']}: {text}")
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                entry = params["entry"]
                url = entry.get("url", "")
                found.append(f"{entry['source']}: {entry['text']} {url}")
            elif method == "Network.loadingFailed" and not params.get("canceled"):
                url = requests.get(params["requestId"], "?")
                found.append(f"failed to load {url}: {params['errorText']}")
            elif (
                method == "Network.responseReceived"
                and params["response"]["status"] >= 400
            ):
                response = params["response"]
                found.append(f"HTTP {response['status']} for {response['url']}")
        return found

    def close(self):
        socket = getattr(self, "socket", None)
        if socket is not None:
            socket.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


def event_url(event, requests):
    """The URL an event is about, if any."""
    params = event["params"]
    if event["method"] == "Log.entryAdded":
        return params["entry"].get("url", "")
    if event["method"] == "Network.responseReceived":
        return params["response"]["url"]
    if event["method"] == "Network.loadingFailed":
        return requests.get(params["requestId"], "")
    return ""


def describe_exception(details):
    exception = details.get("exception") or {}
    return exception.get("description") or details.get("text", "exception")


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
            browser.settle(0.2)
        except RuntimeError as error:
            problems.append(f"{page}: {error}")
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
    browser.click("#search-input")
    # Focusing the box fetches the index; a query typed before it is there
    # finds nothing, as it would for a reader.
    deadline = time.monotonic() + 20
    while browser.evaluate(
        "document.querySelector('#search-input').classList.contains('loading')"
    ):
        if time.monotonic() > deadline:
            return ["search: the index did not load within 20 s"]
        time.sleep(0.1)
    browser.call("Input.insertText", text=SEARCH_QUERY)
    suggestions = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        suggestions = browser.evaluate(
            "Array.from(document.querySelectorAll('.aa-suggestion'), el =>"
            " JSON.parse(jQuery(el).data('aaDatum') || '{}').path || '')"
        )
        if suggestions:
            break
        time.sleep(0.2)
    if not suggestions:
        return [f"search: no suggestions for {SEARCH_QUERY}"]
    hits = [
        i for i, path in enumerate(suggestions) if path.endswith("/" + SEARCH_TARGET)
    ]
    if not hits:
        got = ", ".join(suggestions)
        return [f"search: no suggestion leads to {SEARCH_TARGET}; got {got}"]
    browser.events = []
    browser.click(".aa-suggestion", hits[0])
    browser.wait_for("Page.loadEventFired")
    location = browser.evaluate("location.pathname")
    problems = [f"search: {error}" for error in browser.errors()]
    if not location.endswith("/" + SEARCH_TARGET):
        problems.append(
            f"search: the suggestion opened {location}, not {SEARCH_TARGET}"
        )
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "site", nargs="?", default="docs", help="the built site (default: docs)"
    )
    parser.add_argument(
        "--chromium", default="/usr/bin/chromium", help="the browser to drive"
    )
    args = parser.parse_args()

    if not pathlib.Path(args.site, "index.html").exists():
        sys.exit(f"check-site: no site in {args.site}: run `make site`")
    site = Site(args.site)
    browser = Browser(args.chromium)
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
