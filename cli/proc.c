/* Process and socket helpers for ixia-local (proc.h).
 *
 * Identity checks read /proc/PID/stat: a pid is only signalled while its
 * start time still matches the one recorded, and a process counts as gone
 * only when all its threads are (a daemon killed with -9 can leave threads
 * exiting for a moment). Spawning detaches the child into its own session
 * so it outlives the tool. */
#include "proc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROC_POLL_US (20 * 1000)

/* Threads of a process still listed (its leader included). A process killed
 * with -9 shows its leader as a zombie while other threads are still
 * exiting, and those still hold its files (RocksDB's lock among them). */
static guint ixia_proc_threads(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  GDir *d = g_dir_open(path, 0, NULL);
  guint n = 0;
  if (d) {
    while (g_dir_read_name(d)) n++;
    g_dir_close(d);
  }
  return n;
}

guint64 ixia_proc_start_time(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  char *text = NULL;
  if (pid <= 0 || !g_file_get_contents(path, &text, NULL, NULL)) return 0;
  /* "pid (comm) state ppid ... starttime(22) ...": comm may hold spaces and
   * parentheses, so fields are counted from the last ')'. */
  guint64 start = 0;
  const char *p = strrchr(text, ')');
  if (p) {
    char **fields = g_strsplit(p + 2, " ", 21);
    /* fields[0] is field 3 (state), so field 22 is fields[19]. */
    gboolean leader_gone = fields[0] && (fields[0][0] == 'Z' || fields[0][0] == 'X');
    if (g_strv_length(fields) >= 20 && (!leader_gone || ixia_proc_threads(pid) > 1))
      start = g_ascii_strtoull(fields[19], NULL, 10);
    g_strfreev(fields);
  }
  g_free(text);
  return start;
}

gboolean ixia_proc_matches(pid_t pid, guint64 start_time) {
  guint64 now = ixia_proc_start_time(pid);
  return now != 0 && now == start_time;
}

static void ixia_proc_child_setup(gpointer data) {
  (void)data;
  /* Own session: the terminal's Ctrl-C and hang-up go to the foreground
   * process group, which the daemon must not be part of. */
  setsid();
}

gboolean ixia_proc_spawn_detached(char **argv, const char *cwd, const char *log_path, pid_t *pid,
                                  ixia_error_t **err) {
  int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    return ixia_error_set(err, IXIA_EINTERNAL, "cannot open log %s: %s", log_path,
                          g_strerror(errno));
  GDateTime *now = g_date_time_new_now_local();
  char *stamp = g_date_time_format_iso8601(now);
  char *cmd = g_strjoinv(" ", argv);
  char *header = g_strdup_printf("---- ixia-local %s: %s\n", stamp, cmd);
  /* The header only helps reading the log; a short write is not worth
   * failing the start for. */
  if (write(fd, header, strlen(header)) < 0) {
  }
  g_free(header);
  g_free(cmd);
  g_free(stamp);
  g_date_time_unref(now);

  GPid child = 0;
  GError *gerr = NULL;
  /* GLib closes every other descriptor in the child, so ixia-local's lock
   * file and sockets do not leak into the daemons. */
  gboolean ok = g_spawn_async_with_fds(cwd, argv, NULL,
                                       G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDIN_FROM_DEV_NULL,
                                       ixia_proc_child_setup, NULL, &child, -1, fd, fd, &gerr);
  close(fd);
  if (!ok) {
    ixia_error_set(err, IXIA_EINTERNAL, "cannot start %s: %s", argv[0], gerr->message);
    g_error_free(gerr);
    return FALSE;
  }
  *pid = child;
  return TRUE;
}

