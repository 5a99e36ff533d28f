#!/usr/bin/env python3
"""ixia over HTTP/JSON with the requests library (docs/HTTP.md).

    IXIA_HTTP=http://127.0.0.1:8080 IXIA_KEY=ixk_... python3 http_client.py

Writes a few documents to shop/products (creating the table), reads them
back, updates one conditionally, loads more with _bulk and queries them with
read-your-writes (min_version). Every step checks what it got, so the tests
run this file against a live stack. The key needs read, write, query and
schema on namespace "shop".
"""
import json
import os
import sys

import requests


class IxiaError(Exception):
    def __init__(self, status, body):
        self.status = status
        self.code = body.get("code", str(status))
        super().__init__(f"{status} {self.code}: {body.get('message', '')}")


class Ixia:
    """A small client: one keep-alive session, the key on every request."""

    def __init__(self, base, key=None):
        self.base = base.rstrip("/")
        self.http = requests.Session()
        if key:
            self.http.headers["Authorization"] = f"Bearer {key}"

    def call(self, method, path, body=None, headers=None, data=None):
        r = self.http.request(method, self.base + path, json=body, data=data, headers=headers)
        if r.status_code >= 300:
            raise IxiaError(r.status_code, r.json())
        return r

    def apply_schema(self, ns, table, schema):
        return self.call("PUT", f"/v1/{ns}/{table}/_schema", schema).json()["version"]

    def put(self, ns, table, key, doc, if_version=None, if_absent=False):
        headers = {}
        if if_version is not None:
            headers["If-Match"] = f'"{if_version}"'
        if if_absent:
            headers["If-None-Match"] = "*"
        return self.call("PUT", f"/v1/{ns}/{table}/docs/{key}", doc, headers).json()["version"]

    def upsert(self, ns, table, key, fields):
        return self.call("PATCH", f"/v1/{ns}/{table}/docs/{key}", fields).json()["version"]

    def get(self, ns, table, key, fields=None):
        params = f"?fields={','.join(fields)}" if fields else ""
        try:
            return self.call("GET", f"/v1/{ns}/{table}/docs/{key}{params}").json()
        except IxiaError as e:
            if e.status == 404:
                return None
            raise

    def multi_get(self, ns, table, keys):
        return self.call("GET", f"/v1/{ns}/{table}/docs?keys={','.join(keys)}").json()["docs"]

    def bulk(self, ns, table, ops):
        body = "".join(json.dumps(op) + "\n" for op in ops)
        r = self.call("POST", f"/v1/{ns}/{table}/_bulk", data=body.encode(),
                      headers={"Content-Type": "application/x-ndjson"})
        return [json.loads(line) for line in r.text.splitlines()]

    def query(self, ns, table, request):
        return self.call("POST", f"/v1/{ns}/{table}/_query", request).json()

    def stats(self):
        return self.call("GET", "/v1/_stats").json()


def main():
    ixia = Ixia(os.environ.get("IXIA_HTTP", "http://127.0.0.1:8080"), os.environ.get("IXIA_KEY"))
    ixia.apply_schema("shop", "products", {
        "indexes": [{"field": "category", "type": "keyword"}, {"field": "price", "type": "double"}]})

    v1 = ixia.put("shop", "products", "py-1", {"title": "red mug", "category": "mugs", "price": 9.5})
    doc = ixia.get("shop", "products", "py-1", fields=["title"])
    assert doc["version"] == v1 and doc["doc"] == {"title": "red mug"}, doc

    # Optimistic concurrency: the version is the ETag.
    v2 = ixia.put("shop", "products", "py-1", {"title": "red mug", "category": "mugs", "price": 8},
                  if_version=v1)
    try:
        ixia.put("shop", "products", "py-1", {"title": "stale"}, if_version=v1)
        raise AssertionError("a stale If-Match was accepted")
    except IxiaError as e:
        assert e.status == 409 and e.code == "CONFLICT", e
    ixia.upsert("shop", "products", "py-1", {"stock": 3})
    assert ixia.get("shop", "products", "py-1")["doc"]["stock"] == 3

    results = ixia.bulk("shop", "products", [
        {"op": "put", "key": f"py-{i}", "doc": {"title": f"item {i}", "category": "bulk", "price": i}}
        for i in range(2, 12)] + [{"op": "put", "key": "py-bad", "doc": {"price": "free"}}])
    assert [r["status"] for r in results] == [200] * 10 + [400], results
    assert results[-1]["error"]["code"] == "TYPE_MISMATCH"

    docs = ixia.multi_get("shop", "products", ["py-1", "py-2", "py-nope"])
    assert [d["found"] for d in docs] == [True, True, False], docs

    # Read-your-writes: wait until the index holds everything written so far.
    latest = ixia.stats()["store_latest_version"]
    res = ixia.query("shop", "products", {
        "filter": {"term": {"category": "bulk"}}, "limit": 3, "fields": ["title"],
        "min_version": latest, "aggs": {"avg_price": {"avg": "price"}}})
    assert res["total"] == 10, res
    assert abs(res["aggs"]["avg_price"]["value"] - 6.5) < 1e-9, res["aggs"]
    print(f"http client: ok (versions {v1}, {v2}; {res['total']} bulk documents found)")


if __name__ == "__main__":
    try:
        main()
    except (IxiaError, AssertionError, requests.RequestException) as e:
        print(f"http client: {e}", file=sys.stderr)
        sys.exit(1)
