/* The `ixia` command-line client (cli.h): a table of commands, each a
 * function that parses its arguments, makes one or a few API calls and
 * prints JSON.
 *
 * Options a command does not list are usage errors rather than silently
 * ignored; every failure goes through ixia_cli_fail, which prints the error
 * and maps its code to the documented exit code, so scripts can tell a bad
 * input from an unreachable API. The bulk loader lives in load.c. */
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "client.h"
#include "config.h"
#include "load.h"

/* Options that only some commands take; a command lists the ones it
 * accepts so that a misplaced option is a usage error, not silently
 * ignored. */
enum {
  OPT_EXPECT_VERSION = 1 << 0,
  OPT_FIELDS = 1 << 1,
  OPT_KEY_FIELD = 1 << 2,
  OPT_CONNS = 1 << 3,
  OPT_BATCH = 1 << 4,
  OPT_KEYSPEC = 1 << 5, /* keys create: --namespaces, --actions, --expires-in, --description */
  OPT_OUT = 1 << 6,
};

#define LOAD_DEFAULT_CONNS 8
#define LOAD_DEFAULT_BATCH 100
#define LOAD_MAX_CONNS 256

typedef struct {
  ixia_config_t *cfg;
  /* Parsed options; the initial values mean "not given". */
  char *api;
  gint64 expect_version; /* G_MININT64 when not given */
  char *fields;
  char *key_field;
  gint conns, batch; /* -1 when not given */
  char *namespaces, *actions, *expires_in, *description, *out;
  ixia_client_t *client; /* connected on first use, after local input is read */
} ixia_cli_t;

typedef struct {
  const char *name; /* one or two words: "put", "schema apply" */
  const char *args; /* positional arguments, for help */
  const char *help;
  int nargs;        /* positional arguments after the command words */
  guint opts;       /* OPT_* accepted */
  int (*run)(ixia_cli_t *cli, char **args);
} ixia_cli_command_t;

int ixia_cli_exit_code(const ixia_error_t *err) { return ixia_error_exit_code(err); }

void ixia_cli_print_error(const ixia_error_t *err) {
  fprintf(stderr, "ixia: %s: %s\n", ixia_code_name(err->code), err->message);
}

/* Prints and frees err; returns its exit code. */
static int ixia_cli_fail(ixia_error_t *err) {
  ixia_cli_print_error(err);
  int code = ixia_cli_exit_code(err);
  ixia_error_destroy(err);
  return code;
}

static int ixia_cli_usage(const char *fmt, ...) G_GNUC_PRINTF(1, 2);
static int ixia_cli_usage(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  fprintf(stderr, "ixia: %s: %s (see `ixia --help`)\n", ixia_code_name(IXIA_EINVAL), msg);
  g_free(msg);
  return IXIA_EXIT_USAGE;
}

char *ixia_cli_read_input(const char *path, const char *what, gsize *len, ixia_error_t **err) {
  if (strcmp(path, "-") != 0) {
    char *text = NULL;
    GError *gerr = NULL;
    if (!g_file_get_contents(path, &text, len, &gerr)) {
      ixia_error_from_gerror(err, gerr, IXIA_EINVAL, what);
      return NULL;
    }
    return text;
  }
  GString *s = g_string_new(NULL);
  char buf[65536];
  for (;;) {
    ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
    if (n > 0) {
      g_string_append_len(s, buf, n);
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      ixia_error_set(err, IXIA_EINVAL, "%s: reading stdin: %s", what, g_strerror(errno));
      g_string_free(s, TRUE);
      return NULL;
    }
  }
  if (len) *len = s->len;
  return g_string_free(s, FALSE);
}

/* A JSON argument: the text itself, or stdin for "-". */
static char *ixia_cli_json_arg(const char *arg, const char *what, ixia_error_t **err) {
  if (strcmp(arg, "-") == 0) return ixia_cli_read_input("-", what, NULL, err);
  return g_strdup(arg);
}

/* Connects on first use, so that local input (a file, stdin) is read and
 * checked before the API is needed. Returns 0, or the exit code after
 * printing the error. */
