/* ixia-recovery SUBCOMMAND [OPTIONS]: thin dispatch; the work is in the
 * ixia_recovery library (recovery.h). Exit codes: 0 done, 1 failed,
 * 2 usage error. Each subcommand prints a JSON summary on stdout and its
 * progress on stderr. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "recovery.h"

enum { EXIT_OK = 0, EXIT_FAILED = 1, EXIT_USAGE = 2 };

typedef struct {
  char *api;
  gint batch;
  gboolean quiet;
} opts_t;

static int print_summary(cJSON *summary, ixia_error_t *err) {
  if (!summary) {
    fprintf(stderr, "ixia-recovery: %s: %s\n", ixia_code_name(err->code), err->message);
    ixia_error_destroy(err);
    return EXIT_FAILED;
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

typedef struct {
  const char *name;
  const char *params;
  const char *summary;
  int (*run)(const ixia_config_t *cfg, opts_t *o, int argc, char **argv);
} command_t;

static const command_t COMMANDS[] = {
    {"backfill", "NAMESPACE TABLE",
     "Index the existing documents of a table on every shard (after an index was added), "
     "without stopping traffic.",
     run_backfill},
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
  opts_t o = {.batch = 500};
  GOptionEntry entries[] = {
      {"api", 0, 0, G_OPTION_ARG_STRING, &o.api, "API address host:port (default $IXIA_API)", "ADDR"},
      {"batch", 0, 0, G_OPTION_ARG_INT, &o.batch, "Documents per page (default 500)", "N"},
      {"quiet", 'q', 0, G_OPTION_ARG_NONE, &o.quiet, "No progress line on stderr", NULL},
      G_OPTION_ENTRY_NULL};
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
    code = cmd->run(cfg, &o, sub_argc, sub_argv);
  }
  ixia_config_destroy(cfg);
  g_free(o.api);
  g_free(prog);
  return code;
}
