/* ixia-recovery SUBCOMMAND [OPTIONS]: thin dispatch; the work is in the
 * ixia_recovery library (recovery.h). Exit codes: 0 done, 1 failed or
 * diverged, 2 usage error; a failed call exits as `ixia` does (common/error.h:
 * 4 API unreachable, 6 bad input, 7 shard unavailable, ...). Each
 * subcommand prints a JSON summary on stdout and its progress on stderr. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "auth.h"
#include "config.h"
#include "kafka_util.h"
#include "recovery.h"

enum { EXIT_OK = 0, EXIT_FAILED = 1, EXIT_USAGE = 2 };

typedef struct {
  char *api;
  gint batch;
  gboolean quiet;
  char *to;          /* backup: the backup directory; restore: the new store */
  char *from;        /* restore: the backup directory */
  gint64 to_version; /* restore; -1 = not given */
} opts_t;

static int print_summary(cJSON *summary, ixia_error_t *err) {
  if (!summary) {
    fprintf(stderr, "ixia-recovery: %s: %s\n", ixia_code_name(err->code), err->message);
    int code = ixia_error_exit_code(err);
    ixia_error_destroy(err);
    return code;
  }
  char *text = cJSON_Print(summary);
  printf("%s\n", text);
  cJSON_free(text);
  cJSON_Delete(summary);
  return EXIT_OK;
}

static int run_backfill(const ixia_config_t *cfg, opts_t *o, int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "ixia-recovery backfill: expected NAMESPACE TABLE (see --help)\n");
    return EXIT_USAGE;
  }
  char *api = ixia_client_address(o->api, cfg);
  ixia_backfill_opts_t bo = {.batch = (guint)o->batch, .quiet = o->quiet};
  ixia_error_t *err = NULL;
  cJSON *summary = ixia_recovery_backfill(api, argv[1], argv[2], &bo, &err);
  g_free(api);
  return print_summary(summary, err);
}

static int run_backup(const ixia_config_t *cfg, opts_t *o, int argc, char **argv) {
  (void)argv;
  if (argc != 1 || !o->to) {
    fprintf(stderr, "ixia-recovery backup: expected --to DIR and no argument (see --help)\n");
    return EXIT_USAGE;
  }
  char *api = ixia_client_address(o->api, cfg);
  ixia_backup_opts_t bo = {.quiet = o->quiet};
  ixia_error_t *err = NULL;
  cJSON *summary = ixia_recovery_backup(api, o->to, &bo, &err);
  g_free(api);
  return print_summary(summary, err);
}

static int run_restore(const ixia_config_t *cfg, opts_t *o, int argc, char **argv) {
  (void)cfg, (void)argv;
  if (argc != 1 || !o->from || !o->to || o->to_version < 0) {
    fprintf(stderr, "ixia-recovery restore: expected --from DIR --to-version V --to STOREDIR "
                    "(see --help)\n");
    return EXIT_USAGE;
  }
  ixia_backup_opts_t bo = {.quiet = o->quiet};
  ixia_error_t *err = NULL;
  cJSON *summary = ixia_recovery_restore(o->from, o->to_version, o->to, &bo, &err);
  return print_summary(summary, err);
}

/* Options of snapshot, rebuild-index, dump-index, verify, replay-failed
 * (--to/--from are shared with backup/restore). */
static struct {
  char *partitions;
  gint partition_count;
  gint shards, shard;
  char *index;
  char *index_offline;
  char *snapshot;
  char *log;
  gint page;
  gint examples;
  gint recheck_ms;
} dr = {.shard = -1, .page = 5000, .examples = 10, .recheck_ms = 1000};

/* Prints the report; exit 1 when it says "ok": false (divergence, entries
 * left in the log). */
static int print_verdict(cJSON *summary, ixia_error_t *err) {
  gboolean ok = !summary || cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(summary, "ok"));
  int code = print_summary(summary, err);
  return code == EXIT_OK && !ok ? EXIT_FAILED : code;
}

static int no_args(const char *name, int argc) {
  if (argc == 1) return EXIT_OK;
  fprintf(stderr, "ixia-recovery %s: unexpected argument (see --help)\n", name);
  return EXIT_USAGE;
}