static int ixia_cli_connect(ixia_cli_t *cli) {
  if (cli->client) return IXIA_EXIT_OK;
  ixia_error_t *err = NULL;
  cli->client = ixia_client_new(cli->api, &err);
  if (cli->client) return IXIA_EXIT_OK;
  /* The only invalid argument here is a malformed address: a usage error. */
  int code = err->code == IXIA_EINVAL ? IXIA_EXIT_USAGE : ixia_cli_exit_code(err);
  ixia_cli_print_error(err);
  ixia_error_destroy(err);
  return code;
}

#define IXIA_CLI_CONNECT(cli)                 \
  do {                                        \
    int connect_rc_ = ixia_cli_connect(cli);  \
    if (connect_rc_ != IXIA_EXIT_OK) {        \
      return connect_rc_;                     \
    }                                         \
  } while (0)

static gint64 ixia_cli_expected(const ixia_cli_t *cli) {
  return cli->expect_version == G_MININT64 ? -1 : cli->expect_version;
}

static int ixia_cli_print_version(gint64 version) {
  printf("{\"version\":%" G_GINT64_FORMAT "}\n", version);
  return IXIA_EXIT_OK;
}

typedef gboolean (*ixia_cli_write_fn)(ixia_client_t *, const char *, const char *, const char *,
                                      const char *, gint64, gint64 *, ixia_error_t **);

static int ixia_cli_write(ixia_cli_t *cli, char **args,
                          ixia_cli_write_fn fn) {
  ixia_error_t *err = NULL;
  g_autofree char *json = ixia_cli_json_arg(args[3], "document", &err);
  if (!json) return ixia_cli_fail(err);
  IXIA_CLI_CONNECT(cli);
  gint64 version = 0;
  gboolean ok =
      fn(cli->client, args[0], args[1], args[2], json, ixia_cli_expected(cli), &version, &err);
  return ok ? ixia_cli_print_version(version) : ixia_cli_fail(err);
}

static int ixia_cli_cmd_put(ixia_cli_t *cli, char **args) {
  return ixia_cli_write(cli, args, ixia_client_put);
}

static int ixia_cli_cmd_upsert(ixia_cli_t *cli, char **args) {
  return ixia_cli_write(cli, args, ixia_client_upsert);
}

static int ixia_cli_cmd_delete(ixia_cli_t *cli, char **args) {
  ixia_error_t *err = NULL;
  IXIA_CLI_CONNECT(cli);
  gint64 version = 0;
  if (!ixia_client_delete(cli->client, args[0], args[1], args[2], ixia_cli_expected(cli), &version,
                          &err))
    return ixia_cli_fail(err);
  return ixia_cli_print_version(version);
}

static int ixia_cli_cmd_get(ixia_cli_t *cli, char **args) {
  char **fields = cli->fields ? ixia_split_list(cli->fields) : NULL;
  if (fields && !fields[0]) {
    g_strfreev(fields);
    return ixia_cli_usage("--fields needs at least one field name");
  }
  int rc = ixia_cli_connect(cli);
  if (rc != IXIA_EXIT_OK) {
    g_strfreev(fields);
    return rc;
  }
  ixia_error_t *err = NULL;
  gboolean found = FALSE;
  char *json = NULL;
  gboolean ok = ixia_client_get(cli->client, args[0], args[1], args[2], (const char *const *)fields,
                                &found, NULL, &json, &err);
  g_strfreev(fields);
  if (!ok) return ixia_cli_fail(err);
  if (!found)
    return ixia_cli_fail(ixia_error_new(IXIA_ENOTFOUND, "no document '%s' in %s/%s", args[2],
                                        args[0], args[1]));
  puts(json);
  g_free(json);
  return IXIA_EXIT_OK;
}

static int ixia_cli_cmd_schema_apply(ixia_cli_t *cli, char **args) {
  (void)cli;
  ixia_error_t *err = NULL;
  g_autofree char *json = ixia_cli_read_input(args[0], "schema", NULL, &err);
  if (!json) return ixia_cli_fail(err);
  IXIA_CLI_CONNECT(cli);
  gint64 version = 0;
  gboolean ok = ixia_client_apply_schema(cli->client, json, &version, &err);
  return ok ? ixia_cli_print_version(version) : ixia_cli_fail(err);
}

