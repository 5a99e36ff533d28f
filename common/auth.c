/* API keys (auth.h): the key store of the API, the service key, scope
 * checks and the client key of the process.
 *
 * The store is a hash table id -> record, loaded from auth.keys_file at
 * start and rewritten whole (temp file + rename) on every create or
 * revoke, under one mutex: keys change rarely, and a file that is always
 * whole is easy to back up or inspect. A record is also the principal of
 * every connection or request using the key; revoking marks it, so a
 * connection authenticated earlier loses its rights at its next call. */
#include "auth.h"

#include <stdatomic.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
#include "log.h"
#include "schema.h"

#define KEY_PREFIX "ixk_"
#define ID_BYTES 6
#define SECRET_BYTES 32
#define SERVICE_ID "service"

static const char *const action_names[] = {"read", "write", "query", "schema", "admin"};

const char *ixia_action_name(ixia_action_t a) {
  for (guint i = 0; i < G_N_ELEMENTS(action_names); i++)
    if (a == (ixia_action_t)(1 << i)) return action_names[i];
  return NULL;
}

struct ixia_principal {
  _Atomic gint refs;
  char *id;
  char *sha256;     /* hex of the key text's SHA-256 */
  char **namespaces; /* NULL-terminated; NULL = every namespace ("*") */
  guint actions;
  gint64 expires_at; /* epoch seconds; 0 = never */
  gint64 created_at;
  char *description;
  _Atomic gint revoked;
};

struct ixia_auth {
  gboolean enabled;
  char *keys_file; /* NULL: no store (shards, sinks) */
  GMutex lock;
  GHashTable *keys; /* id -> ixia_principal_t */
  ixia_principal_t *service; /* NULL when no service key is known */
  ixia_principal_t *anyone;  /* auth off */
};

ixia_principal_t *ixia_principal_ref(ixia_principal_t *p) {
  if (p) atomic_fetch_add(&p->refs, 1);
  return p;
}

void ixia_principal_unref(ixia_principal_t *p) {
  if (!p || !(atomic_fetch_sub(&p->refs, 1) == 1)) return;
  g_free(p->id);
  g_free(p->sha256);
  g_strfreev(p->namespaces);
  g_free(p->description);
  g_free(p);
}

const char *ixia_principal_id(const ixia_principal_t *p) { return p ? p->id : "(none)"; }

static ixia_principal_t *principal_new(const char *id, guint actions) {
  ixia_principal_t *p = g_new0(ixia_principal_t, 1);
  p->refs = 1;
  p->id = g_strdup(id);
  p->actions = actions;
  return p;
}

static char *sha256_hex(const char *text, gsize len) {
  return g_compute_checksum_for_data(G_CHECKSUM_SHA256, (const guchar *)text, len);
}

/* Compares two hex digests in time independent of where they differ. */
static gboolean digest_equal(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  guint8 diff = la != lb;
  for (size_t i = 0; i < la && i < lb; i++) diff |= (guint8)(a[i] ^ b[i]);
  return diff == 0;
}

static char *random_hex(guint bytes) {
  GString *s = g_string_new(NULL);
  for (guint i = 0; i < bytes; i++) g_string_append_printf(s, "%02x", g_random_int_range(0, 256));
  return g_string_free(s, FALSE);
}

/* 32 bytes from the kernel's generator, base64url without padding. */
static char *random_secret(void) {
  guint8 buf[SECRET_BYTES];
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  gsize got = 0;
  while (fd >= 0 && got < sizeof buf) {
    ssize_t r = read(fd, buf + got, sizeof buf - got);
    if (r <= 0 && errno != EINTR) break;
    if (r > 0) got += (gsize)r;
  }
  if (fd >= 0) close(fd);
  if (got < sizeof buf) g_error("cannot read /dev/urandom for a key");
  char *b64 = g_base64_encode(buf, sizeof buf);
  for (char *p = b64; *p; p++) *p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
  char *eq = strchr(b64, '=');
  if (eq) *eq = 0;
  return b64;
}

static char *new_key_text(char **id_out) {
  char *id = random_hex(ID_BYTES);
  char *secret = random_secret();
  char *text = g_strdup_printf(KEY_PREFIX "%s_%s", id, secret);
  g_free(secret);
  if (id_out) *id_out = id;
  else g_free(id);
  return text;
}