static int run_snapshot(const ixia_config_t *cfg, opts_t *o, int argc, char **argv) {
  (void)argv;
  if (no_args("snapshot", argc) || !o->to) {
    fprintf(stderr, "ixia-recovery snapshot: expected --to DIR (see --help)\n");
    return EXIT_USAGE;
  }
  char *api = ixia_client_address(o->api, cfg);
  ixia_error_t *err = NULL;
  cJSON *summary = ixia_recovery_snapshot(api, o->to, &err);
  g_free(api);
  return print_summary(summary, err);
}

/* kafka.brokers, or $IXIA_KAFKA (ixia-local's local.env) when the config
 * leaves the default. */
static char *kafka_brokers(const ixia_config_t *cfg) {
  const char *set = ixia_config_str(cfg, "kafka.brokers");
  const char *env = g_getenv("IXIA_KAFKA");
  return g_strdup(env && *env && strcmp(set, "127.0.0.1:9092") == 0 ? env : set);
}

static int run_rebuild(const ixia_config_t *cfg, opts_t *o, int argc, char **argv) {
  (void)argv;
  if (no_args("rebuild-index", argc) || !o->from || !o->to) {
    fprintf(stderr, "ixia-recovery rebuild-index: expected --from SNAPSHOT --to INDEXDIR (see --help)\n");
    return EXIT_USAGE;
  }
  if ((dr.shards > 0) != (dr.shard >= 0) || (dr.partitions && dr.shards > 0)) {
    fprintf(stderr, "ixia-recovery rebuild-index: give --partitions, or --shards with --shard, or neither\n");
    return EXIT_USAGE;
  }
  ixia_error_t *err = NULL;
  gint32 count = dr.partition_count;
  if (count <= 0) {
    /* The topic's real partition count: a wrong one would build the wrong
     * partition set without a word. */
    char *brokers = kafka_brokers(cfg);
    count = ixia_kafka_topic_partitions_at(brokers, ixia_config_str(cfg, "kafka.topic"),
                                           ixia_config_int(cfg, "kafka.metadata_timeout_ms") * 1000, &err);
    g_free(brokers);
    if (count <= 0) {
      fprintf(stderr, "ixia-recovery rebuild-index: %s; give the topic's partition count with "
                      "--partition-count P\n", err->message);
      int code = ixia_error_exit_code(err);
      ixia_error_destroy(err);
      return code;
    }
    if (!o->quiet)
      fprintf(stderr, "ixia-recovery rebuild-index: topic %s has %d partitions (from Kafka)\n",
              ixia_config_str(cfg, "kafka.topic"), (int)count);
  }
  ixia_rebuild_opts_t ro = {
      .partitions = dr.partitions,
      .partition_count = count,
      .shards = dr.shards,
      .shard = dr.shard,
      .batch = (guint)o->batch,
      .quiet = o->quiet};
  cJSON *summary = ixia_recovery_rebuild_index(o->from, o->to, cfg, &ro, &err);
  if (!summary && err && err->code == IXIA_EINVAL) {
    fprintf(stderr, "ixia-recovery rebuild-index: %s\n", err->message);
    ixia_error_destroy(err);
    return EXIT_USAGE;
  }
  return print_summary(summary, err);
}

static int run_dump(const ixia_config_t *cfg, opts_t *o, int argc, char **argv) {
  (void)o, (void)argv;
  if (no_args("dump-index", argc) || !dr.index) {
    fprintf(stderr, "ixia-recovery dump-index: expected --index INDEXDIR (see --help)\n");
    return EXIT_USAGE;
  }
  ixia_error_t *err = NULL;
  return print_summary(ixia_recovery_dump_index(dr.index, cfg, &err), err);
}

static int run_verify(const ixia_config_t *cfg, opts_t *o, int argc, char **argv) {
  (void)argv;
  if (no_args("verify", argc) || !dr.index_offline != !dr.snapshot || dr.page < 1 || dr.page > 10000 ||
      dr.examples < 0) {
    fprintf(stderr, "ixia-recovery verify: --index-offline and --snapshot go together; --page is "
                    "1..10000 (see --help)\n");
    return EXIT_USAGE;
  }
  ixia_verify_opts_t vo = {.page = (guint)dr.page,
                           .examples = (guint)dr.examples,
                           .recheck_ms = dr.recheck_ms,
                           .quiet = o->quiet};
  ixia_error_t *err = NULL;
  if (dr.index_offline)
    return print_verdict(ixia_recovery_verify_offline(dr.index_offline, dr.snapshot, cfg, &vo, &err), err);
  char *api = ixia_client_address(o->api, cfg);
  cJSON *summary = ixia_recovery_verify(api, &vo, &err);
  g_free(api);
  return print_verdict(summary, err);
}