/* Prints the string a call returned, followed by a newline. */
static int ixia_cli_print_result(gboolean ok, char *text, ixia_error_t *err) {
  if (!ok) return ixia_cli_fail(err);
  puts(text);
  g_free(text);
  return IXIA_EXIT_OK;
}

static int ixia_cli_cmd_schema_show(ixia_cli_t *cli, char **args) {
  (void)cli;
  ixia_error_t *err = NULL;
  IXIA_CLI_CONNECT(cli);
  char *json = NULL;
  gboolean ok = ixia_client_get_schema(cli->client, args[0], args[1], &json, &err);
  return ixia_cli_print_result(ok, json, err);
}

static int ixia_cli_cmd_query(ixia_cli_t *cli, char **args) {
  (void)cli;
  ixia_error_t *err = NULL;
  g_autofree char *request = ixia_cli_json_arg(args[0], "query", &err);
  if (!request) return ixia_cli_fail(err);
  IXIA_CLI_CONNECT(cli);
  char *response = NULL;
  gboolean ok = ixia_client_query(cli->client, request, &response, &err);
  return ixia_cli_print_result(ok, response, err);
}

static int ixia_cli_cmd_shards(ixia_cli_t *cli, char **args) {
  (void)args;
  ixia_error_t *err = NULL;
  IXIA_CLI_CONNECT(cli);
  char **addrs = ixia_client_shards(cli->client, &err);
  if (!addrs) return ixia_cli_fail(err);
  gboolean all_up = TRUE;
  cJSON *out = ixia_shard_statuses(addrs, ixia_client_timeouts()->status_ms, &all_up);
  g_strfreev(addrs);
  char *text = cJSON_Print(out);
  printf("%s\n", text);
  cJSON_free(text);
  cJSON_Delete(out);
  return all_up ? IXIA_EXIT_OK : IXIA_EXIT_UNREACHABLE;
}

static int ixia_cli_cmd_stats(ixia_cli_t *cli, char **args) {
  (void)cli;
  (void)args;
  ixia_error_t *err = NULL;
  IXIA_CLI_CONNECT(cli);
  char *json = NULL;
  gboolean ok = ixia_client_stats(cli->client, &json, &err);
  return ixia_cli_print_result(ok, json, err);
}

static int ixia_cli_cmd_config_doc(ixia_cli_t *cli, char **args) {
  (void)cli;
  (void)args;
  char *doc = ixia_config_doc_markdown();
  fputs(doc, stdout);
  g_free(doc);
  return IXIA_EXIT_OK;
}

