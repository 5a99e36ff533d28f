# Mends three bugs of Thrift 0.17's c_glib generator in the generated types.
# Usage: cmake -DFILE=ixia_ixia_types.c -P patch-generated.cmake
#
# 1. *_finalize functions never chain up to ThriftStruct's finalize, so
#    GObject's per-instance data leaks on every struct (every request and
#    response). Chain up.
# 2. A reader that meets a `binary` field twice in one struct frees the
#    first value (a GByteArray) with g_free: "free(): invalid pointer" on
#    any frame or event that repeats such a field (found by replaying the
#    recorded crash frames). Release it with g_byte_array_unref.
# 3. Each *_get_type() registers its type on first use behind an unguarded
#    `static GType type = 0`: two threads making the first object of a type
#    at once both register it; the loser stores 0 and every later call fails
#    again ("cannot register existing type"), so e.g. every change event is
#    undecodable for the life of the indexer (found by the kill -9 soak).
#    Guard each with g_once_init_enter/leave. (ixia_thrift_init() also
#    registers every type before daemons start threads.)
#
# Each patch counts what it changed and fails the build when the generator's
# output no longer has the expected shape.
file(READ "${FILE}" src)

string(REGEX MATCHALL "_finalize \\(GObject \\*object\\)" finalizers "${src}")
list(LENGTH finalizers expected)
string(REGEX REPLACE
  "\n}\n\nstatic void\n([a-z0-9_]+_class_init)"
  "\n  G_OBJECT_CLASS (g_type_class_peek (THRIFT_TYPE_STRUCT))->finalize (object);\n}\n\nstatic void\n\\1"
  src "${src}")
string(REGEX MATCHALL "g_type_class_peek \\(THRIFT_TYPE_STRUCT\\)" done "${src}")
list(LENGTH done count)
if(NOT count EQUAL expected)
  message(FATAL_ERROR "patch-generated: patched ${count} of ${expected} finalizers in ${FILE}; "
                      "the generator's output changed, review this patch")
endif()

string(REGEX MATCHALL "thrift_protocol_read_binary \\(protocol, &data" binaries "${src}")
list(LENGTH binaries expected)
string(REGEX REPLACE
  "g_free\\(this_object->([a-z0-9_]+)\\);(\n[ ]+this_object->[a-z0-9_]+ = NULL;\n[ ]+}\n\n[ ]+if \\(\\(ret = thrift_protocol_read_binary)"
  "g_byte_array_unref (this_object->\\1);\\2"
  src "${src}")
# (no ';' in the pattern: MATCHALL returns a list, which ';' would split)
string(REGEX MATCHALL "g_byte_array_unref \\(this_object->[a-z0-9_]+\\)" done "${src}")
list(LENGTH done count)
if(NOT count EQUAL expected)
  message(FATAL_ERROR "patch-generated: patched ${count} of ${expected} binary readers in ${FILE}; "
                      "the generator's output changed, review this patch")
endif()

string(REGEX MATCHALL "static GType type = 0" getters "${src}")
list(LENGTH getters expected)
string(REPLACE "static GType type = 0;\n\n  if (type == 0) \n  {"
  "static gsize type_once = 0;\n  static GType type = 0;\n\n  if (g_once_init_enter (&type_once))\n  {"
  src "${src}")
string(REPLACE "&type_info, 0);\n  }\n\n  return type;"
  "&type_info, 0);\n    g_once_init_leave (&type_once, 1);\n  }\n\n  return type;"
  src "${src}")
string(REGEX MATCHALL "if \\(g_once_init_enter \\(&type_once\\)\\)" entered "${src}")
string(REGEX MATCHALL "g_once_init_leave \\(&type_once, 1\\)" left "${src}")
list(LENGTH entered count_enter)
list(LENGTH left count_leave)
if(NOT count_enter EQUAL expected OR NOT count_leave EQUAL expected)
  message(FATAL_ERROR "patch-generated: guarded ${count_enter}/${count_leave} of ${expected} get_type functions "
                      "in ${FILE}; the generator's output changed, review this patch")
endif()

file(WRITE "${FILE}" "${src}")