static int run_replay(const ixia_config_t *cfg, opts_t *o, int argc, char **argv) {
  (void)argv;
  if (no_args("replay-failed", argc) || !dr.log) {
    fprintf(stderr, "ixia-recovery replay-failed: expected --log FILE (see --help)\n");
    return EXIT_USAGE;
  }
  char *api = ixia_client_address(o->api, cfg);
  ixia_error_t *err = NULL;
  cJSON *summary = ixia_recovery_replay_failed(api, dr.log, (guint)o->batch, &err);
  g_free(api);
  return print_verdict(summary, err);
}

typedef struct {
  const char *name;
  const char *params;
  const char *summary;
  int (*run)(const ixia_config_t *cfg, opts_t *o, int argc, char **argv);
  const char *options; /* its options (long names, space-separated): --help lists only these */
} command_t;

static const command_t COMMANDS[] = {
    {"backfill", "NAMESPACE TABLE",
     "Index the existing documents of a table on every shard (after an index was added), "
     "without stopping traffic.",
     run_backfill, "api batch quiet"},
    {"backup", "--to DIR",
     "Back up the truth store for point-in-time restore: a base snapshot (first run), then "
     "every WAL batch since the last run appended to DIR/wal. Run it more often than "
     "store.wal_ttl_seconds.",
     run_backup, "api to quiet"},
    {"restore", "--from DIR --to-version V --to STOREDIR",
     "Build a truth store at STOREDIR (new or empty) as it was at version V, from a backup "
     "directory. Needs no running stack.",
     run_restore, "from to-version to quiet"},
    {"snapshot", "--to DIR",
     "Take a consistent checkpoint of the truth store through the API (no downtime): DIR/store "
     "and DIR/SNAPSHOT.json with its version. DIR is on the API's host.",
     run_snapshot, "api to quiet"},
    {"rebuild-index", "--from SNAPSHOT --to INDEXDIR [--partitions SPEC | --shards N --shard I]",
     "Build a shard's index offline from a snapshot, deterministically. Start ixia-indexer on "
     "it: it reads Kafka from the earliest retained offset and catches up (Kafka retention must "
     "reach back to the snapshot's version).",
     run_rebuild, "from to partitions partition-count shards shard batch quiet"},
    {"dump-index", "--index INDEXDIR",
     "Print a canonical checksum and counts of an index directory (the indexer must not run "
     "on it).",
     run_dump, "index"},
    {"verify", "[--index-offline INDEXDIR --snapshot DIR]",
     "Compare the index shards with the truth store (range digests, descending where they "
     "differ, as the shards' own anti-entropy); list missing, extra and stale documents; exit 1 "
     "on divergence.",
     run_verify, "api index-offline snapshot page examples recheck-ms quiet"},
    {"replay-failed", "--log FILE",
     "Re-index the keys of a shard's failed-updates log from the truth store's current "
     "documents; replayed entries leave the log.",
     run_replay, "api log batch quiet"},
};

