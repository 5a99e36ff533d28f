#include "client.h"

#include <string.h>

#include <thrift/c_glib/protocol/thrift_binary_protocol.h>
#include <thrift/c_glib/transport/thrift_framed_transport.h>
#include <thrift/c_glib/transport/thrift_socket.h>

struct ixia_client {
  char *address;
  ThriftTransport *socket;
  ThriftTransport *framed;
  ThriftProtocol *protocol;
  IxiaIxiaIf *iface;
};

char *ixia_client_address(const char *explicit_addr, const ixia_config_t *cfg) {
  if (explicit_addr && *explicit_addr) return g_strdup(explicit_addr);
  const char *env = g_getenv("IXIA_API");
  if (env && *env) return g_strdup(env);
  if (cfg)
    return g_strdup_printf("%s:%" G_GINT64_FORMAT, ixia_config_str(cfg, "api.host"),
                           ixia_config_int(cfg, "api.port"));
  return g_strdup("127.0.0.1:9090");
}

ixia_client_t *ixia_client_new(const char *hostport, ixia_error_t **err) {
  const char *colon = strrchr(hostport, ':');
  char *end = NULL;
  guint64 port = colon ? g_ascii_strtoull(colon + 1, &end, 10) : 0;
  if (!colon || colon == hostport || !end || *end || port == 0 || port > 65535) {
    ixia_error_set(err, IXIA_EINVAL, "bad API address '%s': expected HOST:PORT", hostport);
    return NULL;
  }
  ixia_client_t *c = g_new0(ixia_client_t, 1);
  c->address = g_strdup(hostport);
  char *host = g_strndup(hostport, (gsize)(colon - hostport));
  c->socket = g_object_new(THRIFT_TYPE_SOCKET, "hostname", host, "port", (guint)port, NULL);
  g_free(host);
  c->framed = g_object_new(THRIFT_TYPE_FRAMED_TRANSPORT, "transport", c->socket, NULL);
  c->protocol = g_object_new(THRIFT_TYPE_BINARY_PROTOCOL, "transport", c->framed, NULL);
  c->iface = g_object_new(IXIA_TYPE_IXIA_CLIENT, "input_protocol", c->protocol, "output_protocol",
                          c->protocol, NULL);
  GError *gerr = NULL;
  if (!thrift_transport_open(c->framed, &gerr)) {
    ixia_error_set(err, IXIA_EUNAVAILABLE, "cannot connect to ixia API at %s: %s", hostport,
                   gerr ? gerr->message : "unknown error");
    if (gerr) g_error_free(gerr);
    ixia_client_destroy(c);
    return NULL;
  }
  return c;
}

void ixia_client_destroy(ixia_client_t *c) {
  if (!c) return;
  if (c->framed && thrift_transport_is_open(c->framed)) thrift_transport_close(c->framed, NULL);
  if (c->iface) g_object_unref(c->iface);
  if (c->protocol) g_object_unref(c->protocol);
  if (c->framed) g_object_unref(c->framed);
  if (c->socket) g_object_unref(c->socket);
  g_free(c->address);
  g_free(c);
}

IxiaIxiaIf *ixia_client_iface(ixia_client_t *c) { return c->iface; }

gboolean ixia_client_check(ixia_client_t *c, gboolean ok, IxiaIxiaError *xe, GError *gerr,
                           ixia_error_t **err) {
  if (xe) {
    ok = FALSE;
    ixia_error_set(err, (ixia_code_t)xe->code, "%s", xe->message ? xe->message : "(no message)");
    g_object_unref(xe);
  } else if (!ok) {
    ixia_error_set(err, IXIA_EUNAVAILABLE, "ixia API at %s: %s", c->address,
                   gerr ? gerr->message : "call failed");
  }
  if (gerr) g_error_free(gerr);
  return ok;
}


gboolean ixia_client_put(ixia_client_t *c, const char *ns, const char *table, const char *key,
                         const char *json, gint64 expected_version, gint64 *version,
                         ixia_error_t **err) {
  gint64 v = 0;
  IxiaIxiaError *xe = NULL;
  GError *gerr = NULL;
  gboolean ok = ixia_ixia_if_put(c->iface, &v, ns, table, key, json, expected_version, &xe, &gerr);
  if (version) *version = v;
  return ixia_client_check(c, ok, xe, gerr, err);
}

