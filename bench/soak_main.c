/* ixia-soak: kill -9 soak of a local stack (soak.h). Exit 0 when nothing
 * acknowledged was lost, the index converged after every round and no page
 * repeated a key; 1 otherwise; 2 usage. */
#include <stdio.h>
#include <unistd.h>

#include "json.h"
#include "soak.h"

int main(int argc, char **argv) {
  gint rounds = 10, writers = 4, keys = 300, two_every = 4, converge_s = 60;
  gint64 seed = 1;
  double round_s = 1.5;
  gboolean keep = FALSE;
  char *dir = NULL;
  GOptionEntry entries[] = {
      {"rounds", 'n', 0, G_OPTION_ARG_INT, &rounds, "Rounds, each with one kill -9 (default 10)", "N"},
      {"writers", 0, 0, G_OPTION_ARG_INT, &writers, "Writer connections (default 4)", "W"},
      {"keys", 0, 0, G_OPTION_ARG_INT, &keys, "Keys per writer (default 300)", "K"},
      {"round-seconds", 0, 0, G_OPTION_ARG_DOUBLE, &round_s, "Seconds of writes per round (default 1.5)", "S"},
      {"two-every", 0, 0, G_OPTION_ARG_INT, &two_every,
       "Every Nth round kills two daemons at once (default 4; 0 = never)", "N"},
      {"seed", 0, 0, G_OPTION_ARG_INT64, &seed, "Random seed (default 1)", "S"},
      {"converge-seconds", 0, 0, G_OPTION_ARG_INT, &converge_s,
       "Longest wait for index = truth after a round (default 60)", "S"},
      {"dir", 'd', 0, G_OPTION_ARG_FILENAME, &dir, "Stack directory (default: a new temporary one)", "DIR"},
      {"keep", 0, 0, G_OPTION_ARG_NONE, &keep, "Keep the stack directory (logs) afterwards, also when the soak passes", NULL},
      G_OPTION_ENTRY_NULL};
  GOptionContext *ctx = g_option_context_new("");
  g_option_context_set_summary(
      ctx,
      "Crash-consistency soak: runs a local stack (ixia-local), writers that record every\n"
      "acknowledgement, and a killer that sends kill -9 to a random daemon each round (two in\n"
      "every --two-every-th round) and restarts it; after each round every acknowledged write\n"
      "must be in the store, ixia-recovery verify must pass, and paged queries must not repeat\n"
      "a key. Prints one line per round and a JSON summary.");
  g_option_context_add_main_entries(ctx, entries, NULL);
  GError *gerr = NULL;
  if (!g_option_context_parse(ctx, &argc, &argv, &gerr) || argc != 1 || rounds < 1 || writers < 1 ||
      keys < 1 || round_s < 0.5 || two_every < 0 || converge_s < 1) {
    fprintf(stderr, "ixia-soak: %s (see --help)\n", gerr ? gerr->message : "bad arguments");
    if (gerr) g_error_free(gerr);
    g_option_context_free(ctx);
    return 2;
  }
  g_option_context_free(ctx);
  char *exe = g_file_read_link("/proc/self/exe", NULL);
  char *bin = exe ? g_path_get_dirname(exe) : g_strdup(".");
  char *work = dir ? g_strdup(dir) : g_dir_make_tmp("ixia-soak-XXXXXX", NULL);
  ixia_soak_opts_t o = {bin, work, (guint)rounds, (guint)writers, (guint)keys, round_s,
                        (guint)two_every, (guint64)seed, (guint)converge_s};
  ixia_error_t *err = NULL;
  cJSON *summary = ixia_soak_run(&o, &err);
  int rc = 1;
  if (summary) {
    char *text = ixia_json_print(summary);
    printf("%s\n", text);
    g_free(text);
    rc = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(summary, "ok")) ? 0 : 1;
    cJSON_Delete(summary);
  } else {
    fprintf(stderr, "ixia-soak: %s\n", err->message);
    ixia_error_destroy(err);
  }
  /* A failed soak keeps its stack directory: the daemons' logs tell why. */
  if (!keep && !dir && rc == 0) {
    char *cmd[] = {"rm", "-rf", work, NULL};
    g_spawn_sync(NULL, cmd, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL, NULL, NULL);
  } else {
    fprintf(stderr, "ixia-soak: stack directory %s kept\n", work);
  }
  g_free(work);
  g_free(dir);
  g_free(bin);
  g_free(exe);
  return rc;
}
