/* The one error type (error.h): constructors, the conversions from each
 * dependency's convention, code names and exit codes.
 *
 * Setting an error never overwrites one already set (the first cause
 * wins), and prefixes only add context to the message, so an error read at
 * the top still names its origin. */
#include "error.h"

#include <stdarg.h>
#include <stdlib.h>

static ixia_error_t *error_newv(ixia_code_t code, const char *fmt, va_list ap) {
  ixia_error_t *e = g_new0(ixia_error_t, 1);
  e->code = code;
  e->message = g_strdup_vprintf(fmt, ap);
  return e;
}

ixia_error_t *ixia_error_new(ixia_code_t code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ixia_error_t *e = error_newv(code, fmt, ap);
  va_end(ap);
  return e;
}

void ixia_error_destroy(ixia_error_t *err) {
  if (!err) return;
  g_free(err->message);
  g_free(err);
}

gboolean ixia_error_set(ixia_error_t **err, ixia_code_t code, const char *fmt, ...) {
  if (err && !*err) {
    va_list ap;
    va_start(ap, fmt);
    *err = error_newv(code, fmt, ap);
    va_end(ap);
  }
  return FALSE;
}

gboolean ixia_error_propagate(ixia_error_t **dst, ixia_error_t *src) {
  if (dst && !*dst)
    *dst = src;
  else
    ixia_error_destroy(src);
  return FALSE;
}

void ixia_error_prefix(ixia_error_t *err, const char *fmt, ...) {
  if (!err) return;
  va_list ap;
  va_start(ap, fmt);
  char *prefix = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  char *msg = g_strdup_printf("%s: %s", prefix, err->message);
  g_free(prefix);
  g_free(err->message);
  err->message = msg;
}

gboolean ixia_error_from_rocksdb(ixia_error_t **err, char *errptr, const char *what) {
  if (!errptr) return TRUE;
  ixia_error_set(err, IXIA_EINTERNAL, "%s: rocksdb: %s", what, errptr);
  free(errptr); /* RocksDB allocates with malloc */
  return FALSE;
}

gboolean ixia_error_from_gerror(ixia_error_t **err, GError *gerr, ixia_code_t code,
                                const char *what) {
  if (!gerr) return TRUE;
  ixia_error_set(err, code, "%s: %s", what, gerr->message);
  g_error_free(gerr);
  return FALSE;
}

const char *ixia_code_name(ixia_code_t code) {
  switch (code) {
    case IXIA_OK: return "OK";
    case IXIA_EINVAL: return "INVALID_ARGUMENT";
    case IXIA_ENOTFOUND: return "NOT_FOUND";
    case IXIA_ECONFLICT: return "CONFLICT";
    case IXIA_ETOOLARGE: return "TOO_LARGE";
    case IXIA_ETYPE: return "TYPE_MISMATCH";
    case IXIA_EUNAVAILABLE: return "UNAVAILABLE";
    case IXIA_EINTERNAL: return "INTERNAL";
    case IXIA_EUNSUPPORTED: return "UNSUPPORTED";
    case IXIA_EEXHAUSTED: return "RESOURCE_EXHAUSTED";
    case IXIA_EUNAUTHENTICATED: return "UNAUTHENTICATED";
    case IXIA_EDENIED: return "PERMISSION_DENIED";
    case IXIA_EDEADLINE: return "DEADLINE_EXCEEDED";
    case IXIA_ENOTCAUGHTUP: return "NOT_CAUGHT_UP";
    case IXIA_ESHARD: return "SHARD_UNAVAILABLE";
  }
  return "UNKNOWN";
}

int ixia_error_exit_code(const ixia_error_t *err) {
  switch (err->code) {
    case IXIA_ENOTFOUND: return IXIA_EXIT_NOTFOUND;
    case IXIA_EUNAVAILABLE: return IXIA_EXIT_UNREACHABLE;
    case IXIA_EEXHAUSTED: return IXIA_EXIT_EXHAUSTED;
    case IXIA_EINVAL:
    case IXIA_ETYPE:
    case IXIA_ETOOLARGE: return IXIA_EXIT_BADINPUT;
    case IXIA_ESHARD: return IXIA_EXIT_SHARD;
    case IXIA_EDEADLINE: return IXIA_EXIT_DEADLINE;
    case IXIA_ENOTCAUGHTUP: return IXIA_EXIT_NOTCAUGHTUP;
    case IXIA_EUNAUTHENTICATED:
    case IXIA_EDENIED: return IXIA_EXIT_DENIED;
    default: return IXIA_EXIT_ERROR;
  }
}
