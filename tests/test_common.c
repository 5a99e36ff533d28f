/* Unit tests of common/: config, JSON limits, schemas, errors, and the
 * generated Thrift types' registration. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "ixia_ixia_types.h"
#include "disk.h"
#include "error.h"
#include "json.h"
#include "schema.h"
#include "support.h"

static void test_config_defaults_and_set(void) {
  ixia_config_t *c = ixia_config_new();
  CU_ASSERT_EQUAL(ixia_config_int(c, "limits.max_key_bytes"), 512);
  CU_ASSERT_TRUE(ixia_config_bool(c, "store.sync"));
  CU_ASSERT_STRING_EQUAL(ixia_config_str(c, "log.level"), "info");
  ixia_error_t *e = NULL;
  CU_ASSERT_TRUE(ixia_config_set_assignment(c, "limits.max_key_bytes=100", &e));
  CU_ASSERT_EQUAL(ixia_config_int(c, "limits.max_key_bytes"), 100);
  CU_ASSERT_TRUE(ixia_config_set_assignment(c, "store.sync=false", &e));
  CU_ASSERT_FALSE(ixia_config_bool(c, "store.sync"));
  CU_ASSERT_PTR_NULL(e);
  ixia_config_destroy(c);
  ixia_config_destroy(NULL);
}

static void test_config_errors(void) {
  ixia_config_t *c = ixia_config_new();
  ixia_error_t *e = NULL;
  CU_ASSERT_FALSE(ixia_config_set_assignment(c, "no.such=1", &e));
  CU_ASSERT_PTR_NOT_NULL_FATAL(e);
  CU_ASSERT_PTR_NOT_NULL(strstr(e->message, "no.such"));
  ixia_error_destroy(e), e = NULL;
  CU_ASSERT_FALSE(ixia_config_set_assignment(c, "limits.max_key_bytes=99999", &e));
  CU_ASSERT_PTR_NOT_NULL(e && strstr(e->message, "outside"));
  ixia_error_destroy(e), e = NULL;
  CU_ASSERT_FALSE(ixia_config_set_assignment(c, "limits.max_key_bytes=abc", &e));
  CU_ASSERT_PTR_NOT_NULL(e && strstr(e->message, "not an integer"));
  ixia_error_destroy(e), e = NULL;
  CU_ASSERT_FALSE(ixia_config_set_assignment(c, "store.sync=maybe", &e));
  ixia_error_destroy(e), e = NULL;
  CU_ASSERT_FALSE(ixia_config_set_assignment(c, "novalue", &e));
  ixia_error_destroy(e), e = NULL;
  /* The failed sets left the values alone. */
  CU_ASSERT_EQUAL(ixia_config_int(c, "limits.max_key_bytes"), 512);
  ixia_config_destroy(c);
}

static void test_config_file(void) {
  char *dir = ixt_tmpdir();
  char *path = g_build_filename(dir, "ixia.conf", NULL);
  g_file_set_contents(path, "[limits]\nmax_doc_bytes = 2048\n[cache]\nservers = a:1,b:2\n", -1, NULL);
  ixia_config_t *c = ixia_config_new();
  ixia_error_t *e = NULL;
  CU_ASSERT_TRUE(ixia_config_load_file(c, path, &e));
  CU_ASSERT_EQUAL(ixia_config_int(c, "limits.max_doc_bytes"), 2048);
  CU_ASSERT_STRING_EQUAL(ixia_config_str(c, "cache.servers"), "a:1,b:2");
  g_file_set_contents(path, "[limits]\nmax_dok_bytes = 1\n", -1, NULL);
  CU_ASSERT_FALSE(ixia_config_load_file(c, path, &e));
  CU_ASSERT_PTR_NOT_NULL(e && strstr(e->message, "limits.max_dok_bytes"));
  ixia_error_destroy(e);
  ixia_config_destroy(c);
  g_free(path);
  g_free(dir);
}

static void test_config_doc_lists_every_option(void) {
  char *md = ixia_config_doc_markdown();
  for (const ixia_option_t *o = ixia_config_options(); o->name; o++) {
    char *needle = g_strdup_printf("`%s`", o->name);
    CU_ASSERT_PTR_NOT_NULL(strstr(md, needle));
    g_free(needle);
  }
  g_free(md);
}

