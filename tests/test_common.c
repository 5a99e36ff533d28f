/* Unit tests of common/: config, JSON limits, schemas, errors, and the
 * generated Thrift types' registration. */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <thrift/c_glib/thrift_application_exception.h>

#include "config.h"
#include "bytes.h"
#include "client.h"
#include "ixia_ixia_types.h"
#include "disk.h"
#include "error.h"
#include "hitpage.h"
#include "json.h"
#include "rocksdb_cache.h"
#include "schema.h"
#include "support.h"
#include "thrift_util.h"
#include "timeutil.h"
#include "wire.h"

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

/* Significant digits of a number's text: from the first non-zero digit to
 * the last digit before any exponent, the point not counted. */
static int sig_digits(const char *t) {
  int n = 0, started = 0;
  for (; *t && *t != 'e'; t++) {
    if (*t < '0' || *t > '9') continue;
    if (*t != '0') started = 1;
    if (started) n++;
  }
  return n;
}

/* The number writer against printf: the same text for prices, small
 * fractions, long fractions and arbitrary doubles where printf's shortest
 * has 15 digits, text that reads back with no more digits otherwise. */
static void test_json_numbers_match_printf(void) {
  GRand *r = g_rand_new_with_seed(11);
  guint fast = 0, longer = 0;
  for (guint i = 0; i < 400000; i++) {
    double d;
    switch (i % 4) {
      case 0: /* a decimal of 0..9 places */
        d = (double)g_rand_int_range(r, -2000000000, 2000000000) / pow(10, g_rand_int_range(r, 0, 10));
        break;
      case 1: /* a price */
        d = (double)g_rand_int_range(r, 1, 10000000) / 100.0;
        break;
      case 2: /* any magnitude */
        d = g_rand_double_range(r, -1, 1) * pow(10, g_rand_int_range(r, -12, 20));
        break;
      default: { /* any bits */
        guint64 bits = (guint64)g_rand_int(r) << 32 | g_rand_int(r);
        memcpy(&d, &bits, sizeof d);
      }
    }
    char got[32], want[32];
    ixia_json_format_number(d, got);
    if (!isfinite(d)) {
      CU_ASSERT_STRING_EQUAL(got, "null");
      continue;
    }
    if (d == floor(d) && fabs(d) < 9007199254740992.0) continue; /* integers: checked above */
    /* printf's shortest of 15, 16 and 17 digits: the same text when it
     * has 15 (only one 15-digit decimal can read back), otherwise text
     * that reads back with no more digits. */
    int prec = 15;
    g_ascii_formatd(want, sizeof want, "%.15g", d);
    if (g_ascii_strtod(want, NULL) != d) g_ascii_formatd(want, sizeof want, "%.16g", d), prec = 16;
    if (g_ascii_strtod(want, NULL) != d) g_ascii_formatd(want, sizeof want, "%.17g", d), prec = 17;
    if (prec == 15) fast++;
    else longer++;
    gboolean same = prec == 15 ? strcmp(got, want) == 0
                               : g_ascii_strtod(got, NULL) == d && sig_digits(got) <= prec &&
                                     (strchr(got, 'e') != NULL) == (strchr(want, 'e') != NULL);
    if (!same) {
      printf("\n%.17g: got %s, printf %s\n", d, got, want);
      CU_FAIL("number text differs from printf's");
      break;
    }
  }
  CU_ASSERT(fast > 100000);  /* the decimal path was exercised */
  CU_ASSERT(longer > 50000); /* and the 16- and 17-digit one */
  g_rand_free(r);
}

/* Numbers written as JSON text without cJSON: the shortest form that reads
 * back to the same double, integers as integers, and null for what JSON
 * cannot hold; trees as cJSON would print them but for inexact numbers. */