gboolean ixia_proc_reap(pid_t pid, int *status) {
  int st = 0;
  pid_t r;
  do {
    r = waitpid(pid, &st, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid) {
    if (status) *status = st;
    return TRUE;
  }
  return FALSE;
}

char *ixia_proc_describe_status(int status) {
  if (WIFEXITED(status)) return g_strdup_printf("exited with status %d", WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return g_strdup_printf("was killed by signal %d (%s)", WTERMSIG(status),
                           strsignal(WTERMSIG(status)));
  return g_strdup_printf("ended with wait status %d", status);
}

/* Waits up to ms for the process to be gone, reaping it if it is ours. */
static gboolean ixia_proc_wait_gone(pid_t pid, guint64 start_time, int ms) {
  gint64 deadline = g_get_monotonic_time() + (gint64)ms * 1000;
  for (;;) {
    ixia_proc_reap(pid, NULL);
    if (!ixia_proc_matches(pid, start_time)) return TRUE;
    if (g_get_monotonic_time() >= deadline) return FALSE;
    g_usleep(PROC_POLL_US);
  }
}

ixia_stop_result_t ixia_proc_stop(pid_t pid, guint64 start_time, int grace_ms,
                                  ixia_error_t **err) {
  guint64 now = ixia_proc_start_time(pid);
  if (now != start_time) {
    ixia_proc_reap(pid, NULL); /* a zombie child of ours */
    return now == 0 ? IXIA_STOP_NOT_RUNNING : IXIA_STOP_PID_REUSED;
  }
  if (kill(pid, SIGTERM) != 0) {
    if (errno == ESRCH) return IXIA_STOP_NOT_RUNNING;
    ixia_error_set(err, IXIA_EINTERNAL, "cannot signal pid %d: %s", (int)pid, g_strerror(errno));
    return IXIA_STOP_FAILED;
  }
  if (ixia_proc_wait_gone(pid, start_time, grace_ms)) return IXIA_STOP_TERMINATED;
  if (kill(pid, SIGKILL) != 0 && errno != ESRCH) {
    ixia_error_set(err, IXIA_EINTERNAL, "cannot SIGKILL pid %d: %s", (int)pid, g_strerror(errno));
    return IXIA_STOP_FAILED;
  }
  if (ixia_proc_wait_gone(pid, start_time, 5000)) return IXIA_STOP_KILLED;
  ixia_error_set(err, IXIA_EINTERNAL, "pid %d is still alive after SIGKILL", (int)pid);
  return IXIA_STOP_FAILED;
}

int ixia_proc_free_port(ixia_error_t **err) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    ixia_error_set(err, IXIA_EINTERNAL, "socket: %s", g_strerror(errno));
    return -1;
  }
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof a;
  int port = -1;
  if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
      getsockname(fd, (struct sockaddr *)&a, &alen) != 0)
    ixia_error_set(err, IXIA_EINTERNAL, "finding a free port: %s", g_strerror(errno));
  else
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

/* Waits for events on fd until the deadline (monotonic µs). */
static gboolean ixia_proc_poll(int fd, short events, gint64 deadline) {
  for (;;) {
    gint64 left_ms = (deadline - g_get_monotonic_time()) / 1000;
    if (left_ms <= 0) return FALSE;
    struct pollfd p = {.fd = fd, .events = events};
    int r = poll(&p, 1, (int)left_ms);
    if (r > 0) return TRUE;
    if (r == 0 || errno != EINTR) return FALSE;
  }
}

char *ixia_proc_tcp_request(const char *host, int port, const char *request, int timeout_ms,
                            ixia_error_t **err) {
  gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
    ixia_error_set(err, IXIA_EINVAL, "bad IPv4 address '%s'", host);
    return NULL;
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    ixia_error_set(err, IXIA_EINTERNAL, "socket: %s", g_strerror(errno));
    return NULL;
  }
  GString *reply = g_string_new(NULL);
  const char *failure = NULL;
  int sockerr = 0;
  socklen_t slen = sizeof sockerr;
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 && errno != EINPROGRESS) {
    failure = g_strerror(errno);
  } else if (!ixia_proc_poll(fd, POLLOUT, deadline)) {
    failure = "connect timed out";
  } else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &sockerr, &slen) != 0 || sockerr != 0) {
    failure = g_strerror(sockerr ? sockerr : errno);
  } else if (send(fd, request, strlen(request), MSG_NOSIGNAL) != (ssize_t)strlen(request)) {
    failure = "short send";
  } else {
    while (!strchr(reply->str, '\n')) {
      if (!ixia_proc_poll(fd, POLLIN, deadline)) {
        failure = "no reply in time";
        break;
      }
      char buf[256];
      ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n > 0) {
        g_string_append_len(reply, buf, n);
      } else if (n == 0) {
        failure = "connection closed";
        break;
      } else if (errno != EINTR && errno != EAGAIN) {
        failure = g_strerror(errno);
        break;
      }
    }
  }
  close(fd);
  if (failure) {
    ixia_error_set(err, IXIA_EUNAVAILABLE, "%s:%d: %s", host, port, failure);
    g_string_free(reply, TRUE);
    return NULL;
  }
  char *nl = strchr(reply->str, '\n');
  g_string_truncate(reply, (gsize)(nl - reply->str));
  if (reply->len && reply->str[reply->len - 1] == '\r') g_string_truncate(reply, reply->len - 1);
  return g_string_free(reply, FALSE);
}
