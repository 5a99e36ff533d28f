/* Epoch seconds, RFC 3339 text and calendar units at a fixed offset.
 *
 * Why integer arithmetic rather than GDateTime: date_histogram puts every
 * timestamp value of every matching document into a calendar bucket, and a
 * GDateTime (plus a GTimeZone) per value costs allocations in the hottest
 * loop of an aggregation. The civil-date conversions are the classic
 * days-from-civil / civil-from-days algorithms on the proleptic Gregorian
 * calendar (as C++20's <chrono> does), a dozen integer operations each.
 * Offsets are fixed (no daylight-saving rules): a calendar day at +02:00
 * is always 24 hours. */
#include "timeutil.h"

#include <stdatomic.h>
#include <string.h>

static gint64 floor_div(gint64 a, gint64 b) {
  gint64 q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

gint64 ixia_days_from_civil(gint64 y, guint m, guint d) {
  y -= m <= 2;
  gint64 era = (y >= 0 ? y : y - 399) / 400;
  gint64 yoe = y - era * 400;
  gint64 doy = (153 * ((gint64)m + (m > 2 ? -3 : 9)) + 2) / 5 + (gint64)d - 1;
  gint64 doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

void ixia_civil_from_days(gint64 z, gint64 *y, guint *m, guint *d) {
  z += 719468;
  gint64 era = (z >= 0 ? z : z - 146096) / 146097;
  gint64 doe = z - era * 146097;
  gint64 yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  gint64 doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  gint64 mp = (5 * doy + 2) / 153;
  *d = (guint)(doy - (153 * mp + 2) / 5 + 1);
  *m = (guint)(mp < 10 ? mp + 3 : mp - 9);
  *y = yoe + era * 400 + (*m <= 2);
}

static guint days_in_month(gint64 y, guint m) {
  static const guint8 n[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  gboolean leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : n[m - 1];
}

/* n decimal digits at s; -1 when one is not a digit. */
static gint64 digits(const char *s, guint n) {
  gint64 v = 0;
  for (guint i = 0; i < n; i++) {
    if (!g_ascii_isdigit(s[i])) return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

gboolean ixia_time_parse_rfc3339(const char *s, gint64 *epoch) {
  if (!s || strlen(s) < 20) return FALSE;
  gint64 y = digits(s, 4), mo = digits(s + 5, 2), d = digits(s + 8, 2);
  gint64 h = digits(s + 11, 2), mi = digits(s + 14, 2), sec = digits(s + 17, 2);
  if (y < 0 || mo < 1 || mo > 12 || d < 1 || h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 ||
      sec > 60 || s[4] != '-' || s[7] != '-' || s[13] != ':' || s[16] != ':')
    return FALSE;
  if (s[10] != 'T' && s[10] != 't' && s[10] != ' ') return FALSE;
  if (d > days_in_month(y, (guint)mo)) return FALSE;
  const char *p = s + 19;
  if (*p == '.') {
    p++;
    if (!g_ascii_isdigit(*p)) return FALSE;
    while (g_ascii_isdigit(*p)) p++;
  }
  gint32 off = 0;
  if (*p == 'Z' || *p == 'z') {
    p++;
  } else if (*p == '+' || *p == '-') {
    /* The offset is the text's last six bytes, "+hh:mm": nothing is read
     * past a shorter tail (a query's "2024-02-01T00:00:00+" read two bytes
     * beyond the string). */
    if (strlen(p) != 6 || p[3] != ':') return FALSE;
    gint64 oh = digits(p + 1, 2), om = digits(p + 4, 2);
    if (oh < 0 || oh > 23 || om < 0 || om > 59) return FALSE;
    off = (gint32)((oh * 60 + om) * 60) * (*p == '-' ? -1 : 1);
    p += 6;
  } else {
    return FALSE;
  }
  if (*p) return FALSE;
  gint64 days = ixia_days_from_civil(y, (guint)mo, (guint)d);
  *epoch = days * 86400 + h * 3600 + mi * 60 + sec - off;
  return TRUE;
}

gboolean ixia_time_parse_offset(const char *s, gint32 *out) {
  if (!s) return FALSE;
  if (!strcmp(s, "Z") || !strcmp(s, "z") || !strcmp(s, "UTC") || !strcmp(s, "+00:00")) {
    *out = 0;
    return TRUE;
  }
  if (s[0] != '+' && s[0] != '-') return FALSE;
  gint64 h = digits(s + 1, 2), m = 0;
  size_t n = strlen(s);
  if (n == 6 && s[3] == ':') m = digits(s + 4, 2);
  else if (n == 5) m = digits(s + 3, 2);
  else if (n != 3) return FALSE;
  if (h < 0 || m < 0 || m > 59 || h * 60 + m > 18 * 60) return FALSE;
  *out = (gint32)((h * 60 + m) * 60) * (s[0] == '-' ? -1 : 1);
  return TRUE;
}

char *ixia_time_format(gint64 epoch, gint32 offset) {
  gint64 local = epoch + offset;
  gint64 days = floor_div(local, 86400), sod = local - days * 86400;
  gint64 y;
  guint m, d;
  ixia_civil_from_days(days, &y, &m, &d);
  char zone[8] = "Z";
  if (offset != 0) {
    gint32 a = ABS(offset) / 60;
    g_snprintf(zone, sizeof zone, "%c%02d:%02d", offset < 0 ? '-' : '+', a / 60, a % 60);
  }
  return g_strdup_printf("%04" G_GINT64_FORMAT "-%02u-%02uT%02d:%02d:%02d%s", y, m, d,
                         (int)(sod / 3600), (int)(sod / 60 % 60), (int)(sod % 60), zone);
}

static const char *const unit_names[] = {"minute", "hour", "day", "week", "month", "quarter", "year"};
static const char *const unit_short[] = {"1m", "1h", "1d", "1w", "1M", "1q", "1y"};

gboolean ixia_cal_unit_parse(const char *s, ixia_cal_unit_t *out) {
  for (guint i = 0; i < G_N_ELEMENTS(unit_names); i++) {
    if (!strcmp(s, unit_names[i]) || !strcmp(s, unit_short[i])) {
      *out = (ixia_cal_unit_t)i;
      return TRUE;
    }
  }
  return FALSE;
}

const char *ixia_cal_unit_name(ixia_cal_unit_t u) { return unit_names[u]; }

gint64 ixia_cal_floor(gint64 t, ixia_cal_unit_t u, gint32 offset) {
  gint64 local = t + offset;
  switch (u) {
    case IXIA_CAL_MINUTE:
      return floor_div(local, 60) * 60 - offset;
    case IXIA_CAL_HOUR:
      return floor_div(local, 3600) * 3600 - offset;
    case IXIA_CAL_DAY:
      return floor_div(local, 86400) * 86400 - offset;
    case IXIA_CAL_WEEK: {
      gint64 days = floor_div(local, 86400);
      gint64 dow = ((days + 3) % 7 + 7) % 7; /* 1970-01-01 was a Thursday; 0 = Monday */
      return (days - dow) * 86400 - offset;
    }
    default: {
      gint64 y;
      guint m, d;
      ixia_civil_from_days(floor_div(local, 86400), &y, &m, &d);
      if (u == IXIA_CAL_YEAR) m = 1;
      else if (u == IXIA_CAL_QUARTER) m = (m - 1) / 3 * 3 + 1;
      return ixia_days_from_civil(y, m, 1) * 86400 - offset;
    }
  }
}

gint64 ixia_cal_next(gint64 start, ixia_cal_unit_t u, gint32 offset) {
  switch (u) {
    case IXIA_CAL_MINUTE:
      return start + 60;
    case IXIA_CAL_HOUR:
      return start + 3600;
    case IXIA_CAL_DAY:
      return start + 86400;
    case IXIA_CAL_WEEK:
      return start + 7 * 86400;
    default: {
      gint64 y;
      guint m, d;
      ixia_civil_from_days(floor_div(start + offset, 86400), &y, &m, &d);
      guint step = u == IXIA_CAL_YEAR ? 12 : u == IXIA_CAL_QUARTER ? 3 : 1;
      m += step;
      while (m > 12) m -= 12, y++;
      return ixia_days_from_civil(y, m, 1) * 86400 - offset;
    }
  }
}

static _Atomic gint64 test_shift;

gint64 ixia_time_now(void) {
  return g_get_real_time() / G_USEC_PER_SEC + atomic_load_explicit(&test_shift, memory_order_relaxed);
}

void ixia_time_test_shift(gint64 seconds) {
  atomic_fetch_add_explicit(&test_shift, seconds, memory_order_relaxed);
}
