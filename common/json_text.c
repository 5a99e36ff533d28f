/* JSON text handled as text: projecting a few fields out of a stored
 * document and writing JSON strings, without building a cJSON tree.
 *
 * Why: a query page re-reads up to query.max_limit documents from the truth
 * store and returns a few fields of each. Parsing a 1 KB document into a
 * tree (dozens of allocations) costs several times more than scanning its
 * text once for the members asked for and copying their bytes. The text
 * was written by the server itself (ixia_json_print of a checked document),
 * so the scanner relies on it being well formed; it still never reads past
 * the given length, and it reports text it cannot follow so the caller can
 * fall back to the tree.
 *
 * Numbers and whole trees are written here too (ixia_json_format_number,
 * ixia_json_print): a sorted page writes a few values per hit, and cJSON's
 * printer checks each number's round trip with sscanf, which cost more
 * than the page's merge (and a fifth of the API's CPU for an
 * aggregation's response); its check is also approximate.
 *
 * ixia_json_project_text gives the same object as ixia_json_project (the
 * same members, nesting and order) for such text; a path that goes through
 * an array of objects is left to the tree (reported as text it cannot
 * follow).
 *
 * The walk over an object's members or an array's elements
 * (ixia_json_members_next and its kin) serves readers of other daemons'
 * answers, such as the benchmark client's summary of a query answer
 * (bench/answer.c). Its _peek forms leave a value to the
 * caller, who reads it where it stands and resumes the walk from its end
 * (ixia_json_walk_resume), so a large array is read once rather than
 * scanned for its end and then read again. */
#include <float.h>
#include <math.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "json.h"

static const char *ws(const char *p, const char *e) {
  while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
  return p;
}

/* p at an opening quote: the byte after the closing one, or NULL. A
 * backslash escapes the byte after it. Sixteen bytes a step are searched
 * for a quote or a backslash at once, inline: a stored document's strings
 * are mostly a few bytes long, and projecting two members of a ~1 KB
 * document walks past a dozen of them, a call to memchr each (16% of the
 * projection's profile, mostly the first touch of the document's lines;
 * a microbenchmark with the documents in cache: 124-130 ns a document
 * before, 109-110 after). */
static const char *skip_string(const char *p, const char *e) {
  const char *s = p + 1;
#ifdef __SSE2__
  const __m128i quote = _mm_set1_epi8('"'), bs = _mm_set1_epi8('\\');
  while (e - s >= 16) {
    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)s);
    unsigned m = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, bs)));
    if (!m) {
      s += 16;
      continue;
    }
    s += __builtin_ctz(m);
    if (*s == '"') return s + 1;
    if (e - s < 2) return NULL; /* a backslash at the last byte */
    s += 2;                     /* the backslash and the byte it escapes */
  }
#endif
  for (; s < e; s++) {
    if (*s == '"') return s + 1;
    if (*s == '\\' && ++s == e) break;
  }
  return NULL;
}

/* One value at p (no recursion: containers are skipped by counting). */
static const char *skip_value(const char *p, const char *e) {
  if (p >= e) return NULL;
  if (*p == '"') return skip_string(p, e);
  if (*p == '{' || *p == '[') {
    int depth = 0;
    while (p < e) {
      char c = *p;
      if (c == '"') {
        p = skip_string(p, e);
        if (!p) return NULL;
        continue;
      }
      if (c == '{' || c == '[') depth++;
      else if ((c == '}' || c == ']') && --depth == 0) return p + 1;
      p++;
    }
    return NULL;
  }
  const char *s = p;
  while (p < e && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\t' && *p != '\n' &&
         *p != '\r')
    p++;
  return p > s ? p : NULL;
}

