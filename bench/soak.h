/* ixia-soak: a crash-consistency soak of the whole stack.
 *
 * It runs a local stack with ixia-local (memcached, ixia-devkafka, the
 * sink, one indexer, the API) and then, round after round:
 *   1. writers (one connection each, disjoint keys) put, upsert and delete
 *      documents and record every acknowledgement (key -> version, deleted)
 *      and every call that failed without one (its outcome is unknown);
 *   2. at a random moment a killer sends kill -9 to a random daemon (to two
 *      in every `two_every`-th round) and restarts it with `ixia-local
 *      restart` while the writers go on;
 *   3. once the writers stopped: every acknowledged write must be in the
 *      store at its version or later (a document acknowledged as deleted
 *      must be gone, unless a later unacknowledged call may have re-created
 *      it), `ixia-recovery verify` (the library) must find the index equal
 *      to the truth within `converge_s`, and the whole table read page by
 *      page through queries must hold no key twice.
 * Each round prints one line; the run ends with a JSON summary (rounds,
 * kills per daemon, acknowledged and lost writes, verify failures,
 * duplicates, the slowest convergence, the shards' anti-entropy
 * divergences) and fails when a write was lost, the index did not converge
 * or a page repeated a key.
 *
 * Thread safety: one run at a time per process. */
#ifndef IXIA_SOAK_H
#define IXIA_SOAK_H

#include <cjson/cJSON.h>
#include <glib.h>

#include "error.h"

typedef struct {
  const char *bin_dir;  /* where ixia-local and the daemons are */
  const char *dir;      /* the stack's directory (created by ixia-local) */
  guint rounds;
  guint writers;        /* writer threads */
  guint keys;           /* keys per writer */
  double round_s;       /* seconds of writes per round */
  guint two_every;      /* every Nth round kills two daemons; 0 = never */
  guint64 seed;
  guint converge_s;     /* longest wait for index = truth after a round */
} ixia_soak_opts_t;

/* Runs the soak; returns the summary ({"ok", ...}) or NULL with *err when
 * the stack could not be run at all. */
cJSON *ixia_soak_run(const ixia_soak_opts_t *o, ixia_error_t **err);

#endif
