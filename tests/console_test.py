#!/usr/bin/env python3
"""The status console (GET / on the API's HTTP port) in a real headless
Chromium, driven over the WebDriver protocol (chromedriver) with plain HTTP
calls: no Selenium needed.

    console_test.py HTTP_BASE KEY SCREENSHOT.png

Checks that the pipeline tiles and the shard table fill in from the live
API, that a query typed in the box shows its hits as table rows and its terms
aggregation as bars, and that a bad query shows the server's error. Saves a
screenshot. Exit 1 on the first failed check.
"""
import base64
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

import requests

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1280,1000"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Browser:
    def __init__(self, profile):
        self.port = free_port()
        self.proc = subprocess.Popen(["chromedriver", f"--port={self.port}"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{self.port}"
        for _ in range(100):
            try:
                requests.get(self.base + "/status", timeout=1)
                break
            except requests.RequestException:
                time.sleep(0.1)
        caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
            "binary": "/usr/bin/chromium", "args": FLAGS + [f"--user-data-dir={profile}"]}}}}
        r = requests.post(self.base + "/session", json=caps, timeout=60).json()
        if "sessionId" not in r.get("value", {}):
            raise RuntimeError(f"chromedriver could not start Chromium: {r}")
        self.session = f"{self.base}/session/{r['value']['sessionId']}"

    def cmd(self, method, path, body=None):
        r = requests.request(method, self.session + path, json=body, timeout=60).json()
        if isinstance(r.get("value"), dict) and "error" in r["value"]:
            raise RuntimeError(f"webdriver {path}: {r['value']}")
        return r.get("value")

    def js(self, script, *args):
        return self.cmd("POST", "/execute/sync", {"script": script, "args": list(args)})

    def wait(self, script, what, timeout=20):
        deadline = time.time() + timeout
        while time.time() < deadline:
            v = self.js(script)
            if v:
                return v
            time.sleep(0.2)
        raise AssertionError(f"console: {what} within {timeout} s")

    def click(self, css):
        el = self.cmd("POST", "/element", {"using": "css selector", "value": css})
        self.cmd("POST", f"/element/{list(el.values())[0]}/click", {})

    def close(self):
        try:
            requests.delete(self.session, timeout=10)
        finally:
            self.proc.terminate()
            self.proc.wait(10)


def main():
    base, key, shot = sys.argv[1], sys.argv[2], sys.argv[3]
    with tempfile.TemporaryDirectory() as profile:
        b = Browser(profile)
        try:
            b.cmd("POST", "/url", {"url": base + "/"})
            assert b.js("return document.title") == "ixia console"
            b.js("const k = document.getElementById('key'); k.value = arguments[0];"
                 "k.dispatchEvent(new Event('change'));", key)
            # The pipeline tiles and the shard table come from /v1/_stats and /v1/_shards.
            tiles = b.wait("const t = [...document.querySelectorAll('.tile')];"
                           "return t.length >= 6 ? t.map(x => x.dataset.label + '=' + x.querySelector('b').textContent) : null",
                           "pipeline tiles")
            labels = " ".join(tiles)
            for want in ("replication lag (versions)", "replication lag (s)", "shard lag (events)",
                         "freshness", "cache hit ratio", "failed updates"):
                assert want in labels, f"tile {want} missing: {tiles}"
            rows = b.wait("const r = document.querySelectorAll('#shards tbody tr');"
                          "return r.length ? [...r].map(x => x.textContent) : null", "shard rows")
            assert "indexing" in rows[0], rows
            # A query: hits as table rows, a terms aggregation as bars.
            query = {"namespace": "shop", "table": "products", "filter": {"range": {"price": {"gte": 0}}},
                     "limit": 5, "fields": ["title", "price"], "track_total_hits": True,
                     "aggs": {"by_category": {"terms": {"field": "category", "aggs": {"avg": {"avg": "price"}}}}}}
            b.js("document.getElementById('query').value = arguments[0]", json.dumps(query))
            b.click("#run")
            hits = b.wait("const r = document.querySelectorAll('#hits tbody tr');"
                          "return r.length ? r.length : null", "query hits")
            assert hits == 5, f"{hits} hit rows, expected 5"
            head = b.js("return [...document.querySelectorAll('#hits thead th')].map(x => x.textContent)")
            assert {"key", "title", "price"} <= set(head), head
            bars = b.js("return [...document.querySelectorAll('.agg .bucket')].map(r => "
                        "[r.cells[0].textContent, r.querySelector('.bar').getBoundingClientRect().width])")
            assert len(bars) >= 2 and all(w > 0 for _, w in bars), bars
            assert b.js("return document.getElementById('query-info').textContent").startswith("5 hits of ")
            # A bad query: the server's message is shown.
            b.js("document.getElementById('query').value = arguments[0]",
                 json.dumps({"namespace": "shop", "table": "products", "filter": {"range": {"price": {"lt": "x"}}}}))
            b.click("#run")
            err = b.wait("return document.getElementById('query-error').textContent", "the query error")
            assert "INVALID_ARGUMENT" in err and "price" in err, err
            with open(shot, "wb") as f:
                f.write(base64.b64decode(b.cmd("GET", "/screenshot")))
            print(f"console: ok ({len(tiles)} tiles, {len(rows)} shard(s), {hits} hits, {len(bars)} bars); "
                  f"screenshot {shot}")
        finally:
            b.close()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (AssertionError, RuntimeError, requests.RequestException) as e:
        print(f"console test: {e}", file=sys.stderr)
        sys.exit(1)