static int ixia_cli_cmd_load(ixia_cli_t *cli, char **args) {
  if (!cli->key_field || !*cli->key_field) return ixia_cli_usage("load needs --key-field NAME");
  gint64 max_batch = ixia_config_int(cli->cfg, "limits.max_batch_ops");
  ixia_load_opts_t o = {
      .api = cli->api,
      .ns = args[0],
      .table = args[1],
      .path = args[2],
      .key_field = cli->key_field,
      .conns = cli->conns < 0 ? LOAD_DEFAULT_CONNS : cli->conns,
      .batch = cli->batch < 0 ? (int)MIN(LOAD_DEFAULT_BATCH, max_batch) : cli->batch,
      .max_doc_bytes = (gsize)ixia_config_int(cli->cfg, "limits.max_doc_bytes"),
      .max_depth = (int)ixia_config_int(cli->cfg, "limits.max_json_depth"),
      .max_key_bytes = (gsize)ixia_config_int(cli->cfg, "limits.max_key_bytes"),
      /* Half the frame limit leaves room for keys and framing. */
      .max_batch_bytes = (gsize)ixia_config_int(cli->cfg, "server.max_frame_bytes") / 2,
      .progress = isatty(STDERR_FILENO),
  };
  if (o.conns < 1 || o.conns > LOAD_MAX_CONNS)
    return ixia_cli_usage("--conns must be between 1 and %d", LOAD_MAX_CONNS);
  if (o.batch < 1 || o.batch > max_batch)
    return ixia_cli_usage("--batch must be between 1 and %" G_GINT64_FORMAT
                          " (limits.max_batch_ops)",
                          max_batch);

  if (strcmp(o.path, "-") != 0 && access(o.path, R_OK) != 0)
    return ixia_cli_fail(
        ixia_error_new(IXIA_EINVAL, "cannot read %s: %s", o.path, g_strerror(errno)));
  /* One up-front call: an unreachable API or an unknown table is then a
   * single clear error instead of one per batch. */
  IXIA_CLI_CONNECT(cli);
  ixia_error_t *err = NULL;
  char *schema = NULL;
  if (!ixia_client_get_schema(cli->client, o.ns, o.table, &schema, &err)) {
    if (err->code == IXIA_ENOTFOUND || err->code == IXIA_EUNAVAILABLE) {
      ixia_error_prefix(err, "cannot load into %s/%s", o.ns, o.table);
      return ixia_cli_fail(err);
    }
    ixia_error_destroy(err); /* anything else: the writes themselves will tell */
  }
  g_free(schema);

  ixia_load_result_t r;
  ixia_load_run(&o, &r);
  double rate = r.seconds > 0 ? (double)r.loaded / r.seconds : 0;
  printf("loaded %" G_GUINT64_FORMAT " documents in %.1f s (%.0f docs/s)", r.loaded, r.seconds,
         rate);
  if (r.failed) printf(", %" G_GUINT64_FORMAT " failed", r.failed);
  if (r.fatal) printf(", stopped early");
  putchar('\n');
  fflush(stdout);
  if (r.fatal) return ixia_cli_fail(r.fatal);
  if (r.failed) {
    fprintf(stderr, "ixia: %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT
                    " documents were not loaded (errors above)\n",
            r.failed, r.failed + r.loaded);
    return IXIA_EXIT_ERROR;
  }
  return IXIA_EXIT_OK;
}

/* "30d", "12h", "15m", "90s" or seconds → seconds; -1 when malformed. */
static gint64 ixia_cli_duration(const char *text) {
  char *end = NULL;
  gint64 n = g_ascii_strtoll(text, &end, 10);
  if (end == text || n <= 0) return -1;
  gint64 unit = !*end ? 1 : !strcmp(end, "s") ? 1 : !strcmp(end, "m") ? 60 : !strcmp(end, "h") ? 3600
                : !strcmp(end, "d") ? 86400 : -1;
  return unit < 0 ? -1 : n * unit;
}

static int ixia_cli_cmd_keys_create(ixia_cli_t *cli, char **args) {
  (void)args;
  if (!cli->namespaces || !cli->actions)
    return ixia_cli_usage("keys create needs --namespaces NS,... (or '*') and --actions "
                          "read,write,query,schema,admin");
  cJSON *spec = cJSON_CreateObject();
  char **ns = ixia_split_list(cli->namespaces), **acts = ixia_split_list(cli->actions);
  cJSON_AddItemToObject(spec, "namespaces", cJSON_CreateStringArray((const char *const *)ns, (int)g_strv_length(ns)));
  cJSON_AddItemToObject(spec, "actions", cJSON_CreateStringArray((const char *const *)acts, (int)g_strv_length(acts)));
  g_strfreev(ns);
  g_strfreev(acts);
  if (cli->expires_in) {
    gint64 secs = ixia_cli_duration(cli->expires_in);
    if (secs < 0) {
      cJSON_Delete(spec);
      return ixia_cli_usage("--expires-in takes a duration such as 3600, 90s, 15m, 12h or 30d");
    }
    cJSON_AddNumberToObject(spec, "expires_at", (double)(g_get_real_time() / G_USEC_PER_SEC + secs));
  }
  if (cli->description) cJSON_AddStringToObject(spec, "description", cli->description);
  char *text = cJSON_PrintUnformatted(spec);
  cJSON_Delete(spec);
  int rc = ixia_cli_connect(cli);
  if (rc != IXIA_EXIT_OK) {
    cJSON_free(text);
    return rc;
  }
  ixia_error_t *err = NULL;
  char *out = NULL;
  gboolean ok = ixia_client_create_key(cli->client, text, &out, &err);
  cJSON_free(text);
  return ixia_cli_print_result(ok, out, err);
}

