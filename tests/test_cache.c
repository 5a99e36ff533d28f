/* Unit tests of cache/: a real memcached per suite (and extra ones for the
 * two-server and failure tests), started on free loopback ports and killed at
 * the end. Outcomes are checked by reading memcached directly. */
#include <stdatomic.h>
#include <CUnit/Basic.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>
#include <libmemcached/memcached.h>

#include "cache.h"
#include "config.h"
#include "log.h"
#include "support.h"


/* ---- direct access to memcached ------------------------------------------- */

/* Sends one text-protocol command and reads the first reply line into buf.
 * Returns FALSE when the server does not answer within timeout_ms. */
static gboolean raw_cmd(int port, const char *cmd, char *buf, size_t buflen, int timeout_ms) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return FALSE;
  struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  gboolean ok = FALSE;
  if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      send(fd, cmd, strlen(cmd), MSG_NOSIGNAL) == (ssize_t)strlen(cmd)) {
    size_t got = 0;
    while (got + 1 < buflen) {
      ssize_t n = recv(fd, buf + got, 1, 0);
      if (n <= 0) break;
      got++;
      if (buf[got - 1] == '\n') {
        ok = TRUE;
        break;
      }
    }
    buf[got] = '\0';
  }
  close(fd);
  return ok;
}


/* The raw stored bytes under mkey on the server at port (g_free), or NULL. */
static char *raw_get(int port, const char *mkey, size_t *len) {
  memcached_st *mc = memcached_create(NULL);
  memcached_server_add(mc, "127.0.0.1", (in_port_t)port);
  memcached_return_t rc;
  uint32_t flags;
  size_t l = 0;
  char *v = memcached_get(mc, mkey, strlen(mkey), &l, &flags, &rc);
  char *out = v ? g_memdup2(v, l ? l : 1) : NULL;
  free(v);
  memcached_free(mc);
  if (len) *len = l;
  return out;
}

static char raw_tag(int port, const char *mkey) {
  size_t len;
  char *v = raw_get(port, mkey, &len);
  char tag = v && len ? v[0] : 0;
  g_free(v);
  return tag;
}

/* Remaining TTL in seconds (meta get), -1 for none, -2 when absent. */
static long raw_ttl(int port, const char *mkey) {
  char cmd[300], buf[128];
  g_snprintf(cmd, sizeof cmd, "mg %s t\r\n", mkey);
  if (!raw_cmd(port, cmd, buf, sizeof buf, 1000)) return -3;
  if (g_str_has_prefix(buf, "EN")) return -2;
  const char *t = strstr(buf, " t");
  return t ? strtol(t + 2, NULL, 10) : -3;
}

/* ---- helpers ------------------------------------------------------------------ */

static ixt_memcached_t mc1;

static ixia_config_t *cfg_new(const char *servers, ...) {
  ixia_config_t *cfg = ixia_config_new();
  ixia_error_t *err = NULL;
  CU_ASSERT_FATAL(ixia_config_set(cfg, "cache.servers", servers, &err));
  CU_ASSERT_FATAL(ixia_config_set(cfg, "cache.timeout_ms", "100", &err));
  CU_ASSERT_FATAL(ixia_config_set(cfg, "cache.retry_timeout_s", "1", &err));
  va_list ap;
  va_start(ap, servers);
  for (const char *a; (a = va_arg(ap, const char *));) {
    gboolean ok = ixia_config_set_assignment(cfg, a, &err);
    if (!ok) fprintf(stderr, "config %s: %s\n", a, err->message);
    CU_ASSERT_FATAL(ok);
  }
  va_end(ap);
  return cfg;
}

static char *server_of(const ixt_memcached_t *m) {
  return g_strdup_printf("127.0.0.1:%d", m->port);
}

/* A cache on m with config assignments ("section.key=value", NULL-ended);
 * "pause=N" sets the backfill pause test hook (IXIA_TEST_BACKFILL_PAUSE_MS)
 * for this cache. */
static ixia_cache_t *cache_for(const ixt_memcached_t *m, ...) {
  char *servers = server_of(m);
  ixia_config_t *cfg = cfg_new(servers, NULL);
  va_list ap;
  va_start(ap, m);
  for (const char *a; (a = va_arg(ap, const char *));) {
    if (g_str_has_prefix(a, "pause=")) {
      g_setenv("IXIA_TEST_BACKFILL_PAUSE_MS", a + strlen("pause="), TRUE);
      continue;
    }
    ixia_error_t *err = NULL;
    CU_ASSERT_FATAL(ixia_config_set_assignment(cfg, a, &err));
  }
  va_end(ap);
  ixia_error_t *err = NULL;
  ixia_cache_t *c = ixia_cache_new(cfg, &err);
  g_unsetenv("IXIA_TEST_BACKFILL_PAUSE_MS");
  if (!c) fprintf(stderr, "ixia_cache_new: %s\n", err->message);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  ixia_config_destroy(cfg);
  g_free(servers);
  return c;
}

#define KEY(s) (s), strlen(s)

/* Miss, lease, backfill, wait: what a reader does. TRUE if it stored. */
static gboolean fill(ixia_cache_t *c, const char *ns, const char *t, const char *key, gint64 ver,
                     const char *json) {
  ixia_cache_lease_t *l = ixia_cache_lease(c, ns, t, KEY(key));
  if (!l) return FALSE;
  ixia_cache_backfill(c, l, ver, json, strlen(json), 0);
  return ixia_cache_wait_idle(c, 5000);
}

