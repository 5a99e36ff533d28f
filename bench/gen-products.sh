#!/usr/bin/env bash
# Prints N product documents shaped like shared/sample-doc.json, one per line:
# 50 categories, 2,000 brands, 15 countries, a price, 1-5 tags, ~1 KB each.
# Usage: bench/gen-products.sh N [SEED]
set -euo pipefail
n=${1:?usage: gen-products.sh N [SEED]}
seed=${2:-42}
awk -v n="$n" -v seed="$seed" 'BEGIN {
  srand(seed);
  split("US CA MX GB DE FR ES IT NL SE PL JP KR AU BR", country, " ");
  split("red blue green small large light heavy smart mini pro eco basic classic modern soft hard ultra", word, " ");
  for (i = 0; i < n; i++) {
    title = word[int(rand()*17)+1] " " word[int(rand()*17)+1] " " word[int(rand()*17)+1] " " word[int(rand()*17)+1];
    ntags = int(rand()*5) + 1; tags = "";
    for (t = 0; t < ntags; t++) tags = tags (t ? "," : "") sprintf("\"t%03d\"", int(rand()*300));
    desc = "";
    for (w = 0; w < 130; w++) desc = desc (w ? " " : "") word[int(rand()*17)+1];
    printf "{\"key\":\"p%012d\",\"title\":\"%s\",\"category\":\"cat%02d\",\"brand\":\"brand%04d\",\"country\":\"%s\",\"price\":%.2f,\"stock\":%d,\"rating\":%.1f,\"tags\":[%s],\"updated_at\":%d,\"description\":\"%s\"}\n",
      i, title, int(rand()*50), int(rand()*2000), country[int(rand()*15)+1], 1 + rand()*499, int(rand()*1000), 1 + rand()*4, tags, 1760000000 + int(rand()*10000000), desc;
  }
}'