static int ixia_cli_cmd_keys_list(ixia_cli_t *cli, char **args) {
  (void)args;
  IXIA_CLI_CONNECT(cli);
  ixia_error_t *err = NULL;
  char *out = NULL;
  gboolean ok = ixia_client_list_keys(cli->client, &out, &err);
  return ixia_cli_print_result(ok, out, err);
}

static int ixia_cli_cmd_keys_revoke(ixia_cli_t *cli, char **args) {
  IXIA_CLI_CONNECT(cli);
  ixia_error_t *err = NULL;
  if (!ixia_client_revoke_key(cli->client, args[0], &err)) return ixia_cli_fail(err);
  printf("{\"revoked\":\"%s\"}\n", args[0]);
  return IXIA_EXIT_OK;
}

static int ixia_cli_cmd_keys_service(ixia_cli_t *cli, char **args) {
  (void)args;
  if (!cli->out) {
    char *key = ixia_auth_new_service_key();
    puts(key);
    g_free(key);
    return IXIA_EXIT_OK;
  }
  ixia_error_t *err = NULL;
  gboolean created = FALSE;
  if (!ixia_auth_ensure_service_key(cli->out, &created, &err)) return ixia_cli_fail(err);
  fprintf(stderr, "ixia: %s %s\n", created ? "wrote a new service key to" : "kept the service key in",
          cli->out);
  return IXIA_EXIT_OK;
}

static int ixia_cli_cmd_help(ixia_cli_t *cli, char **args);

static const ixia_cli_command_t commands[] = {
    {"put", "NS TABLE KEY JSON|-", "replace a document; prints {\"version\":N}", 4,
     OPT_EXPECT_VERSION, ixia_cli_cmd_put},
    {"upsert", "NS TABLE KEY JSON|-", "merge top-level fields into a document", 4,
     OPT_EXPECT_VERSION, ixia_cli_cmd_upsert},
    {"get", "NS TABLE KEY", "print a document (--fields a,b for a subset); exit 3 if missing", 3,
     OPT_FIELDS, ixia_cli_cmd_get},
    {"delete", "NS TABLE KEY", "delete a document; prints {\"version\":N}", 3, OPT_EXPECT_VERSION,
     ixia_cli_cmd_delete},
    {"schema apply", "FILE.json|-", "create or change a table schema", 1, 0,
     ixia_cli_cmd_schema_apply},
    {"schema show", "NS TABLE", "print a table schema", 2, 0, ixia_cli_cmd_schema_show},
    {"load", "NS TABLE FILE.jsonl|-",
     "bulk load JSON lines (--key-field NAME, --conns N, --batch N)", 3,
     OPT_KEY_FIELD | OPT_CONNS | OPT_BATCH, ixia_cli_cmd_load},
    {"query", "JSON|-", "run a query; prints the response", 1, 0, ixia_cli_cmd_query},
    {"stats", "", "print server counters as JSON", 0, 0, ixia_cli_cmd_stats},
    {"shards", "", "print every index shard's status (positions, lag, failed updates); exit 4 "
     "if one is unreachable", 0, 0, ixia_cli_cmd_shards},
    {"keys create", "", "create an API key (--namespaces A,B|'*' --actions read,write,query,"
     "schema,admin [--expires-in 30d] [--description TEXT]); prints it once", 0, OPT_KEYSPEC,
     ixia_cli_cmd_keys_create},
    {"keys list", "", "list API keys (ids, scopes, expiry; never the secrets)", 0, 0,
     ixia_cli_cmd_keys_list},
    {"keys revoke", "ID", "revoke an API key at once", 1, 0, ixia_cli_cmd_keys_revoke},
    {"keys service-key", "", "print a new service key, or with --out FILE write one there "
     "unless it exists (mode 0600)", 0, OPT_OUT, ixia_cli_cmd_keys_service},
    {"config-doc", "", "print the configuration reference (docs/CONFIG.md)", 0, 0,
     ixia_cli_cmd_config_doc},
    {"help", "", "show this help", 0, 0, ixia_cli_cmd_help},
};

