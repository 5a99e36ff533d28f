/* Test hooks: behaviour only tests change, kept out of the config table
 * (and so out of docs/CONFIG.md), in the spirit of sqlite3_test_control.
 *
 * A hook is read from the environment variable IXIA_TEST_<NAME> of the
 * process (integration tests set it for the daemons they start; unit tests
 * set it before creating the object that reads it). A set hook is logged
 * once, as a warning, so a production log shows it. Every hook and its
 * meaning is listed in testhook.c. Thread-safe. */
#ifndef IXIA_TESTHOOK_H
#define IXIA_TESTHOOK_H

#include <glib.h>

/* The hook's integer value, or def when unset or not a number. */
gint64 ixia_test_hook(const char *name, gint64 def);

/* Starts following IXIA_TEST_CLOCK_FILE (see testhook.c) when it is set;
 * does nothing otherwise, or when called again. Every process calls it
 * once through ixia_config_from_args. */
void ixia_test_hook_start_clock(void);

#endif
