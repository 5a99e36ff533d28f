/* Shared harness of the libFuzzer targets: temporary directories, config,
 * quiet logs. See fuzz.h. */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "wire.h"

static GPtrArray *dirs;

static void remove_dirs(void) {
  for (guint i = 0; dirs && i < dirs->len; i++) {
    char *cmd = g_strdup_printf("rm -rf '%s'", (char *)g_ptr_array_index(dirs, i));
    if (system(cmd) != 0) fprintf(stderr, "fuzz: could not remove %s\n", (char *)dirs->pdata[i]);
    g_free(cmd);
  }
}

char *ixia_fuzz_tmpdir(void) {
  if (!dirs) {
    dirs = g_ptr_array_new_with_free_func(g_free);
    atexit(remove_dirs);
  }
  char *d = g_dir_make_tmp("ixia-fuzz-XXXXXX", NULL);
  if (!d) abort();
  g_ptr_array_add(dirs, g_strdup(d));
  return d;
}

ixia_config_t *ixia_fuzz_config(const char *const *sets) {
  ixia_config_t *cfg = ixia_config_new();
  for (const char *const *s = sets; s && *s; s++) {
    ixia_error_t *err = NULL;
    if (!ixia_config_set_assignment(cfg, *s, &err)) {
      fprintf(stderr, "fuzz harness: %s\n", err->message);
      abort();
    }
  }
  ixia_log_set_level_name("error");
  ixia_wire_limits_t lim = ixia_wire_limits_from_config(cfg);
  ixia_wire_set_limits(&lim);
  return cfg;
}

char *ixia_fuzz_text(const uint8_t *data, size_t size) {
  char *t = g_malloc(size + 1);
  if (size) memcpy(t, data, size);
  t[size] = 0;
  return t;
}