static void test_json_limits(void) {
  ixia_error_t *e = NULL;
  const char *ok = "{\"a\":{\"b\":[1,2,{\"c\":\"}]]]\"}]}}";
  const ixia_json_limits_t l4 = {1000, "limits.max_doc_bytes", 4, "limits.max_json_depth"},
                           l3 = {1000, "limits.max_doc_bytes", 3, "limits.max_json_depth"},
                           l10 = {10, "limits.max_doc_bytes", 8, NULL}, l8 = {1000, NULL, 8, NULL};
  cJSON *d = ixia_json_parse_object(ok, strlen(ok), &l4, "doc", &e);
  CU_ASSERT_PTR_NOT_NULL(d);
  cJSON_Delete(d);
  d = ixia_json_parse_object(ok, strlen(ok), &l3, "doc", &e);
  CU_ASSERT_PTR_NULL(d);
  CU_ASSERT_EQUAL(e ? e->code : 0, IXIA_ETOOLARGE);
  CU_ASSERT_PTR_NOT_NULL(e && strstr(e->message, "nesting"));
  CU_ASSERT_PTR_NOT_NULL(e && strstr(e->message, "(limits.max_json_depth)"));
  ixia_error_destroy(e), e = NULL;
  d = ixia_json_parse_object(ok, strlen(ok), &l10, "doc", &e);
  CU_ASSERT_PTR_NOT_NULL(e && strstr(e->message, "over the limit of 10 bytes (limits.max_doc_bytes)"));
  ixia_error_destroy(e), e = NULL;
  const char *bad[] = {"{\"a\":", "[1,2]", "{} x", "", "nul", "{\"a\":1,}"};
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    d = ixia_json_parse_object(bad[i], strlen(bad[i]), &l8, "doc", &e);
    CU_ASSERT_PTR_NULL(d);
    CU_ASSERT_EQUAL(e ? e->code : 0, IXIA_EINVAL);
    ixia_error_destroy(e), e = NULL;
  }
}

static void test_json_project(void) {
  const char *src = "{\"a\":1,\"s\":{\"c\":\"US\",\"d\":2},\"t\":[1,2]}";
  cJSON *doc = cJSON_Parse(src);
  const char *paths[] = {"a", "s.c", "t"};
  gboolean all = FALSE;
  cJSON *p = ixia_json_project(doc, paths, 3, &all);
  char *s = ixia_json_print(p);
  CU_ASSERT_STRING_EQUAL(s, "{\"a\":1,\"s\":{\"c\":\"US\"},\"t\":[1,2]}");
  CU_ASSERT_TRUE(all);
  g_free(s);
  cJSON_Delete(p);
  const char *missing[] = {"a", "nope"};
  p = ixia_json_project(doc, missing, 2, &all);
  CU_ASSERT_FALSE(all);
  cJSON_Delete(p);
  CU_ASSERT_PTR_NULL(ixia_json_path(doc, "s.c.x"));
  CU_ASSERT_PTR_NOT_NULL(ixia_json_path(doc, "s.d"));
  cJSON_Delete(doc);
}

static const char *SCHEMA =
    "{\"namespace\":\"shop\",\"table\":\"products\",\"cache_ttl_seconds\":60,"
    "\"indexes\":[{\"field\":\"category\",\"type\":\"keyword\"},{\"field\":\"price\",\"type\":\"double\"},"
    "{\"field\":\"stock\",\"type\":\"long\"},{\"field\":\"tags\",\"type\":\"keyword\"},"
    "{\"field\":\"seller.ok\",\"type\":\"bool\"},{\"field\":\"updated_at\",\"type\":\"timestamp\"}]}";