/* Whether the string token [s, t) (quotes included) spells name[0..n). */
static gboolean key_is(const char *s, const char *t, const char *name, size_t n) {
  size_t len = (size_t)(t - s) - 2;
  if (len == n && memcmp(s + 1, name, n) == 0) return TRUE;
  /* An escape only lengthens a name's token. */
  if (len <= n || !memchr(s + 1, '\\', len)) return FALSE;
  char *copy = ixia_memdup0(s, (size_t)(t - s));
  cJSON *j = cJSON_Parse(copy);
  gboolean eq = cJSON_IsString(j) && strlen(j->valuestring) == n && memcmp(j->valuestring, name, n) == 0;
  cJSON_Delete(j);
  g_free(copy);
  return eq;
}

/* Starts a walk over the object at [p, e); FALSE when p is not an object. */
gboolean ixia_json_members_open(ixia_json_walk_t *m, const char *p, size_t len) {
  const char *e = p + len;
  p = ws(p, e);
  if (p >= e || *p != '{') return FALSE;
  *m = (ixia_json_walk_t){ws(p + 1, e), e, FALSE};
  return TRUE;
}

gboolean ixia_json_elements_open(ixia_json_walk_t *m, const char *p, size_t len) {
  const char *e = p + len;
  p = ws(p, e);
  if (p >= e || *p != '[') return FALSE;
  *m = (ixia_json_walk_t){ws(p + 1, e), e, FALSE};
  return TRUE;
}

/* Past the separator before the next item: the item's first byte, NULL at
 * the closing bracket `close` (the walk then stands past it), or (void *)1
 * for text that cannot be followed. */
static const char *walk_step(ixia_json_walk_t *m, char close) {
  const char *p = m->p, *e = m->e;
  if (m->started) {
    p = ws(p, e);
    if (p < e && *p == close) {
      m->p = p + 1;
      return NULL;
    }
    if (p >= e || *p != ',') return (const char *)1;
    p = ws(p + 1, e);
  } else if (p < e && *p == close) {
    m->p = p + 1;
    return NULL;
  }
  m->started = TRUE;
  return p < e ? p : (const char *)1;
}

int ixia_json_members_peek(ixia_json_walk_t *m, const char **k, const char **kend, const char **v) {
  const char *p = walk_step(m, '}'), *e = m->e;
  if (!p) return 0;
  if (p == (const char *)1 || *p != '"') return -1;
  const char *ke = skip_string(p, e);
  if (!ke) return -1;
  const char *colon = ws(ke, e);
  if (colon >= e || *colon != ':') return -1;
  const char *val = ws(colon + 1, e);
  if (val >= e) return -1;
  *k = p;
  *kend = ke;
  *v = val;
  m->p = val;
  return 1;
}

int ixia_json_elements_peek(ixia_json_walk_t *m, const char **v) {
  const char *p = walk_step(m, ']');
  if (!p) return 0;
  if (p == (const char *)1) return -1;
  *v = p;
  m->p = p;
  return 1;
}

const char *ixia_json_value_end(const ixia_json_walk_t *m, const char *v) { return skip_value(v, m->e); }

void ixia_json_walk_resume(ixia_json_walk_t *m, const char *vend) { m->p = vend; }

int ixia_json_members_next(ixia_json_walk_t *m, const char **k, const char **kend, const char **v,
                           const char **vend) {
  int r = ixia_json_members_peek(m, k, kend, v);
  if (r <= 0) return r;
  const char *ve = skip_value(*v, m->e);
  if (!ve) return -1;
  *vend = m->p = ve;
  return 1;
}

int ixia_json_elements_next(ixia_json_walk_t *m, const char **v, const char **vend) {
  int r = ixia_json_elements_peek(m, v);
  if (r <= 0) return r;
  const char *ve = skip_value(*v, m->e);
  if (!ve) return -1;
  *vend = m->p = ve;
  return 1;
}

gboolean ixia_json_key_is(const char *k, const char *kend, const char *name) {
  return key_is(k, kend, name, strlen(name));
}

/* The value of the first member `name` of the object at [p, e); NULL when
 * absent or when p is not an object. *bad is set for text that cannot be
 * followed. */
