#!/usr/bin/env bash
# Clients against a live stack with API keys on (ixia-local): the curl
# examples of docs/HTTP.md, the Python examples (HTTP, Thrift IDL, Kafka
# change events), and the status console in headless Chromium.
# Usage: clients_test.sh BIN_DIR SOURCE_DIR PYTHON
set -euo pipefail
BIN=$1 SRC=$2 PY=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/ixia-clients-XXXXXX")
cleanup() {
  "$BIN/ixia-local" down --dir "$work/run" >/dev/null 2>&1 || true
  [ -n "${IXIA_TEST_KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
"$BIN/ixia-local" up --dir run --set auth.enabled=true --set log.level=warn >/dev/null
set -a; . run/local.env; set +a
export PATH="$BIN:$PATH"
SERVICE_KEY=$(cat run/service.key)

echo "== docs/HTTP.md examples"
"$PY" "$SRC/tests/run_doc_examples.py" "$SRC/docs/HTTP.md"

echo "== Python examples"
mkdir -p gen-py && thrift --gen py -out gen-py "$SRC/schemas/ixia.thrift"
KEY=$(IXIA_KEY=$SERVICE_KEY ixia keys create --namespaces shop --actions read,write,query,schema \
  --description "python examples" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["key"])')
IXIA_KEY=$KEY "$PY" "$SRC/examples/python/http_client.py"
IXIA_KEY=$KEY PYTHONPATH=gen-py "$PY" "$SRC/examples/python/thrift_client.py"
PYTHONPATH=gen-py "$PY" "$SRC/examples/python/decode_events.py" --brokers "$IXIA_KAFKA" \
  --until-key thrift-5 --timeout 30 > events.jsonl
grep -q '"key": "py-1"' events.jsonl
grep -q '"op": "SCHEMA"' events.jsonl
echo "decode_events: $(wc -l < events.jsonl) events decoded"

echo "== status console (headless Chromium)"
"$PY" "$SRC/tests/console_test.py" "$IXIA_HTTP" "$KEY" "$work/console.png"
echo "clients: all passed"
