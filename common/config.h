/* The one configuration table shared by every ixia daemon and tool.
 *
 * Options are named "section.key". Values come, in increasing precedence,
 * from the built-in defaults, a GKeyFile config file (--config FILE or the
 * IXIA_CONFIG environment variable) and `--set section.key=value` on the
 * command line. Every value is checked against its type and bounds when set.
 * docs/CONFIG.md is generated from this table (`ixia config-doc`), and a test
 * keeps the two equal.
 *
 * Thread safety: a config is built at start-up by one thread; after that it
 * is read-only and may be read from any thread. */
#ifndef IXIA_CONFIG_H
#define IXIA_CONFIG_H

#include <glib.h>

#include "error.h"

typedef enum { IXIA_OPT_INT, IXIA_OPT_BOOL, IXIA_OPT_STRING, IXIA_OPT_DOUBLE } ixia_opt_type_t;

typedef struct {
  const char *name; /* "section.key" */
  ixia_opt_type_t type;
  const char *def;  /* default, as text */
  gint64 min, max;  /* bounds for IXIA_OPT_INT */
  const char *doc;
} ixia_option_t;

typedef struct ixia_config ixia_config_t;

/* NULL-terminated table of every option. */
const ixia_option_t *ixia_config_options(void);

/* A config holding the defaults. */
ixia_config_t *ixia_config_new(void);
void ixia_config_destroy(ixia_config_t *cfg);

/* Loads a GKeyFile file; unknown sections/keys are errors (typos must not
 * pass silently). */
gboolean ixia_config_load_file(ixia_config_t *cfg, const char *path, ixia_error_t **err);
/* Sets one option from "section.key=value". */
gboolean ixia_config_set_assignment(ixia_config_t *cfg, const char *assignment,
                                    ixia_error_t **err);
gboolean ixia_config_set(ixia_config_t *cfg, const char *name, const char *value,
                         ixia_error_t **err);

/* Getters abort on an unknown name: that is a programming error. */
gint64 ixia_config_int(const ixia_config_t *cfg, const char *name);
/* A thread count whose 0 means twice the cores, at least 4 (pools whose
 * work computes and waits briefly: indexer.search_threads, query.threads). */
int ixia_config_threads(const ixia_config_t *cfg, const char *name);
gboolean ixia_config_bool(const ixia_config_t *cfg, const char *name);
double ixia_config_double(const ixia_config_t *cfg, const char *name);
/* Borrowed; valid as long as the config. */
const char *ixia_config_str(const ixia_config_t *cfg, const char *name);

/* "a, b,,c" -> {"a", "b", "c"}: a comma-separated list (of fields, keys,
 * namespaces), tolerant of spaces and stray commas; NULL gives an empty
 * list. g_strfreev the result. */
char **ixia_split_list(const char *list);

/* Markdown reference of every option (caller frees). */
char *ixia_config_doc_markdown(void);

/* Common command line of every daemon and tool: --config FILE, --set K=V
 * (repeatable), plus `extra` entries. Removes what it parses from argv, loads
 * the config and applies log.level and the wire limits (wire.h). Returns
 * NULL with *err set on a bad option; the caller prints the message and
 * exits 2. */
ixia_config_t *ixia_config_from_args(int *argc, char ***argv, const char *parameter_string,
                                     const char *summary, const GOptionEntry *extra,
                                     ixia_error_t **err);

#endif
