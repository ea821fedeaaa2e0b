# embed_text.cmake - a text file as a C array, so that a program carries it
# with no file to find at run time (cli/attach_gdb.py in `fsdpshim attach`).
#   cmake -DINPUT=file -DOUTPUT=header.h -DNAME=c_name -P embed_text.cmake
# writes `static const char NAME[] = {...bytes..., 0};`.
file(READ "${INPUT}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n  " bytes "${bytes}")
file(WRITE "${OUTPUT}" "/* generated from ${INPUT} by cmake/embed_text.cmake */\n"
  "static const char ${NAME}[] = {\n  ${bytes}0};\n")
