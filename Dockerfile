# One image for every ixia daemon; docker-compose.yml picks the command.
FROM debian:12 AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config libglib2.0-dev libthrift-c-glib-dev thrift-compiler \
      librocksdb-dev libmemcached-dev libcjson-dev libcunit1-dev libxxhash-dev librdkafka-dev \
      libroaring-dev libmicrohttpd-dev libstemmer-dev libjemalloc-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build build -j"$(nproc)"

# RocksDB is linked into the binaries (CMakeLists.txt); the runtime needs
# the compression libraries and the C++ runtime it uses.
FROM debian:12
RUN apt-get update && apt-get install -y --no-install-recommends \
      libglib2.0-0 libthrift-c-glib0 libmemcached11 libmemcachedutil2 libcjson1 \
      libxxhash0 librdkafka1 libroaring0 libmicrohttpd12 libstemmer0d libjemalloc2 curl \
      libsnappy1v5 zlib1g libbz2-1.0 liblz4-1 libzstd1 libstdc++6 \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/build/bin/ /usr/local/bin/
RUN useradd --system --home /data ixia && mkdir -p /data /auth && chown ixia /data /auth
USER ixia
WORKDIR /data
