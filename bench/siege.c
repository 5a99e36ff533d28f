/* The "siege" workload: what a normal client sees while the API is held by
 * thousands of idle connections and a slowloris client.
 *
 * Measured twice in one run, first on a quiet API (the baseline, the limit
 * to compare with), then with --idle connections open and doing nothing and
 * one client trickling a frame a byte at a time: a fresh connection + get
 * (what `ixia get` costs on the wire) many times, and the `ixia get` command
 * itself (process start included) a few times. Reports both distributions,
 * how many idle connections the API held, and when it cut the slowloris off
 * (server.request_timeout_ms). */
#include <stdatomic.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "client.h"
#include "hdr.h"

#define PROBE_KEY "siege-probe"
#define WIRE_GETS 300
#define CLI_GETS 20

static int tcp_connect(const char *hostport) {
  const char *colon = strrchr(hostport, ':');
  if (!colon) return -1;
  char *host = g_strndup(hostport, (gsize)(colon - hostport));
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  struct addrinfo *res = NULL;
  int rc = getaddrinfo(host, colon + 1, &hints, &res);
  g_free(host);
  if (rc != 0) return -1;
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  return fd;
}

/* Connect + get of the probe key, WIRE_GETS times; then `ixia get`. */
static gboolean measure(const ixia_bench_opts_t *o, const char *cli, ixia_hdr_t *wire,
                        ixia_hdr_t *cmd, ixia_error_t **err) {
  for (int i = 0; i < WIRE_GETS; i++) {
    gint64 t0 = g_get_monotonic_time();
    ixia_client_t *c = ixia_client_new(o->api, err);
    gboolean found = FALSE;
    gboolean ok = c && ixia_client_get(c, "bench", "siege", PROBE_KEY, NULL, &found, NULL, NULL, err);
    ixia_client_destroy(c);
    if (!ok) return FALSE;
    if (!found) return ixia_error_set(err, IXIA_EINTERNAL, "the probe document is missing");
    ixia_hdr_record(wire, g_get_monotonic_time() - t0);
  }
  char *argv[] = {(char *)cli, "--api", o->api, "get", "bench", "siege", PROBE_KEY, NULL};
  for (int i = 0; i < CLI_GETS; i++) {
    gint64 t0 = g_get_monotonic_time();
    gint status = -1;
    GError *gerr = NULL;
    if (!g_spawn_sync(NULL, argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL, NULL,
                      &status, &gerr))
      return ixia_error_from_gerror(err, gerr, IXIA_EINTERNAL, cli);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      return ixia_error_set(err, IXIA_EUNAVAILABLE, "`ixia get` exited with status %d", status);
    ixia_hdr_record(cmd, g_get_monotonic_time() - t0);
  }
  return TRUE;
}

typedef struct {
  int fd;
  _Atomic gint stop;
  gint64 started_us, cut_us; /* cut_us: when the server closed it, 0 = never */
} slowloris_t;

/* One byte every 500 ms of a frame announcing 1 MB, until the server cuts
 * the connection or the run ends. */
static gpointer slowloris_main(gpointer data) {
  slowloris_t *s = data;
  const guint8 header[4] = {0, 0x10, 0, 0};
  if (send(s->fd, header, 4, MSG_NOSIGNAL) != 4) return NULL;
  s->started_us = g_get_monotonic_time();
  struct timeval tv = {.tv_usec = 500000};
  setsockopt(s->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  while (!atomic_load(&s->stop)) {
    guint8 b = 0x80;
    char x;
    ssize_t r = recv(s->fd, &x, 1, 0);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK) ||
        send(s->fd, &b, 1, MSG_NOSIGNAL) != 1) {
      s->cut_us = g_get_monotonic_time();
      break;
    }
  }
  return NULL;
}

