# Mends a bug of Thrift 0.17's c_glib generator in a generated service
# client. Usage: cmake -DFILE=ixia_search.c -P patch-service.cmake
#
# A client reading the answer of a method that returns `binary` frees the
# value it already holds (a GByteArray) with g_free when the answer repeats
# its field: a leak of the array's bytes, and of its reference count's
# meaning. Release it with g_byte_array_unref (the same bug as patch 2 of
# patch-generated.cmake, in the client's reader of a result).
#
# The patch counts what it changed and fails the build when the generator's
# output no longer has the expected shape.
file(READ "${FILE}" src)

string(REGEX MATCHALL "thrift_protocol_read_binary \\(protocol, &data, &len, error\\)" binaries "${src}")
list(LENGTH binaries expected)
string(REGEX REPLACE
  "g_free\\(\\*_return\\);(\n[ ]+\\*_return = NULL;\n[ ]+}\n\n[ ]+if \\(\\(ret = thrift_protocol_read_binary)"
  "g_byte_array_unref (*_return);\\1"
  src "${src}")
string(REGEX MATCHALL "g_byte_array_unref \\(\\*_return\\)" done "${src}")
list(LENGTH done count)
if(NOT count EQUAL expected)
  message(FATAL_ERROR "patch-service: patched ${count} of ${expected} binary results in ${FILE}; "
                      "the generator's output changed, review this patch")
endif()

file(WRITE "${FILE}" "${src}")
