#!/usr/bin/env python3
"""ixia over its Thrift IDL (schemas/ixia.thrift) from Python.

Generate the bindings once, then run:

    mkdir -p gen-py && thrift --gen py -out gen-py schemas/ixia.thrift
    PYTHONPATH=gen-py IXIA_API=127.0.0.1:9090 IXIA_KEY=ixk_... python3 thrift_client.py

The port speaks framed transport and the strict binary protocol. With API
keys on, a connection calls authenticate(key) once, first. Every step checks
what it got, so the tests run this file against a live stack. The key needs
read, write, query and schema on namespace "shop".
"""
import json
import os
import sys

from thrift.protocol import TBinaryProtocol
from thrift.transport import TSocket, TTransport

from ixia import Ixia
from ixia.ttypes import ErrorCode, IxiaError, OpKind, WriteOp


def connect(address, key):
    host, port = address.rsplit(":", 1)
    transport = TTransport.TFramedTransport(TSocket.TSocket(host, int(port)))
    client = Ixia.Client(TBinaryProtocol.TBinaryProtocol(transport))
    transport.open()
    if key:
        client.authenticate(key)
    return client, transport


def main():
    client, transport = connect(os.environ.get("IXIA_API", "127.0.0.1:9090"), os.environ.get("IXIA_KEY"))
    try:
        client.applySchema(json.dumps({"namespace": "shop", "table": "products", "indexes": [
            {"field": "category", "type": "keyword"}, {"field": "price", "type": "double"}]}))
        v = client.put("shop", "products", "thrift-1",
                       json.dumps({"title": "teapot", "category": "thrift", "price": 30}), -1)
        doc = client.get("shop", "products", "thrift-1", ["title"])
        assert doc.found and doc.version == v and json.loads(doc.json) == {"title": "teapot"}, doc

        # An atomic batch, then a conditional write that must fail.
        versions = client.batch([
            WriteOp(kind=OpKind.PUT, ns="shop", table="products", key=f"thrift-{i}",
                    json=json.dumps({"title": f"cup {i}", "category": "thrift", "price": i}))
            for i in range(2, 6)])
        assert len(versions) == 4
        try:
            client.put("shop", "products", "thrift-1", "{}", 0)  # 0: must be absent
            raise AssertionError("a put on an existing key with expected_version 0 succeeded")
        except IxiaError as e:
            assert e.code == ErrorCode.CONFLICT, e

        # Calls outside the key's namespaces are refused by name.
        try:
            client.get("blog", "posts", "1", [])
            if os.environ.get("IXIA_KEY"):
                raise AssertionError("a get on another namespace succeeded")
        except IxiaError as e:
            assert e.code in (ErrorCode.PERMISSION_DENIED, ErrorCode.NOT_FOUND), e

        stats = json.loads(client.stats())
        res = json.loads(client.query(json.dumps({
            "namespace": "shop", "table": "products", "filter": {"term": {"category": "thrift"}},
            "min_version": stats["store_latest_version"], "limit": 0,
            "aggs": {"total": {"sum": "price"}}})))
        assert res["total"] == 5 and res["aggs"]["total"]["value"] == 44, res
        print(f"thrift client: ok ({res['total']} documents, sum of prices {res['aggs']['total']['value']})")
    finally:
        transport.close()


if __name__ == "__main__":
    try:
        main()
    except (IxiaError, AssertionError) as e:
        print(f"thrift client: {e}", file=sys.stderr)
        sys.exit(1)
