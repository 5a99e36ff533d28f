/* The crash-consistency soak (soak.h): the stack through ixia-local, the
 * writers and their record of acknowledgements, the killer, and the checks
 * after each round. */
#include "soak.h"

#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "client.h"
#include "json.h"
#include "recovery.h"

#define NS "soak"
#define TABLE "docs"
#define SCHEMA                                                                               \
  "{\"namespace\":\"soak\",\"table\":\"docs\",\"indexes\":[{\"field\":\"category\",\"type\":" \
  "\"keyword\"},{\"field\":\"n\",\"type\":\"long\"}]}"
#define PAGE 37

static const char *const DAEMONS[] = {"memcached", "ixia-devkafka", "ixia-replication-sink",
                                      "ixia-indexer", "ixia-query-api"};

/* ---------- the stack ---------- */

typedef struct {
  const ixia_soak_opts_t *o;
  char *local;  /* ixia-local */
  char *api;    /* host:port */
} soak_stack_t;

/* Runs ixia-local with args; TRUE on exit 0. Its stderr goes to ours only
 * on failure. */
static gboolean local_cmd(soak_stack_t *s, const char *const *args, ixia_error_t **err) {
  GPtrArray *argv = g_ptr_array_new();
  g_ptr_array_add(argv, s->local);
  for (const char *const *a = args; *a; a++) g_ptr_array_add(argv, (gpointer)*a);
  g_ptr_array_add(argv, "--dir");
  g_ptr_array_add(argv, (gpointer)s->o->dir);
  g_ptr_array_add(argv, NULL);
  char *out = NULL, *errout = NULL;
  int status = 0;
  GError *gerr = NULL;
  gboolean ok = g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &errout,
                             &status, &gerr) &&
                g_spawn_check_wait_status(status, &gerr);
  if (!ok)
    ixia_error_set(err, IXIA_EUNAVAILABLE, "ixia-local %s: %s%s%s", args[0], gerr ? gerr->message : "failed",
                   errout && *errout ? "\n" : "", errout ? errout : "");
  if (gerr) g_error_free(gerr);
  g_free(out);
  g_free(errout);
  g_ptr_array_free(argv, TRUE);
  return ok;
}

/* The API address from DIR/local.env. */
static char *read_api(const char *dir) {
  char *path = g_build_filename(dir, "local.env", NULL);
  char *text = NULL, *api = NULL;
  if (g_file_get_contents(path, &text, NULL, NULL)) {
    char **lines = g_strsplit(text, "\n", -1);
    for (char **l = lines; *l; l++)
      if (g_str_has_prefix(*l, "IXIA_API=")) api = g_strdup(*l + 9);
    g_strfreev(lines);
  }
  g_free(text);
  g_free(path);
  return api;
}

/* The pid DIR/pids records for a daemon, or 0. */
static pid_t pid_of(const char *dir, const char *name) {
  char *path = g_build_filename(dir, "pids", NULL);
  char *text = NULL;
  pid_t pid = 0;
  if (g_file_get_contents(path, &text, NULL, NULL)) {
    char **lines = g_strsplit(text, "\n", -1);
    for (char **l = lines; *l && !pid; l++) {
      char **f = g_strsplit(*l, " ", -1);
      if (g_strv_length(f) == 3 && strcmp(f[0], name) == 0) pid = (pid_t)atoi(f[1]);
      g_strfreev(f);
    }
    g_strfreev(lines);
  }
  g_free(text);
  g_free(path);
  return pid;
}

/* ---------- the writers ---------- */

typedef struct {
  gint64 version; /* last acknowledged write (0: none) */
  gboolean deleted;
  gboolean uncertain; /* a call after it failed: its outcome is unknown */
} key_state_t;

typedef struct {
  guint id;
  const char *api;
  guint keys;
  key_state_t *state; /* by key index */
  GRand *rand;
  _Atomic gint *stop;
  guint64 acked, failed, calls;
  GThread *thread;
} writer_t;

static char *key_name(guint writer, guint i) { return g_strdup_printf("w%u-k%04u", writer, i); }

