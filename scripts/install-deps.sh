#!/usr/bin/env bash
# Installs the Debian packages ixia needs to build, test and run.
# Idempotent: when every package is already present it does nothing.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config clang libclang-rt-14-dev
  libglib2.0-dev libthrift-c-glib-dev thrift-compiler
  librocksdb-dev rocksdb-tools
  libmemcached-dev libmemcached-tools memcached
  libcjson-dev libcunit1-dev libxxhash-dev
  librdkafka-dev
  libroaring-dev libjemalloc-dev
  libmicrohttpd-dev
  libstemmer-dev
  docker-compose
  # tests: Python clients, promtool, the console in a real browser
  python3 python3-requests python3-thrift python3-confluent-kafka prometheus chromium chromium-driver
  curl openssl
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
