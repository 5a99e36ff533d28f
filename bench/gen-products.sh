#!/usr/bin/env bash
# Prints N product documents shaped like shared/sample-doc.json, one per line
# (for `ixia load`): 50 categories, 2,000 brands, 15 countries, a price, 1-5
# tags, ~1 KB each. The same generator as ixia-bench's load workload, so a
# file made here holds exactly what `ixia-bench --docs N load` writes.
# Usage: bench/gen-products.sh N [SEED]   (needs a build: make build)
set -euo pipefail
n=${1:?usage: gen-products.sh N [SEED]}
seed=${2:-42}
bin=${IXIA_BIN:-$(cd "$(dirname "$0")/.." && pwd)/build/bin}
exec "$bin/ixia-bench" --docs "$n" --seed "$seed" gen
