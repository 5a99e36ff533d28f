# Turns a file into a C array: cmake -DIN=file -DOUT=file.c -DNAME=symbol -P embed.cmake
file(READ ${IN} HEX HEX)
string(LENGTH "${HEX}" LEN)
math(EXPR BYTES "${LEN} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," ARRAY "${HEX}")
file(WRITE ${OUT} "/* Generated from ${IN} by embed.cmake. */\n#include <glib.h>\nconst char ${NAME}[] = {${ARRAY} 0};\nconst gsize ${NAME}_len = ${BYTES};\n")