static char *ixia_cli_summary(void) {
  GString *s = g_string_new("Commands:\n");
  for (guint i = 0; i < G_N_ELEMENTS(commands); i++) {
    const ixia_cli_command_t *c = &commands[i];
    char *usage = g_strdup_printf("%s %s", c->name, c->args);
    g_string_append_printf(s, "  %-36s %s\n", usage, c->help);
    g_free(usage);
  }
  g_string_append(s,
                  "\nThe API address comes from --api, else $IXIA_API, else the config "
                  "(api.host:api.port).\n"
                  "The API key comes from $IXIA_KEY, else the service key file (auth.service_key_file)\n"
                  "when readable.\n"
                  "Exit codes: 0 ok, 1 other error (e.g. CONFLICT), 2 usage, 3 not found, 4 API unreachable,\n"
                  "5 refused: resources exhausted (the server's disk is under its reserve; nothing was\n"
                  "written, retry later), 6 bad input (INVALID_ARGUMENT, TYPE_MISMATCH, TOO_LARGE), 7 an\n"
                  "index shard unavailable, 8 query deadline exceeded, 9 min_version not reached in time,\n"
                  "10 no valid API key, or the key does not allow it.");
  return g_string_free(s, FALSE);
}

/* Parses the command line into cli; on --help GOption prints the help and
 * exits. Returns FALSE with *err set on a bad option. */
static gboolean ixia_cli_parse(ixia_cli_t *cli, int *argc, char ***argv, ixia_error_t **err) {
  GOptionEntry entries[] = {
      {"api", 'a', 0, G_OPTION_ARG_STRING, &cli->api, "API address (default $IXIA_API)",
       "HOST:PORT"},
      {"expect-version", 0, 0, G_OPTION_ARG_INT64, &cli->expect_version,
       "put/upsert/delete: only if the current version is N (0: key must be absent)", "N"},
      {"fields", 'f', 0, G_OPTION_ARG_STRING, &cli->fields, "get: only these fields", "A,B"},
      {"key-field", 'k', 0, G_OPTION_ARG_STRING, &cli->key_field,
       "load: field holding each document's key", "NAME"},
      {"conns", 'c', 0, G_OPTION_ARG_INT, &cli->conns, "load: concurrent connections (default 8)",
       "N"},
      {"batch", 'b', 0, G_OPTION_ARG_INT, &cli->batch, "load: documents per batch (default 100)",
       "N"},
      {"namespaces", 0, 0, G_OPTION_ARG_STRING, &cli->namespaces,
       "keys create: namespaces the key may act on, or '*'", "A,B"},
      {"actions", 0, 0, G_OPTION_ARG_STRING, &cli->actions,
       "keys create: read, write, query, schema, admin", "A,B"},
      {"expires-in", 0, 0, G_OPTION_ARG_STRING, &cli->expires_in,
       "keys create: lifetime (3600, 90s, 15m, 12h, 30d); default never", "DURATION"},
      {"description", 0, 0, G_OPTION_ARG_STRING, &cli->description, "keys create: a note", "TEXT"},
      {"out", 0, 0, G_OPTION_ARG_FILENAME, &cli->out, "keys service-key: file to write", "FILE"},
      {NULL, 0, 0, 0, NULL, NULL, NULL},
  };
  char *summary = ixia_cli_summary();
  cli->cfg = ixia_config_from_args(argc, argv, "COMMAND [ARGS...]", summary, entries, err);
  g_free(summary);
  return cli->cfg != NULL;
}

static int ixia_cli_cmd_help(ixia_cli_t *cli, char **args) {
  (void)args;
  /* Same text as --help, from the same option table: parse "--help",
   * which prints it and exits 0. */
  char *fake[] = {"ixia", "--help", NULL};
  char **argv = fake;
  int argc = 2;
  ixia_config_destroy(cli->cfg);
  cli->cfg = NULL;
  ixia_error_t *err = NULL;
  ixia_cli_parse(cli, &argc, &argv, &err);
  return ixia_cli_fail(err); /* not reached */
}

