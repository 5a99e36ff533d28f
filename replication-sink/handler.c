/* Thrift glue: converts generated types to sink.c calls and ixia_error_t to
 * the IxiaError exception. No logic lives here. */
#include "ixia_replication_sink.h"
#include "sink.h"
#include "thrift_util.h"

typedef struct {
  IxiaReplicationSinkHandler parent;
  ixia_sink_t *sink;
} IxiaSinkHandler;

typedef struct {
  IxiaReplicationSinkHandlerClass parent;
} IxiaSinkHandlerClass;

GType ixia_sink_handler_get_type(void);
G_DEFINE_TYPE(IxiaSinkHandler, ixia_sink_handler, IXIA_TYPE_REPLICATION_SINK_HANDLER)

static ixia_sink_t *sink_of(IxiaReplicationSinkIf *iface) { return ((IxiaSinkHandler *)iface)->sink; }

static gboolean h_replicate(IxiaReplicationSinkIf *iface, gint64 *ret, const GPtrArray *batches,
                            IxiaIxiaError **xe, GError **error) {
  (void)error;
  guint n = batches ? batches->len : 0;
  /* Views into the request's buffers; nothing is copied. */
  ixia_sink_batch_t *b = g_new0(ixia_sink_batch_t, n ? n : 1);
  for (guint i = 0; i < n; i++) {
    IxiaWalBatch *w = g_ptr_array_index(batches, i);
    b[i].sequence = w->sequence;
    b[i].data = w->data ? w->data->data : NULL;
    b[i].len = w->data ? w->data->len : 0;
  }
  ixia_error_t *err = NULL;
  gboolean ok = ixia_sink_replicate(sink_of(iface), b, n, ret, &err);
  g_free(b);
  return ok ? TRUE : ixia_error_to_thrift(xe, err);
}

static gboolean h_stats(IxiaReplicationSinkIf *iface, gchar **ret, IxiaIxiaError **xe,
                        GError **error) {
  (void)xe, (void)error;
  *ret = ixia_sink_stats(sink_of(iface));
  return TRUE;
}

static void ixia_sink_handler_init(IxiaSinkHandler *self) { (void)self; }

static void ixia_sink_handler_class_init(IxiaSinkHandlerClass *klass) {
  IxiaReplicationSinkHandlerClass *h = IXIA_REPLICATION_SINK_HANDLER_CLASS(klass);
  h->replicate = h_replicate;
  h->stats = h_stats;
}

ThriftProcessor *ixia_sink_processor_new(ixia_sink_t *sink) {
  IxiaSinkHandler *handler = g_object_new(ixia_sink_handler_get_type(), NULL);
  handler->sink = sink;
  ThriftProcessor *p =
      g_object_new(IXIA_TYPE_REPLICATION_SINK_PROCESSOR, "handler", handler, NULL);
  g_object_unref(handler); /* the processor holds its own reference */
  return p;
}
