# The batch builder/cursor benchmark (tests/bench/batch; run by hand, not a CTest test).
if(TARGET mrd_replay)
  add_executable(bench_batch ${CMAKE_CURRENT_LIST_DIR}/batch/bench_batch.c)
  target_link_libraries(bench_batch PRIVATE mrd_replay)
endif()