char *ixia_auth_new_service_key(void) {
  char *secret = random_secret();
  char *text = g_strdup_printf(KEY_PREFIX SERVICE_ID "_%s", secret);
  g_free(secret);
  return text;
}

/* ---- the store file ---- */

static cJSON *record_json(const ixia_principal_t *p, gboolean with_hash) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "id", p->id);
  if (with_hash) cJSON_AddStringToObject(o, "sha256", p->sha256);
  cJSON *ns = cJSON_AddArrayToObject(o, "namespaces");
  if (!p->namespaces) cJSON_AddItemToArray(ns, cJSON_CreateString("*"));
  for (char **n = p->namespaces; n && *n; n++) cJSON_AddItemToArray(ns, cJSON_CreateString(*n));
  cJSON *acts = cJSON_AddArrayToObject(o, "actions");
  for (guint i = 0; i < G_N_ELEMENTS(action_names); i++)
    if (p->actions & (1u << i)) cJSON_AddItemToArray(acts, cJSON_CreateString(action_names[i]));
  cJSON_AddNumberToObject(o, "expires_at", (double)p->expires_at);
  cJSON_AddNumberToObject(o, "created_at", (double)p->created_at);
  cJSON_AddStringToObject(o, "description", p->description ? p->description : "");
  return o;
}

static gint cmp_created(gconstpointer a, gconstpointer b) {
  const ixia_principal_t *x = *(ixia_principal_t *const *)a, *y = *(ixia_principal_t *const *)b;
  return x->created_at != y->created_at ? (x->created_at < y->created_at ? -1 : 1)
                                         : strcmp(x->id, y->id);
}

static GPtrArray *sorted_keys(ixia_auth_t *a) {
  GPtrArray *list = g_ptr_array_new();
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init(&it, a->keys);
  while (g_hash_table_iter_next(&it, NULL, &v)) g_ptr_array_add(list, v);
  g_ptr_array_sort(list, cmp_created);
  return list;
}

static gboolean save_locked(ixia_auth_t *a, ixia_error_t **err) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "format", 1);
  cJSON *arr = cJSON_AddArrayToObject(o, "keys");
  GPtrArray *list = sorted_keys(a);
  for (guint i = 0; i < list->len; i++) cJSON_AddItemToArray(arr, record_json(list->pdata[i], TRUE));
  g_ptr_array_unref(list);
  char *text = cJSON_Print(o);
  cJSON_Delete(o);
  char *tmp = g_strconcat(a->keys_file, ".tmp", NULL);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  gboolean ok = fd >= 0;
  size_t len = strlen(text), off = 0;
  while (ok && off < len) {
    ssize_t w = write(fd, text + off, len - off);
    if (w < 0 && errno == EINTR) continue;
    ok = w > 0;
    if (ok) off += (size_t)w;
  }
  ok = ok && fsync(fd) == 0;
  int saved = errno;
  if (fd >= 0) close(fd);
  ok = ok && rename(tmp, a->keys_file) == 0;
  if (!ok) {
    if (!saved) saved = errno;
    ixia_error_set(err, IXIA_EUNAVAILABLE, "cannot write the key store %s (auth.keys_file): %s",
                   a->keys_file, g_strerror(saved));
    unlink(tmp);
  }
  g_free(tmp);
  cJSON_free(text);
  return ok;
}

/* Reads namespaces and actions of a spec or record. */
static gboolean parse_scope(const cJSON *o, ixia_principal_t *p, ixia_error_t **err) {
  const cJSON *ns = cJSON_GetObjectItemCaseSensitive(o, "namespaces");
  const cJSON *acts = cJSON_GetObjectItemCaseSensitive(o, "actions");
  if (!cJSON_IsArray(ns) || cJSON_GetArraySize(ns) == 0)
    return ixia_error_set(err, IXIA_EINVAL,
                          "\"namespaces\" must be a non-empty list of namespaces, or [\"*\"]");
  if (!cJSON_IsArray(acts) || cJSON_GetArraySize(acts) == 0)
    return ixia_error_set(err, IXIA_EINVAL,
                          "\"actions\" must be a non-empty list of read, write, query, schema, admin");
  GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
  gboolean all = FALSE, ok = TRUE;
  const cJSON *it;
  cJSON_ArrayForEach(it, ns) {
    if (!cJSON_IsString(it)) {
      ok = ixia_error_set(err, IXIA_EINVAL, "\"namespaces\" must hold strings");
      break;
    }
    if (strcmp(it->valuestring, "*") == 0) all = TRUE;
    else if (!ixia_name_valid(it->valuestring, "namespace", err)) {
      ok = FALSE;
      break;
    } else g_ptr_array_add(names, g_strdup(it->valuestring));
  }
  p->actions = 0;
  cJSON_ArrayForEach(it, acts) {
    if (!ok) break;
    guint bit = 0;
    for (guint i = 0; cJSON_IsString(it) && i < G_N_ELEMENTS(action_names); i++)
      if (strcmp(it->valuestring, action_names[i]) == 0) bit = 1u << i;
    if (!bit)
      ok = ixia_error_set(err, IXIA_EINVAL,
                          "unknown action %s: the actions are read, write, query, schema, admin",
                          cJSON_IsString(it) ? it->valuestring : "(not a string)");
    p->actions |= bit;
  }
  if (ok && !all) {
    g_ptr_array_add(names, NULL);
    g_strfreev(p->namespaces);
    p->namespaces = (char **)g_ptr_array_free(names, FALSE);
  } else {
    g_ptr_array_unref(names);
  }
  return ok;
}

