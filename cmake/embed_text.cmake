# Writes OUT, a C++ source defining `const char NAME[]` (in namespace lakecache) with the bytes of
# IN: how a page the binary serves is built into it. Usage:
#   cmake -DIN=file -DOUT=file.cc -DNAME=kSymbol -P embed_text.cmake
file(READ "${IN}" content)
string(FIND "${content}" ")lc_embed\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw string delimiter )lc_embed\"")
endif()
file(WRITE "${OUT}.tmp" "// Generated from ${IN} by cmake/embed_text.cmake: do not edit.\nnamespace lakecache {\nextern const char ${NAME}[];\nconst char ${NAME}[] = R\"lc_embed(${content})lc_embed\";\n}  // namespace lakecache\n")
file(RENAME "${OUT}.tmp" "${OUT}")