static const char *member(const char *p, const char *e, const char *name, size_t n,
                          const char **vend, gboolean *bad) {
  ixia_json_walk_t m;
  if (!ixia_json_members_open(&m, p, (size_t)(e - p))) return NULL;
  const char *k, *kend, *v, *ve;
  int r;
  while ((r = ixia_json_members_next(&m, &k, &kend, &v, &ve)) > 0)
    if (key_is(k, kend, name, n)) {
      *vend = ve;
      return v;
    }
  if (r < 0) *bad = TRUE;
  return NULL;
}

/* Runs of bytes that need no escape are copied whole: appended a byte at a
 * time, the keys and values of a page of 100 hits were 2% of the API's CPU
 * and of a shard's. */
void ixia_json_append_string(GString *out, const char *s, size_t len) {
  static const char hex[] = "0123456789abcdef";
  g_string_append_c(out, '"');
  for (size_t i = 0; i < len; i++) {
    size_t run = i;
    while (run < len && (guint8)s[run] >= 0x20 && s[run] != '"' && s[run] != '\\') run++;
    if (run > i) {
      ixia_json_put(out, s + i, run - i);
      i = run;
      if (i == len) break;
    }
    guint8 c = (guint8)s[i];
    switch (c) {
      case '"': g_string_append(out, "\\\""); break;
      case '\\': g_string_append(out, "\\\\"); break;
      case '\b': g_string_append(out, "\\b"); break;
      case '\f': g_string_append(out, "\\f"); break;
      case '\n': g_string_append(out, "\\n"); break;
      case '\r': g_string_append(out, "\\r"); break;
      case '\t': g_string_append(out, "\\t"); break;
      default:
        if (c < 0x20) {
          g_string_append(out, "\\u00");
          g_string_append_c(out, hex[c >> 4]);
          g_string_append_c(out, hex[c & 15]);
        } else {
          g_string_append_c(out, (char)c);
        }
    }
  }
  g_string_append_c(out, '"');
}

/* Two digits a step, from a table, written from the end: a page of 100
 * hits writes two integers a hit in the shard and one in the API (5% of
 * the shard's CPU on a sorted page went to a digit a step). */
gsize ixia_json_format_int(gint64 v, char buf[24]) {
  static const char pairs[201] =
      "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
      "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
      "8081828384858687888990919293949596979899";
  char tmp[24];
  char *p = tmp + sizeof tmp;
  guint64 u = v < 0 ? (guint64)0 - (guint64)v : (guint64)v;
  while (u >= 100) {
    guint d = (guint)(u % 100);
    u /= 100;
    p -= 2;
    memcpy(p, pairs + 2 * d, 2);
  }
  if (u >= 10) {
    p -= 2;
    memcpy(p, pairs + 2 * u, 2);
  } else {
    *--p = (char)('0' + u);
  }
  if (v < 0) *--p = '-';
  gsize len = (gsize)(tmp + sizeof tmp - p);
  memcpy(buf, p, len);
  buf[len] = 0;
  return len;
}

void ixia_json_append_int(GString *out, gint64 v) {
  char num[24];
  ixia_json_put(out, num, ixia_json_format_int(v, num));
}

/* Writes sign, then m / 10^k in fixed notation (m > 0 has n digits, no
 * trailing zero, k >= 1), into buf. */
static void write_fixed(char buf[32], gboolean neg, guint64 m, gsize k) {
  char digits[24];
  gsize n = ixia_json_format_int((gint64)m, digits), len = 0;
  if (neg) buf[len++] = '-';
  if (n <= k) { /* 0.00ddd */
    buf[len++] = '0';
    buf[len++] = '.';
    for (gsize z = n; z < k; z++) buf[len++] = '0';
    memcpy(buf + len, digits, n);
    len += n;
  } else {
    memcpy(buf + len, digits, n - k);
    len += n - k;
    buf[len++] = '.';
    memcpy(buf + len, digits + n - k, k);
    len += k;
  }
  buf[len] = 0;
}

