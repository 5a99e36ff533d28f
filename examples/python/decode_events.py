#!/usr/bin/env python3
"""Reads ixia's change events from Kafka and decodes them (README, "Change
events from another language").

    mkdir -p gen-py && thrift --gen py -out gen-py schemas/ixia.thrift
    PYTHONPATH=gen-py python3 decode_events.py --brokers 127.0.0.1:9092 [--until-key K]

Each Kafka message's value is a ChangeEvent struct (schemas/ixia.thrift) in
Thrift's compact protocol; its key is the truth-store key, so one document's
edits stay on one partition, in order. Delivery is at-least-once: apply an
event only when its version is newer than the one you hold. Uses
confluent-kafka (Debian: python3-confluent-kafka). Prints one JSON line per
event; with --until-key it stops (exit 0) once an event for that document key
arrived, or fails after --timeout seconds.
"""
import argparse
import json
import sys
import time

from confluent_kafka import Consumer, KafkaError
from thrift.protocol import TCompactProtocol
from thrift.transport import TTransport

from ixia.ttypes import ChangeEvent, ChangeOp


def decode(value):
    """One message value -> ChangeEvent."""
    event = ChangeEvent()
    event.read(TCompactProtocol.TCompactProtocol(TTransport.TMemoryBuffer(value)))
    if event.format != 1:
        raise ValueError(f"change event format {event.format}: this reader knows format 1")
    return event


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", required=True)
    ap.add_argument("--topic", default="ixia.changes")
    ap.add_argument("--until-key")
    ap.add_argument("--timeout", type=float, default=30)
    a = ap.parse_args()
    consumer = Consumer({"bootstrap.servers": a.brokers, "group.id": "python-decoder",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([a.topic])
    newest = {}  # (ns, table, key) -> version: the at-least-once rule
    deadline = time.time() + a.timeout
    try:
        while time.time() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    print(f"kafka: {msg.error()}", file=sys.stderr)
                continue
            ev = decode(msg.value())
            key = ev.key.decode("utf-8", "replace") if ev.key else ""
            ident = (ev.ns, ev.table, key)
            if ev.op != ChangeOp.SCHEMA and newest.get(ident, -1) >= ev.version:
                continue  # a re-send of an edit already seen
            newest[ident] = ev.version
            print(json.dumps({"op": ChangeOp._VALUES_TO_NAMES[ev.op], "ns": ev.ns, "table": ev.table,
                              "key": key, "version": ev.version,
                              "doc": json.loads(ev.doc) if ev.doc else None,
                              "partition": msg.partition(), "offset": msg.offset()}))
            if a.until_key is not None and key == a.until_key:
                return 0
    finally:
        consumer.close()
    if a.until_key is not None:
        print(f"no event for key {a.until_key} within {a.timeout} s", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