static void test_schema_parse(void) {
  ixia_error_t *e = NULL;
  ixia_schema_t *s = ixia_schema_parse(SCHEMA, strlen(SCHEMA), &e);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  CU_ASSERT_STRING_EQUAL(s->ns, "shop");
  CU_ASSERT_EQUAL(s->n_indexes, 6);
  CU_ASSERT_EQUAL(s->cache_ttl_seconds, 60);
  CU_ASSERT_EQUAL(s->indexes[1].type, IXIA_FIELD_DOUBLE);
  ixia_schema_unref(s);
  const char *bad[] = {
      "{\"table\":\"t\"}",
      "{\"namespace\":\"a b\",\"table\":\"t\"}",
      "{\"namespace\":\"a\",\"table\":\"t\",\"indexes\":[{\"field\":\"x\",\"type\":\"float\"}]}",
      "{\"namespace\":\"a\",\"table\":\"t\",\"indexes\":[{\"field\":\"x\",\"type\":\"long\"},{\"field\":\"x\",\"type\":\"long\"}]}",
      "{\"namespace\":\"a\",\"table\":\"t\",\"ttl_seconds\":-1}",
      "{\"namespace\":\"a\",\"table\":\"t\",\"colour\":1}",
      "{\"namespace\":\"a\",\"table\":\"t\",\"indexes\":[{\"field\":\"a..b\",\"type\":\"long\"}]}",
  };
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    s = ixia_schema_parse(bad[i], strlen(bad[i]), &e);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT_PTR_NOT_NULL(e);
    CU_ASSERT_EQUAL(e ? e->code : 0, IXIA_EINVAL);
    ixia_error_destroy(e), e = NULL;
  }
}