/* d written with k decimals (1..6) when d is m / 10^k for an integer m
 * of at most 15 digits and |d| >= 1e-4: prices, percentages, coordinates.
 * The text is then exactly what "%.15g" prints (fixed notation, trailing
 * zeros dropped), without printf: m / 10^k == d means the decimal reads
 * back to d, and d lies within 2^-53 of it relatively, below half a unit of
 * the 15th digit, so "%.15g" rounds d to the same digits. FALSE: d is not
 * of that form. */
static gboolean format_decimal(double d, char buf[32]) {
  static const double p10[] = {1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6};
  double a = fabs(d);
  if (a < 1e-4 || a >= 1e15) return FALSE;
  for (guint k = 1; k < G_N_ELEMENTS(p10); k++) {
    double m = rint(d * p10[k]);
    if (m / p10[k] != d) continue;
    if (fabs(m) >= 1e15) return FALSE;
    write_fixed(buf, d < 0, (guint64)fabs(m), k);
    return TRUE;
  }
  return FALSE;
}

/* Any other non-integral d with 1e-4 <= |d| < 1e15 (sums, averages),
 * without printf, whose "%.17g" and the sscanf of cJSON's round-trip check
 * were most of the API's CPU for an aggregation's response: the fewest of
 * 15, 16 and 17 significant digits that read back to d.
 *
 * The 17 digits are |d| * 10^k (k = 16 - the decimal exponent, 2..20)
 * rounded to an integer in long double: 10^k is exact there, so the
 * product is within 2^-64 relatively, i.e. within 0.006 of the exact
 * value, and the integer is off the correctly rounded one only when that
 * lies within 0.006 of a half, by one. It still reads back to d: 17 digits
 * are spaced at most 0.91 of d's ulp apart (10^-16 d against 2^-53 d), so
 * the text lies within 0.506 * 0.91 < 0.5 ulp of d. A 15- or 16-digit
 * candidate (the two integers around the 17 digits cut short) is kept only
 * if it reads back, checked exactly: an integer below 2^53 divided by an
 * exact power of ten is correctly rounded (one IEEE division), so == d is
 * the round trip (a larger one, 16 digits from 9007..., goes to strtod). */
#if LDBL_MANT_DIG >= 64
/* Whether long double arithmetic really carries 64 bits at run time (the
 * x87 precision can be set lower, and valgrind computes it in doubles):
 * asked once. */
static gboolean long_double_exact(void) {
  static gint answer; /* 0 unknown, 1 yes, 2 no */
  gint a = g_atomic_int_get(&answer);
  if (!a) {
    volatile long double one = 1.0L, tiny = 0x1p-63L;
    a = one + tiny != one ? 1 : 2;
    g_atomic_int_set(&answer, a);
  }
  return a == 1;
}
#endif

