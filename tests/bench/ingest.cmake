# The ingest benchmark's ceiling program (tests/bench/ingest runs it; not a CTest test).
if(TARGET mrd_store AND TARGET mrd_replay)
  add_executable(ingest_ceiling ${CMAKE_CURRENT_LIST_DIR}/ingest_ceiling.c)
  target_link_libraries(ingest_ceiling PRIVATE mrd_replay mrd_store ${SQLITE3_LIB})
endif()