gboolean ixia_client_upsert(ixia_client_t *c, const char *ns, const char *table, const char *key,
                            const char *json, gint64 expected_version, gint64 *version,
                            ixia_error_t **err) {
  gint64 v = 0;
  IxiaIxiaError *xe = NULL;
  GError *gerr = NULL;
  gboolean ok =
      ixia_ixia_if_upsert(c->iface, &v, ns, table, key, json, expected_version, &xe, &gerr);
  if (version) *version = v;
  return ixia_client_check(c, ok, xe, gerr, err);
}

gboolean ixia_client_delete(ixia_client_t *c, const char *ns, const char *table, const char *key,
                            gint64 expected_version, gint64 *version, ixia_error_t **err) {
  gint64 v = 0;
  IxiaIxiaError *xe = NULL;
  GError *gerr = NULL;
  gboolean ok =
      ixia_ixia_if_delete_doc(c->iface, &v, ns, table, key, expected_version, &xe, &gerr);
  if (version) *version = v;
  return ixia_client_check(c, ok, xe, gerr, err);
}

gboolean ixia_client_get(ixia_client_t *c, const char *ns, const char *table, const char *key,
                         const char *const *fields, gboolean *found, gint64 *version, char **json,
                         ixia_error_t **err) {
  GPtrArray *f = g_ptr_array_new();
  for (const char *const *p = fields; p && *p; p++) g_ptr_array_add(f, (gpointer)*p);
  IxiaDocument *doc = g_object_new(IXIA_TYPE_DOCUMENT, NULL);
  IxiaIxiaError *xe = NULL;
  GError *gerr = NULL;
  gboolean ok = ixia_ixia_if_get(c->iface, &doc, ns, table, key, f, &xe, &gerr);
  g_ptr_array_free(f, TRUE);
  ok = ixia_client_check(c, ok, xe, gerr, err);
  if (ok) {
    if (found) *found = doc->found;
    if (version) *version = doc->version;
    if (json) *json = doc->found ? g_strdup(doc->json) : NULL;
  }
  g_object_unref(doc);
  return ok;
}

gboolean ixia_client_apply_schema(ixia_client_t *c, const char *schema_json, gint64 *version,
                                  ixia_error_t **err) {
  gint64 v = 0;
  IxiaIxiaError *xe = NULL;
  GError *gerr = NULL;
  gboolean ok = ixia_ixia_if_apply_schema(c->iface, &v, schema_json, &xe, &gerr);
  if (version) *version = v;
  return ixia_client_check(c, ok, xe, gerr, err);
}

/* Calls returning a string share one shape. */
#define STRING_CALL(c, out, err, call_expr)             \
  do {                                                  \
    gchar *s = NULL;                                    \
    IxiaIxiaError *xe = NULL;                           \
    GError *gerr = NULL;                                \
    gboolean ok = (call_expr);                          \
    ok = ixia_client_check((c), ok, xe, gerr, (err));   \
    if (ok && (out))                                    \
      *(out) = s;                                       \
    else                                                \
      g_free(s);                                        \
    return ok;                                          \
  } while (0)

gboolean ixia_client_get_schema(ixia_client_t *c, const char *ns, const char *table, char **json,
                                ixia_error_t **err) {
  STRING_CALL(c, json, err, ixia_ixia_if_get_schema(c->iface, &s, ns, table, &xe, &gerr));
}

gboolean ixia_client_stats(ixia_client_t *c, char **json, ixia_error_t **err) {
  STRING_CALL(c, json, err, ixia_ixia_if_stats(c->iface, &s, &xe, &gerr));
}

gboolean ixia_client_query(ixia_client_t *c, const char *request_json, char **response_json,
                           ixia_error_t **err) {
  STRING_CALL(c, response_json, err, ixia_ixia_if_query(c->iface, &s, request_json, &xe, &gerr));
}