static gboolean format_digits(double d, char buf[32]) {
#if LDBL_MANT_DIG < 64
  (void)d;
  (void)buf;
  return FALSE; /* long double is double here: printf's way */
#else
  if (!long_double_exact()) return FALSE;
  static const double p10[] = {1,    1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                               1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                               1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  double a = fabs(d);
  if (!(a >= 1e-4 && a < 1e15)) return FALSE;
  int e = (int)floor(log10(a));
  int k = 16 - e;
  long double x = (long double)a * (long double)p10[k];
  /* log10 can be one off next to a power of ten. */
  if (x >= 1e17L) x = (long double)a * (long double)p10[--k];
  else if (x < 1e16L) x = (long double)a * (long double)p10[++k];
  if (k < 2 || k > 22) return FALSE;
  guint64 m = (guint64)rintl(x);
  if (m >= G_GUINT64_CONSTANT(100000000000000000) || m < G_GUINT64_CONSTANT(10000000000000000)) return FALSE;
  gboolean shorter = FALSE;
  for (int drop = 2; drop >= 1 && !shorter; drop--) { /* 15 digits, then 16 */
    guint64 p = drop == 2 ? 100 : 10, lo = m / p;
    /* The correctly rounded candidate is lo or lo + 1 (m may be one off
     * and rounding it again may go the other way): the nearer first. */
    guint64 c[2] = {lo, lo + 1};
    if (m - lo * p >= p / 2) c[0] = lo + 1, c[1] = lo;
    for (int i = 0; i < 2 && !shorter; i++) {
      if (c[i] < G_GUINT64_CONSTANT(9007199254740992)) {
        shorter = (double)c[i] / p10[k - drop] == a;
      } else { /* not exact as a double: strtod decides */
        write_fixed(buf, FALSE, c[i], (gsize)(k - drop));
        shorter = g_ascii_strtod(buf, NULL) == a;
      }
      if (shorter) m = c[i], k -= drop;
    }
  }
  while (m % 10 == 0 && k > 0) {
    m /= 10;
    k--;
  }
  if (k <= 0) return FALSE; /* integral: not this function's case */
  write_fixed(buf, d < 0, m, (gsize)k);
  return TRUE;
#endif
}

void ixia_json_format_number(double d, char buf[32]) {
  if (!isfinite(d)) {
    strcpy(buf, "null");
  } else if (d == floor(d) && fabs(d) < 9007199254740992.0) {
    ixia_json_format_int((gint64)d, buf); /* -0 gives "0" */
  } else if (!format_decimal(d, buf) && !format_digits(d, buf)) {
    g_ascii_formatd(buf, 32, "%.15g", d);
    if (g_ascii_strtod(buf, NULL) != d) g_ascii_formatd(buf, 32, "%.16g", d);
    if (g_ascii_strtod(buf, NULL) != d) g_ascii_formatd(buf, 32, "%.17g", d);
  }
}

/* One item of ixia_json_print; FALSE at an item cJSON would not print
 * either (an invalid one, or a raw one without text). */
static gboolean print_item(GString *out, const cJSON *item) {
  if (cJSON_IsNull(item)) {
    g_string_append(out, "null");
  } else if (cJSON_IsFalse(item)) {
    g_string_append(out, "false");
  } else if (cJSON_IsTrue(item)) {
    g_string_append(out, "true");
  } else if (cJSON_IsNumber(item)) {
    char buf[32];
    ixia_json_format_number(item->valuedouble, buf);
    g_string_append(out, buf);
  } else if (cJSON_IsString(item)) {
    const char *v = item->valuestring ? item->valuestring : "";
    ixia_json_append_string(out, v, strlen(v));
  } else if (cJSON_IsRaw(item)) {
    if (!item->valuestring) return FALSE;
    g_string_append(out, item->valuestring);
  } else if (cJSON_IsArray(item) || cJSON_IsObject(item)) {
    gboolean obj = cJSON_IsObject(item);
    g_string_append_c(out, obj ? '{' : '[');
    for (const cJSON *c = item->child; c; c = c->next) {
      if (c != item->child) g_string_append_c(out, ',');
      if (obj) {
        const char *name = c->string ? c->string : "";
        ixia_json_append_string(out, name, strlen(name));
        g_string_append_c(out, ':');
      }
      if (!print_item(out, c)) return FALSE;
    }
    g_string_append_c(out, obj ? '}' : ']');
  } else {
    return FALSE;
  }
  return TRUE;
}

char *ixia_json_print(const cJSON *item) {
  GString *out = g_string_sized_new(256);
  if (!item || !print_item(out, item)) {
    g_string_free(out, TRUE);
    return NULL;
  }
  return g_string_free(out, FALSE);
}

/* The projection being built: a member holds a value's text or members. */
typedef struct pnode {
  char *name;
  const char *raw, *raw_end; /* leaf */
  GPtrArray *kids;           /* object: struct pnode*, in insertion order */
} pnode_t;

static void pnode_free(gpointer p) {
  pnode_t *n = p;
  g_free(n->name);
  if (n->kids) g_ptr_array_free(n->kids, TRUE);
  g_free(n);
}

static pnode_t *kid(pnode_t *obj, const char *name) {
  for (guint i = 0; i < obj->kids->len; i++) {
    pnode_t *k = obj->kids->pdata[i];
    if (strcmp(k->name, name) == 0) return k;
  }
  return NULL;
}

static void emit(const pnode_t *obj, GString *out) {
  g_string_append_c(out, '{');
  for (guint i = 0; i < obj->kids->len; i++) {
    const pnode_t *k = obj->kids->pdata[i];
    if (i) g_string_append_c(out, ',');
    ixia_json_append_string(out, k->name, strlen(k->name));
    g_string_append_c(out, ':');
    if (k->kids) emit(k, out);
    else g_string_append_len(out, k->raw, k->raw_end - k->raw);
  }
  g_string_append_c(out, '}');
}

/* Most paths a projection picks in its one-pass form. */
#define FLAT_MAX 32

guint ixia_json_member_table(const char *json, size_t len, guint16 *table, guint max) {
  ixia_json_walk_t m;
  if (len > G_MAXUINT16 || !ixia_json_members_open(&m, json, len)) return 0;
  const char *k, *kend, *v, *ve;
  guint n = 0;
  int r;
  while ((r = ixia_json_members_next(&m, &k, &kend, &v, &ve)) > 0) {
    /* (A name with an escape is compared by the walk, which decodes it.) */
    if (n == max || memchr(k + 1, '\\', (size_t)(kend - k) - 2)) return 0;
    guint16 *x = table + IXIA_JSON_MEMBER_WORDS * n++;
    x[0] = (guint16)(k - json);
    x[1] = (guint16)(kend - json);
    x[2] = (guint16)(v - json);
    x[3] = (guint16)(ve - json);
  }
  return r < 0 ? 0 : n;
}

/* Member [k, kend): [v, ve) goes to every path it names that has no value
 * yet; *left counts the paths still without one. */
static inline void take_member(const char *const *paths, const size_t *nlen, guint npaths,
                               const char *k, const char *kend, const char *val, const char *vend,
                               gboolean plain, const char **v, const char **ve, guint *left) {
  /* A plain key (a member table's: none has an escape) is compared only
   * when its length is the path's: the other members' names in the text
   * are not read (a page's projection missed on their lines). */
  size_t klen = (size_t)(kend - k) - 2;
  for (guint i = 0; i < npaths; i++)
    if (!v[i] && (plain ? klen == nlen[i] && memcmp(k + 1, paths[i], klen) == 0
                        : key_is(k, kend, paths[i], nlen[i]))) {
      v[i] = val;
      ve[i] = vend;
      (*left)--;
    }
}

/* Every path one member deep (the usual case): one pass over the
 * document's members finds them all, where a search per path would scan the
 * document once each; with a member table (ixia_json_member_table) the pass
 * reads the table instead of the text. Written in the order asked, the
 * first of two equal paths winning, as the general form does. -1: text it
 * cannot follow; 0: not this form (a dotted or empty path, or too many); 1:
 * written. */
static int project_flat(const char *json, const char *e, const guint16 *table, guint n_table,
                        const char *const *paths, guint npaths, GString *out, gboolean *all_present) {
  if (npaths > FLAT_MAX) return 0;
  size_t nlen[FLAT_MAX];
  const char *v[FLAT_MAX] = {0}, *ve[FLAT_MAX] = {0};
  for (guint i = 0; i < npaths; i++) {
    if (!paths[i][0] || strchr(paths[i], '.')) return 0;
    nlen[i] = strlen(paths[i]);
  }
  guint left = npaths;
  ixia_json_walk_t m;
  if (table) {
    for (guint t = 0; left > 0 && t < n_table; t++) {
      const guint16 *x = table + IXIA_JSON_MEMBER_WORDS * t;
      take_member(paths, nlen, npaths, json + x[0], json + x[1], json + x[2], json + x[3], TRUE, v, ve, &left);
    }
  } else if (ixia_json_members_open(&m, json, (size_t)(e - json))) { /* (a document that is not an object holds none) */
    const char *k, *kend, *val, *vend;
    int r = 0;
    while (left > 0 && (r = ixia_json_members_next(&m, &k, &kend, &val, &vend)) > 0)
      take_member(paths, nlen, npaths, k, kend, val, vend, FALSE, v, ve, &left);
    if (r < 0) return -1;
  }
  gboolean all = TRUE, first = TRUE;
  g_string_append_c(out, '{');
  for (guint i = 0; i < npaths; i++) {
    if (!v[i]) {
      all = FALSE;
      continue;
    }
    gboolean dup = FALSE;
    for (guint j = 0; j < i && !dup; j++) dup = strcmp(paths[j], paths[i]) == 0;
    if (dup) continue;
    if (!first) g_string_append_c(out, ',');
    first = FALSE;
    ixia_json_append_string(out, paths[i], nlen[i]);
    g_string_append_c(out, ':');
    ixia_json_put(out, v[i], (size_t)(ve[i] - v[i]));
  }
  g_string_append_c(out, '}');
  if (all_present) *all_present = all;
  return 1;
}

gboolean ixia_json_project_table(const char *json, size_t len, const guint16 *table, guint n_members,
                                 const char *const *paths, guint npaths, GString *out,
                                 gboolean *all_present) {
  int flat = table && n_members ? project_flat(json, json + len, table, n_members, paths, npaths, out, all_present) : 0;
  return flat > 0 || ixia_json_project_text(json, len, paths, npaths, out, all_present);
}

gboolean ixia_json_project_text(const char *json, size_t len, const char *const *paths,
                                guint npaths, GString *out, gboolean *all_present) {
  gboolean all = TRUE;
  const char *e = json + len;
  int flat = project_flat(json, e, NULL, 0, paths, npaths, out, all_present);
  if (flat != 0) return flat > 0;
  pnode_t root = {NULL, NULL, NULL, g_ptr_array_new_with_free_func(pnode_free)};
  gboolean bad = FALSE;
  for (guint i = 0; i < npaths && !bad; i++) {
    if (!paths[i][0]) {
      all = FALSE;
      continue;
    }
    /* Find the value: one object level per segment. */
    const char *v = json, *ve = e, *p = paths[i];
    while (v && *p) {
      const char *dot = strchr(p, '.');
      size_t n = dot ? (size_t)(dot - p) : strlen(p);
      v = member(v, ve, p, n, &ve, &bad);
      p = dot ? dot + 1 : p + n;
      /* Through an array of objects: the tree projection handles those. */
      if (v && *p && *ws(v, ve) == '[') bad = TRUE;
    }
    if (!v) {
      all = FALSE;
      continue;
    }
    /* Place it, nested as the path is; an earlier path that already holds
     * the member (or a whole object above it) wins. */
    gchar **parts = g_strsplit(paths[i], ".", -1);
    guint np = g_strv_length(parts);
    pnode_t *obj = &root;
    for (guint j = 0; obj && j + 1 < np; j++) {
      pnode_t *k = kid(obj, parts[j]);
      if (!k) {
        k = g_new0(pnode_t, 1);
        k->name = g_strdup(parts[j]);
        k->kids = g_ptr_array_new_with_free_func(pnode_free);
        g_ptr_array_add(obj->kids, k);
      }
      obj = k->kids ? k : NULL;
    }
    if (obj && !kid(obj, parts[np - 1])) {
      pnode_t *leaf = g_new0(pnode_t, 1);
      leaf->name = g_strdup(parts[np - 1]);
      leaf->raw = v;
      leaf->raw_end = ve;
      g_ptr_array_add(obj->kids, leaf);
    }
    g_strfreev(parts);
  }
  if (!bad) emit(&root, out);
  if (all_present) *all_present = all;
  g_ptr_array_free(root.kids, TRUE);
  return !bad;
}