static gboolean load_store(ixia_auth_t *a, ixia_error_t **err) {
  char *text = NULL;
  gsize len = 0;
  GError *gerr = NULL;
  if (!g_file_get_contents(a->keys_file, &text, &len, &gerr)) {
    gboolean missing = g_error_matches(gerr, G_FILE_ERROR, G_FILE_ERROR_NOENT);
    if (missing) {
      g_error_free(gerr);
      return TRUE; /* no keys yet */
    }
    return ixia_error_from_gerror(err, gerr, IXIA_EINVAL, "auth.keys_file");
  }
  cJSON *o = cJSON_ParseWithLength(text, len);
  g_free(text);
  const cJSON *keys = o ? cJSON_GetObjectItemCaseSensitive(o, "keys") : NULL;
  gboolean ok = cJSON_IsArray(keys);
  if (!ok) ixia_error_set(err, IXIA_EINVAL, "auth.keys_file %s is not a key store", a->keys_file);
  const cJSON *k;
  cJSON_ArrayForEach(k, keys) {
    if (!ok) break;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(k, "id");
    const cJSON *sha = cJSON_GetObjectItemCaseSensitive(k, "sha256");
    if (!cJSON_IsString(id) || !cJSON_IsString(sha)) {
      ok = ixia_error_set(err, IXIA_EINVAL, "auth.keys_file %s: a key without id or sha256",
                          a->keys_file);
      break;
    }
    ixia_principal_t *p = principal_new(id->valuestring, 0);
    p->sha256 = g_strdup(sha->valuestring);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(k, "expires_at");
    p->expires_at = cJSON_IsNumber(v) ? (gint64)v->valuedouble : 0;
    v = cJSON_GetObjectItemCaseSensitive(k, "created_at");
    p->created_at = cJSON_IsNumber(v) ? (gint64)v->valuedouble : 0;
    v = cJSON_GetObjectItemCaseSensitive(k, "description");
    p->description = g_strdup(cJSON_IsString(v) ? v->valuestring : "");
    ok = parse_scope(k, p, err);
    if (ok) g_hash_table_replace(a->keys, p->id, p);
    else {
      ixia_error_prefix(*err, "auth.keys_file %s, key %s", a->keys_file, p->id);
      ixia_principal_unref(p);
    }
  }
  cJSON_Delete(o);
  return ok;
}

/* ---- life cycle ---- */

gboolean ixia_auth_ensure_service_key(const char *path, gboolean *created, ixia_error_t **err) {
  if (created) *created = FALSE;
  if (g_file_test(path, G_FILE_TEST_EXISTS)) return TRUE;
  char *dir = g_path_get_dirname(path);
  g_mkdir_with_parents(dir, 0700);
  g_free(dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return TRUE;
    return ixia_error_set(err, IXIA_EINVAL, "cannot create the service key file %s "
                          "(auth.service_key_file): %s", path, g_strerror(errno));
  }
  char *key = ixia_auth_new_service_key();
  char *line = g_strconcat(key, "\n", NULL);
  gboolean ok = write(fd, line, strlen(line)) == (ssize_t)strlen(line) && fsync(fd) == 0;
  close(fd);
  g_free(line);
  g_free(key);
  if (!ok)
    return ixia_error_set(err, IXIA_EINVAL, "cannot write the service key file %s: %s", path,
                          g_strerror(errno));
  if (created) *created = TRUE;
  return TRUE;
}