static char *cli_path(void) {
  char *self = g_file_read_link("/proc/self/exe", NULL);
  char *dir = self ? g_path_get_dirname(self) : g_strdup(".");
  char *cli = g_build_filename(dir, "ixia", NULL);
  g_free(self);
  g_free(dir);
  return cli;
}

gboolean ixia_bench_siege(const ixia_bench_opts_t *o, int idle) {
  ixia_error_t *err = NULL;
  ixia_client_t *c = ixia_client_new(o->api, &err);
  gboolean ok =
      c &&
      ixia_client_apply_schema(c, "{\"namespace\":\"bench\",\"table\":\"siege\",\"indexes\":[]}",
                               NULL, &err) &&
      ixia_client_put(c, "bench", "siege", PROBE_KEY, "{\"probe\":true}", -1, NULL, &err);
  ixia_client_destroy(c);
  char *cli = cli_path();
  ixia_hdr_t *base_wire = ixia_hdr_new(), *base_cmd = ixia_hdr_new();
  ixia_hdr_t *wire = ixia_hdr_new(), *cmd = ixia_hdr_new();
  ok = ok && measure(o, cli, base_wire, base_cmd, &err);

  struct rlimit rl;
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
  GArray *fds = g_array_new(FALSE, FALSE, sizeof(int));
  int refused = 0;
  for (int i = 0; ok && i < idle; i++) {
    int fd = tcp_connect(o->api);
    if (fd < 0) {
      refused++;
      if (errno == EMFILE || errno == ENFILE) break;
      continue;
    }
    g_array_append_val(fds, fd);
  }
  slowloris_t slow = {.fd = tcp_connect(o->api)};
  GThread *st = slow.fd >= 0 ? g_thread_new("slowloris", slowloris_main, &slow) : NULL;
  g_usleep(200000); /* the server has seen them all */
  ok = ok && measure(o, cli, wire, cmd, &err);
  char *stats = NULL;
  c = ok ? ixia_client_new(o->api, &err) : NULL;
  ok = ok && ixia_client_stats(c, &stats, &err);
  ixia_client_destroy(c);
  /* Wait (bounded) for the server to cut the slowloris. */
  for (int i = 0; st && i < 600 && !slow.cut_us; i++) g_usleep(100000);
  if (st) {
    atomic_store(&slow.stop, 1);
    g_thread_join(st);
    close(slow.fd);
  }
  for (guint i = 0; i < fds->len; i++) close(g_array_index(fds, int, i));

  cJSON *out = ixia_bench_result_new("siege");
  if (ok) {
    cJSON_AddNumberToObject(out, "idle_connections", fds->len);
    cJSON_AddNumberToObject(out, "idle_refused", refused);
    cJSON *st_json = cJSON_Parse(stats ? stats : "{}");
    cJSON_AddNumberToObject(out, "server_connections_open",
                            cJSON_GetNumberValue(cJSON_GetObjectItem(st_json, "connections_open")));
    cJSON_Delete(st_json);
    ixia_bench_add_latency(out, "quiet_connect_get_", base_wire);
    ixia_bench_add_latency(out, "siege_connect_get_", wire);
    ixia_bench_add_latency(out, "quiet_ixia_get_", base_cmd);
    ixia_bench_add_latency(out, "siege_ixia_get_", cmd);
    if (slow.cut_us)
      cJSON_AddNumberToObject(out, "slowloris_cut_after_ms",
                              (double)(slow.cut_us - slow.started_us) / 1000.0);
    else
      cJSON_AddNullToObject(out, "slowloris_cut_after_ms");
  } else {
    cJSON_AddStringToObject(out, "error", err ? err->message : "failed");
  }
  ixia_bench_print(out);
  ixia_error_destroy(err);
  g_free(stats);
  g_free(cli);
  g_array_free(fds, TRUE);
  ixia_hdr_destroy(base_wire);
  ixia_hdr_destroy(base_cmd);
  ixia_hdr_destroy(wire);
  ixia_hdr_destroy(cmd);
  return ok;
}
