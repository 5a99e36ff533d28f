/* Free-space reserves of data directories: ixia's flood-stage watermark.
 *
 * A daemon that writes a RocksDB keeps a reserve of free space on the file
 * system of each of its data directories (store.disk_reserve_mb for the
 * truth store, index.disk_reserve_mb for an index shard). Before it writes
 * (once per write group or index batch, not per edit) it measures the free
 * space (statvfs: f_bavail * f_frsize, what an unprivileged writer may use;
 * a system call without I/O, about a microsecond) and, when a watched file
 * system has less than the reserve, refuses or pauses instead of writing.
 * This matters because Debian's librocksdb is built with assertions on: once
 * one of its writes (WAL, or its own info LOG) has failed for lack of space,
 * its next write to that file aborts the whole process. The reserve also
 * keeps room for what RocksDB writes on its own (memtable flushes of about
 * the write buffer each, compactions, the WAL file it preallocates, its info
 * LOG) and for the operator's tools.
 *
 * A reserve of 0 turns the refusal off (free space is still measured, for
 * stats). Several watched paths on one file system are measured once. Going
 * under the reserve and coming back above it are each logged once. A path
 * statvfs cannot measure (removed, no permission) is logged once and does
 * not block writes: RocksDB reports its own errors there.
 *
 * Thread safety: every function may be called from any thread. */
#ifndef IXIA_DISK_H
#define IXIA_DISK_H

#include <glib.h>

#include "error.h"

typedef struct ixia_disk_reserve ixia_disk_reserve_t;

/* A reserve of reserve_mb MiB set by config option `option` (named in
 * messages). `who` prefixes log lines ("store", "indexer"); `resumes` ends
 * the refusal message ("writes resume", "indexing resumes": "...; writes
 * resume when space is freed"). The strings are copied. */
ixia_disk_reserve_t *ixia_disk_reserve_new(const char *who, const char *option, gint64 reserve_mb,
                                           const char *resumes);
void ixia_disk_reserve_destroy(ixia_disk_reserve_t *r);

/* Watches the file system holding path too (ignored when an already
 * watched path is on the same file system). path should exist. */
void ixia_disk_reserve_watch(ixia_disk_reserve_t *r, const char *path);

/* Measures every watched file system now. TRUE when each has at least the
 * reserve free (always when the reserve is 0). Otherwise FALSE with
 * IXIA_EEXHAUSTED, e.g. "disk full: 12.0 MiB free on /data/store, under
 * store.disk_reserve_mb=256; writes resume when space is freed". */
gboolean ixia_disk_reserve_check(ixia_disk_reserve_t *r, ixia_error_t **err);

/* As measured by the last check: the least free space over the watched
 * file systems (-1 before any), and whether it was under the reserve. */
gint64 ixia_disk_reserve_free(ixia_disk_reserve_t *r);
gboolean ixia_disk_reserve_exhausted(ixia_disk_reserve_t *r);
/* The reserve in bytes (0: off). */
gint64 ixia_disk_reserve_bytes(const ixia_disk_reserve_t *r);

/* Free bytes an unprivileged writer may use on path's file system. */
gboolean ixia_disk_free(const char *path, gint64 *bytes, ixia_error_t **err);

#endif