static gpointer writer_main(gpointer data) {
  writer_t *w = data;
  ixia_client_t *c = NULL;
  guint64 n = 0;
  while (!atomic_load(w->stop)) {
    if (!c && !(c = ixia_client_new_timeout(w->api, 5000, NULL))) {
      g_usleep(20000);
      continue;
    }
    guint i = (guint)g_rand_int_range(w->rand, 0, (gint32)w->keys);
    char *key = key_name(w->id, i);
    int op = g_rand_int_range(w->rand, 0, 100);
    char *doc = g_strdup_printf("{\"category\":\"c%u\",\"n\":%" G_GUINT64_FORMAT ",\"w\":%u}", i % 7, ++n, w->id);
    gint64 version = 0;
    ixia_error_t *e = NULL;
    gboolean ok = op < 70   ? ixia_client_put(c, NS, TABLE, key, doc, -1, &version, &e)
                  : op < 85 ? ixia_client_upsert(c, NS, TABLE, key, doc, -1, &version, &e)
                            : ixia_client_delete(c, NS, TABLE, key, -1, &version, &e);
    w->calls++;
    key_state_t *st = &w->state[i];
    if (ok) {
      w->acked++;
      st->version = version;
      st->deleted = op >= 85;
      st->uncertain = FALSE;
    } else {
      /* Anything but a clean refusal may have been applied. */
      w->failed++;
      st->uncertain = TRUE;
      if (e->code == IXIA_EUNAVAILABLE || e->code == IXIA_EINTERNAL) {
        ixia_client_destroy(c);
        c = NULL;
        g_usleep(20000);
      }
    }
    ixia_error_destroy(e);
    g_free(doc);
    g_free(key);
  }
  ixia_client_destroy(c);
  return NULL;
}

/* ---------- the checks ---------- */

/* A client once the API answers (it may be restarting), within 30 s. */
static ixia_client_t *connect_api(const char *api) {
  gint64 deadline = g_get_monotonic_time() + 30 * G_USEC_PER_SEC;
  while (g_get_monotonic_time() < deadline) {
    ixia_client_t *c = ixia_client_new_timeout(api, 10000, NULL);
    char *stats = NULL;
    if (c && ixia_client_stats(c, &stats, NULL)) {
      g_free(stats);
      return c;
    }
    ixia_client_destroy(c);
    g_usleep(100000);
  }
  return NULL;
}

typedef struct {
  guint64 keys, lost, unexpected;
  char *example; /* first lost write */
} store_check_t;

/* Every acknowledged write is in the store at its version or later. */
static gboolean check_store(ixia_client_t *c, writer_t *ws, guint n, store_check_t *out, ixia_error_t **err) {
  memset(out, 0, sizeof *out);
  for (guint w = 0; w < n; w++) {
    for (guint i = 0; i < ws[w].keys; i++) {
      key_state_t *st = &ws[w].state[i];
      if (!st->version && !st->uncertain) continue;
      out->keys++;
      char *key = key_name(ws[w].id, i);
      gboolean found = FALSE;
      gint64 v = 0;
      char *json = NULL;
      if (!ixia_client_get(c, NS, TABLE, key, NULL, &found, &v, &json, err)) {
        g_free(key);
        return FALSE;
      }
      g_free(json);
      gboolean lost = (found && v < st->version) || (found && st->deleted && !st->uncertain) ||
                      (!found && st->version && !st->deleted && !st->uncertain);
      gboolean odd = !lost && !st->uncertain && found && v != st->version;
      if (lost && !out->example)
        out->example = g_strdup_printf("%s: acknowledged %s at version %" G_GINT64_FORMAT ", store has %s%" G_GINT64_FORMAT,
                                       key, st->deleted ? "delete" : "write", st->version,
                                       found ? "version " : "nothing", found ? v : 0);
      out->lost += lost;
      out->unexpected += odd;
      g_free(key);
    }
  }
  return TRUE;
}

/* ixia-recovery verify until it passes; the seconds it took, or -1. */
static double converge(const char *api, guint seconds, char **last) {
  gint64 t0 = g_get_monotonic_time(), deadline = t0 + (gint64)seconds * G_USEC_PER_SEC;
  ixia_verify_opts_t vo = {.page = 5000, .examples = 2, .recheck_ms = 300, .quiet = TRUE};
  for (;;) {
    ixia_error_t *e = NULL;
    cJSON *r = ixia_recovery_verify(api, &vo, &e);
    gboolean ok = r && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok"));
    g_free(*last);
    *last = r ? ixia_json_print(r) : g_strdup(e->message);
    cJSON_Delete(r);
    ixia_error_destroy(e);
    if (ok) return (double)(g_get_monotonic_time() - t0) / 1e6;
    if (g_get_monotonic_time() >= deadline) return -1;
    g_usleep(250000);
  }
}