char *ixia_auth_read_service_key(const ixia_config_t *cfg, ixia_error_t **err) {
  const char *path = ixia_config_str(cfg, "auth.service_key_file");
  char *text = NULL;
  GError *gerr = NULL;
  if (!*path) {
    ixia_error_set(err, IXIA_EINVAL, "auth.service_key_file is not set");
    return NULL;
  }
  if (!g_file_get_contents(path, &text, NULL, &gerr)) {
    ixia_error_set(err, IXIA_EINVAL,
                   "cannot read the service key (auth.service_key_file=%s): %s; ixia-query-api "
                   "creates it on its first start, `ixia keys service-key --out FILE` makes one, "
                   "or set auth.enabled=false",
                   path, gerr->message);
    g_error_free(gerr);
    return NULL;
  }
  g_strstrip(text);
  if (!g_str_has_prefix(text, KEY_PREFIX SERVICE_ID "_") || strlen(text) < 20) {
    ixia_error_set(err, IXIA_EINVAL, "auth.service_key_file %s does not hold a service key", path);
    g_free(text);
    return NULL;
  }
  return text;
}

ixia_auth_t *ixia_auth_new(const ixia_config_t *cfg, gboolean with_store, ixia_error_t **err) {
  ixia_auth_t *a = g_new0(ixia_auth_t, 1);
  g_mutex_init(&a->lock);
  a->enabled = ixia_config_bool(cfg, "auth.enabled");
  a->keys = g_hash_table_new_full(g_str_hash, g_str_equal, NULL,
                                  (GDestroyNotify)ixia_principal_unref);
  a->anyone = principal_new("(auth off)", IXIA_ACT_ALL);
  if (!a->enabled) return a;
  const char *svc_path = ixia_config_str(cfg, "auth.service_key_file");
  gboolean ok = TRUE;
  if (with_store) {
    a->keys_file = g_strdup(ixia_config_str(cfg, "auth.keys_file"));
    ok = *a->keys_file ? load_store(a, err)
                       : ixia_error_set(err, IXIA_EINVAL, "auth.keys_file is empty");
    gboolean created = FALSE;
    if (ok && *svc_path) ok = ixia_auth_ensure_service_key(svc_path, &created, err);
    if (ok && created) IXIA_INFO("auth: created a service key in %s (mode 0600)", svc_path);
  }
  char *svc = NULL;
  if (ok && (*svc_path || !with_store)) {
    svc = ixia_auth_read_service_key(cfg, err);
    ok = svc != NULL;
  }
  if (svc) {
    a->service = principal_new(SERVICE_ID, IXIA_ACT_ALL);
    a->service->sha256 = sha256_hex(svc, strlen(svc));
    /* The daemon's own clients (to shards, sinks) authenticate with it. */
    ixia_auth_set_client_key(svc);
    memset(svc, 0, strlen(svc));
    g_free(svc);
  }
  if (!ok) {
    ixia_auth_destroy(a);
    return NULL;
  }
  if (with_store)
    IXIA_INFO("auth: on, %u API keys in %s", g_hash_table_size(a->keys), a->keys_file);
  return a;
}

void ixia_auth_destroy(ixia_auth_t *a) {
  if (!a) return;
  g_hash_table_destroy(a->keys);
  ixia_principal_unref(a->service);
  ixia_principal_unref(a->anyone);
  g_free(a->keys_file);
  g_mutex_clear(&a->lock);
  g_free(a);
}

gboolean ixia_auth_enabled(const ixia_auth_t *a) { return a && a->enabled; }

/* ---- checks ---- */

static char *format_time(gint64 epoch) {
  GDateTime *t = g_date_time_new_from_unix_utc(epoch);
  char *s = t ? g_date_time_format_iso8601(t) : g_strdup_printf("%" G_GINT64_FORMAT, epoch);
  if (t) g_date_time_unref(t);
  return s;
}

static gboolean still_valid(const ixia_principal_t *p, ixia_error_t **err) {
  if (atomic_load(&p->revoked))
    return ixia_error_set(err, IXIA_EUNAUTHENTICATED, "API key %s was revoked", p->id);
  if (p->expires_at && g_get_real_time() / G_USEC_PER_SEC >= p->expires_at) {
    char *when = format_time(p->expires_at);
    ixia_error_set(err, IXIA_EUNAUTHENTICATED, "API key %s expired at %s", p->id, when);
    g_free(when);
    return FALSE;
  }
  return TRUE;
}