/* The command named by the first one or two positional arguments; *words
 * gets how many arguments the name used. */
static const ixia_cli_command_t *ixia_cli_find(int argc, char **argv, int *words) {
  for (guint i = 0; i < G_N_ELEMENTS(commands); i++) {
    char **name = g_strsplit(commands[i].name, " ", -1);
    int n = (int)g_strv_length(name);
    gboolean match = n <= argc;
    for (int j = 0; match && j < n; j++) match = strcmp(name[j], argv[j]) == 0;
    g_strfreev(name);
    if (match) {
      *words = n;
      return &commands[i];
    }
  }
  return NULL;
}

static guint ixia_cli_given_opts(const ixia_cli_t *cli) {
  guint given = 0;
  if (cli->expect_version != G_MININT64) given |= OPT_EXPECT_VERSION;
  if (cli->fields) given |= OPT_FIELDS;
  if (cli->key_field) given |= OPT_KEY_FIELD;
  if (cli->conns != -1) given |= OPT_CONNS;
  if (cli->batch != -1) given |= OPT_BATCH;
  if (cli->namespaces || cli->actions || cli->expires_in || cli->description) given |= OPT_KEYSPEC;
  if (cli->out) given |= OPT_OUT;
  return given;
}

static int ixia_cli_dispatch(ixia_cli_t *cli, int argc, char **argv) {
  if (argc < 2) return ixia_cli_usage("no command given");
  int words = 0;
  const ixia_cli_command_t *c = ixia_cli_find(argc - 1, argv + 1, &words);
  if (!c) return ixia_cli_usage("unknown command '%s'", argv[1]);
  int nargs = argc - 1 - words;
  char **args = argv + 1 + words;
  if (nargs != c->nargs)
    return ixia_cli_usage("%s takes %d argument%s: %s %s (got %d)", c->name, c->nargs,
                          c->nargs == 1 ? "" : "s", c->name, c->args, nargs);
  guint stray = ixia_cli_given_opts(cli) & ~c->opts;
  if (stray)
    return ixia_cli_usage("option %s does not apply to %s",
                          stray & OPT_EXPECT_VERSION ? "--expect-version"
                          : stray & OPT_FIELDS       ? "--fields"
                          : stray & OPT_KEY_FIELD    ? "--key-field"
                          : stray & OPT_CONNS        ? "--conns"
                          : stray & OPT_BATCH        ? "--batch"
                          : stray & OPT_KEYSPEC      ? "--namespaces/--actions/--expires-in/--description"
                                                     : "--out",
                          c->name);
  if (cli->expect_version != G_MININT64 && cli->expect_version < 0)
    return ixia_cli_usage("--expect-version must be 0 (key absent) or a version");

  char *address = ixia_client_address(cli->api, cli->cfg);
  g_free(cli->api);
  cli->api = address;
  return c->run(cli, args);
}

int ixia_cli_main(int argc, char **argv) {
  /* A server that goes away mid-call must give an error, not kill us. */
  signal(SIGPIPE, SIG_IGN);
  ixia_cli_t cli = {.expect_version = G_MININT64, .conns = -1, .batch = -1};
  ixia_error_t *err = NULL;
  int code;
  if (!ixia_cli_parse(&cli, &argc, &argv, &err)) {
    ixia_cli_print_error(err);
    ixia_error_destroy(err);
    code = IXIA_EXIT_USAGE;
  } else {
    ixia_auth_client_key_from_env(cli.cfg);
    code = ixia_cli_dispatch(&cli, argc, argv);
  }
  fflush(stdout);
  if (ferror(stdout)) {
    fprintf(stderr, "ixia: %s: writing stdout failed\n", ixia_code_name(IXIA_EINTERNAL));
    if (code == IXIA_EXIT_OK) code = IXIA_EXIT_ERROR;
  }
  ixia_client_destroy(cli.client);
  ixia_config_destroy(cli.cfg);
  g_free(cli.api);
  g_free(cli.fields);
  g_free(cli.key_field);
  g_free(cli.namespaces);
  g_free(cli.actions);
  g_free(cli.expires_in);
  g_free(cli.description);
  g_free(cli.out);
  return code;
}
