/* Text analysis: how a text field's strings become tokens, the same at index
 * time (the document's values) and at query time (match, term, prefix).
 *
 * An analyzer is named in the schema (docs/SCHEMA.md): "standard", or the
 * name of a Snowball language ("english", "french", ...: libstemmer's list),
 * which is "standard" followed by that language's stemmer. "standard":
 *   1. the text is made valid UTF-8 (invalid bytes become U+FFFD) and
 *      normalised to NFKC, so compatibility forms (ligatures, full-width
 *      letters, superscripts) read as their plain letters;
 *   2. tokens are the maximal runs of letters, digits and combining marks
 *      (GLib's Unicode tables), anything else separates them;
 *   3. each token is case-folded (Unicode full case folding: "Straße" and
 *      "STRASSE" fold alike) and normalised to NFKC again.
 * An ASCII text takes a shortcut that gives the same tokens: runs of ASCII
 * letters and digits, lower-cased.
 *
 * Positions count tokens from 0 within a field; the caller keeps counting
 * across the strings of a multi-valued field, with a gap between strings so
 * that a phrase never spans two of them.
 *
 * libstemmer's stemmers are not thread-safe: each thread keeps its own, by
 * language, freed when the thread ends. */
#include <libstemmer.h>
#include <string.h>

#include "internal.h"

static void stemmers_free(gpointer p) {
  GHashTable *h = p;
  if (h) g_hash_table_destroy(h);
}

static GPrivate stemmers_key = G_PRIVATE_INIT(stemmers_free);

static void stemmer_delete(gpointer p) { sb_stemmer_delete(p); }

/* This thread's stemmer for a language, or NULL for "standard". */
static struct sb_stemmer *stemmer_for(const char *analyzer) {
  if (!analyzer || strcmp(analyzer, IXIA_ANALYZER_STANDARD) == 0) return NULL;
  GHashTable *h = g_private_get(&stemmers_key);
  if (!h) {
    h = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, stemmer_delete);
    g_private_set(&stemmers_key, h);
  }
  struct sb_stemmer *s = g_hash_table_lookup(h, analyzer);
  if (!s) {
    s = sb_stemmer_new(analyzer, "UTF_8");
    if (!s) return NULL; /* the schema check lets only known names through */
    g_hash_table_insert(h, g_strdup(analyzer), s);
  }
  return s;
}

static gboolean is_token_char(gunichar c) { return g_unichar_isalnum(c) || g_unichar_ismark(c); }

/* Hands one folded token on, stemmed when asked. */
static gboolean emit(struct sb_stemmer *st, const char *tok, gsize n, guint32 pos, ixia_token_fn fn,
                     void *ud) {
  if (n == 0) return TRUE;
  if (!st) return fn(tok, n, pos, ud);
  const sb_symbol *r = sb_stemmer_stem(st, (const sb_symbol *)tok, (int)n);
  if (!r) return fn(tok, n, pos, ud); /* out of memory in the stemmer: the word as is */
  return fn((const char *)r, (gsize)sb_stemmer_length(st), pos, ud);
}

static gboolean all_ascii(const char *t, gsize len) {
  for (gsize i = 0; i < len; i++)
    if ((guint8)t[i] >= 0x80) return FALSE;
  return TRUE;
}

void ixia_analyze(const char *analyzer, const char *text, gsize len, guint32 *pos,
                  ixia_token_fn fn, void *ud) {
  struct sb_stemmer *st = stemmer_for(analyzer);
  if (all_ascii(text, len)) {
    char small[64];
    for (gsize i = 0; i < len;) {
      while (i < len && !g_ascii_isalnum(text[i])) i++;
      gsize start = i;
      while (i < len && g_ascii_isalnum(text[i])) i++;
      gsize n = i - start;
      if (n == 0) break;
      char *buf = n <= sizeof small ? small : g_malloc(n);
      for (gsize k = 0; k < n; k++) buf[k] = g_ascii_tolower(text[start + k]);
      gboolean go = emit(st, buf, n, (*pos)++, fn, ud);
      if (buf != small) g_free(buf);
      if (!go) return;
    }
    return;
  }
  char *valid = g_utf8_make_valid(text, (gssize)len);
  char *norm = g_utf8_normalize(valid, -1, G_NORMALIZE_NFKC);
  g_free(valid);
  if (!norm) return;
  for (const char *p = norm; *p;) {
    while (*p && !is_token_char(g_utf8_get_char(p))) p = g_utf8_next_char(p);
    const char *start = p;
    while (*p && is_token_char(g_utf8_get_char(p))) p = g_utf8_next_char(p);
    if (p == start) break;
    char *folded = g_utf8_casefold(start, p - start);
    char *tok = g_utf8_normalize(folded, -1, G_NORMALIZE_NFKC);
    g_free(folded);
    gboolean go = !tok || emit(st, tok, strlen(tok), (*pos)++, fn, ud);
    g_free(tok);
    if (!go) break;
  }
  g_free(norm);
}

typedef struct {
  GHashTable *seen;
  GPtrArray *out;
} dedup_t;

static gboolean add_unique(const char *tok, gsize n, guint32 pos, void *ud) {
  (void)pos;
  dedup_t *d = ud;
  GBytes *b = g_bytes_new(tok, n);
  if (!d->seen) d->seen = g_hash_table_new(g_bytes_hash, g_bytes_equal);
  if (g_hash_table_add(d->seen, b)) g_ptr_array_add(d->out, b);
  else g_bytes_unref(b);
  return TRUE;
}

void ixia_text_tokens(const char *analyzer, const char *text, size_t len, GPtrArray *out) {
  dedup_t d = {NULL, out};
  guint32 pos = 0;
  ixia_analyze(analyzer, text, len, &pos, add_unique, &d);
  if (d.seen) g_hash_table_destroy(d.seen);
}

typedef struct {
  gsize n;
  char *first;
} one_t;

static gboolean count_tokens(const char *tok, gsize n, guint32 pos, void *ud) {
  (void)pos;
  one_t *o = ud;
  if (o->n++ == 0) o->first = g_strndup(tok, n);
  return o->n < 2;
}

char *ixia_analyze_one(const char *analyzer, const char *text, gboolean stem) {
  one_t o = {0, NULL};
  guint32 pos = 0;
  ixia_analyze(stem ? analyzer : NULL, text, strlen(text), &pos, count_tokens, &o);
  if (o.n == 1) return o.first;
  g_free(o.first);
  return NULL;
}
