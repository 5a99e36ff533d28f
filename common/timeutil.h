/* Times as the schema and the query language see them: whole epoch seconds
 * (UTC), read from RFC 3339 text, written as ISO 8601 text, and grouped
 * into calendar units (hour, day, ISO week, month, quarter, year) at a
 * fixed time-zone offset.
 *
 * Pure functions on integers; thread-safe. See docs/SCHEMA.md (timestamp
 * fields) and docs/QUERY.md (date_histogram). */
#ifndef IXIA_TIMEUTIL_H
#define IXIA_TIMEUTIL_H

#include <glib.h>

/* Now, in whole epoch seconds: the one clock of document expiry (the
 * store's TTL and the index's expiry schedule). */
gint64 ixia_time_now(void);
/* Test control, in the spirit of sqlite3_test_control: moves this
 * process's ixia_time_now by `seconds` (cumulative), so a test of expiry
 * need not wait on the wall clock. The product calls it only through the
 * IXIA_TEST_CLOCK_FILE test hook (testhook.c). */
void ixia_time_test_shift(gint64 seconds);

/* The accepted forms of a timestamp value, for error messages. */
#define IXIA_TIMESTAMP_FORMS                                                                 \
  "whole epoch seconds from 0 to 10^12, or an RFC 3339 string like \"2024-05-01T12:30:00Z\" " \
  "or \"2024-05-01T14:30:00.250+02:00\""

/* Largest timestamp: 10^12 seconds (year 33658). */
#define IXIA_TIMESTAMP_MAX 1000000000000.0

/* Parses an RFC 3339 date-time ("2024-05-01T12:30:00Z", "...T12:30:00.5+02:00";
 * 't', 'z' and a space for 'T' accepted) into epoch seconds, a fraction of a
 * second dropped (rounded down). FALSE when s is not such a string or names
 * a day that does not exist. */
gboolean ixia_time_parse_rfc3339(const char *s, gint64 *epoch);

/* A time-zone offset: "Z", "UTC", "+02:00", "-05:30", "+0200", "+02". FALSE
 * when malformed or beyond +-18:00. */
gboolean ixia_time_parse_offset(const char *s, gint32 *offset_seconds);

/* Days since 1970-01-01 of a proleptic Gregorian date, and back. */
gint64 ixia_days_from_civil(gint64 y, guint m, guint d);
void ixia_civil_from_days(gint64 days, gint64 *y, guint *m, guint *d);

/* "2024-05-01T12:30:00Z" (offset 0) or "2024-05-01T14:30:00+02:00": the
 * local time at the offset. Returns a new string. */
char *ixia_time_format(gint64 epoch, gint32 offset_seconds);

typedef enum {
  IXIA_CAL_MINUTE,
  IXIA_CAL_HOUR,
  IXIA_CAL_DAY,
  IXIA_CAL_WEEK, /* ISO weeks, starting on Monday */
  IXIA_CAL_MONTH,
  IXIA_CAL_QUARTER,
  IXIA_CAL_YEAR,
} ixia_cal_unit_t;

/* "minute", "hour", "day", "week", "month", "quarter", "year" (and the
 * one-letter-count forms "1h", "1d", "1w", "1M", "1q", "1y"). */
gboolean ixia_cal_unit_parse(const char *s, ixia_cal_unit_t *out);
const char *ixia_cal_unit_name(ixia_cal_unit_t u);

/* The start (epoch seconds) of the calendar unit holding t, with units
 * counted in local time at the offset. */
gint64 ixia_cal_floor(gint64 t, ixia_cal_unit_t u, gint32 offset);
/* The start of the unit after the one starting at start. */
gint64 ixia_cal_next(gint64 start, ixia_cal_unit_t u, gint32 offset);

#endif
