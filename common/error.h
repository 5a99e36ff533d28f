/* One error type for the whole code base: a code and a message.
 *
 * Each dependency's convention (RocksDB char **errptr, GError,
 * memcached_return_t, Thrift exceptions) is converted into this type exactly
 * once, at the module that talks to that dependency.
 *
 * Ownership: an ixia_error_t is owned by whoever holds the pointer; free it
 * with ixia_error_destroy(). Functions that fail take an `ixia_error_t **err`
 * which may be NULL (the caller does not want details) and is only set when
 * *err is NULL, so the first error wins. Thread-safe: no shared state. */
#ifndef IXIA_ERROR_H
#define IXIA_ERROR_H

#include <glib.h>

/* Values match the ErrorCode enum of schemas/ixia.thrift. */
typedef enum {
  IXIA_OK = 0,
  IXIA_EINVAL = 1,
  IXIA_ENOTFOUND = 2,
  IXIA_ECONFLICT = 3,
  IXIA_ETOOLARGE = 4,
  IXIA_ETYPE = 5,
  IXIA_EUNAVAILABLE = 6,
  IXIA_EINTERNAL = 7,
  IXIA_EUNSUPPORTED = 8,
  IXIA_EEXHAUSTED = 9, /* refused: a resource (disk space) is under its reserve; retry later */
  IXIA_EUNAUTHENTICATED = 10, /* no API key, an unknown or revoked one, or an expired one */
  IXIA_EDENIED = 11,          /* the key is valid but not for this namespace and action */
  IXIA_EDEADLINE = 12, /* a query ran past its deadline */
  IXIA_ENOTCAUGHTUP = 13, /* min_version was not reached within the wait */
  IXIA_ESHARD = 14,    /* an index shard could not answer */
} ixia_code_t;

typedef struct ixia_error {
  ixia_code_t code;
  char *message;
} ixia_error_t;

ixia_error_t *ixia_error_new(ixia_code_t code, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
void ixia_error_destroy(ixia_error_t *err);

/* Sets *err when err != NULL and *err == NULL. Always returns FALSE so that
 * `return ixia_error_set(err, ...)` reads naturally in gboolean functions. */
gboolean ixia_error_set(ixia_error_t **err, ixia_code_t code, const char *fmt, ...)
    G_GNUC_PRINTF(3, 4);

/* Moves src into *dst (first error wins, src is freed otherwise). */
gboolean ixia_error_propagate(ixia_error_t **dst, ixia_error_t *src);

/* Prepends "prefix: " to an existing error's message. */
void ixia_error_prefix(ixia_error_t *err, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

/* Converts and frees a RocksDB error string (char *errptr). Returns FALSE
 * when errptr was set (an error happened), TRUE otherwise. */
gboolean ixia_error_from_rocksdb(ixia_error_t **err, char *errptr, const char *what);

/* Converts and frees a GError. Returns FALSE when gerr was set. */
gboolean ixia_error_from_gerror(ixia_error_t **err, GError *gerr, ixia_code_t code,
                                const char *what);

/* Short stable name of a code, e.g. "INVALID_ARGUMENT". */
const char *ixia_code_name(ixia_code_t code);

/* Process exit codes of the command-line tools (ixia, ixia-recovery), part
 * of their interface: scripts tell failures apart by them. */
enum {
  IXIA_EXIT_OK = 0,
  IXIA_EXIT_ERROR = 1,       /* any other error (CONFLICT, INTERNAL, ...); recovery: diverged */
  IXIA_EXIT_USAGE = 2,       /* bad command line */
  IXIA_EXIT_NOTFOUND = 3,    /* NOT_FOUND */
  IXIA_EXIT_UNREACHABLE = 4, /* UNAVAILABLE: the API cannot be reached (or refuses connections) */
  IXIA_EXIT_EXHAUSTED = 5,   /* RESOURCE_EXHAUSTED: refused under a disk reserve */
  IXIA_EXIT_BADINPUT = 6,    /* INVALID_ARGUMENT, TYPE_MISMATCH, TOO_LARGE: the input was refused */
  IXIA_EXIT_SHARD = 7,       /* SHARD_UNAVAILABLE: an index shard could not answer */
  IXIA_EXIT_DEADLINE = 8,    /* DEADLINE_EXCEEDED: the query's deadline ran out */
  IXIA_EXIT_NOTCAUGHTUP = 9, /* NOT_CAUGHT_UP: the min_version wait ran out */
  IXIA_EXIT_DENIED = 10,     /* UNAUTHENTICATED, PERMISSION_DENIED: no valid API key, or the
                                key does not allow the call */
};

/* The exit code for an error (the table above). */
int ixia_error_exit_code(const ixia_error_t *err);

#endif