static void test_json_numbers(void) {
  static const struct {
    double d;
    const char *want;
  } cases[] = {
      {50, "50"},
      {99.9, "99.9"},
      {-0.0, "0"},
      {-17, "-17"},
      {0.1 + 0.2, "0.30000000000000004"},
      {1e20, "1e+20"},
      {9007199254740991.0, "9007199254740991"},
      {-9007199254740991.0, "-9007199254740991"},
      {5e-324, "4.94065645841247e-324"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    char buf[32];
    ixia_json_format_number(cases[i].d, buf);
    CU_ASSERT_STRING_EQUAL(buf, cases[i].want);
    CU_ASSERT_EQUAL(g_ascii_strtod(buf, NULL), cases[i].d);
  }
  char buf[32];
  ixia_json_format_number(NAN, buf);
  CU_ASSERT_STRING_EQUAL(buf, "null");
  ixia_json_format_number(-INFINITY, buf);
  CU_ASSERT_STRING_EQUAL(buf, "null");

  /* Scalars and nesting as the tree writer prints them. */
  const char *src = "[\"a\\\"b\",1.5,-3,true,false,null,{\"x\":[1]}]";
  cJSON *arr = cJSON_Parse(src);
  char *got = ixia_json_print(arr);
  CU_ASSERT_STRING_EQUAL(got, src);
  g_free(got);
  cJSON_Delete(arr);

  /* The tree writer against cJSON's printer where both are exact: the same
   * text, escapes, empty containers and a member without a name ("")
   * included; numbers differ only where cJSON's check is lossy. */
  cJSON *o = cJSON_Parse("{\"s\":\"q\\\"\\\\\\n\\u0001\u00e9\",\"a\":[],\"o\":{},\"n\":[1.5,-2,1e300,0.1]}");
  CU_ASSERT_PTR_NOT_NULL_FATAL(o);
  cJSON_AddItemToArray(o, cJSON_CreateTrue()); /* a member without a name */
  char *ours = ixia_json_print(o), *theirs = cJSON_PrintUnformatted(o);
  CU_ASSERT_STRING_EQUAL(ours, theirs);
  cJSON_free(theirs);
  g_free(ours);
  cJSON_AddItemToObject(o, "x", cJSON_CreateNumber(0.1 + 0.2));
  ours = ixia_json_print(o);
  CU_ASSERT_PTR_NOT_NULL(strstr(ours, "\"x\":0.30000000000000004}"));
  g_free(ours);
  cJSON_Delete(o);
}

/* Strict input: numbers a double cannot hold, NaN/Infinity and repeated keys
 * are INVALID_ARGUMENT naming where they are. */
static void test_json_strict(void) {
  const ixia_json_limits_t l = {100000, NULL, 16, NULL};
  struct { const char *text, *needle; } bad[] = {
      {"{\"price\": 1e400}", "document: price: the number is outside the range of a double"},
      {"{\"a\": {\"b\": [1, -2e308, 3]}}", "document: a.b[1]: the number is outside"},
      {"{\"a\": [{\"x\": 1}, {\"y\": NaN}]}", "document: a[1].y: NaN and Infinity are not JSON numbers"},
      {"{\"a\": -Infinity}", "document: a: NaN and Infinity are not JSON numbers"},
      {"{\"a\": Infinity}", "document: a: NaN and Infinity"},
      {"{\"brand\": \"A\", \"brand\": 7}", "document: key \"brand\" given twice"},
      {"{\"v\": [{\"c\": 1}, {\"c\": 2, \"d\": 3, \"c\": 4}]}", "document: v[1]: key \"c\" given twice"},
      {"{\"a\": {\"b\": 1, \"c\": [}}", "malformed JSON near byte"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    ixia_error_t *e = NULL;
    cJSON *d = ixia_json_parse_object(bad[i].text, strlen(bad[i].text), &l, "document", &e);
    CU_ASSERT_PTR_NULL(d);
    CU_ASSERT_EQUAL(e ? e->code : 0, IXIA_EINVAL);
    if (!e || !strstr(e->message, bad[i].needle))
      fprintf(stderr, "\n  %s: %s\n", bad[i].text, e ? e->message : "(no error)");
    CU_ASSERT_PTR_NOT_NULL(e && strstr(e->message, bad[i].needle));
    ixia_error_destroy(e);
    cJSON_Delete(d);
  }
  /* Many members: the hashed check. */
  GString *big = g_string_new("{");
  for (int i = 0; i < 40; i++) g_string_append_printf(big, "\"k%d\": %d, ", i, i);
  g_string_append(big, "\"k7\": 0}");
  ixia_error_t *e = NULL;
  CU_ASSERT_PTR_NULL(ixia_json_parse_object(big->str, big->len, &l, "document", &e));
  CU_ASSERT_PTR_NOT_NULL(e && strstr(e->message, "key \"k7\" given twice"));
  ixia_error_destroy(e), e = NULL;
  g_string_free(big, TRUE);
  const char *ok = "{\"a\": 1e308, \"b\": -1e-400, \"c\": [1, 1], \"d\": {\"a\": 1}}";
  cJSON *d = ixia_json_parse_object(ok, strlen(ok), &l, "document", &e);
  CU_ASSERT_PTR_NOT_NULL(d);
  cJSON_Delete(d);
}

static void test_time(void) {
  gint64 t = 0;
  CU_ASSERT_TRUE(ixia_time_parse_rfc3339("1970-01-01T00:00:00Z", &t) && t == 0);
  CU_ASSERT_TRUE(ixia_time_parse_rfc3339("2024-05-01T12:30:00Z", &t) && t == 1714566600);
  CU_ASSERT_TRUE(ixia_time_parse_rfc3339("2024-05-01T14:30:00.999+02:00", &t) && t == 1714566600);
  CU_ASSERT_TRUE(ixia_time_parse_rfc3339("2024-05-01t07:00:00-05:30", &t) && t == 1714566600);
  CU_ASSERT_TRUE(ixia_time_parse_rfc3339("2024-02-29 00:00:00z", &t) && t == 1709164800);
  const char *bad[] = {"2024-02-30T00:00:00Z", "2023-02-29T00:00:00Z", "2024-05-01T12:30:00",
                       "2024-05-01", "2024-13-01T00:00:00Z", "2024-05-01T24:00:00Z",
                       "2024-05-01T12:30:00+2:00", "2024-05-01T12:30:00.Z", "x024-05-01T12:30:00Z",
                       "2024-05-01T12:30:00Zjunk", "1714566600"};
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    gboolean ok = ixia_time_parse_rfc3339(bad[i], &t);
    if (ok) fprintf(stderr, "\n  accepted %s\n", bad[i]);
    CU_ASSERT_FALSE(ok);
  }
  /* A zone offset cut short at the end of the text: refused, and nothing is
   * read past the string (each is its own heap copy of exactly its size,
   * so the sanitized build catches a read beyond it; the first crashed
   * the query fuzz target). */
  const char *cut[] = {"2024-02-01T00:00:00+", "2024-02-01T00:00:00-0", "2024-02-01T00:00:00+01",
                       "2024-02-01T00:00:00+01:", "2024-02-01T00:00:00+01:0", "2024-02-01T00:00:00.5+0",
                       "2024-02-01T00:00:00+01:000", "2024-02-01T00:00:00+0100"};
  for (guint i = 0; i < G_N_ELEMENTS(cut); i++) {
    char *copy = g_strdup(cut[i]);
    gboolean ok = ixia_time_parse_rfc3339(copy, &t);
    if (ok) fprintf(stderr, "\n  accepted %s\n", cut[i]);
    CU_ASSERT_FALSE(ok);
    g_free(copy);
  }
  char *whole = g_strdup("2024-02-01T00:00:00.25-01:30");
  CU_ASSERT_TRUE(ixia_time_parse_rfc3339(whole, &t) && t == 1706745600 + 5400);
  g_free(whole);
  /* Civil dates round trip over four centuries, leap days included. */
  for (gint64 d = -800000; d < 800000; d += 37) {
    gint64 y;
    guint m, dd;
    ixia_civil_from_days(d, &y, &m, &dd);
    CU_ASSERT_EQUAL_FATAL(ixia_days_from_civil(y, m, dd), d);
  }
  char *s = ixia_time_format(1714566600, 0);
  CU_ASSERT_STRING_EQUAL(s, "2024-05-01T12:30:00Z");
  g_free(s);
  s = ixia_time_format(1714566600, -(5 * 3600 + 1800));
  CU_ASSERT_STRING_EQUAL(s, "2024-05-01T07:00:00-05:30");
  g_free(s);
  gint32 off = 1;
  CU_ASSERT_TRUE(ixia_time_parse_offset("+02:00", &off) && off == 7200);
  CU_ASSERT_TRUE(ixia_time_parse_offset("-0530", &off) && off == -19800);
  CU_ASSERT_TRUE(ixia_time_parse_offset("Z", &off) && off == 0);
  CU_ASSERT_FALSE(ixia_time_parse_offset("+19:00", &off));
  CU_ASSERT_FALSE(ixia_time_parse_offset("Europe/Paris", &off));
  /* Calendar units at an offset: 2024-03-31T23:30:00Z is April 1st at +02:00. */
  gint64 t0 = 1711927800;
  CU_ASSERT_EQUAL(ixia_cal_floor(t0, IXIA_CAL_MONTH, 0), 1709251200);        /* 2024-03-01Z */
  CU_ASSERT_EQUAL(ixia_cal_floor(t0, IXIA_CAL_MONTH, 7200), 1711929600 - 7200); /* 2024-04-01+02 */
  CU_ASSERT_EQUAL(ixia_cal_next(1709251200, IXIA_CAL_MONTH, 0), 1711929600);
  CU_ASSERT_EQUAL(ixia_cal_floor(t0, IXIA_CAL_QUARTER, 0), 1704067200);      /* 2024-01-01 */
  CU_ASSERT_EQUAL(ixia_cal_floor(t0, IXIA_CAL_QUARTER, 7200), 1711929600 - 7200);
  CU_ASSERT_EQUAL(ixia_cal_floor(t0, IXIA_CAL_YEAR, 0), 1704067200);
  CU_ASSERT_EQUAL(ixia_cal_next(1704067200, IXIA_CAL_YEAR, 0), 1735689600);
  CU_ASSERT_EQUAL(ixia_cal_floor(t0, IXIA_CAL_WEEK, 0), 1711324800);         /* Monday 2024-03-25 */
  CU_ASSERT_EQUAL(ixia_cal_floor(t0, IXIA_CAL_DAY, -3600), 1711929600 - 86400 + 3600);
  CU_ASSERT_EQUAL(ixia_cal_next(ixia_cal_floor(1706745600 - 1, IXIA_CAL_MONTH, 0), IXIA_CAL_MONTH, 0), 1706745600);
  ixia_cal_unit_t u;
  CU_ASSERT_TRUE(ixia_cal_unit_parse("1M", &u) && u == IXIA_CAL_MONTH);
  CU_ASSERT_TRUE(ixia_cal_unit_parse("quarter", &u) && u == IXIA_CAL_QUARTER);
  CU_ASSERT_FALSE(ixia_cal_unit_parse("fortnight", &u));
}

/* Paths reach into arrays of objects at any depth. */
static gboolean collect_loc(const cJSON *v, const ixia_json_loc_t *loc, void *ud) {
  char *at = ixia_json_loc_string(loc), *val = ixia_json_print(v);
  g_string_append_printf(ud, "%s=%s;", at, val);
  g_free(at);
  g_free(val);
  return TRUE;
}

static void test_json_path_arrays(void) {
  const char *src = "{\"v\": [{\"c\": \"red\", \"s\": {\"n\": [1, [2]]}}, {\"c\": [\"blue\", null]}, 5,"
                    " [{\"c\": \"deep\"}], {\"s\": [{\"n\": 3}, {\"n\": null}]}], \"top\": 1}";
  cJSON *doc = cJSON_Parse(src);
  GString *got = g_string_new(NULL);
  ixia_json_path_foreach(doc, "v.c", collect_loc, got);
  CU_ASSERT_STRING_EQUAL(got->str, "v[0].c=\"red\";v[1].c[0]=\"blue\";v[1].c[1]=null;v[3][0].c=\"deep\";");
  g_string_truncate(got, 0);
  ixia_json_path_foreach(doc, "v.s.n", collect_loc, got);
  CU_ASSERT_STRING_EQUAL(got->str, "v[0].s.n[0]=1;v[0].s.n[1][0]=2;v[4].s[0].n=3;v[4].s[1].n=null;");
  g_string_truncate(got, 0);
  ixia_json_path_foreach(doc, "top", collect_loc, got);
  ixia_json_path_foreach(doc, "top.x", collect_loc, got);
  ixia_json_path_foreach(doc, "nope", collect_loc, got);
  CU_ASSERT_STRING_EQUAL(got->str, "top=1;");
  g_string_free(got, TRUE);
  /* Projection keeps the arrays' shape; two paths into one array line up. */
  const char *paths[] = {"v.c", "v.s.n", "top"};
  gboolean all = FALSE;
  cJSON *p = ixia_json_project(doc, paths, 3, &all);
  char *s = ixia_json_print(p);
  CU_ASSERT_STRING_EQUAL(s, "{\"v\":[{\"c\":\"red\",\"s\":{\"n\":[1,[2]]}},{\"c\":[\"blue\",null]},[{\"c\":\"deep\"}],"
                            "{\"s\":[{\"n\":3},{\"n\":null}]}],\"top\":1}");
  CU_ASSERT_TRUE(all);
  g_free(s);
  cJSON_Delete(p);
  /* The text projection leaves such paths to the tree. */
  GString *out = g_string_new(NULL);
  CU_ASSERT_FALSE(ixia_json_project_text(src, strlen(src), paths, 1, out, NULL));
  CU_ASSERT_TRUE(ixia_json_project_text(src, strlen(src), paths + 2, 1, out, NULL));
  CU_ASSERT_STRING_EQUAL(out->str, "{\"top\":1}");
  g_string_free(out, TRUE);
  cJSON_Delete(doc);
}

/* The text projection of paths one member deep (its one-pass form) gives
 * what the tree gives: order asked, first of equal paths, missing members
 * left out and reported, escaped member names. */
static void test_json_project_flat(void) {
  const char *docs[] = {
      "{\"title\": \"T\", \"price\": 9.5, \"tags\": [\"a\", {\"b\": 1}], \"x\\u0079\": {\"n\": null}, "
      "\"q\\\"t\": true}",
      "{}",
      " { \"price\" : -0.0 , \"title\":\"\\\"}\" } ",
      "{\"n\":{\"price\":1,\"title\":[]},\"title\":\"caf\u00e9 \\\\\",\"price\":1e300,\"tags\":[{\"title\":2}]}",
  };
  const char *sets[][4] = {{"price", "title", NULL}, {"title", "title", "price", NULL},
                           {"nope", "price", NULL},  {"xy", "q\"t", "tags", NULL},
                           {"tags", NULL},           {"n.price", "title", NULL}};
  /* Member tables: none for a name with an escape (doc 0) or no member. */
  guint16 table[IXIA_JSON_MEMBER_WORDS * 9]; /* (room for 9: one call below asks for that many) */
  const guint want_members[] = {0, 0, 2, 4};
  for (guint d = 0; d < G_N_ELEMENTS(docs); d++) {
    cJSON *doc = cJSON_Parse(docs[d]);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    for (guint k = 0; k < G_N_ELEMENTS(sets); k++) {
      guint n = 0;
      while (sets[k][n]) n++;
      gboolean all_tree = FALSE, all_text = FALSE;
      cJSON *p = ixia_json_project(doc, sets[k], n, &all_tree);
      cJSON *want = cJSON_Duplicate(p, TRUE);
      GString *out = g_string_new(NULL);
      CU_ASSERT_TRUE(ixia_json_project_text(docs[d], strlen(docs[d]), sets[k], n, out, &all_text));
      cJSON *got = cJSON_Parse(out->str);
      char *a = ixia_json_print(want), *b = ixia_json_print(got);
      if (!a || !b || strcmp(a, b) != 0) fprintf(stderr, "doc %u paths %u: tree %s, text %s\n", d, k, a, out->str);
      CU_ASSERT_TRUE(a && b && strcmp(a, b) == 0);
      CU_ASSERT_EQUAL(all_text, all_tree);
      /* Through the document's member table: the same bytes. */
      guint nm = ixia_json_member_table(docs[d], strlen(docs[d]), table, 8);
      CU_ASSERT_EQUAL(nm, want_members[d]);
      GString *by_table = g_string_new(NULL);
      gboolean all_table = !all_text;
      CU_ASSERT_TRUE(ixia_json_project_table(docs[d], strlen(docs[d]), nm ? table : NULL, nm, sets[k], n,
                                             by_table, &all_table));
      CU_ASSERT_STRING_EQUAL(by_table->str, out->str);
      CU_ASSERT_EQUAL(all_table, all_text);
      g_string_free(by_table, TRUE);
      g_free(a);
      g_free(b);
      cJSON_Delete(got);
      cJSON_Delete(want);
      cJSON_Delete(p);
      g_string_free(out, TRUE);
    }
    cJSON_Delete(doc);
  }
  /* No table past its limits: more members than room, a text over 65,535
   * bytes, anything but an object. */
  GString *wide = g_string_new("{");
  for (int i = 0; i < 9; i++) g_string_append_printf(wide, "%s\"m%d\":%d", i ? "," : "", i, i);
  g_string_append_c(wide, '}');
  CU_ASSERT_EQUAL(ixia_json_member_table(wide->str, wide->len, table, 8), 0);
  CU_ASSERT_EQUAL(ixia_json_member_table(wide->str, wide->len, table, 9), 9);
  GString *big = g_string_new("{\"s\":\"");
  while (big->len < 70000) g_string_append(big, "0123456789");
  g_string_append(big, "\"}");
  CU_ASSERT_EQUAL(ixia_json_member_table(big->str, big->len, table, 8), 0);
  CU_ASSERT_EQUAL(ixia_json_member_table("[1,2]", 5, table, 8), 0);
  CU_ASSERT_EQUAL(ixia_json_member_table("{\"a\":", 5, table, 8), 0);
  g_string_free(wide, TRUE);
  g_string_free(big, TRUE);
  char buf[24];
  CU_ASSERT_EQUAL(ixia_json_format_int(0, buf), 1);
  CU_ASSERT_STRING_EQUAL(buf, "0");
  CU_ASSERT_EQUAL(ixia_json_format_int(-42, buf), 3);
  CU_ASSERT_STRING_EQUAL(buf, "-42");
  ixia_json_format_int(G_MININT64, buf);
  CU_ASSERT_STRING_EQUAL(buf, "-9223372036854775808");
  ixia_json_format_int(G_MAXINT64, buf);
  CU_ASSERT_STRING_EQUAL(buf, "9223372036854775807");
  /* Every digit count and sign, around each power of ten, and at random:
   * as printf writes them. */
  GRand *r = g_rand_new_with_seed(11);
  for (int i = 0; i < 20000; i++) {
    gint64 v;
    if (i < 19 * 6) {
      gint64 p10 = 1;
      for (int k = 0; k < i / 6; k++) p10 *= 10;
      v = (p10 - 1 + (i % 3)) * ((i / 3) % 2 ? -1 : 1);
    } else {
      v = (gint64)((guint64)g_rand_int(r) << 32 | g_rand_int(r)) >> g_rand_int_range(r, 0, 64);
    }
    char want[32];
    g_snprintf(want, sizeof want, "%" G_GINT64_FORMAT, v);
    CU_ASSERT_EQUAL(ixia_json_format_int(v, buf), strlen(want));
    if (strcmp(buf, want) != 0) fprintf(stderr, "format_int(%s) gave %s\n", want, buf);
    CU_ASSERT_STRING_EQUAL(buf, want);
  }
  g_rand_free(r);
}

/* A walk that leaves values to its caller: an array read element by
 * element where it stands, the outer walk resuming past its bracket, gives
 * the same members as the plain walk; text cut anywhere is refused by
 * both, never read past. */
static void test_json_walk_peek(void) {
  const char *text = "{ \"a\" : [ {\"x\":\"]}\"} , [1,2], \"s\" ] ,\"b\":{\"c\":[]},\"n\":null,\"e\":[] }";
  size_t len = strlen(text);
  for (size_t cut = 1; cut <= len; cut++) {
    char *t = g_memdup2(text, cut); /* exactly as long as the cut, for the sanitizers */
    GString *plain = g_string_new(NULL), *peeked = g_string_new(NULL);
    ixia_json_walk_t w;
    const char *k, *ke, *v, *ve;
    int r = -2, pr = -2;
    if (ixia_json_members_open(&w, t, cut))
      while ((r = ixia_json_members_next(&w, &k, &ke, &v, &ve)) > 0)
        g_string_append_printf(plain, "%.*s=%.*s;", (int)(ke - k), k, (int)(ve - v), v);
    if (ixia_json_members_open(&w, t, cut)) {
      while ((pr = ixia_json_members_peek(&w, &k, &ke, &v)) > 0) {
        ixia_json_walk_t a;
        if (*v == '[' && ixia_json_elements_open(&a, v, (size_t)(t + cut - v))) {
          const char *x;
          int ar;
          GString *els = g_string_new(NULL);
          while ((ar = ixia_json_elements_peek(&a, &x)) > 0) {
            const char *xe = ixia_json_value_end(&a, x);
            if (!xe) {
              ar = -1;
              break;
            }
            g_string_append_printf(els, "%s%.*s", els->len ? "," : "", (int)(xe - x), x);
            ixia_json_walk_resume(&a, xe);
          }
          if (ar < 0) {
            pr = -1;
            g_string_free(els, TRUE);
            break;
          }
          ixia_json_walk_resume(&w, a.p);
          /* (The plain walk gives the array's text: compared without white space.) */
          g_string_append_printf(peeked, "%.*s=[%s];", (int)(ke - k), k, els->str);
          g_string_free(els, TRUE);
          continue;
        }
        if (!(ve = ixia_json_value_end(&w, v))) {
          pr = -1;
          break;
        }
        ixia_json_walk_resume(&w, ve);
        g_string_append_printf(peeked, "%.*s=%.*s;", (int)(ke - k), k, (int)(ve - v), v);
      }
    }
    CU_ASSERT_EQUAL(r < 0, pr < 0);
    if (cut == len) {
      CU_ASSERT_EQUAL(r, 0);
      CU_ASSERT_EQUAL(pr, 0);
      CU_ASSERT_STRING_EQUAL(plain->str, "\"a\"=[ {\"x\":\"]}\"} , [1,2], \"s\" ];\"b\"={\"c\":[]};\"n\"=null;\"e\"=[];");
      CU_ASSERT_STRING_EQUAL(peeked->str, "\"a\"=[{\"x\":\"]}\"},[1,2],\"s\"];\"b\"={\"c\":[]};\"n\"=null;\"e\"=[];");
    } else {
      CU_ASSERT_TRUE(r != 0 && pr != 0); /* an object cut short never ends */
    }
    g_string_free(plain, TRUE);
    g_string_free(peeked, TRUE);
    g_free(t);
  }
}

/* Strings of every length up to 70 with escapes anywhere (the scanner
 * takes sixteen bytes a step, so escapes fall on each side of a step's
 * edge): the text projection agrees with the tree, and a document cut
 * short inside its last member does not find it, without reading past its
 * end (the copy is exactly as long as the cut, for the sanitizers). */
static void test_json_project_strings(void) {
  static const char *const esc[] = {"\\\"", "\\\\", "\\n", "\\u0041", "\\/"};
  GRand *r = g_rand_new_with_seed(7);
  for (int round = 0; round < 400; round++) {
    GString *d = g_string_new("{");
    char names[4][8];
    for (int m = 0; m < 4; m++) {
      g_snprintf(names[m], sizeof names[m], "m%d", m);
      g_string_append_printf(d, "%s\"%s\":\"", m ? "," : "", names[m]);
      gint len = g_rand_int_range(r, 0, 71);
      for (gint i = 0; i < len; i++) {
        if (g_rand_int_range(r, 0, 6) == 0) g_string_append(d, esc[g_rand_int_range(r, 0, G_N_ELEMENTS(esc))]);
        else g_string_append_c(d, (char)('a' + g_rand_int_range(r, 0, 26)));
      }
      g_string_append_c(d, '"');
    }
    g_string_append_c(d, '}');
    cJSON *doc = cJSON_Parse(d->str);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    const char *want_paths[2] = {names[g_rand_int_range(r, 0, 4)], names[3]};
    gboolean all = FALSE;
    cJSON *want = ixia_json_project(doc, want_paths, 2, &all);
    char *a = ixia_json_print(want);
    GString *out = g_string_new(NULL);
    CU_ASSERT_TRUE(ixia_json_project_text(d->str, d->len, want_paths, 2, out, &all));
    cJSON *got = cJSON_Parse(out->str);
    char *b = ixia_json_print(got);
    if (!b || strcmp(a, b) != 0) fprintf(stderr, "doc %s: tree %s, text %s\n", d->str, a, out->str);
    CU_ASSERT_TRUE(b && strcmp(a, b) == 0);
    /* Cut short before the last member's closing quote: it is never found. */
    for (gsize cut = 1; cut < d->len - 1; cut += 1 + (gsize)g_rand_int_range(r, 0, 3)) {
      char *part = g_memdup2(d->str, cut);
      g_string_truncate(out, 0);
      const char *last[1] = {names[3]};
      CU_ASSERT_FALSE(ixia_json_project_text(part, cut, last, 1, out, &all) && all);
      g_free(part);
    }
    g_free(a);
    g_free(b);
    cJSON_Delete(got);
    cJSON_Delete(want);
    cJSON_Delete(doc);
    g_string_free(out, TRUE);
    g_string_free(d, TRUE);
  }
  g_rand_free(r);
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
  /* RFC 3339 timestamps; declared fields inside arrays of objects. */
  const char *good2 = "{\"updated_at\":[\"2024-05-01T12:30:00Z\",1770369490],"
                      "\"seller\":[{\"ok\":true},{\"ok\":[false,null]},{\"other\":1}]}";
  d = cJSON_Parse(good2);
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
      {"{\"updated_at\":\"yesterday\"}", "updated_at", "not a timestamp (whole epoch seconds from 0 to 10^12, or an RFC 3339 string"},
      {"{\"updated_at\":\"1969-12-31T23:59:59Z\"}", "updated_at", "outside the range of timestamps"},
      {"{\"seller\":[{\"ok\":true},{\"ok\":5}]}", "seller.ok", "but seller[1].ok is an integer"},
      {"{\"seller\":[[{\"ok\":[true,\"x\"]}]]}", "seller.ok", "but seller[0][0].ok[1] is a string"},
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
  ixia_error_destroy(e), e = NULL;
  ixia_schema_unref(a);
  ixia_schema_unref(b);
  ixia_schema_unref(c);
  /* A text field's analyzer is part of what it indexes: it cannot change;
   * positions can be switched (a backfill re-indexes older documents). */
  const char *t1 = "{\"namespace\":\"shop\",\"table\":\"products\",\"indexes\":["
                   "{\"field\":\"title\",\"type\":\"text\"}]}";
  const char *t2 = "{\"namespace\":\"shop\",\"table\":\"products\",\"indexes\":["
                   "{\"field\":\"title\",\"type\":\"text\",\"analyzer\":\"english\"}]}";
  const char *t3 = "{\"namespace\":\"shop\",\"table\":\"products\",\"indexes\":["
                   "{\"field\":\"title\",\"type\":\"text\",\"analyzer\":\"standard\",\"positions\":true}]}";
  a = ixia_schema_parse(t1, strlen(t1), NULL);
  b = ixia_schema_parse(t2, strlen(t2), NULL);
  c = ixia_schema_parse(t3, strlen(t3), NULL);
  CU_ASSERT_FALSE(ixia_schema_check_evolution(a, b, &e));
  CU_ASSERT_PTR_NOT_NULL(e && strstr(e->message, "'standard'") && strstr(e->message, "'english'"));
  ixia_error_destroy(e), e = NULL;
  CU_ASSERT_TRUE(ixia_schema_check_evolution(a, c, &e));
  CU_ASSERT_TRUE(ixia_schema_check_evolution(c, a, &e));
  ixia_schema_unref(a);
  ixia_schema_unref(b);
  ixia_schema_unref(c);
}

static void test_schema_analyzers(void) {
  const char *j = "{\"namespace\":\"shop\",\"table\":\"t\",\"indexes\":["
                  "{\"field\":\"a\",\"type\":\"text\"},"
                  "{\"field\":\"b\",\"type\":\"text\",\"analyzer\":\"french\",\"positions\":true},"
                  "{\"field\":\"c\",\"type\":\"text\",\"analyzer\":\"standard\",\"positions\":false}]}";
  ixia_error_t *e = NULL;
  ixia_schema_t *s = ixia_schema_parse(j, strlen(j), &e);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  CU_ASSERT_STRING_EQUAL(s->indexes[0].analyzer, "standard");
  CU_ASSERT_FALSE(s->indexes[0].positions);
  CU_ASSERT_STRING_EQUAL(s->indexes[1].analyzer, "french");
  CU_ASSERT_TRUE(s->indexes[1].positions);
  /* The canonical text names only what differs from the defaults. */
  CU_ASSERT_STRING_EQUAL(s->json, "{\"namespace\":\"shop\",\"table\":\"t\",\"ttl_seconds\":0,"
                                  "\"cache_ttl_seconds\":0,\"indexes\":[{\"field\":\"a\",\"type\":\"text\"},"
                                  "{\"field\":\"b\",\"type\":\"text\",\"analyzer\":\"french\",\"positions\":true},"
                                  "{\"field\":\"c\",\"type\":\"text\"}]}");
  ixia_schema_t *again = ixia_schema_parse(s->json, strlen(s->json), &e);
  CU_ASSERT_TRUE(again && strcmp(again->json, s->json) == 0);
  ixia_schema_unref(again);
  ixia_schema_unref(s);
  struct { const char *index, *needle; } bad[] = {
      {"{\"field\":\"a\",\"type\":\"text\",\"analyzer\":\"klingon\"}", "unknown analyzer 'klingon' (standard, arabic"},
      {"{\"field\":\"a\",\"type\":\"text\",\"analyzer\":7}", "unknown analyzer"},
      {"{\"field\":\"a\",\"type\":\"keyword\",\"analyzer\":\"english\"}", "\"analyzer\" applies to text fields only"},
      {"{\"field\":\"a\",\"type\":\"long\",\"positions\":true}", "\"positions\" applies to text fields only"},
      {"{\"field\":\"a\",\"type\":\"text\",\"positions\":1}", "\"positions\" must be true or false"},
      {"{\"field\":\"a\",\"type\":\"text\",\"stem\":true}", "unknown member 'stem'"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    char *js = g_strdup_printf("{\"namespace\":\"shop\",\"table\":\"t\",\"indexes\":[%s]}", bad[i].index);
    s = ixia_schema_parse(js, strlen(js), &e);
    CU_ASSERT_PTR_NULL(s);
    if (!e || !strstr(e->message, bad[i].needle)) fprintf(stderr, "\n  %s: %s\n", js, e ? e->message : "(none)");
    CU_ASSERT_PTR_NOT_NULL(e && strstr(e->message, bad[i].needle));
    ixia_error_destroy(e), e = NULL;
    ixia_schema_unref(s);
    g_free(js);
  }
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
static _Atomic gint type_race_go;
static gpointer type_racer(gpointer out) {
  while (!atomic_load(&type_race_go)) {
  }
  *(GType *)out = IXIA_TYPE_KEY_VERSION_PAGE;
  return NULL;
}

static void test_thrift_types_register_once(void) {
  CU_ASSERT_EQUAL_FATAL(g_type_from_name("IxiaKeyVersionPageType"), 0);
  GType got[TYPE_RACERS] = {0};
  GThread *t[TYPE_RACERS];
  for (int i = 0; i < TYPE_RACERS; i++) t[i] = g_thread_new("type-racer", type_racer, &got[i]);
  atomic_store(&type_race_go, 1);
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

/* Block caches split into shards of at least 32 MiB (a whole-key filter
 * of a 64 MiB table is ~1.2 MiB; 4 MiB shards thrashed them), up to 64. */
static void test_rocksdb_cache_shards(void) {
  CU_ASSERT_EQUAL(ixia_rocksdb_cache_shard_bits((size_t)8 << 20), 0);
  CU_ASSERT_EQUAL(ixia_rocksdb_cache_shard_bits((size_t)64 << 20), 1);
  CU_ASSERT_EQUAL(ixia_rocksdb_cache_shard_bits((size_t)256 << 20), 3); /* index.block_cache_mb */
  CU_ASSERT_EQUAL(ixia_rocksdb_cache_shard_bits((size_t)3 << 30), 6);
  CU_ASSERT_EQUAL(ixia_rocksdb_cache_shard_bits((size_t)1 << 40), 6);
  for (size_t mb = 32; mb <= 8192; mb *= 2) {
    int bits = ixia_rocksdb_cache_shard_bits(mb << 20);
    CU_ASSERT_TRUE(((mb << 20) >> bits) >= IXIA_ROCKSDB_CACHE_MIN_SHARD);
  }
  /* RocksDB's C API reports a cache's capacity but not its shard count:
   * the split itself is checked through the function above only. */
  rocksdb_cache_t *c = ixia_rocksdb_cache_new((size_t)256 << 20);
  CU_ASSERT_EQUAL(rocksdb_cache_get_capacity(c), (size_t)256 << 20);
  rocksdb_cache_destroy(c);
}

/* ---- the get call coded by hand (wire.h) ---- */

/* A get call as the generated code writes it: the message header, then the
 * generated argument struct (whose writer always writes the field list,
 * empty when fields is NULL). */
static GByteArray *get_call(guint8 type, const char *ns, const char *table, const char *key,
                            const char *const *fields, gint32 seqid) {
  IxiaIxiaGetArgs *a = g_object_new(IXIA_TYPE_IXIA_GET_ARGS, NULL);
  g_free(a->ns), g_free(a->table), g_free(a->key);
  a->ns = g_strdup(ns), a->__isset_ns = ns != NULL;
  a->table = g_strdup(table), a->__isset_table = table != NULL;
  a->key = g_strdup(key), a->__isset_key = key != NULL;
  if (fields) {
    for (const char *const *f = fields; *f; f++) g_ptr_array_add(a->fields, g_strdup(*f));
    a->__isset_fields = TRUE;
  } else {
    g_clear_pointer(&a->fields, g_ptr_array_unref);
  }
  GByteArray *args = ixia_thrift_serialize(THRIFT_STRUCT(a), FALSE, NULL);
  g_object_unref(a);
  GByteArray *f = g_byte_array_new();
  ixia_bytes_append32(f, 0x80010000u | type);
  ixia_bytes_append32(f, 3);
  g_byte_array_append(f, (const guint8 *)"get", 3);
  ixia_bytes_append32(f, (guint32)seqid);
  g_byte_array_append(f, args->data, args->len);
  g_byte_array_unref(args);
  return f;
}

static gboolean read_get(const GByteArray *f, ixia_wire_get_t *call) {
  GByteArray *scratch = g_byte_array_new();
  static GByteArray *keep; /* the strings of *call live in it until the next read */
  gboolean ok = ixia_wire_read_get(f->data, f->len, scratch, call);
  if (keep) g_byte_array_unref(keep);
  keep = scratch;
  return ok;
}

/* A message header (strict binary protocol) for `name`, then body. */
static GByteArray *message(guint8 type, const char *name, gint32 seqid, const GByteArray *body) {
  GByteArray *m = g_byte_array_new();
  ixia_bytes_append32(m, 0x80010000u | type);
  ixia_bytes_append32(m, (guint32)strlen(name));
  g_byte_array_append(m, (const guint8 *)name, (guint)strlen(name));
  ixia_bytes_append32(m, (guint32)seqid);
  g_byte_array_append(m, body->data, body->len);
  return m;
}

/* The API's shard calls from its I/O threads, coded by hand: the call is
 * the generated client's bytes, and every answer the generated server
 * writes (a string, an IxiaError, an application exception) reads back;
 * any cut of one, or another method's, does not. */
static void test_wire_string_call_by_hand(void) {
  const char *req = "{\"query\": {\"filter\": \"caf\u00e9\"}}";
  IxiaSearchSearchArgs *args = g_object_new(IXIA_TYPE_SEARCH_SEARCH_ARGS, NULL);
  args->request_json = g_strdup(req);
  args->__isset_request_json = TRUE;
  GByteArray *body = ixia_thrift_serialize(THRIFT_STRUCT(args), FALSE, NULL);
  GByteArray *want = message(T_CALL, "search", 77, body);
  GByteArray *mine = g_byte_array_new();
  ixia_wire_append_string_call(mine, "search", 77, req, strlen(req));
  CU_ASSERT_TRUE(mine->len == want->len && memcmp(mine->data, want->data, want->len) == 0);
  g_byte_array_unref(mine);
  g_byte_array_unref(want);
  g_byte_array_unref(body);
  g_object_unref(args);

  const char *v, *msg;
  gsize vlen, mlen;
  gint32 code;
  /* a string */
  IxiaSearchSearchResult *r = g_object_new(IXIA_TYPE_SEARCH_SEARCH_RESULT, NULL);
  r->success = g_strdup("{\"hits\": []}");
  r->__isset_success = TRUE;
  body = ixia_thrift_serialize(THRIFT_STRUCT(r), FALSE, NULL);
  GByteArray *ok = message(T_REPLY, "search", 0, body);
  CU_ASSERT_EQUAL(ixia_wire_read_string_reply(ok->data, ok->len, "search", &v, &vlen, &code, &msg, &mlen),
                  IXIA_WIRE_REPLY_OK);
  CU_ASSERT_TRUE(vlen == strlen(r->success) && memcmp(v, r->success, vlen) == 0);
  CU_ASSERT_EQUAL(ixia_wire_read_string_reply(ok->data, ok->len, "status", &v, &vlen, &code, &msg, &mlen),
                  IXIA_WIRE_REPLY_BAD);
  g_byte_array_unref(body);
  g_object_unref(r);
  /* an IxiaError */
  r = g_object_new(IXIA_TYPE_SEARCH_SEARCH_RESULT, NULL);
  r->err = g_object_new(IXIA_TYPE_IXIA_ERROR, "code", (gint32)IXIA_EDEADLINE, "message", "too slow", NULL);
  r->__isset_err = TRUE;
  body = ixia_thrift_serialize(THRIFT_STRUCT(r), FALSE, NULL);
  GByteArray *xe = message(T_REPLY, "search", 0, body);
  CU_ASSERT_EQUAL(ixia_wire_read_string_reply(xe->data, xe->len, "search", &v, &vlen, &code, &msg, &mlen),
                  IXIA_WIRE_REPLY_ERROR);
  CU_ASSERT_EQUAL(code, IXIA_EDEADLINE);
  CU_ASSERT_TRUE(mlen == 8 && memcmp(msg, "too slow", 8) == 0);
  g_byte_array_unref(body);
  g_object_unref(r);
  /* the server's own error answer, as ixia_wire_append_error writes it */
  GByteArray *ours = g_byte_array_new();
  ixia_wire_append_error(ours, "search", 6, 0, IXIA_ETOOLARGE, "over the frame limit");
  CU_ASSERT_EQUAL(ixia_wire_read_string_reply(ours->data, ours->len, "search", &v, &vlen, &code, &msg, &mlen),
                  IXIA_WIRE_REPLY_ERROR);
  CU_ASSERT_EQUAL(code, IXIA_ETOOLARGE);
  /* an application exception */
  ThriftApplicationException *ax = g_object_new(THRIFT_TYPE_APPLICATION_EXCEPTION, "type", 1,
                                                "message", "unknown method", NULL);
  body = ixia_thrift_serialize(THRIFT_STRUCT(ax), FALSE, NULL);
  GByteArray *ex = message(T_EXCEPTION, "search", 0, body);
  CU_ASSERT_EQUAL(ixia_wire_read_string_reply(ex->data, ex->len, "search", &v, &vlen, &code, &msg, &mlen),
                  IXIA_WIRE_REPLY_EXCEPTION);
  CU_ASSERT_TRUE(mlen == 14 && memcmp(msg, "unknown method", 14) == 0);
  g_byte_array_unref(body);
  g_object_unref(ax);
  GByteArray *all[] = {ok, xe, ours, ex};
  for (guint i = 0; i < G_N_ELEMENTS(all); i++) {
    for (guint cut = 0; cut < all[i]->len; cut++)
      CU_ASSERT_EQUAL(ixia_wire_read_string_reply(all[i]->data, cut, "search", &v, &vlen, &code, &msg, &mlen),
                      IXIA_WIRE_REPLY_BAD);
    g_byte_array_unref(all[i]);
  }
}

/* The serving side of such calls (a shard's search_page, the API's query
 * answered from their frames): the generated client's call reads back with
 * its argument NUL-terminated in place; every other shape (a cut, another
 * method, a one-way call, a second field, a NUL inside) is left to the
 * processor; the reply is byte for byte what the generated server writes. */
static void test_wire_string_call_served_by_hand(void) {
  const char *req = "{\"query\": {\"filter\": \"caf\u00e9\"}}";
  GByteArray *call = g_byte_array_new();
  ixia_wire_append_string_call(call, "search_page", 41, req, strlen(req));
  gint32 seqid = 0;
  const char *arg = NULL;
  gsize len = 0;
  CU_ASSERT_TRUE(ixia_wire_read_string_call(call->data, call->len, "search_page", &seqid, &arg, &len));
  CU_ASSERT_EQUAL(seqid, 41);
  CU_ASSERT_TRUE(len == strlen(req) && arg && strcmp(arg, req) == 0);
  CU_ASSERT_FALSE(ixia_wire_read_string_call(call->data, call->len, "search", &seqid, &arg, &len));
  for (guint cut = 0; cut < call->len; cut++)
    CU_ASSERT_FALSE(ixia_wire_read_string_call(call->data, cut, "search_page", &seqid, &arg, &len));
  GByteArray *odd = g_byte_array_new();
  g_byte_array_append(odd, call->data, call->len);
  odd->data[3] = T_ONEWAY;
  CU_ASSERT_FALSE(ixia_wire_read_string_call(odd->data, odd->len, "search_page", &seqid, &arg, &len));
  /* a second field before the stop */
  g_byte_array_set_size(odd, 0);
  g_byte_array_append(odd, call->data, call->len - 1);
  const guint8 field2[] = {T_I32, 0, 2, 0, 0, 0, 7, T_STOP};
  g_byte_array_append(odd, field2, sizeof field2);
  CU_ASSERT_FALSE(ixia_wire_read_string_call(odd->data, odd->len, "search_page", &seqid, &arg, &len));
  /* a NUL inside the argument */
  g_byte_array_set_size(odd, 0);
  ixia_wire_append_string_call(odd, "search_page", 1, "ab\0cd", 5);
  CU_ASSERT_FALSE(ixia_wire_read_string_call(odd->data, odd->len, "search_page", &seqid, &arg, &len));
  g_byte_array_unref(odd);
  g_byte_array_unref(call);

  /* the reply of a binary result, as the generated server writes it */
  const guint8 page[] = {'I', 'X', 'P', '1', 0, 0, 0, 0, 0xff};
  IxiaSearchSearchPageResult *r = g_object_new(IXIA_TYPE_SEARCH_SEARCH_PAGE_RESULT, NULL);
  g_byte_array_append(r->success ? r->success : (r->success = g_byte_array_new()), page, sizeof page);
  r->__isset_success = TRUE;
  GByteArray *body = ixia_thrift_serialize(THRIFT_STRUCT(r), FALSE, NULL);
  GByteArray *want = message(T_REPLY, "search_page", 41, body);
  GByteArray *mine = g_byte_array_new();
  ixia_wire_append_string_reply(mine, "search_page", 41, page, sizeof page);
  CU_ASSERT_TRUE(mine->len == want->len && memcmp(mine->data, want->data, want->len) == 0);
  const char *v, *msg;
  gsize vlen, mlen;
  gint32 code;
  CU_ASSERT_EQUAL(ixia_wire_read_string_reply(mine->data, mine->len, "search_page", &v, &vlen, &code, &msg, &mlen),
                  IXIA_WIRE_REPLY_OK);
  CU_ASSERT_TRUE(vlen == sizeof page && memcmp(v, page, vlen) == 0);
  g_byte_array_unref(mine);
  g_byte_array_unref(want);
  g_byte_array_unref(body);
  g_object_unref(r);
}

/* A packed page of hits (hitpage.h) reads back as written: keys (empty,
 * non-ASCII, long), versions and ids at their extremes, sort values
 * (missing, empty, binary with NULs, 1,000 bytes) and scores, and the
 * page's object after them; every cut of it and every byte changed to
 * each of a few values either reads as a page or fails, never past its
 * end (ASan watches the reads). */
static void test_hitpage_round_trip(void) {
  const char *keys[] = {"", "k", "caf\xc3\xa9 \"q\" \\", NULL};
  char *long_key = g_strnfill(5000, 'x');
  guint8 bin[1000];
  for (guint i = 0; i < sizeof bin; i++) bin[i] = (guint8)(i * 7);
  const char *meta = "{\"total\":3,\"aggs\":null}";
  for (guint32 flags = 0; flags < 4; flags++) {
    GByteArray *page = g_byte_array_new();
    ixia_hitpage_begin(page, flags);
    guint n = 0;
    for (guint i = 0; i < 4; i++, n++) {
      const char *key = keys[i] ? keys[i] : long_key;
      ixia_hitpage_put_hit(page, key, strlen(key), i == 1 ? G_MAXINT64 : -(gint64)i, i == 2 ? G_MAXUINT32 : i);
      if (flags & IXIA_HITPAGE_SORT) {
        ixia_hitpage_put_count(page, i);
        for (guint k = 0; k < i; k++) ixia_hitpage_put_value(page, k != 1, bin, k == 0 ? 0 : k == 2 ? 1000 : 3);
      }
      if (flags & IXIA_HITPAGE_SCORE) ixia_hitpage_put_score(page, i == 3 ? -0.25 : (double)i * 1e300);
    }
    ixia_hitpage_finish(page, n, meta, strlen(meta));

    ixia_hitpage_t pg;
    const char *m;
    gsize ml;
    CU_ASSERT_TRUE_FATAL(ixia_hitpage_open(&pg, page->data, page->len, &m, &ml));
    CU_ASSERT_TRUE(ml == strlen(meta) && memcmp(m, meta, ml) == 0);
    ixia_hitpage_hit_t h;
    for (guint i = 0; i < 4; i++) {
      CU_ASSERT_EQUAL_FATAL(ixia_hitpage_next(&pg, &h), 1);
      const char *key = keys[i] ? keys[i] : long_key;
      CU_ASSERT_STRING_EQUAL(h.key, key);
      CU_ASSERT_EQUAL(h.key_len, strlen(key));
      CU_ASSERT_EQUAL(h.version, i == 1 ? G_MAXINT64 : -(gint64)i);
      CU_ASSERT_EQUAL(h.id, i == 2 ? G_MAXUINT32 : i);
      CU_ASSERT_EQUAL(h.n_sort, flags & IXIA_HITPAGE_SORT ? i : 0);
      const guint8 *p = h.sort;
      for (guint k = 0; k < h.n_sort; k++) {
        const guint8 *v;
        gsize len;
        gboolean has = ixia_hitpage_value(&p, &v, &len);
        CU_ASSERT_EQUAL(has, k != 1);
        CU_ASSERT_EQUAL(len, k == 1 ? 0 : k == 0 ? 0 : k == 2 ? 1000 : 3);
        if (has && len) CU_ASSERT_EQUAL(memcmp(v, bin, len), 0);
      }
      CU_ASSERT_EQUAL(h.has_score, (flags & IXIA_HITPAGE_SCORE) != 0);
      if (h.has_score) CU_ASSERT_EQUAL(h.score, i == 3 ? -0.25 : (double)i * 1e300);
    }
    CU_ASSERT_EQUAL(ixia_hitpage_next(&pg, &h), 0);

    /* Every cut, and bytes changed: read to the end or failed, in bounds
     * (each read from a copy of exactly that many bytes). */
    guint reads = 0;
    for (guint cut = 0; cut < page->len; cut++) {
      guint8 *copy = g_memdup2(page->data, cut);
      if (ixia_hitpage_open(&pg, copy, cut, &m, &ml)) {
        int r;
        while ((r = ixia_hitpage_next(&pg, &h)) > 0) reads++;
        CU_ASSERT_EQUAL(r, -1); /* a cut page never ends cleanly */
      }
      g_free(copy);
    }
    const guint8 with[] = {0x00, 0x01, 0x02, 0x7f, 0xff};
    for (guint at = 0; at < MIN(page->len, 6000u); at += at < 64 ? 1 : 97) {
      for (guint w = 0; w < G_N_ELEMENTS(with); w++) {
        guint8 *copy = g_memdup2(page->data, page->len);
        copy[at] = with[w];
        if (ixia_hitpage_open(&pg, copy, page->len, &m, &ml)) {
          int r;
          while ((r = ixia_hitpage_next(&pg, &h)) > 0) {
            const guint8 *p = h.sort, *v;
            gsize len;
            for (guint k = 0; k < h.n_sort; k++) ixia_hitpage_value(&p, &v, &len);
            reads++;
          }
        }
        g_free(copy);
      }
    }
    CU_ASSERT_TRUE(reads > 0);
    g_byte_array_unref(page);
  }
  g_free(long_key);
}

static void test_wire_get_by_hand(void) {
  ixia_thrift_init();
  /* Calls the generated client writes are read whole, whatever fields says. */
  const char *two[] = {"price", "seller.name", NULL}, *none[] = {NULL};
  const char *const *cases[] = {NULL, none, two};
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    GByteArray *f = get_call(T_CALL, "shop", "products", "p:1 ü", cases[i], 77 + (gint32)i);
    ixia_wire_get_t call;
    CU_ASSERT_TRUE_FATAL(read_get(f, &call));
    CU_ASSERT_EQUAL(call.seqid, 77 + (gint32)i);
    CU_ASSERT_STRING_EQUAL(call.ns, "shop");
    CU_ASSERT_STRING_EQUAL(call.table, "products");
    CU_ASSERT_STRING_EQUAL(call.key, "p:1 ü");
    CU_ASSERT_EQUAL(call.key_len, strlen("p:1 ü"));
    guint n = 0;
    while (call.fields[n]) n++;
    CU_ASSERT_EQUAL(n, i == 2 ? 2u : 0u);
    if (i == 2) {
      CU_ASSERT_STRING_EQUAL(call.fields[0], "price");
      CU_ASSERT_STRING_EQUAL(call.fields[1], "seller.name");
    }
    /* Any cut of the frame is left to the processor, never read past. */
    for (guint cut = 0; cut < f->len; cut++) {
      GByteArray *part = g_byte_array_new();
      g_byte_array_append(part, f->data, cut);
      CU_ASSERT_FALSE(read_get(part, &call));
      g_byte_array_unref(part);
    }
    g_byte_array_unref(f);
  }
  /* Shapes it leaves to the processor (which answers them as it always did). */
  ixia_wire_get_t call;
  GByteArray *f = get_call(T_ONEWAY, "shop", "products", "k", NULL, 1);
  CU_ASSERT_FALSE(read_get(f, &call));
  g_byte_array_unref(f);
  f = g_byte_array_new(); /* no key (field 3): the processor says "missing argument key" */
  const guint8 no_key[] = {0x80, 1, 0, T_CALL, 0, 0, 0, 3, 'g', 'e', 't', 0, 0, 0, 1,
                           T_STRING, 0, 1, 0, 0, 0, 1, 's', T_STRING, 0, 2, 0, 0, 0, 1, 't', T_STOP};
  g_byte_array_append(f, no_key, sizeof no_key);
  CU_ASSERT_FALSE(read_get(f, &call));
  const guint8 key[] = {T_STRING, 0, 3, 0, 0, 0, 1, 'k', T_STOP};
  g_byte_array_set_size(f, f->len - 1);
  g_byte_array_append(f, key, sizeof key);
  CU_ASSERT_TRUE(read_get(f, &call)); /* the same with it */
  g_byte_array_unref(f);
  f = get_call(T_CALL, "shop", "products", "k", NULL, 1);
  f->data[10] = 'x'; /* "gex" */
  CU_ASSERT_FALSE(read_get(f, &call));
  f->data[10] = 't';
  CU_ASSERT_TRUE(read_get(f, &call));
  const guint8 extra[] = {T_I32, 0, 5, 0, 0, 0, 1}; /* an unknown field before the stop */
  GByteArray *g = g_byte_array_new();
  g_byte_array_append(g, f->data, f->len - 1);
  g_byte_array_append(g, extra, sizeof extra);
  g_byte_array_append(g, f->data + f->len - 1, 1);
  CU_ASSERT_FALSE(read_get(g, &call));
  g_byte_array_unref(g);
  const guint8 again[] = {T_STRING, 0, 1, 0, 0, 0, 1, 'x'}; /* ns given twice */
  g = g_byte_array_new();
  g_byte_array_append(g, f->data, f->len - 1);
  g_byte_array_append(g, again, sizeof again);
  g_byte_array_append(g, f->data + f->len - 1, 1);
  CU_ASSERT_FALSE(read_get(g, &call));
  g_byte_array_unref(g);
  const guint8 trail = 0;
  g_byte_array_append(f, &trail, 1); /* a byte after the arguments */
  CU_ASSERT_FALSE(read_get(f, &call));
  g_byte_array_unref(f);
  f = get_call(T_CALL, "shop", "products", "aXb", NULL, 1);
  for (guint i = 0; i + 3 <= f->len; i++)
    if (memcmp(f->data + i, "aXb", 3) == 0) f->data[i + 1] = 0;
  CU_ASSERT_FALSE(read_get(f, &call)); /* c_glib would cut the key at the NUL */
  g_byte_array_unref(f);
  /* Arguments of other types (read as "missing" by the generated reader):
   * ns as an i32, the fields as a set, a list of i32. */
  const guint8 ns_i32[] = {0x80, 1, 0, T_CALL, 0, 0, 0, 3, 'g', 'e', 't', 0, 0, 0, 1,
                           T_I32, 0, 1, 0, 0, 0, 7, T_STRING, 0, 2, 0, 0, 0, 1, 't',
                           T_STRING, 0, 3, 0, 0, 0, 1, 'k', T_STOP};
  const guint8 set_fields[] = {0x80, 1, 0, T_CALL, 0, 0, 0, 3, 'g', 'e', 't', 0, 0, 0, 1,
                               T_STRING, 0, 1, 0, 0, 0, 1, 's', T_STRING, 0, 2, 0, 0, 0, 1, 't',
                               T_STRING, 0, 3, 0, 0, 0, 1, 'k', T_SET, 0, 4, T_STRING, 0, 0, 0, 0,
                               T_STOP};
  const guint8 i32_list[] = {0x80, 1, 0, T_CALL, 0, 0, 0, 3, 'g', 'e', 't', 0, 0, 0, 1,
                             T_STRING, 0, 1, 0, 0, 0, 1, 's', T_STRING, 0, 2, 0, 0, 0, 1, 't',
                             T_STRING, 0, 3, 0, 0, 0, 1, 'k', T_LIST, 0, 4, T_I32, 0, 0, 0, 1,
                             0, 0, 0, 9, T_STOP};
  const struct { const guint8 *b; gsize n; } typed[] = {
      {ns_i32, sizeof ns_i32}, {set_fields, sizeof set_fields}, {i32_list, sizeof i32_list}};
  for (guint i = 0; i < G_N_ELEMENTS(typed); i++) {
    f = g_byte_array_new();
    g_byte_array_append(f, typed[i].b, (guint)typed[i].n);
    CU_ASSERT_FALSE(read_get(f, &call));
    g_byte_array_unref(f);
  }
  /* A frame over IXIA_WIRE_GET_MAX_FRAME (a 70,000-byte key): the
   * processor's (its "key is over limits.max_key_bytes" error). */
  char *long_key = g_strnfill(70000, 'k');
  f = get_call(T_CALL, "shop", "products", long_key, NULL, 1);
  CU_ASSERT_FALSE(read_get(f, &call));
  g_byte_array_unref(f);
  g_free(long_key);
  GPtrArray *many = g_ptr_array_new_with_free_func(g_free);
  for (guint i = 0; i <= IXIA_WIRE_GET_MAX_FIELDS; i++) g_ptr_array_add(many, g_strdup_printf("f%u", i));
  g_ptr_array_add(many, NULL);
  f = get_call(T_CALL, "shop", "products", "k", (const char *const *)many->pdata, 1);
  CU_ASSERT_FALSE(read_get(f, &call));
  g_byte_array_unref(f);
  g_ptr_array_unref(many);

  /* The client's call: the generated client's bytes (which always send the
   * list, empty when there are no fields). */
  for (guint i = 1; i < G_N_ELEMENTS(cases); i++) {
    GByteArray *want = get_call(T_CALL, "shop", "products", "p:1 ü", cases[i], 0);
    GByteArray *mine = g_byte_array_new();
    ixia_wire_append_get_call(mine, 0, "shop", "products", "p:1 ü", i == 1 ? NULL : cases[i]);
    CU_ASSERT_EQUAL(mine->len, want->len);
    CU_ASSERT_TRUE(mine->len == want->len && memcmp(mine->data, want->data, want->len) == 0);
    g_byte_array_unref(mine);
    g_byte_array_unref(want);
  }

  /* The answer: byte for byte the generated result's, and read back by it. */
  for (int found = 0; found <= 1; found++) {
    const char *json = found ? "{\"a\": [1, \"é\"]}" : "";
    GByteArray *out = g_byte_array_new();
    ixia_wire_append_get_reply(out, 4242, found, "p:1 ü", strlen("p:1 ü"), found ? 9001 : 0, json,
                               strlen(json));
    const guint8 head[] = {0x80, 1, 0, T_REPLY, 0, 0, 0, 3, 'g', 'e', 't', 0, 0, 0x10, 0x92};
    CU_ASSERT_TRUE_FATAL(out->len > sizeof head);
    CU_ASSERT_EQUAL(memcmp(out->data, head, sizeof head), 0);
    IxiaIxiaGetResult *r = g_object_new(IXIA_TYPE_IXIA_GET_RESULT, NULL);
    IxiaDocument *d = r->success;
    d->found = found;
    g_free(d->key), d->key = g_strdup("p:1 ü");
    d->version = found ? 9001 : 0;
    g_free(d->json), d->json = g_strdup(json);
    d->__isset_found = d->__isset_key = d->__isset_version = d->__isset_json = TRUE;
    r->__isset_success = TRUE;
    GByteArray *want = ixia_thrift_serialize(THRIFT_STRUCT(r), FALSE, NULL);
    CU_ASSERT_EQUAL_FATAL(out->len - sizeof head, want->len);
    CU_ASSERT_EQUAL(memcmp(out->data + sizeof head, want->data, want->len), 0);
    g_object_unref(r);
    r = g_object_new(IXIA_TYPE_IXIA_GET_RESULT, NULL);
    CU_ASSERT_TRUE(ixia_thrift_deserialize(THRIFT_STRUCT(r), out->data + sizeof head,
                                           out->len - sizeof head, FALSE, NULL));
    CU_ASSERT_TRUE(r->__isset_success);
    CU_ASSERT_EQUAL(r->success->found, found);
    CU_ASSERT_STRING_EQUAL(r->success->key, "p:1 ü");
    CU_ASSERT_EQUAL(r->success->version, found ? 9001 : 0);
    CU_ASSERT_STRING_EQUAL(r->success->json, json);
    g_object_unref(r);
    /* and by the client's reader; any cut of it is left to the generated one */
    gboolean f = !found;
    gint64 v = -1;
    const char *j = NULL;
    gsize jl = 0;
    CU_ASSERT_TRUE(ixia_wire_read_get_reply(out->data, out->len, &f, &v, &j, &jl));
    CU_ASSERT_EQUAL(f, found);
    CU_ASSERT_EQUAL(v, found ? 9001 : 0);
    CU_ASSERT_TRUE(jl == strlen(json) && memcmp(j, json, jl) == 0);
    for (guint cut = 0; cut < out->len; cut++)
      CU_ASSERT_FALSE(ixia_wire_read_get_reply(out->data, cut, &f, &v, &j, &jl));
    g_byte_array_unref(want);
    g_byte_array_unref(out);
  }
  GByteArray *e = g_byte_array_new(); /* an error answer is not a document */
  ixia_wire_append_error(e, "get", 3, 0, IXIA_ENOTFOUND, "unknown table");
  gboolean ef;
  gint64 ev;
  const char *ej;
  gsize ejl;
  CU_ASSERT_FALSE(ixia_wire_read_get_reply(e->data, e->len, &ef, &ev, &ej, &ejl));
  g_byte_array_unref(e);
}

/* A server on a loopback port that answers each get twice: first as if it
 * were the answer of an earlier get (another sequence id, an older
 * document), then with its own answer. */
static gboolean recv_exact(int fd, guint8 *p, gsize n) {
  while (n > 0) {
    ssize_t r = recv(fd, p, n, 0);
    if (r <= 0) return FALSE;
    p += r, n -= (gsize)r;
  }
  return TRUE;
}

static gpointer late_answer_server(gpointer data) {
  int lfd = GPOINTER_TO_INT(data);
  int fd = accept(lfd, NULL, NULL);
  guint8 hdr[4];
  GByteArray *out = g_byte_array_new();
  while (fd >= 0 && recv_exact(fd, hdr, 4)) {
    guint32 n = ixia_bytes_get32(hdr);
    guint8 *frame = g_malloc(n);
    const char *name;
    guint32 name_len;
    gint32 seq;
    if (!recv_exact(fd, frame, n) || !ixia_wire_peek_call(frame, n, &name, &name_len, &seq)) {
      g_free(frame);
      break;
    }
    for (int i = name_len == 3 ? 0 : 1; i < 2; i++) {
      g_byte_array_set_size(out, 4);
      if (name_len != 3) ixia_wire_append_void_reply(out, name, name_len, seq); /* authenticate */
      else if (i == 0) ixia_wire_append_get_reply(out, seq + 7, TRUE, "k", 1, 1, "{\"old\": 1}", 10);
      else ixia_wire_append_get_reply(out, seq, TRUE, "k", 1, 2, "{\"new\": 2}", 10);
      ixia_bytes_put32(out->data, out->len - 4);
      CU_ASSERT_EQUAL(send(fd, out->data, out->len, MSG_NOSIGNAL), (ssize_t)out->len);
    }
    g_free(frame);
  }
  g_byte_array_unref(out);
  if (fd >= 0) close(fd);
  return NULL;
}

static void test_client_skips_late_answers(void) {
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof a;
  CU_ASSERT_TRUE_FATAL(lfd >= 0 && bind(lfd, (struct sockaddr *)&a, sizeof a) == 0 &&
                       listen(lfd, 1) == 0 && getsockname(lfd, (struct sockaddr *)&a, &alen) == 0);
  GThread *t = g_thread_new("late-answers", late_answer_server, GINT_TO_POINTER(lfd));
  char *addr = g_strdup_printf("127.0.0.1:%d", ntohs(a.sin_port));
  ixia_error_t *err = NULL;
  ixia_client_t *c = ixia_client_new(addr, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  for (int round = 0; round < 3; round++) {
    gboolean found = FALSE;
    gint64 version = 0;
    char *json = NULL;
    CU_ASSERT_TRUE(ixia_client_get(c, "shop", "products", "k", NULL, &found, &version, &json, &err));
    CU_ASSERT_TRUE(found);
    CU_ASSERT_EQUAL(version, 2); /* never the older document of the other answer */
    CU_ASSERT_STRING_EQUAL(json ? json : "", "{\"new\": 2}");
    g_free(json);
    if (err) fprintf(stderr, "  get: %s\n", err->message);
    g_clear_pointer(&err, ixia_error_destroy);
  }
  ixia_client_destroy(c);
  g_thread_join(t);
  close(lfd);
  g_free(addr);
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
  IXT_ADD(s, test_json_strict);
  IXT_ADD(s, test_json_numbers);
  IXT_ADD(s, test_json_numbers_match_printf);
  IXT_ADD(s, test_time);
  IXT_ADD(s, test_json_path_arrays);
  IXT_ADD(s, test_json_project_flat);
  IXT_ADD(s, test_json_project_strings);
  IXT_ADD(s, test_json_walk_peek);
  IXT_ADD(s, test_schema_parse);
  IXT_ADD(s, test_schema_check_doc);
  IXT_ADD(s, test_schema_evolution);
  IXT_ADD(s, test_schema_analyzers);
  IXT_ADD(s, test_error_first_wins);
  IXT_ADD(s, test_exit_codes);
  IXT_ADD(s, test_disk_reserve);
  IXT_ADD(s, test_rocksdb_cache_shards);
  IXT_ADD(s, test_wire_get_by_hand);
  IXT_ADD(s, test_hitpage_round_trip);
  IXT_ADD(s, test_wire_string_call_by_hand);
  IXT_ADD(s, test_wire_string_call_served_by_hand);
  IXT_ADD(s, test_client_skips_late_answers);
  return ixt_run();
}
