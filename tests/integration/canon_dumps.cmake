# Canonical dumps of the recorded captures and the batch fuzz corpus, against checked-in
# hashes (canon_dumps.sha256): proves that a change to the batch builder, reader or the
# kinds table (proto/kinds.h) leaves every event of those inputs, as the canonical form
# sees it (launcher/replay/canon.h), byte for byte as it was.
#   cmake -DDUMP=<mrd-canon-dump> -DTESTS=<tests/> -DEXPECTED=<canon_dumps.sha256> -P this
# Each line of EXPECTED: "<sha256> <glob under tests/>": the dumps of the matching files,
# concatenated in sorted order, hash to it.
file(STRINGS ${EXPECTED} lines REGEX "^[0-9a-f]")
set(bad 0)
foreach(line ${lines})
  string(REGEX REPLACE "^([0-9a-f]+) +(.*)$" "\\1;\\2" parts "${line}")
  list(GET parts 0 want)
  list(GET parts 1 glob)
  file(GLOB files ${TESTS}/${glob})
  list(SORT files)
  list(LENGTH files n)
  execute_process(COMMAND ${DUMP} ${files} OUTPUT_VARIABLE all RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(SEND_ERROR "mrd-canon-dump failed (${rc}) on ${glob}")
  endif()
  string(SHA256 got "${all}")
  if(got STREQUAL want)
    message(STATUS "ok: ${glob} (${n} files)")
  else()
    message(SEND_ERROR "canonical dump of ${glob} (${n} files) changed: ${got}, expected ${want}")
    set(bad 1)
  endif()
endforeach()
if(bad)
  message(FATAL_ERROR "canonical dumps changed")
endif()