ixia_principal_t *ixia_auth_verify(ixia_auth_t *a, const char *key, gsize len, ixia_error_t **err) {
  if (!a->enabled) return ixia_principal_ref(a->anyone);
  /* ixk_<id>_<secret>: the id picks the record, the hash proves the key. */
  if (!key || len < sizeof KEY_PREFIX || memcmp(key, KEY_PREFIX, strlen(KEY_PREFIX)) != 0) {
    ixia_error_set(err, IXIA_EUNAUTHENTICATED,
                   "not an ixia API key (keys look like ixk_<id>_<secret>; `ixia keys create` "
                   "makes one)");
    return NULL;
  }
  const char *id = key + strlen(KEY_PREFIX);
  const char *us = memchr(id, '_', len - strlen(KEY_PREFIX));
  if (!us || us == id || (gsize)(us - id) > 32) {
    ixia_error_set(err, IXIA_EUNAUTHENTICATED, "malformed API key (expected ixk_<id>_<secret>)");
    return NULL;
  }
  char *idstr = g_strndup(id, (gsize)(us - id));
  char *digest = sha256_hex(key, len);
  ixia_principal_t *p = NULL;
  if (strcmp(idstr, SERVICE_ID) == 0) {
    if (a->service && digest_equal(a->service->sha256, digest)) p = ixia_principal_ref(a->service);
  } else {
    g_mutex_lock(&a->lock);
    ixia_principal_t *r = g_hash_table_lookup(a->keys, idstr);
    if (r && digest_equal(r->sha256, digest)) p = ixia_principal_ref(r);
    g_mutex_unlock(&a->lock);
  }
  g_free(digest);
  if (!p) {
    ixia_error_set(err, IXIA_EUNAUTHENTICATED, "unknown or revoked API key %s", idstr);
  } else if (!still_valid(p, err)) {
    ixia_principal_unref(p);
    p = NULL;
  }
  g_free(idstr);
  return p;
}

gboolean ixia_auth_check(ixia_auth_t *a, const ixia_principal_t *p, ixia_action_t act,
                         const char *ns, ixia_error_t **err) {
  if (!a || !a->enabled) return TRUE;
  if (!p)
    return ixia_error_set(err, IXIA_EUNAUTHENTICATED,
                          "an API key is needed (HTTP: Authorization: Bearer KEY; Thrift: call "
                          "authenticate first; CLI and tools: IXIA_KEY)");
  if (!still_valid(p, err)) return FALSE;
  if (act == 0) return TRUE; /* any valid key */
  gboolean ns_ok = p->namespaces == NULL;
  for (char **n = p->namespaces; !ns_ok && ns && n && *n; n++) ns_ok = strcmp(*n, ns) == 0;
  if (!(p->actions & act) || !ns_ok)
    return ixia_error_set(err, IXIA_EDENIED, "API key %s may not %s %s", p->id,
                          ixia_action_name(act) ? ixia_action_name(act) : "do this",
                          ns ? ns : "every namespace (this call needs a key for namespace *)");
  return TRUE;
}

/* ---- management ---- */