/* Reads the whole table page by page; counts keys seen twice. */
static gboolean check_pages(ixia_client_t *c, guint64 *keys, guint64 *dups, guint *pages, ixia_error_t **err) {
  GHashTable *seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  char *after = NULL;
  gboolean ok = TRUE;
  *dups = *keys = 0;
  *pages = 0;
  do {
    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "namespace", NS);
    cJSON_AddStringToObject(req, "table", TABLE);
    cJSON_AddNumberToObject(req, "limit", PAGE);
    cJSON *fields = cJSON_AddArrayToObject(req, "fields");
    cJSON_AddItemToArray(fields, cJSON_CreateString("n"));
    if (after) cJSON_AddStringToObject(req, "after", after);
    char *text = ixia_json_print(req);
    cJSON_Delete(req);
    char *resp = NULL;
    ok = ixia_client_query(c, text, &resp, err);
    g_free(text);
    g_clear_pointer(&after, g_free);
    cJSON *r = ok ? cJSON_Parse(resp) : NULL;
    g_free(resp);
    const cJSON *h;
    cJSON_ArrayForEach(h, cJSON_GetObjectItemCaseSensitive(r, "hits")) {
      const char *k = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(h, "key"));
      if (!k) continue;
      if (g_hash_table_contains(seen, k)) (*dups)++;
      else g_hash_table_add(seen, g_strdup(k));
    }
    after = g_strdup(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "next")));
    cJSON_Delete(r);
    (*pages)++;
  } while (ok && after && *pages < 100000);
  *keys = g_hash_table_size(seen);
  g_free(after);
  g_hash_table_destroy(seen);
  return ok;
}

/* The shards' anti-entropy divergences so far (their status). */
static double shard_divergences(ixia_client_t *c) {
  char **addrs = ixia_client_shards(c, NULL);
  double total = 0;
  for (char **a = addrs; a && *a; a++) {
    ixia_shard_client_t *sc = ixia_shard_client_new(g_strstrip(*a), 10000, NULL);
    char *json = NULL;
    if (sc && ixia_shard_client_status(sc, &json, NULL)) {
      cJSON *o = cJSON_Parse(json);
      total += cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "anti_entropy_divergent"));
      cJSON_Delete(o);
    }
    g_free(json);
    ixia_shard_client_destroy(sc);
  }
  g_strfreev(addrs);
  return total;
}

/* What an operator would look at when the index does not converge: each
 * shard's status and the end of every daemon's log, on stderr. */
static void dump_diagnostics(soak_stack_t *s, ixia_client_t *c) {
  char **addrs = c ? ixia_client_shards(c, NULL) : NULL;
  for (char **a = addrs; a && *a; a++) {
    ixia_shard_client_t *sc = ixia_shard_client_new(g_strstrip(*a), 10000, NULL);
    char *json = NULL;
    if (sc && ixia_shard_client_status(sc, &json, NULL)) fprintf(stderr, "soak: shard %s status: %s\n", *a, json);
    g_free(json);
    ixia_shard_client_destroy(sc);
  }
  g_strfreev(addrs);
  for (guint i = 0; i < G_N_ELEMENTS(DAEMONS); i++) {
    char *name = g_strdup_printf("%s.log", DAEMONS[i]);
    char *path = g_build_filename(s->o->dir, "logs", name, NULL);
    char *text = NULL;
    if (g_file_get_contents(path, &text, NULL, NULL)) {
      char **lines = g_strsplit(text, "\n", -1);
      guint n = g_strv_length(lines), from = n > 40 ? n - 40 : 0;
      fprintf(stderr, "soak: the last lines of %s:\n", path);
      for (guint l = from; l < n; l++)
        if (*lines[l]) fprintf(stderr, "  | %.400s\n", lines[l]);
      g_strfreev(lines);
    }
    g_free(text);
    g_free(path);
    g_free(name);
  }
}