static gint64 ms_since(gint64 t0) {
  return (g_get_monotonic_time() - t0) / 1000;
}

static void note(const char *fmt, ...) G_GNUC_PRINTF(1, 2);
static void note(const char *fmt, ...) {
  if (!g_getenv("IXIA_TEST_VERBOSE")) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

/* ---- tests: keys and configuration ------------------------------------------ */

static gboolean key_is_valid_for_memcached(const char *k) {
  if (strlen(k) > 250) return FALSE;
  for (const char *p = k; *p; p++)
    if ((guchar)*p <= 0x20 || (guchar)*p >= 0x7f) return FALSE;
  return TRUE;
}

static void test_key_scheme(void) {
  char *k = ixia_cache_key("shop", "products", KEY("sku-1"));
  CU_ASSERT_STRING_EQUAL(k, "ixia:shop:products:sku-1");
  g_free(k);

  /* Spaces, control and non-ASCII bytes, and embedded NULs are hashed. */
  const char binary[] = {'a', '\0', 'b', '\n', (char)0xff};
  const char *odd[] = {"has space", "tab\there", "caf\xc3\xa9"};
  for (size_t i = 0; i < G_N_ELEMENTS(odd) + 1; i++) {
    const char *key = i < G_N_ELEMENTS(odd) ? odd[i] : binary;
    size_t len = i < G_N_ELEMENTS(odd) ? strlen(odd[i]) : sizeof binary;
    k = ixia_cache_key("shop", "products", key, len);
    CU_ASSERT_TRUE(g_str_has_prefix(k, "ixia:#:shop:products:"));
    CU_ASSERT_EQUAL(strlen(k), strlen("ixia:#:shop:products:") + 32);
    CU_ASSERT_TRUE(key_is_valid_for_memcached(k));
    g_free(k);
  }
  /* NUL-separated keys that differ only after the NUL stay distinct. */
  char *k1 = ixia_cache_key("shop", "products", "a\0b", 3);
  char *k2 = ixia_cache_key("shop", "products", "a\0c", 3);
  char *k3 = ixia_cache_key("shop", "products", "a\0b", 3);
  CU_ASSERT_STRING_NOT_EQUAL(k1, k2);
  CU_ASSERT_STRING_EQUAL(k1, k3);
  g_free(k1);
  g_free(k2);
  g_free(k3);

  /* Length limit: plain up to 200 bytes in all, hashed beyond. */
  size_t prefix = strlen("ixia:shop:products:");
  char *long_key = g_strnfill(600, 'x');
  k = ixia_cache_key("shop", "products", long_key, 200 - prefix);
  CU_ASSERT_EQUAL(strlen(k), 200);
  CU_ASSERT_TRUE(g_str_has_prefix(k, "ixia:shop:products:x"));
  g_free(k);
  k1 = ixia_cache_key("shop", "products", long_key, 201 - prefix);
  k2 = ixia_cache_key("shop", "products", long_key, 512);
  CU_ASSERT_TRUE(g_str_has_prefix(k1, "ixia:#:shop:products:"));
  CU_ASSERT_TRUE(g_str_has_prefix(k2, "ixia:#:shop:products:"));
  CU_ASSERT_STRING_NOT_EQUAL(k1, k2);
  CU_ASSERT_TRUE(key_is_valid_for_memcached(k2));
  g_free(k1);
  g_free(k2);

  /* Longest names still give a valid key. */
  char *ns = g_strnfill(64, 'n'), *tb = g_strnfill(64, 't');
  k = ixia_cache_key(ns, tb, long_key, 512);
  CU_ASSERT_TRUE(key_is_valid_for_memcached(k));
  g_free(k);
  g_free(ns);
  g_free(tb);
  g_free(long_key);

  /* A namespace named "h" (or anything) cannot forge a hashed key. */
  k1 = ixia_cache_key("shop", "products", KEY("has space"));
  const char *tail = k1 + strlen("ixia:#:");
  k2 = ixia_cache_key("#", "shop", KEY(tail)); /* invalid name: hashed */
  CU_ASSERT_STRING_NOT_EQUAL(k1, k2);
  g_free(k1);
  g_free(k2);

  /* Names that are not valid identifiers are hashed with the key. */
  k1 = ixia_cache_key("a:b", "c", KEY("d"));
  k2 = ixia_cache_key("a", "b:c", KEY("d"));
  CU_ASSERT_TRUE(g_str_has_prefix(k1, "ixia:#:"));
  CU_ASSERT_STRING_NOT_EQUAL(k1, k2);
  CU_ASSERT_TRUE(key_is_valid_for_memcached(k1));
  g_free(k1);
  g_free(k2);

  /* Table and namespace are part of the key. */
  k1 = ixia_cache_key("shop", "a", KEY("k"));
  k2 = ixia_cache_key("shop", "b", KEY("k"));
  CU_ASSERT_STRING_NOT_EQUAL(k1, k2);
  g_free(k1);
  g_free(k2);
}

static void test_disabled(void) {
  ixia_config_t *cfg = cfg_new("", NULL);
  ixia_error_t *err = NULL;
  ixia_cache_t *c = ixia_cache_new(cfg, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  CU_ASSERT_TRUE(ixia_cache_disabled(c));
  gint64 v = -1;
  char *json = NULL;
  size_t len = 0;
  CU_ASSERT_EQUAL(ixia_cache_get(c, "shop", "p", KEY("k"), &v, &json, &len), IXIA_CACHE_MISS);
  CU_ASSERT_PTR_NULL(json);
  ixia_cache_lease_t *l = ixia_cache_lease(c, "shop", "p", KEY("k"));
  CU_ASSERT_PTR_NULL(l);
  ixia_cache_backfill(c, l, 1, "{}", 2, 0);
  ixia_cache_lease_release(NULL);
  CU_ASSERT_TRUE(ixia_cache_invalidate(c, "shop", "p", KEY("k")));
  CU_ASSERT_TRUE(ixia_cache_wait_idle(c, 0));
  ixia_cache_stats_t st;
  ixia_cache_get_stats(c, &st);
  CU_ASSERT_EQUAL(st.misses, 1);
  CU_ASSERT_EQUAL(st.errors, 0);
  ixia_cache_destroy(c);
  ixia_cache_destroy(NULL);

  /* Blanks and empty entries alone also disable. */
  CU_ASSERT_TRUE(ixia_config_set(cfg, "cache.servers", " , ", &err));
  c = ixia_cache_new(cfg, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  CU_ASSERT_TRUE(ixia_cache_disabled(c));
  ixia_cache_destroy(c);
  ixia_config_destroy(cfg);
}

static void test_bad_servers(void) {
  const char *bad[] = {"127.0.0.1:notaport", "127.0.0.1:0", "127.0.0.1:70000", ":11211",
                       "[::1", "127.0.0.1:11211,host:x"};
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    ixia_config_t *cfg = cfg_new(bad[i], NULL);
    ixia_error_t *err = NULL;
    ixia_cache_t *c = ixia_cache_new(cfg, &err);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_PTR_NOT_NULL(err);
    if (err) {
      CU_ASSERT_EQUAL(err->code, IXIA_EINVAL);
      CU_ASSERT_PTR_NOT_NULL(strstr(err->message, "cache.servers"));
    }
    ixia_error_destroy(err);
    ixia_cache_destroy(c);
    ixia_config_destroy(cfg);
  }
  /* Several servers, default port, IPv6 form: accepted without connecting. */
  ixia_config_t *cfg = cfg_new("127.0.0.1:1, localhost ,[::1]:2", NULL);
  ixia_error_t *err = NULL;
  ixia_cache_t *c = ixia_cache_new(cfg, &err);
  CU_ASSERT_PTR_NOT_NULL(c);
  CU_ASSERT_FALSE(c && ixia_cache_disabled(c));
  ixia_cache_destroy(c);
  ixia_error_destroy(err);
  ixia_config_destroy(cfg);
}

/* ---- tests: behaviour against a live memcached -------------------------------- */

static void test_roundtrip(void) {
  ixia_cache_t *c = cache_for(&mc1, NULL);
  const char *json = "{\"title\":\"lamp\",\"price\":12.5}";
  gint64 v = -1;
  char *got = NULL;
  size_t len = 0;
  CU_ASSERT_EQUAL(ixia_cache_get(c, "shop", "rt", KEY("k1"), &v, &got, &len), IXIA_CACHE_MISS);

  ixia_cache_lease_t *l = ixia_cache_lease(c, "shop", "rt", KEY("k1"));
  CU_ASSERT_PTR_NOT_NULL_FATAL(l);
  char *mkey = ixia_cache_key("shop", "rt", KEY("k1"));
  size_t rlen = 0;
  char *raw = raw_get(mc1.port, mkey, &rlen);
  CU_ASSERT_TRUE(raw && rlen == 17 && raw[0] == 'L');
  g_free(raw);
  long ttl = raw_ttl(mc1.port, mkey);
  CU_ASSERT_TRUE(ttl > 0 && ttl <= 5); /* cache.lease_ttl_seconds */
  /* A placeholder is a miss. */
  CU_ASSERT_EQUAL(ixia_cache_get(c, "shop", "rt", KEY("k1"), &v, &got, &len), IXIA_CACHE_MISS);

  ixia_cache_backfill(c, l, 42, json, strlen(json), 0);
  CU_ASSERT_TRUE(ixia_cache_wait_idle(c, 5000));
  raw = raw_get(mc1.port, mkey, &rlen);
  CU_ASSERT_TRUE(raw && rlen == 9 + strlen(json) && raw[0] == 'V');
  CU_ASSERT_TRUE(raw && memcmp(raw + 9, json, strlen(json)) == 0);
  g_free(raw);
  ttl = raw_ttl(mc1.port, mkey);
  CU_ASSERT_TRUE(ttl > 290 && ttl <= 300); /* cache.default_ttl_seconds */

  CU_ASSERT_EQUAL(ixia_cache_get(c, "shop", "rt", KEY("k1"), &v, &got, &len), IXIA_CACHE_HIT);
  CU_ASSERT_EQUAL(v, 42);
  CU_ASSERT_EQUAL(len, strlen(json));
  CU_ASSERT_STRING_EQUAL(got, json); /* NUL-terminated */
  g_free(got);

  /* A value present: no lease. */
  CU_ASSERT_PTR_NULL(ixia_cache_lease(c, "shop", "rt", KEY("k1")));

  /* Explicit TTL, a binary key, an empty document and a large version. */
  const char bkey[] = {'b', ' ', '\0', '\x01', (char)0xe9};
  l = ixia_cache_lease(c, "shop", "rt", bkey, sizeof bkey);
  CU_ASSERT_PTR_NOT_NULL_FATAL(l);
  ixia_cache_backfill(c, l, G_MAXINT64, "", 0, 60);
  CU_ASSERT_TRUE(ixia_cache_wait_idle(c, 5000));
  char *bmkey = ixia_cache_key("shop", "rt", bkey, sizeof bkey);
  ttl = raw_ttl(mc1.port, bmkey);
  CU_ASSERT_TRUE(ttl > 50 && ttl <= 60);
  g_free(bmkey);
  got = NULL;
  CU_ASSERT_EQUAL(ixia_cache_get(c, "shop", "rt", bkey, sizeof bkey, &v, &got, &len),
                  IXIA_CACHE_HIT);
  CU_ASSERT_EQUAL(v, G_MAXINT64);
  CU_ASSERT_EQUAL(len, 0);
  CU_ASSERT_TRUE(got && got[0] == '\0');
  g_free(got);

  ixia_cache_stats_t st;
  ixia_cache_get_stats(c, &st);
  CU_ASSERT_EQUAL(st.hits, 2);
  CU_ASSERT_EQUAL(st.misses, 2);
  CU_ASSERT_EQUAL(st.errors, 0);
  CU_ASSERT_EQUAL(st.leases, 2);
  CU_ASSERT_EQUAL(st.backfills, 2);
  CU_ASSERT_EQUAL(st.backfills_stale, 0);
  g_free(mkey);
  ixia_cache_destroy(c);
}

static void test_foreign_value_is_miss(void) {
  ixia_cache_t *c = cache_for(&mc1, NULL);
  char *mkey = ixia_cache_key("shop", "foreign", KEY("k"));
  char cmd[300], buf[64];
  g_snprintf(cmd, sizeof cmd, "set %s 0 60 5\r\nhello\r\n", mkey);
  CU_ASSERT_TRUE(raw_cmd(mc1.port, cmd, buf, sizeof buf, 1000));
  gint64 v;
  char *got = NULL;
  size_t len;
  CU_ASSERT_EQUAL(ixia_cache_get(c, "shop", "foreign", KEY("k"), &v, &got, &len),
                  IXIA_CACHE_MISS);
  CU_ASSERT_PTR_NULL(got);
  g_free(mkey);
  ixia_cache_destroy(c);
}

static void test_lease_blocks_second_lease(void) {
  ixia_cache_t *c = cache_for(&mc1, NULL);
  ixia_cache_t *other = cache_for(&mc1, NULL); /* another query-api node */
  ixia_cache_lease_t *l1 = ixia_cache_lease(c, "shop", "lb", KEY("k"));
  CU_ASSERT_PTR_NOT_NULL_FATAL(l1);
  CU_ASSERT_PTR_NULL(ixia_cache_lease(c, "shop", "lb", KEY("k")));
  CU_ASSERT_PTR_NULL(ixia_cache_lease(other, "shop", "lb", KEY("k")));

  /* Release (document not found): the placeholder goes, a new lease works. */
  char *mkey = ixia_cache_key("shop", "lb", KEY("k"));
  ixia_cache_lease_release(l1);
  CU_ASSERT_TRUE(ixia_cache_wait_idle(c, 5000));
  CU_ASSERT_EQUAL(raw_tag(mc1.port, mkey), 0);
  ixia_cache_lease_t *l2 = ixia_cache_lease(other, "shop", "lb", KEY("k"));
  CU_ASSERT_PTR_NOT_NULL_FATAL(l2);
  CU_ASSERT_EQUAL(raw_tag(mc1.port, mkey), 'L');

  /* Releasing a lease that is no longer ours leaves the new holder alone. */
  CU_ASSERT_TRUE(ixia_cache_invalidate(c, "shop", "lb", KEY("k")));
  ixia_cache_lease_t *l3 = ixia_cache_lease(c, "shop", "lb", KEY("k"));
  CU_ASSERT_PTR_NOT_NULL_FATAL(l3);
  ixia_cache_lease_release(l2);
  CU_ASSERT_TRUE(ixia_cache_wait_idle(other, 5000));
  CU_ASSERT_EQUAL(raw_tag(mc1.port, mkey), 'L');
  ixia_cache_backfill(c, l3, 3, "{}", 2, 0);
  CU_ASSERT_TRUE(ixia_cache_wait_idle(c, 5000));
  CU_ASSERT_EQUAL(raw_tag(mc1.port, mkey), 'V');

  ixia_cache_stats_t st;
  ixia_cache_get_stats(c, &st);
  CU_ASSERT_EQUAL(st.leases, 2);
  CU_ASSERT_EQUAL(st.backfills, 1);
  g_free(mkey);
  ixia_cache_destroy(c);
  ixia_cache_destroy(other);
}

/* Reader misses and leases, reads v1; a writer commits v2 and deletes; the
 * slow backfill of v1 must not land. */
static void test_stale_set_race(void) {
  ixia_cache_t *c = cache_for(&mc1, "pause=300", NULL);
  gint64 v;
  char *got = NULL;
  size_t len;
  CU_ASSERT_EQUAL(ixia_cache_get(c, "shop", "race", KEY("k"), &v, &got, &len), IXIA_CACHE_MISS);
  ixia_cache_lease_t *l = ixia_cache_lease(c, "shop", "race", KEY("k"));
  CU_ASSERT_PTR_NOT_NULL_FATAL(l);
  ixia_cache_backfill(c, l, 1, "{\"v\":1}", 7, 0); /* held 300 ms by the test hook */
  CU_ASSERT_TRUE(ixia_cache_invalidate(c, "shop", "race", KEY("k"))); /* the write of v2 */
  CU_ASSERT_TRUE(ixia_cache_wait_idle(c, 5000));

  char *mkey = ixia_cache_key("shop", "race", KEY("k"));
  CU_ASSERT_EQUAL(raw_tag(mc1.port, mkey), 0); /* v1 not stored */
  CU_ASSERT_EQUAL(ixia_cache_get(c, "shop", "race", KEY("k"), &v, &got, &len), IXIA_CACHE_MISS);
  ixia_cache_stats_t st;
  ixia_cache_get_stats(c, &st);
  CU_ASSERT_EQUAL(st.backfills, 0);
  CU_ASSERT_EQUAL(st.backfills_stale, 1);

  /* Same race with a second reader that leases after the write, reads v2 and
   * backfills too: only v2 may end up cached, whichever backfill runs first. */
  l = ixia_cache_lease(c, "shop", "race", KEY("k"));
  CU_ASSERT_PTR_NOT_NULL_FATAL(l);
  ixia_cache_backfill(c, l, 1, "{\"v\":1}", 7, 0);
  CU_ASSERT_TRUE(ixia_cache_invalidate(c, "shop", "race", KEY("k")));
  ixia_cache_lease_t *l2 = ixia_cache_lease(c, "shop", "race", KEY("k"));
  CU_ASSERT_PTR_NOT_NULL_FATAL(l2);
  ixia_cache_backfill(c, l2, 2, "{\"v\":2}", 7, 0);
  CU_ASSERT_TRUE(ixia_cache_wait_idle(c, 5000));
  CU_ASSERT_EQUAL(ixia_cache_get(c, "shop", "race", KEY("k"), &v, &got, &len), IXIA_CACHE_HIT);
  CU_ASSERT_EQUAL(v, 2);
  CU_ASSERT_STRING_EQUAL(got, "{\"v\":2}");
  g_free(got);
  ixia_cache_get_stats(c, &st);
  CU_ASSERT_EQUAL(st.backfills, 1);
  CU_ASSERT_EQUAL(st.backfills_stale, 2);
  g_free(mkey);
  ixia_cache_destroy(c);
}

static void test_invalidate(void) {
  ixia_cache_t *c = cache_for(&mc1, NULL);
  CU_ASSERT_TRUE(fill(c, "shop", "inv", "k", 5, "{\"a\":1}"));
  char *mkey = ixia_cache_key("shop", "inv", KEY("k"));
  CU_ASSERT_EQUAL(raw_tag(mc1.port, mkey), 'V');
  CU_ASSERT_TRUE(ixia_cache_invalidate(c, "shop", "inv", KEY("k")));
  CU_ASSERT_EQUAL(raw_tag(mc1.port, mkey), 0);
  gint64 v;
  char *got = NULL;
  size_t len;
  CU_ASSERT_EQUAL(ixia_cache_get(c, "shop", "inv", KEY("k"), &v, &got, &len), IXIA_CACHE_MISS);
  CU_ASSERT_TRUE(ixia_cache_invalidate(c, "shop", "inv", KEY("k"))); /* absent: fine */
  /* Hashed keys are invalidated the same way. */
  char *long_key = g_strnfill(400, 'z');
  CU_ASSERT_TRUE(fill(c, "shop", "inv", long_key, 6, "{}"));
  CU_ASSERT_EQUAL(ixia_cache_get(c, "shop", "inv", KEY(long_key), &v, &got, &len),
                  IXIA_CACHE_HIT);
  g_free(got);
  CU_ASSERT_TRUE(ixia_cache_invalidate(c, "shop", "inv", KEY(long_key)));
  got = NULL;
  CU_ASSERT_EQUAL(ixia_cache_get(c, "shop", "inv", KEY(long_key), &v, &got, &len),
                  IXIA_CACHE_MISS);
  ixia_cache_stats_t st;
  ixia_cache_get_stats(c, &st);
  CU_ASSERT_EQUAL(st.invalidations, 3);
  CU_ASSERT_EQUAL(st.invalidation_failures, 0);
  g_free(long_key);
  g_free(mkey);
  ixia_cache_destroy(c);
}

static void test_queue_full_drops(void) {
  ixia_cache_t *c =
      cache_for(&mc1, "cache.backfill_queue_max=1", "pause=200", NULL);
  ixia_cache_lease_t *l[3];
  for (int i = 0; i < 3; i++) {
    char key[8];
    g_snprintf(key, sizeof key, "q%d", i);
    l[i] = ixia_cache_lease(c, "shop", "queue", KEY(key));
    CU_ASSERT_PTR_NOT_NULL_FATAL(l[i]);
  }
  for (int i = 0; i < 3; i++) ixia_cache_backfill(c, l[i], 1, "{}", 2, 0);
  CU_ASSERT_TRUE(ixia_cache_wait_idle(c, 5000));
  ixia_cache_stats_t st;
  ixia_cache_get_stats(c, &st);
  CU_ASSERT_EQUAL(st.backfills, 1);
  CU_ASSERT_EQUAL(st.backfills_dropped, 2);
  ixia_cache_destroy(c);
}

static void test_destroy_cuts_pause(void) {
  ixia_cache_t *c = cache_for(&mc1, "pause=10000", NULL);
  ixia_cache_lease_t *l = ixia_cache_lease(c, "shop", "destroy", KEY("k"));
  CU_ASSERT_PTR_NOT_NULL_FATAL(l);
  ixia_cache_backfill(c, l, 1, "{}", 2, 0);
  gint64 t0 = g_get_monotonic_time();
  ixia_cache_destroy(c);
  CU_ASSERT_TRUE(ms_since(t0) < 1000);
  char *mkey = ixia_cache_key("shop", "destroy", KEY("k"));
  CU_ASSERT_EQUAL(raw_tag(mc1.port, mkey), 'L'); /* left to expire */
  g_free(mkey);
}

/* Many threads read, write and backfill the same keys against a simulated
 * store; once quiet, every cached value must be the store's current one. */
#define CONC_KEYS 16
#define CONC_THREADS 8
#define CONC_OPS 400
typedef struct {
  ixia_cache_t *c;
  GMutex lock;
  gint64 version[CONC_KEYS];
  _Atomic gint errors;
} conc_t;

static gpointer conc_worker(gpointer data) {
  conc_t *s = data;
  GRand *r = g_rand_new();
  for (int i = 0; i < CONC_OPS; i++) {
    char key[16];
    int k = g_rand_int_range(r, 0, CONC_KEYS);
    g_snprintf(key, sizeof key, "c%d", k);
    if (g_rand_int_range(r, 0, 5) == 0) { /* write: commit, then delete */
      g_mutex_lock(&s->lock);
      s->version[k]++;
      g_mutex_unlock(&s->lock);
      if (!ixia_cache_invalidate(s->c, "shop", "conc", KEY(key))) atomic_fetch_add(&s->errors, 1);
      continue;
    }
    gint64 v;
    char *json = NULL;
    size_t len;
    ixia_cache_result_t res = ixia_cache_get(s->c, "shop", "conc", KEY(key), &v, &json, &len);
    if (res == IXIA_CACHE_ERROR) atomic_fetch_add(&s->errors, 1);
    if (res != IXIA_CACHE_MISS) {
      g_free(json);
      continue;
    }
    ixia_cache_lease_t *l = ixia_cache_lease(s->c, "shop", "conc", KEY(key));
    g_mutex_lock(&s->lock); /* read the store after the lease */
    gint64 cur = s->version[k];
    g_mutex_unlock(&s->lock);
    char doc[32];
    g_snprintf(doc, sizeof doc, "{\"v\":%" G_GINT64_FORMAT "}", cur);
    ixia_cache_backfill(s->c, l, cur, doc, strlen(doc), 0);
  }
  g_rand_free(r);
  return NULL;
}

static void test_concurrent_no_stale(void) {
  /* The pause widens the window between reading the store and storing,
   * where writes race with backfills. */
  conc_t s = {.c = cache_for(&mc1, "cache.pool_size=4", "pause=1", NULL)};
  g_mutex_init(&s.lock);
  GThread *t[CONC_THREADS];
  for (int i = 0; i < CONC_THREADS; i++) t[i] = g_thread_new("conc", conc_worker, &s);
  for (int i = 0; i < CONC_THREADS; i++) g_thread_join(t[i]);
  CU_ASSERT_TRUE(ixia_cache_wait_idle(s.c, 10000));
  CU_ASSERT_EQUAL(s.errors, 0);
  int cached = 0;
  for (int k = 0; k < CONC_KEYS; k++) {
    char key[16];
    g_snprintf(key, sizeof key, "c%d", k);
    gint64 v;
    char *json = NULL;
    size_t len;
    if (ixia_cache_get(s.c, "shop", "conc", KEY(key), &v, &json, &len) == IXIA_CACHE_HIT) {
      cached++;
      CU_ASSERT_EQUAL(v, s.version[k]);
      if (v != s.version[k])
        fprintf(stderr, "stale: key %d cached v%" G_GINT64_FORMAT " store v%" G_GINT64_FORMAT "\n",
                k, v, s.version[k]);
    }
    g_free(json);
  }
  ixia_cache_stats_t st;
  ixia_cache_get_stats(s.c, &st);
  CU_ASSERT_TRUE(st.backfills > 0);
  CU_ASSERT_TRUE(cached > 0);
  CU_ASSERT_EQUAL(st.errors, 0);
  ixia_cache_destroy(s.c);
  g_mutex_clear(&s.lock);
}

/* Two servers: keys spread over both (ketama); with one killed, its keys
 * fail fast and the other's keep hitting (no remapping). */
static void test_two_servers(void) {
  ixt_memcached_t a = {0}, b = {0};
  CU_ASSERT_FATAL(ixt_memcached_start(&a, 0));
  if (!ixt_memcached_start(&b, 0)) {
    ixt_memcached_stop(&a);
    CU_FAIL_FATAL("cannot start a second memcached");
  }
  char *servers = g_strdup_printf("127.0.0.1:%d,127.0.0.1:%d", a.port, b.port);
  ixia_config_t *cfg = cfg_new(servers, NULL);
  ixia_cache_t *c = ixia_cache_new(cfg, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  enum { N = 200 };
  char on[N];
  int on_a = 0, on_b = 0;
  for (int i = 0; i < N; i++) {
    char key[16];
    g_snprintf(key, sizeof key, "key-%d", i);
    CU_ASSERT_TRUE(fill(c, "shop", "two", key, i, "{}"));
    char *mkey = ixia_cache_key("shop", "two", KEY(key));
    char ta = raw_tag(a.port, mkey), tb = raw_tag(b.port, mkey);
    CU_ASSERT_TRUE((ta == 'V') != (tb == 'V')); /* on exactly one server */
    on[i] = ta == 'V' ? 'a' : 'b';
    on_a += ta == 'V';
    on_b += tb == 'V';
    g_free(mkey);
  }
  CU_ASSERT_EQUAL(on_a + on_b, N);
  CU_ASSERT_TRUE(on_a > N / 5 && on_b > N / 5);

  ixt_memcached_stop(&b);
  gint64 t0 = g_get_monotonic_time();
  int hits = 0, errors = 0, wrong = 0;
  for (int i = 0; i < N; i++) {
    char key[16];
    g_snprintf(key, sizeof key, "key-%d", i);
    gint64 v;
    char *json = NULL;
    size_t len;
    ixia_cache_result_t r = ixia_cache_get(c, "shop", "two", KEY(key), &v, &json, &len);
    g_free(json);
    if (r == IXIA_CACHE_HIT && on[i] == 'a' && v == i)
      hits++;
    else if (r == IXIA_CACHE_ERROR && on[i] == 'b')
      errors++;
    else
      wrong++;
  }
  CU_ASSERT_EQUAL(hits, on_a);
  CU_ASSERT_EQUAL(errors, on_b);
  CU_ASSERT_EQUAL(wrong, 0);
  CU_ASSERT_TRUE(ms_since(t0) < 2000);

  ixia_cache_destroy(c);
  ixia_config_destroy(cfg);
  g_free(servers);
  ixt_memcached_stop(&a);
}

/* With cache.retry_timeout_s=1 the first call after a second probes the
 * server; that one must already succeed. */
static void wait_recovered(ixia_cache_t *c, const char *table) {
  g_usleep(1050 * 1000);
  gint64 t0 = g_get_monotonic_time();
  gint64 v;
  char *json = NULL;
  size_t len;
  ixia_cache_result_t r = ixia_cache_get(c, "shop", table, KEY("probe"), &v, &json, &len);
  g_free(json);
  note("    recovery probe: %s in %" G_GINT64_FORMAT " ms", r == IXIA_CACHE_ERROR ? "ERROR" : "ok",
       ms_since(t0));
  CU_ASSERT_NOT_EQUAL(r, IXIA_CACHE_ERROR);
}

static void test_memcached_killed(void) {
  ixt_memcached_t m = {0};
  CU_ASSERT_FATAL(ixt_memcached_start(&m, 0));
  ixia_cache_t *c = cache_for(&m, NULL);
  CU_ASSERT_TRUE(fill(c, "shop", "kill", "k", 1, "{}"));

  ixt_memcached_stop(&m);
  gint64 v;
  char *json = NULL;
  size_t len;
  gint64 t0 = g_get_monotonic_time();
  CU_ASSERT_EQUAL(ixia_cache_get(c, "shop", "kill", KEY("k"), &v, &json, &len),
                  IXIA_CACHE_ERROR);
  note("    killed: get ERROR in %" G_GINT64_FORMAT " ms", ms_since(t0));
  CU_ASSERT_TRUE(ms_since(t0) < 500);
  t0 = g_get_monotonic_time();
  for (int i = 0; i < 50; i++)
    CU_ASSERT_EQUAL(ixia_cache_get(c, "shop", "kill", KEY("k"), &v, &json, &len),
                    IXIA_CACHE_ERROR);
  CU_ASSERT_FALSE(ixia_cache_invalidate(c, "shop", "kill", KEY("k")));
  ixia_cache_lease_t *l = ixia_cache_lease(c, "shop", "kill", KEY("k"));
  CU_ASSERT_PTR_NULL(l);
  ixia_cache_backfill(c, l, 2, "{}", 2, 0);
  note("    killed: 50 gets, invalidate, lease in %" G_GINT64_FORMAT " ms", ms_since(t0));
  CU_ASSERT_TRUE(ms_since(t0) < 200); /* skipped while marked down */
  CU_ASSERT_PTR_NULL(json);

  /* A new memcached on the same port: usable after the retry timeout. */
  int port = m.port;
  CU_ASSERT_FATAL(ixt_memcached_start(&m, port));
  wait_recovered(c, "kill");
  CU_ASSERT_EQUAL(ixia_cache_get(c, "shop", "kill", KEY("k"), &v, &json, &len), IXIA_CACHE_MISS);
  CU_ASSERT_TRUE(fill(c, "shop", "kill", "k", 3, "{\"x\":3}"));
  CU_ASSERT_EQUAL(ixia_cache_get(c, "shop", "kill", KEY("k"), &v, &json, &len), IXIA_CACHE_HIT);
  CU_ASSERT_EQUAL(v, 3);
  g_free(json);
  CU_ASSERT_TRUE(ixia_cache_invalidate(c, "shop", "kill", KEY("k")));

  ixia_cache_stats_t st;
  ixia_cache_get_stats(c, &st);
  CU_ASSERT_TRUE(st.errors >= 51);
  CU_ASSERT_EQUAL(st.invalidation_failures, 1);
  ixia_cache_destroy(c);
  ixt_memcached_stop(&m);
}

static void test_memcached_hung(void) {
  ixt_memcached_t m = {0};
  CU_ASSERT_FATAL(ixt_memcached_start(&m, 0));
  ixia_cache_t *c = cache_for(&m, NULL); /* cache.timeout_ms=100 */
  CU_ASSERT_TRUE(fill(c, "shop", "hung", "k", 1, "{\"v\":1}"));
  gint64 v;
  char *json = NULL;
  size_t len;

  /* Hung, and the first call is an invalidate: FALSE, bounded. */
  CU_ASSERT_FATAL(ixt_signal(m.pid, SIGSTOP));
  gint64 t0 = g_get_monotonic_time();
  CU_ASSERT_FALSE(ixia_cache_invalidate(c, "shop", "hung", KEY("k")));
  gint64 took = ms_since(t0);
  note("    hung: invalidate FALSE in %" G_GINT64_FORMAT " ms", took);
  CU_ASSERT_TRUE(took >= 50 && took < 600);
  t0 = g_get_monotonic_time();
  for (int i = 0; i < 50; i++)
    CU_ASSERT_EQUAL(ixia_cache_get(c, "shop", "hung", KEY("k"), &v, &json, &len),
                    IXIA_CACHE_ERROR);
  CU_ASSERT_PTR_NULL(ixia_cache_lease(c, "shop", "hung", KEY("k2")));
  note("    hung: 50 gets + 1 lease while marked down in %" G_GINT64_FORMAT " ms", ms_since(t0));
  CU_ASSERT_TRUE(ms_since(t0) < 200);
  CU_ASSERT_EQUAL(kill(m.pid, SIGCONT), 0);
  wait_recovered(c, "hung");

  /* Hung again, the first call a get: ERROR, bounded. */
  CU_ASSERT_TRUE(ixia_cache_invalidate(c, "shop", "hung", KEY("k")));
  CU_ASSERT_TRUE(fill(c, "shop", "hung", "k", 2, "{\"v\":2}"));
  CU_ASSERT_FATAL(ixt_signal(m.pid, SIGSTOP));
  t0 = g_get_monotonic_time();
  CU_ASSERT_EQUAL(ixia_cache_get(c, "shop", "hung", KEY("k"), &v, &json, &len),
                  IXIA_CACHE_ERROR);
  took = ms_since(t0);
  note("    hung: get ERROR in %" G_GINT64_FORMAT " ms", took);
  CU_ASSERT_TRUE(took >= 50 && took < 600);
  t0 = g_get_monotonic_time();
  CU_ASSERT_FALSE(ixia_cache_invalidate(c, "shop", "hung", KEY("k")));
  CU_ASSERT_TRUE(ms_since(t0) < 50);

  ixia_cache_stats_t st;
  ixia_cache_get_stats(c, &st);
  CU_ASSERT_TRUE(st.invalidation_retries_pending >= 1);
  CU_ASSERT_EQUAL(kill(m.pid, SIGCONT), 0);
  wait_recovered(c, "hung");
  /* The delete was not delivered then, and is retried until memcached
   * confirms it: the old value goes without another write. */
  ixia_cache_result_t r = IXIA_CACHE_HIT;
  for (int i = 0; i < 100 && r != IXIA_CACHE_MISS; i++) {
    json = NULL;
    r = ixia_cache_get(c, "shop", "hung", KEY("k"), &v, &json, &len);
    g_free(json);
    if (r != IXIA_CACHE_MISS) g_usleep(20000);
  }
  CU_ASSERT_EQUAL(r, IXIA_CACHE_MISS);
  ixia_cache_get_stats(c, &st);
  CU_ASSERT_EQUAL(st.invalidation_failures, 2);
  CU_ASSERT_TRUE(st.invalidations_retried >= 1);
  CU_ASSERT_EQUAL(st.invalidation_retries_pending, 0);
  ixia_cache_destroy(c);
  ixt_memcached_stop(&m);
}

/* ---- runner ------------------------------------------------------------------ */

static int suite_init(void) {
  return ixt_memcached_start(&mc1, 0) ? 0 : -1;
}

static int suite_cleanup(void) {
  ixt_memcached_stop(&mc1);
  return 0;
}

int main(void) {
  if (!g_getenv("IXIA_TEST_VERBOSE")) ixia_log_set_level(IXIA_LOG_ERROR);
  if (CU_initialize_registry() != CUE_SUCCESS) return 2;
  CU_pSuite offline = CU_add_suite("cache_offline", NULL, NULL);
  CU_add_test(offline, "key scheme", test_key_scheme);
  CU_add_test(offline, "disabled cache", test_disabled);
  CU_add_test(offline, "bad cache.servers", test_bad_servers);

  CU_pSuite live = CU_add_suite("cache_memcached", suite_init, suite_cleanup);
  CU_add_test(live, "get miss/lease/backfill/hit", test_roundtrip);
  CU_add_test(live, "foreign value is a miss", test_foreign_value_is_miss);
  CU_add_test(live, "a lease blocks a second lease", test_lease_blocks_second_lease);
  CU_add_test(live, "stale-set race", test_stale_set_race);
  CU_add_test(live, "invalidate", test_invalidate);
  CU_add_test(live, "full backfill queue drops", test_queue_full_drops);
  CU_add_test(live, "destroy cuts a backfill pause", test_destroy_cuts_pause);
  CU_add_test(live, "concurrent readers and writers: no stale value",
              test_concurrent_no_stale);
  CU_add_test(live, "two servers", test_two_servers);
  CU_add_test(live, "memcached killed", test_memcached_killed);
  CU_add_test(live, "memcached hung (SIGSTOP)", test_memcached_hung);

  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures() + CU_get_number_of_suites_failed() +
                    CU_get_number_of_tests_failed();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}