static void usage(FILE *f) {
  fprintf(f, "Usage: ixia-recovery SUBCOMMAND [OPTIONS]\n\nSubcommands:\n");
  for (guint i = 0; i < G_N_ELEMENTS(COMMANDS); i++)
    fprintf(f, "  %-10s %s\n", COMMANDS[i].name, COMMANDS[i].summary);
  fprintf(f, "\n`ixia-recovery SUBCOMMAND --help` describes each. The running stack is found\n"
             "through --api, $IXIA_API or api.host:api.port of the config.\n");
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? EXIT_USAGE : EXIT_OK;
  }
  const command_t *cmd = NULL;
  for (guint i = 0; i < G_N_ELEMENTS(COMMANDS); i++)
    if (!strcmp(argv[1], COMMANDS[i].name)) cmd = &COMMANDS[i];
  if (!cmd) {
    fprintf(stderr, "ixia-recovery: unknown subcommand '%s'\n\n", argv[1]);
    usage(stderr);
    return EXIT_USAGE;
  }
  opts_t o = {.batch = 500, .to_version = -1};
  GOptionEntry entries[] = {
      {"api", 0, 0, G_OPTION_ARG_STRING, &o.api, "API address host:port (default $IXIA_API)", "ADDR"},
      {"batch", 0, 0, G_OPTION_ARG_INT, &o.batch, "Documents per page (default 500)", "N"},
      {"quiet", 'q', 0, G_OPTION_ARG_NONE, &o.quiet, "No progress line on stderr", NULL},
      {"to", 0, 0, G_OPTION_ARG_FILENAME, &o.to, "backup: backup directory; restore: new store directory; snapshot: snapshot directory; rebuild-index: new index directory", "DIR"},
      {"from", 0, 0, G_OPTION_ARG_FILENAME, &o.from, "restore: backup directory; rebuild-index: snapshot directory", "DIR"},
      {"to-version", 0, 0, G_OPTION_ARG_INT64, &o.to_version, "restore: version to restore", "V"},
      {"partitions", 0, 0, G_OPTION_ARG_STRING, &dr.partitions,
       "rebuild-index: the shard's partitions (indexer.partitions syntax; default all)", "SPEC"},
      {"partition-count", 0, 0, G_OPTION_ARG_INT, &dr.partition_count,
       "rebuild-index: partitions of the topic (default: read from Kafka, kafka.brokers or "
       "$IXIA_KAFKA, topic kafka.topic)", "P"},
      {"shards", 0, 0, G_OPTION_ARG_INT, &dr.shards,
       "rebuild-index: with --shard, shard I of N contiguous partition ranges", "N"},
      {"shard", 0, 0, G_OPTION_ARG_INT, &dr.shard, "rebuild-index: see --shards", "I"},
      {"index", 0, 0, G_OPTION_ARG_FILENAME, &dr.index, "dump-index: index directory", "INDEXDIR"},
      {"index-offline", 0, 0, G_OPTION_ARG_FILENAME, &dr.index_offline,
       "verify: compare this index directory with --snapshot instead of the live stack", "INDEXDIR"},
      {"snapshot", 0, 0, G_OPTION_ARG_FILENAME, &dr.snapshot, "verify: snapshot directory (offline)", "DIR"},
      {"log", 0, 0, G_OPTION_ARG_FILENAME, &dr.log, "replay-failed: the shard's failed-updates log", "FILE"},
      {"page", 0, 0, G_OPTION_ARG_INT, &dr.page, "verify: keys per page (default 5000)", "N"},
      {"examples", 0, 0, G_OPTION_ARG_INT, &dr.examples, "verify: example keys listed per kind (default 10)", "N"},
      {"recheck-ms", 0, 0, G_OPTION_ARG_INT, &dr.recheck_ms,
       "verify: wait before re-checking mismatches (default 1000)", "MS"},
      G_OPTION_ENTRY_NULL};
  /* Only the subcommand's own options: its --help lists them, and any other
   * is refused as unknown. */
  char **mine = g_strsplit(cmd->options, " ", -1);
  guint kept = 0;
  for (guint i = 0; entries[i].long_name; i++)
    if (g_strv_contains((const char *const *)mine, entries[i].long_name)) entries[kept++] = entries[i];
  entries[kept] = (GOptionEntry)G_OPTION_ENTRY_NULL;
  g_strfreev(mine);
  /* argv[0] becomes "ixia-recovery backfill" for --help's usage line. */
  char *prog = g_strdup_printf("ixia-recovery %s", cmd->name);
  argv[1] = prog;
  int sub_argc = argc - 1;
  char **sub_argv = argv + 1;
  ixia_error_t *err = NULL;
  ixia_config_t *cfg = ixia_config_from_args(&sub_argc, &sub_argv, cmd->params, cmd->summary, entries, &err);
  int code;
  if (!cfg) {
    fprintf(stderr, "%s: %s\n", prog, err->message);
    ixia_error_destroy(err);
    code = EXIT_USAGE;
  } else if (o.batch < 1 || o.batch > 10000) {
    fprintf(stderr, "%s: --batch must be 1..10000\n", prog);
    code = EXIT_USAGE;
  } else {
    /* API key: $IXIA_KEY, else the service key file when readable (the
     * shards accept only the service key). */
    ixia_auth_client_key_from_env(cfg);
    code = cmd->run(cfg, &o, sub_argc, sub_argv);
  }
  ixia_config_destroy(cfg);
  g_free(o.api);
  g_free(o.to);
  g_free(o.from);
  g_free(dr.partitions);
  g_free(dr.index);
  g_free(dr.index_offline);
  g_free(dr.snapshot);
  g_free(dr.log);
  g_free(prog);
  return code;
}