static void test_schema_check_doc(void) {
  ixia_schema_t *s = ixia_schema_parse(SCHEMA, strlen(SCHEMA), NULL);
  const char *good = "{\"category\":\"c\",\"price\":1.5,\"stock\":3,\"tags\":[\"a\",\"b\"],"
                     "\"seller\":{\"ok\":true},\"updated_at\":1770369490,\"other\":[{}]}";
  cJSON *d = cJSON_Parse(good);
  ixia_error_t *e = NULL;
  CU_ASSERT_TRUE(ixia_schema_check_doc(s, d, &e));
  cJSON_Delete(d);
  /* Each error names the field and says what is wrong with the value. */
  struct { const char *doc, *field, *why; } bad[] = {
      {"{\"price\":\"cheap\"}", "price", "but has a string"},
      {"{\"stock\":1.5}", "stock", "a fractional number"},
      {"{\"stock\":1e17}", "stock", "outside the range of longs"},
      {"{\"tags\":[\"a\",3]}", "tags", "element 1 is an integer"},
      {"{\"seller\":{\"ok\":\"yes\"}}", "seller.ok", "a string"},
      {"{\"updated_at\":-5}", "updated_at", "-5, outside the range of timestamps"},
      {"{\"updated_at\":1770369490000}", "updated_at", "milliseconds must be divided by 1000"},
      {"{\"updated_at\":1770369490.5}", "updated_at", "whole epoch seconds"},
      {"{\"category\":{\"x\":1}}", "category", "an object"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    d = cJSON_Parse(bad[i].doc);
    CU_ASSERT_FALSE(ixia_schema_check_doc(s, d, &e));
    CU_ASSERT_EQUAL(e ? e->code : 0, IXIA_ETYPE);
    CU_ASSERT_PTR_NOT_NULL(e && strstr(e->message, bad[i].field));
    if (!e || !strstr(e->message, bad[i].why))
      fprintf(stderr, "\n  %s: %s\n", bad[i].doc, e ? e->message : "(no error)");
    CU_ASSERT_PTR_NOT_NULL(e && strstr(e->message, bad[i].why));
    ixia_error_destroy(e), e = NULL;
    cJSON_Delete(d);
  }
  ixia_schema_unref(s);
}

static void test_schema_evolution(void) {
  ixia_schema_t *a = ixia_schema_parse(SCHEMA, strlen(SCHEMA), NULL);
  const char *add = "{\"namespace\":\"shop\",\"table\":\"products\",\"indexes\":["
                    "{\"field\":\"price\",\"type\":\"double\"},{\"field\":\"brand\",\"type\":\"keyword\"}]}";
  const char *change = "{\"namespace\":\"shop\",\"table\":\"products\",\"indexes\":["
                       "{\"field\":\"price\",\"type\":\"keyword\"}]}";
  ixia_schema_t *b = ixia_schema_parse(add, strlen(add), NULL);
  ixia_schema_t *c = ixia_schema_parse(change, strlen(change), NULL);
  ixia_error_t *e = NULL;
  CU_ASSERT_TRUE(ixia_schema_check_evolution(a, b, &e));
  CU_ASSERT_FALSE(ixia_schema_check_evolution(a, c, &e));
  CU_ASSERT_PTR_NOT_NULL(e && strstr(e->message, "price"));
  ixia_error_destroy(e);
  ixia_schema_unref(a);
  ixia_schema_unref(b);
  ixia_schema_unref(c);
}

static void test_error_first_wins(void) {
  ixia_error_t *e = NULL;
  CU_ASSERT_FALSE(ixia_error_set(&e, IXIA_EINVAL, "first %d", 1));
  ixia_error_set(&e, IXIA_EINTERNAL, "second");
  CU_ASSERT_STRING_EQUAL(e->message, "first 1");
  ixia_error_prefix(e, "ctx");
  CU_ASSERT_STRING_EQUAL(e->message, "ctx: first 1");
  CU_ASSERT_STRING_EQUAL(ixia_code_name(e->code), "INVALID_ARGUMENT");
  ixia_error_destroy(e);
  ixia_error_destroy(NULL);
  CU_ASSERT_FALSE(ixia_error_set(NULL, IXIA_EINVAL, "ignored"));
}

static void test_disk_reserve(void) {
  CU_ASSERT_STRING_EQUAL(ixia_code_name(IXIA_EEXHAUSTED), "RESOURCE_EXHAUSTED");
  char *dir = ixt_tmpdir();
  gint64 avail = -1;
  CU_ASSERT_TRUE(ixia_disk_free(dir, &avail, NULL));
  CU_ASSERT_TRUE(avail > 0);
  /* Reserve 0: measured, never refused. */
  ixia_disk_reserve_t *off = ixia_disk_reserve_new("test", "store.disk_reserve_mb", 0, "writes resume");
  ixia_disk_reserve_watch(off, dir);
  CU_ASSERT_EQUAL(ixia_disk_reserve_free(off), -1); /* nothing measured yet */
  CU_ASSERT_TRUE(ixia_disk_reserve_check(off, NULL));
  CU_ASSERT_TRUE(ixia_disk_reserve_free(off) > 0);
  CU_ASSERT_FALSE(ixia_disk_reserve_exhausted(off));
  CU_ASSERT_EQUAL(ixia_disk_reserve_bytes(off), 0);
  ixia_disk_reserve_destroy(off);
  /* A reserve above the free space: refused, naming path, space and option. */
  gint64 mb = avail / (1024 * 1024) + 1024;
  ixia_disk_reserve_t *r = ixia_disk_reserve_new("test", "store.disk_reserve_mb", mb, "writes resume");
  ixia_disk_reserve_watch(r, dir);
  ixia_disk_reserve_watch(r, dir); /* same file system: measured once */
  ixia_error_t *e = NULL;
  CU_ASSERT_FALSE(ixia_disk_reserve_check(r, &e));
  CU_ASSERT_EQUAL(e ? e->code : 0, IXIA_EEXHAUSTED);
  char *opt = g_strdup_printf("under store.disk_reserve_mb=%" G_GINT64_FORMAT ";", mb);
  CU_ASSERT_PTR_NOT_NULL(e && strstr(e->message, dir));
  CU_ASSERT_PTR_NOT_NULL(e && strstr(e->message, opt));
  CU_ASSERT_PTR_NOT_NULL(e && g_str_has_prefix(e->message, "disk full: "));
  CU_ASSERT_PTR_NOT_NULL(e && g_str_has_suffix(e->message, "; writes resume when space is freed"));
  g_free(opt);
  ixia_error_destroy(e);
  CU_ASSERT_TRUE(ixia_disk_reserve_exhausted(r));
  CU_ASSERT_TRUE(ixia_disk_reserve_free(r) > 0);
  CU_ASSERT_EQUAL(ixia_disk_reserve_bytes(r), mb << 20);
  ixia_disk_reserve_destroy(r);
  /* A path that cannot be measured does not block writes. */
  ixia_disk_reserve_t *gone = ixia_disk_reserve_new("test", "index.disk_reserve_mb", 1, "indexing resumes");
  ixia_disk_reserve_watch(gone, "/nonexistent/ixia/index");
  CU_ASSERT_TRUE(ixia_disk_reserve_check(gone, NULL));
  CU_ASSERT_EQUAL(ixia_disk_reserve_free(gone), -1);
  ixia_disk_reserve_destroy(gone);
  g_free(dir);
}

/* Every failure a script must tell apart has its own exit code. */
static void test_exit_codes(void) {
  static const struct {
    ixia_code_t code;
    int exit;
  } map[] = {{IXIA_EINVAL, IXIA_EXIT_BADINPUT},    {IXIA_ETYPE, IXIA_EXIT_BADINPUT},
             {IXIA_ETOOLARGE, IXIA_EXIT_BADINPUT}, {IXIA_ENOTFOUND, IXIA_EXIT_NOTFOUND},
             {IXIA_EUNAVAILABLE, IXIA_EXIT_UNREACHABLE}, {IXIA_EEXHAUSTED, IXIA_EXIT_EXHAUSTED},
             {IXIA_ESHARD, IXIA_EXIT_SHARD},       {IXIA_EDEADLINE, IXIA_EXIT_DEADLINE},
             {IXIA_ENOTCAUGHTUP, IXIA_EXIT_NOTCAUGHTUP}, {IXIA_ECONFLICT, IXIA_EXIT_ERROR},
             {IXIA_EINTERNAL, IXIA_EXIT_ERROR}};
  GHashTable *seen = g_hash_table_new(g_direct_hash, g_direct_equal);
  for (guint i = 0; i < G_N_ELEMENTS(map); i++) {
    ixia_error_t *e = ixia_error_new(map[i].code, "x");
    CU_ASSERT_EQUAL(ixia_error_exit_code(e), map[i].exit);
    CU_ASSERT_STRING_NOT_EQUAL(ixia_code_name(map[i].code), "UNKNOWN");
    g_hash_table_add(seen, GINT_TO_POINTER(map[i].exit));
    ixia_error_destroy(e);
  }
  /* ok and usage are not errors; the rest are all distinct. */
  CU_ASSERT_EQUAL(g_hash_table_size(seen), 8);
  g_hash_table_destroy(seen);
  CU_ASSERT_STRING_EQUAL(ixia_code_name(IXIA_EDEADLINE), "DEADLINE_EXCEEDED");
  CU_ASSERT_STRING_EQUAL(ixia_code_name(IXIA_ENOTCAUGHTUP), "NOT_CAUGHT_UP");
  CU_ASSERT_STRING_EQUAL(ixia_code_name(IXIA_ESHARD), "SHARD_UNAVAILABLE");
}

/* The generated Thrift types register on first use. Thrift's generator left
 * that unguarded: two threads making the first object of a type at once
 * left one of them, and every later caller, without the type (the kill -9
 * soak saw an indexer that could decode no event again). Sixteen threads
 * race on the first use of a type nothing here has touched. */
#define TYPE_RACERS 16
static gint type_race_go;
static gpointer type_racer(gpointer out) {
  while (!g_atomic_int_get(&type_race_go)) {
  }
  *(GType *)out = IXIA_TYPE_KEY_VERSION_PAGE;
  return NULL;
}

static void test_thrift_types_register_once(void) {
  CU_ASSERT_EQUAL_FATAL(g_type_from_name("IxiaKeyVersionPageType"), 0);
  GType got[TYPE_RACERS] = {0};
  GThread *t[TYPE_RACERS];
  for (int i = 0; i < TYPE_RACERS; i++) t[i] = g_thread_new("type-racer", type_racer, &got[i]);
  g_atomic_int_set(&type_race_go, 1);
  for (int i = 0; i < TYPE_RACERS; i++) g_thread_join(t[i]);
  GType want = g_type_from_name("IxiaKeyVersionPageType");
  CU_ASSERT_NOT_EQUAL(want, 0);
  for (int i = 0; i < TYPE_RACERS; i++) CU_ASSERT_EQUAL(got[i], want);
  /* And the type still works afterwards. */
  CU_ASSERT_EQUAL(IXIA_TYPE_KEY_VERSION_PAGE, want);
  GObject *o = g_object_new(IXIA_TYPE_KEY_VERSION_PAGE, NULL);
  CU_ASSERT_PTR_NOT_NULL(o);
  g_object_unref(o);
}

int main(void) {
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("common", NULL, NULL);
  IXT_ADD(s, test_thrift_types_register_once); /* first: before anything registers types */
  IXT_ADD(s, test_config_defaults_and_set);
  IXT_ADD(s, test_config_errors);
  IXT_ADD(s, test_config_file);
  IXT_ADD(s, test_config_doc_lists_every_option);
  IXT_ADD(s, test_json_limits);
  IXT_ADD(s, test_json_project);
  IXT_ADD(s, test_schema_parse);
  IXT_ADD(s, test_schema_check_doc);
  IXT_ADD(s, test_schema_evolution);
  IXT_ADD(s, test_error_first_wins);
  IXT_ADD(s, test_exit_codes);
  IXT_ADD(s, test_disk_reserve);
  return ixt_run();
}