/* ---------- a round ---------- */

typedef struct {
  guint64 acked, uncertain, lost, unexpected, dups, verify_failures;
  double max_converge;
  guint kills[G_N_ELEMENTS(DAEMONS)];
  guint doubles;
  char *first_problem;
} totals_t;

static void problem(totals_t *t, char *what) {
  fprintf(stderr, "soak: %s\n", what);
  if (!t->first_problem) t->first_problem = what;
  else g_free(what);
}

static gboolean round_run(soak_stack_t *s, guint r, GRand *rand, writer_t *ws, totals_t *t, ixia_error_t **err) {
  const ixia_soak_opts_t *o = s->o;
  _Atomic gint stop = 0;
  guint64 acked0 = 0;
  for (guint w = 0; w < o->writers; w++) {
    ws[w].stop = &stop;
    acked0 += ws[w].acked;
    ws[w].thread = g_thread_new("soak-writer", writer_main, &ws[w]);
  }
  /* One daemon, or two in every two_every-th round, at a random moment. */
  guint n = o->two_every && (r + 1) % o->two_every == 0 ? 2 : 1;
  guint victims[2];
  victims[0] = (guint)g_rand_int_range(rand, 0, G_N_ELEMENTS(DAEMONS));
  do victims[1] = (guint)g_rand_int_range(rand, 0, G_N_ELEMENTS(DAEMONS));
  while (victims[1] == victims[0]);
  if (n == 2 && victims[1] < victims[0]) { /* restart in start order */
    guint x = victims[0];
    victims[0] = victims[1];
    victims[1] = x;
  }
  g_usleep((gulong)(g_rand_double_range(rand, 0.2, MAX(o->round_s - 0.2, 0.3)) * G_USEC_PER_SEC));
  GString *names = g_string_new(NULL);
  for (guint i = 0; i < n; i++) {
    pid_t pid = pid_of(o->dir, DAEMONS[victims[i]]);
    if (pid > 0) kill(pid, SIGKILL);
    t->kills[victims[i]]++;
    g_string_append_printf(names, "%s%s", i ? " + " : "", DAEMONS[victims[i]]);
  }
  t->doubles += n == 2;
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < n; i++) {
    const char *args[] = {"restart", DAEMONS[victims[i]], NULL};
    ok = local_cmd(s, args, err);
  }
  /* The writers go on a moment against the restarted stack. */
  g_usleep(500000);
  atomic_store(&stop, 1);
  guint64 acked = 0, uncertain = 0;
  for (guint w = 0; w < o->writers; w++) {
    g_thread_join(ws[w].thread);
    acked += ws[w].acked;
    for (guint i = 0; i < ws[w].keys; i++) uncertain += ws[w].state[i].uncertain;
  }
  t->acked += acked - acked0;
  ixia_client_t *c = ok ? connect_api(s->api) : NULL;
  if (ok && !c) ok = ixia_error_set(err, IXIA_EUNAVAILABLE, "the API did not come back after round %u", r + 1);
  store_check_t sc = {0};
  ok = ok && check_store(c, ws, o->writers, &sc, err);
  char *last = NULL;
  double took = ok ? converge(s->api, o->converge_s, &last) : -1;
  guint64 keys = 0, dups = 0;
  guint pages = 0;
  ok = ok && check_pages(c, &keys, &dups, &pages, err);
  if (ok) {
    t->lost += sc.lost;
    t->unexpected += sc.unexpected;
    t->dups += dups;
    t->uncertain += uncertain;
    if (took < 0) {
      t->verify_failures++;
      problem(t, g_strdup_printf("round %u: the index did not equal the truth within %u s: %s", r + 1,
                                 o->converge_s, last));
      dump_diagnostics(s, c);
    }
    t->max_converge = MAX(t->max_converge, took);
    if (sc.lost) problem(t, g_strdup_printf("round %u: %" G_GUINT64_FORMAT " acknowledged writes lost, e.g. %s", r + 1,
                                            sc.lost, sc.example));
    if (dups) problem(t, g_strdup_printf("round %u: %" G_GUINT64_FORMAT " keys repeated in %u pages", r + 1, dups, pages));
    fprintf(stderr,
            "soak round %3u: kill -9 %-42s %6" G_GUINT64_FORMAT " writes acknowledged, %" G_GUINT64_FORMAT
            " lost; index = truth after %.1f s; %" G_GUINT64_FORMAT " keys in %u pages, %" G_GUINT64_FORMAT " repeated\n",
            r + 1, names->str, acked - acked0, sc.lost, took, keys, pages, dups);
  }
  g_free(sc.example);
  g_free(last);
  ixia_client_destroy(c);
  g_string_free(names, TRUE);
  return ok;
}

