# Mends two bugs of Thrift 0.17's c_glib generator in the generated types.
# Usage: cmake -DFILE=ixia_ixia_types.c -P patch-generated.cmake
#
# 1. *_finalize functions never chain up to ThriftStruct's finalize, so
#    GObject's per-instance data leaks on every struct (every request and
#    response). Chain up.
# 2. A reader that meets a `binary` field twice in one struct frees the
#    first value (a GByteArray) with g_free: "free(): invalid pointer" on
#    any frame or event that repeats such a field (found by replaying the
#    recorded crash frames). Release it with g_byte_array_unref.
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

file(WRITE "${FILE}" "${src}")
