# Thrift 0.17's c_glib generator emits *_finalize functions that never chain
# up to ThriftStruct's finalize, so GObject's per-instance data leaks on every
# struct (every request and response). Chain up after generation.
# Usage: cmake -DFILE=ixia_ixia_types.c -P patch-finalize.cmake
file(READ "${FILE}" src)
string(REGEX MATCHALL "_finalize \\(GObject \\*object\\)" finalizers "${src}")
list(LENGTH finalizers expected)
string(REGEX REPLACE
  "\n}\n\nstatic void\n([a-z0-9_]+_class_init)"
  "\n  G_OBJECT_CLASS (g_type_class_peek (THRIFT_TYPE_STRUCT))->finalize (object);\n}\n\nstatic void\n\\1"
  patched "${src}")
string(REGEX MATCHALL "g_type_class_peek \\(THRIFT_TYPE_STRUCT\\)" done "${patched}")
list(LENGTH done count)
if(NOT count EQUAL expected)
  message(FATAL_ERROR "patch-finalize: patched ${count} of ${expected} finalizers in ${FILE}; "
                      "the generator's output changed, review this patch")
endif()
file(WRITE "${FILE}" "${patched}")