char *ixia_auth_create_key(ixia_auth_t *a, const char *spec_json, ixia_error_t **err) {
  if (!a->keys_file) {
    ixia_error_set(err, IXIA_EUNSUPPORTED,
                   "API keys are off (auth.enabled=false): there is no key store to add to");
    return NULL;
  }
  const ixia_json_limits_t jl = {65536, NULL, 8, NULL};
  cJSON *spec = ixia_json_parse_object(spec_json ? spec_json : "", spec_json ? strlen(spec_json) : 0,
                                       &jl, "key spec", err);
  if (!spec) return NULL;
  ixia_principal_t *p = principal_new("", 0);
  gboolean ok = parse_scope(spec, p, err);
  const cJSON *exp = cJSON_GetObjectItemCaseSensitive(spec, "expires_at");
  const cJSON *desc = cJSON_GetObjectItemCaseSensitive(spec, "description");
  gint64 now = g_get_real_time() / G_USEC_PER_SEC;
  if (ok && exp && !cJSON_IsNull(exp)) {
    if (!cJSON_IsNumber(exp) || exp->valuedouble < 0)
      ok = ixia_error_set(err, IXIA_EINVAL, "\"expires_at\" must be epoch seconds (0 = never)");
    else p->expires_at = (gint64)exp->valuedouble;
    if (ok && p->expires_at && p->expires_at <= now)
      ok = ixia_error_set(err, IXIA_EINVAL, "\"expires_at\" %" G_GINT64_FORMAT " is in the past",
                          p->expires_at);
  }
  if (ok && desc && !cJSON_IsString(desc))
    ok = ixia_error_set(err, IXIA_EINVAL, "\"description\" must be a string");
  if (ok) p->description = g_strdup(desc ? desc->valuestring : "");
  cJSON_Delete(spec);
  char *text = NULL;
  if (ok) {
    p->created_at = now;
    g_free(p->id);
    text = new_key_text(&p->id);
    p->sha256 = sha256_hex(text, strlen(text));
    g_mutex_lock(&a->lock);
    g_hash_table_replace(a->keys, p->id, ixia_principal_ref(p));
    ok = save_locked(a, err);
    if (!ok) g_hash_table_remove(a->keys, p->id);
    g_mutex_unlock(&a->lock);
  }
  char *out = NULL;
  if (ok) {
    cJSON *o = record_json(p, FALSE);
    cJSON_AddStringToObject(o, "key", text);
    out = ixia_json_print(o);
    cJSON_Delete(o);
    IXIA_INFO("auth: created API key %s", p->id);
  }
  if (text) memset(text, 0, strlen(text));
  g_free(text);
  ixia_principal_unref(p);
  return out;
}

char *ixia_auth_list_keys(ixia_auth_t *a) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddBoolToObject(o, "auth_enabled", a->enabled);
  cJSON *arr = cJSON_AddArrayToObject(o, "keys");
  gint64 now = g_get_real_time() / G_USEC_PER_SEC;
  g_mutex_lock(&a->lock);
  GPtrArray *list = sorted_keys(a);
  for (guint i = 0; i < list->len; i++) {
    ixia_principal_t *p = list->pdata[i];
    cJSON *r = record_json(p, FALSE);
    cJSON_AddBoolToObject(r, "expired", p->expires_at && now >= p->expires_at);
    cJSON_AddItemToArray(arr, r);
  }
  g_ptr_array_unref(list);
  g_mutex_unlock(&a->lock);
  char *out = ixia_json_print(o);
  cJSON_Delete(o);
  return out;
}

gboolean ixia_auth_revoke_key(ixia_auth_t *a, const char *id, ixia_error_t **err) {
  if (!a->keys_file)
    return ixia_error_set(err, IXIA_EUNSUPPORTED, "API keys are off (auth.enabled=false)");
  g_mutex_lock(&a->lock);
  ixia_principal_t *p = id ? g_hash_table_lookup(a->keys, id) : NULL;
  gboolean ok = p != NULL;
  if (!ok) {
    ixia_error_set(err, IXIA_ENOTFOUND, "no API key %s", id ? id : "");
  } else {
    ixia_principal_ref(p);
    g_hash_table_steal(a->keys, id);
    ok = save_locked(a, err);
    if (ok) {
      atomic_store(&p->revoked, 1);
      ixia_principal_unref(p); /* the table's reference */
    } else {
      g_hash_table_replace(a->keys, p->id, p);
      p = NULL;
    }
  }
  g_mutex_unlock(&a->lock);
  if (ok) IXIA_INFO("auth: revoked API key %s", id);
  ixia_principal_unref(p);
  return ok;
}

/* ---- the client side ---- */

static char *client_key;
static GMutex client_lock;

void ixia_auth_set_client_key(const char *key) {
  g_mutex_lock(&client_lock);
  g_free(client_key);
  client_key = key && *key ? g_strdup(key) : NULL;
  g_mutex_unlock(&client_lock);
}

const char *ixia_auth_client_key(void) {
  g_mutex_lock(&client_lock);
  const char *k = client_key;
  g_mutex_unlock(&client_lock);
  return k;
}

void ixia_auth_client_key_from_env(const ixia_config_t *cfg) {
  const char *env = g_getenv("IXIA_KEY");
  if (env && *env) {
    ixia_auth_set_client_key(env);
    return;
  }
  char *svc = ixia_config_bool(cfg, "auth.enabled") ? ixia_auth_read_service_key(cfg, NULL) : NULL;
  if (svc) ixia_auth_set_client_key(svc);
  g_free(svc);
}
