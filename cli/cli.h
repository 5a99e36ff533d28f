/* The `ixia` command-line client: one function per command, dispatched from
 * a table (cli.c); the bulk loader lives in load.c.
 *
 * Exit codes are part of the interface (scripts and tests rely on them);
 * common/error.h lists them (IXIA_EXIT_*): 0 success, 1 other error,
 * 2 usage, 3 not found, 4 API unreachable, 5 refused under a disk reserve,
 * 6 bad input refused by the server, 7 an index shard unavailable,
 * 8 query deadline exceeded, 9 min_version wait ran out, 10 no valid API key
 * or one that does not allow the call. */
#ifndef IXIA_CLI_H
#define IXIA_CLI_H

#include "error.h"

/* Exit code for an error (ixia_error_exit_code). */
int ixia_cli_exit_code(const ixia_error_t *err);

/* Prints "ixia: <CODE_NAME>: message" on stderr. */
void ixia_cli_print_error(const ixia_error_t *err);

/* Reads all of a file, or of stdin when path is "-". `what` names the input
 * in the error message. Returns a NUL-terminated g_malloc'd string. */
char *ixia_cli_read_input(const char *path, const char *what, gsize *len, ixia_error_t **err);

/* Runs the whole CLI; returns the process exit code. */
int ixia_cli_main(int argc, char **argv);

#endif
