# Writes the text file IN as a C source OUT that defines `const char NAME[]` (its bytes and a
# terminating NUL): the HTML report's script and style sheet live as ordinary files in the
# tree (aggregator/export/html/) and are embedded at build time.
# usage: cmake -DIN=file -DOUT=file.c -DNAME=symbol -P embed_text.cmake
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n"
       bytes "${bytes}")
file(WRITE "${OUT}.tmp" "/* generated from ${IN} by cmake/embed_text.cmake */\n"
     "extern const char ${NAME}[];\nconst char ${NAME}[] = {\n${bytes}0};\n")
file(RENAME "${OUT}.tmp" "${OUT}")
