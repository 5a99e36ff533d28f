/* Shared harness of the libFuzzer targets (tests/fuzz/README.md).
 *
 * Each target feeds outside bytes to one decoder through the same code the
 * daemons run. Targets that need state (a truth store, an index, a Kafka
 * cluster) build it once in LLVMFuzzerInitialize under a private temporary
 * directory removed at exit; logging is quieted so the fuzzer's output
 * stays readable. Single-threaded use, as libFuzzer runs a target. */
#ifndef IXIA_FUZZ_H
#define IXIA_FUZZ_H

#include <glib.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* A new temporary directory, removed with everything in it at exit. */
char *ixia_fuzz_tmpdir(void);

/* The default config with "section.key=value" assignments applied
 * (NULL-terminated); aborts on a bad one: that is a harness bug. Also sets
 * the process's wire limits from it and quiets logging. */
ixia_config_t *ixia_fuzz_config(const char *const *sets);

/* A NUL-terminated copy of data (g_free it). */
char *ixia_fuzz_text(const uint8_t *data, size_t size);

#endif
