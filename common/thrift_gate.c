/* Thrift port gate (thrift_gate.h): authenticate answered before the
 * processor, unauthenticated calls refused, a service's fast calls answered
 * from their frames, answers timed and counted. */
#include "thrift_gate.h"

#include <string.h>

#include "metrics.h"
#include "wire.h"

struct ixia_thrift_gate {
  ixia_auth_t *auth;
  const char *const *methods;
  guint n_methods;
  ixia_metric_series_t **latency; /* per method, + "other" last */
  struct {
    const char *method;
    ixia_thrift_fast_fn fn;
    gpointer user;
  } fast[IXIA_THRIFT_GATE_MAX_FAST];
  guint n_fast;
};

static gint method_index(ixia_thrift_gate_t *g, const char *name, guint32 len) {
  for (guint i = 0; i < g->n_methods; i++)
    if (strlen(g->methods[i]) == len && memcmp(g->methods[i], name, len) == 0) return (gint)i;
  return (gint)g->n_methods;
}

static const char *method_label(ixia_thrift_gate_t *g, gint i) {
  return i < (gint)g->n_methods ? g->methods[i] : "other";
}

static void set_frame_header(GByteArray *out) {
  guint32 be = GUINT32_TO_BE(out->len - 4);
  memcpy(out->data, &be, 4);
}

/* An allowed call: answered here when it is one of the service's fast
 * calls and its handler takes the frame. */
static gboolean answer_fast(ixia_thrift_gate_t *g, const char *name, guint32 name_len,
                            gint32 seqid, const guint8 *frame, guint32 size, GByteArray *out) {
  for (guint i = 0; i < g->n_fast; i++) {
    if (strlen(g->fast[i].method) != name_len || memcmp(g->fast[i].method, name, name_len) != 0)
      continue;
    g_byte_array_set_size(out, 4);
    if (!g->fast[i].fn(g->fast[i].user, frame, size, out)) return FALSE;
    guint32 max = ixia_wire_limits().max_frame;
    if (out->len - 4 > max) {
      /* As the processor answers an answer that outgrows its frame. */
      g_byte_array_set_size(out, 4);
      char *msg = g_strdup_printf("the answer is over server.max_frame_bytes=%u; ask for less "
                                  "(fewer keys, a smaller limit or fields)", max);
      ixia_wire_append_error(out, name, name_len, seqid, IXIA_ETOOLARGE, msg);
      g_free(msg);
    }
    set_frame_header(out);
    return TRUE;
  }
  return FALSE;
}

static gboolean gate(gpointer user, const guint8 *frame, guint32 size, GByteArray *out) {
  ixia_thrift_gate_t *g = user;
  const char *name;
  guint32 name_len;
  gint32 seqid;
  if (!ixia_wire_peek_call(frame, size, &name, &name_len, &seqid)) return FALSE;
  gpointer *state = ixia_server_conn_state();
  gboolean is_auth = name_len == 12 && memcmp(name, "authenticate", 12) == 0;
  if (!is_auth && (!ixia_auth_enabled(g->auth) || (state && *state)))
    return answer_fast(g, name, name_len, seqid, frame, size, out);
  g_byte_array_set_size(out, 4);
  if (!is_auth) {
    ixia_wire_append_error(out, name, name_len, seqid, IXIA_EUNAUTHENTICATED,
                           "an API key is needed: call authenticate(key) first on this "
                           "connection (clients send IXIA_KEY or auth.service_key_file)");
    set_frame_header(out);
    return TRUE;
  }
  if (!ixia_auth_enabled(g->auth)) {
    ixia_wire_append_void_reply(out, name, name_len, seqid);
    set_frame_header(out);
    return TRUE;
  }
  const char *key = NULL;
  guint32 key_len = 0;
  ixia_error_t *err = NULL;
  ixia_principal_t *p = NULL;
  if (!ixia_wire_call_string(frame, size, 1, &key, &key_len))
    ixia_error_set(&err, IXIA_EINVAL, "authenticate: missing argument key");
  else
    p = ixia_auth_verify(g->auth, key, key_len, &err);
  if (p && state) {
    ixia_principal_unref(*state);
    *state = p;
    ixia_wire_append_void_reply(out, name, name_len, seqid);
  } else {
    ixia_principal_unref(p);
    if (!err) ixia_error_set(&err, IXIA_EINTERNAL, "authenticate outside a connection");
    ixia_wire_append_error(out, name, name_len, seqid, (gint32)err->code, err->message);
    ixia_error_destroy(err);
  }
  set_frame_header(out);
  return TRUE;
}

static void observe(gpointer user, const guint8 *frame, guint32 size, const guint8 *answer,
                    guint32 answer_len, gint64 elapsed_us) {
  ixia_thrift_gate_t *g = user;
  const char *name;
  guint32 name_len;
  gint32 seqid;
  if (!ixia_wire_peek_call(frame, size, &name, &name_len, &seqid)) return;
  gint i = method_index(g, name, name_len);
  ixia_metric_observe(g->latency[i], (double)elapsed_us / 1e6);
  gint32 code = ixia_wire_answer_error_code(answer, answer_len);
  if (code) ixia_metrics_call_error("thrift", method_label(g, i), ixia_code_name((ixia_code_t)code));
}

ixia_thrift_gate_t *ixia_thrift_gate_new(ixia_auth_t *auth, const char *const *methods) {
  ixia_thrift_gate_t *g = g_new0(ixia_thrift_gate_t, 1);
  g->auth = auth;
  g->methods = methods;
  while (methods && methods[g->n_methods]) g->n_methods++;
  g->latency = g_new0(ixia_metric_series_t *, g->n_methods + 1);
  for (guint i = 0; i <= g->n_methods; i++)
    g->latency[i] = ixia_metrics_call_latency("thrift", method_label(g, (gint)i));
  return g;
}

void ixia_thrift_gate_set_fast(ixia_thrift_gate_t *g, const char *method, ixia_thrift_fast_fn fn,
                               gpointer user) {
  g_return_if_fail(g->n_fast < IXIA_THRIFT_GATE_MAX_FAST);
  g->fast[g->n_fast].method = method;
  g->fast[g->n_fast].fn = fn;
  g->fast[g->n_fast].user = user;
  g->n_fast++;
}

void ixia_thrift_gate_install(ixia_thrift_gate_t *g, ixia_server_t *srv) {
  ixia_server_hooks_t hooks = {gate, observe, (GDestroyNotify)ixia_principal_unref, g};
  ixia_server_set_hooks(srv, &hooks);
}

void ixia_thrift_gate_destroy(ixia_thrift_gate_t *g) {
  if (!g) return;
  g_free(g->latency);
  g_free(g);
}

const ixia_principal_t *ixia_thrift_gate_principal(void) {
  gpointer *state = ixia_server_conn_state();
  return state ? *state : NULL;
}