/* ---------- the run ---------- */

cJSON *ixia_soak_run(const ixia_soak_opts_t *o, ixia_error_t **err) {
  soak_stack_t s = {o, g_build_filename(o->bin_dir, "ixia-local", NULL), NULL};
  /* Fast retries and a quick anti-entropy, so that rounds stay short and
   * the background comparison runs during the soak too. */
  const char *up[] = {"up",
                      "--set", "replication.retry_max_ms=500",
                      "--set", "indexer.anti_entropy_keys_per_s=100000",
                      "--set", "indexer.anti_entropy_pause_s=2",
                      NULL};
  if (!local_cmd(&s, up, err)) {
    g_free(s.local);
    return NULL;
  }
  s.api = read_api(o->dir);
  GRand *rand = g_rand_new_with_seed((guint32)o->seed);
  writer_t *ws = g_new0(writer_t, o->writers);
  for (guint w = 0; w < o->writers; w++) {
    ws[w].id = w;
    ws[w].api = s.api;
    ws[w].keys = o->keys;
    ws[w].state = g_new0(key_state_t, o->keys);
    ws[w].rand = g_rand_new_with_seed((guint32)(o->seed * 131 + w));
  }
  totals_t t = {0};
  gint64 t0 = g_get_monotonic_time();
  ixia_client_t *c = s.api ? connect_api(s.api) : NULL;
  gboolean ok = c && ixia_client_apply_schema(c, SCHEMA, NULL, err);
  if (!c) ixia_error_set(err, IXIA_EUNAVAILABLE, "the stack's API does not answer");
  ixia_client_destroy(c);
  guint done = 0;
  for (; ok && done < o->rounds; done++) ok = round_run(&s, done, rand, ws, &t, err);
  cJSON *out = NULL;
  if (ok) {
    out = cJSON_CreateObject();
    gboolean good = t.lost == 0 && t.verify_failures == 0 && t.dups == 0;
    cJSON_AddBoolToObject(out, "ok", good);
    cJSON_AddNumberToObject(out, "rounds", done);
    cJSON_AddNumberToObject(out, "rounds_with_two_kills", t.doubles);
    cJSON *kills = cJSON_AddObjectToObject(out, "kills");
    for (guint i = 0; i < G_N_ELEMENTS(DAEMONS); i++) cJSON_AddNumberToObject(kills, DAEMONS[i], t.kills[i]);
    cJSON_AddNumberToObject(out, "acknowledged_writes", (double)t.acked);
    cJSON_AddNumberToObject(out, "lost_writes", (double)t.lost);
    cJSON_AddNumberToObject(out, "unexpected_versions", (double)t.unexpected);
    cJSON_AddNumberToObject(out, "verify_failures", (double)t.verify_failures);
    cJSON_AddNumberToObject(out, "repeated_keys_in_pages", (double)t.dups);
    cJSON_AddNumberToObject(out, "slowest_convergence_s", t.max_converge);
    ixia_client_t *cc = connect_api(s.api);
    if (cc) cJSON_AddNumberToObject(out, "anti_entropy_divergent", shard_divergences(cc));
    ixia_client_destroy(cc);
    cJSON_AddNumberToObject(out, "seconds", (double)(g_get_monotonic_time() - t0) / 1e6);
    if (t.first_problem) cJSON_AddStringToObject(out, "first_problem", t.first_problem);
  }
  const char *down[] = {"down", NULL};
  local_cmd(&s, down, NULL);
  for (guint w = 0; w < o->writers; w++) {
    g_free(ws[w].state);
    g_rand_free(ws[w].rand);
  }
  g_free(ws);
  g_rand_free(rand);
  g_free(t.first_problem);
  g_free(s.api);
  g_free(s.local);
  return out;
}
