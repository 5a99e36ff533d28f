/* The failed-updates log of an index shard.
 *
 * Events that cannot be indexed (undecodable message, unsupported format, wrong type for a declared field, a limit) are skipped
 * and appended as one JSON object per line:
 *   {"ns", "table", "key", "version", "op", "error", "code",
 *    "time" (ISO-8601 UTC), "partition", "offset"}
 * Unknown parts are null (an undecodable message whose Kafka key is not a
 * truth-store key has no ns/table/key; events given to reindex() have no
 * partition/offset). "key" is a string when the key is UTF-8, otherwise the
 * line has "key": null and "key_base64". Every line is written and
 * fdatasync'd before the position of its event is committed to the index,
 * so a crash can duplicate a line but never lose one. The file is opened
 * for each append (O_APPEND, under an exclusive flock) and closed again, so
 * a tool may rewrite or replace it (taking the same flock) while the
 * indexer runs.
 *
 * Location (ixia_failed_log_path): indexer.failed_log when set;
 * otherwise "<index.path>.failed-updates.jsonl", i.e. a file BESIDE the index
 * directory in its parent directory (index.path "data/index" gives
 * "data/index.failed-updates.jsonl"). It is outside index.path so that it
 * survives wiping and rebuilding the index, and named after the index
 * directory so that several shards sharing a parent directory never mix
 * their logs (replaying a line through the wrong shard would drop it).
 *
 * It lives apart from the consumer because the recovery tools write it
 * too (rebuild-index, replay-failed) and must follow the same rules.
 *
 * Thread safety: every function may be called from any thread and from
 * several processes at once (the flock serialises appends). */
#ifndef IXIA_FAILED_LOG_H
#define IXIA_FAILED_LOG_H

#include <glib.h>

#include "config.h"
#include "error.h"

/* The failed-updates log of cfg (rule above). Caller g_free's. */
char *ixia_failed_log_path(const ixia_config_t *cfg);

/* One JSON line (with its newline, g_malloc'd); unknown parts: NULL
 * strings, version/partition/offset < 0, op 0 (ops are ixia_idx_op_t). */
char *ixia_failed_log_line(const char *ns, size_t ns_len, const char *table, size_t table_len,
                           const char *key, size_t key_len, gint64 version, gint op,
                           ixia_code_t code, const char *error, gint32 partition, gint64 offset);
/* Appends whole lines under an exclusive flock and fdatasyncs them; the file
 * is opened per append so a tool that renames it aside is never written
 * around. *dir_synced (may be NULL) skips the directory fsync once done. */
gboolean ixia_failed_log_append(const char *path, const char *text, size_t len,
                                gboolean *dir_synced, ixia_error_t **err);

#endif
