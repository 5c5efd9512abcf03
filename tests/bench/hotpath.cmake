# The agent's hot-path benchmark (tests/bench/hotpath; run by hand, not a CTest test): the
# agent's real capture, ring, base, core and transport sources in one program, driven with
# synthetic CUPTI buffers. run.sh compiles the same file against an older tree for old/new
# pairs; this target is the current tree's.
if(MRD_HAVE_CUDA)
  file(GLOB MRD_BENCH_HOTPATH_CAPTURE CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/agent/capture/*.c)
  add_executable(bench_hotpath ${CMAKE_CURRENT_LIST_DIR}/hotpath/bench_hotpath.c
                 ${MRD_AGENT_CORE_SOURCES} ${MRD_BENCH_HOTPATH_CAPTURE})
  target_include_directories(bench_hotpath PRIVATE ${MRD_AGENT_INCLUDES}
                             ${PROJECT_SOURCE_DIR}/agent/capture ${MRD_CUDA_ROOT}/include)
  target_compile_definitions(bench_hotpath PRIVATE MRD_VERSION="${PROJECT_VERSION}")
  target_link_libraries(bench_hotpath PRIVATE mrd_proto ${MRD_CUPTI_LIB_DIR}/libcupti.so
                        Threads::Threads ${CMAKE_DL_LIBS})
  set_target_properties(bench_hotpath PROPERTIES BUILD_RPATH ${MRD_CUPTI_LIB_DIR})
endif()
