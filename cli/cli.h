/* The `ixia` command-line client: one function per command, dispatched from
 * a table (cli.c); the bulk loader lives in load.c.
 *
 * Exit codes are part of the interface (scripts and tests rely on them):
 *   0 success, 1 error reported by the server or a local failure,
 *   2 usage error, 3 not found, 4 API unreachable, 5 refused because a
 *   resource is exhausted (RESOURCE_EXHAUSTED: the server's disk is under
 *   its free-space reserve; nothing was written, retry once space is
 *   freed), 6 no valid API key or the key does not allow the call. */
#ifndef IXIA_CLI_H
#define IXIA_CLI_H

#include "error.h"

enum {
  IXIA_EXIT_OK = 0,
  IXIA_EXIT_ERROR = 1,
  IXIA_EXIT_USAGE = 2,
  IXIA_EXIT_NOTFOUND = 3,
  IXIA_EXIT_UNREACHABLE = 4,
  IXIA_EXIT_EXHAUSTED = 5,
  IXIA_EXIT_DENIED = 6,
};

/* Exit code for an error: NOT_FOUND → 3, UNAVAILABLE → 4,
 * RESOURCE_EXHAUSTED → 5, UNAUTHENTICATED and PERMISSION_DENIED → 6,
 * anything else 1. */
int ixia_cli_exit_code(const ixia_error_t *err);

/* Prints "ixia: <CODE_NAME>: message" on stderr. */
void ixia_cli_print_error(const ixia_error_t *err);

/* Reads all of a file, or of stdin when path is "-". `what` names the input
 * in the error message. Returns a NUL-terminated g_malloc'd string. */
char *ixia_cli_read_input(const char *path, const char *what, gsize *len, ixia_error_t **err);

/* Runs the whole CLI; returns the process exit code. */
int ixia_cli_main(int argc, char **argv);

#endif
