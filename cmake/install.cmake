# Install rules and the Debian package (CPack), included from the top-level CMakeLists.txt
# after every component's add_subdirectory.
#
# Layout under the prefix (the launcher's own search, launcher/agentenv.c, finds each part
# relative to bin/meridian, so an installed copy never needs the build tree):
#   bin/meridian, bin/meridiand
#   lib/meridian/libmeridian.so         the agent (CUDA injection, NCCL plugin, NVTX)
#   lib/meridian/libmeridian_mpi.so     the PMPI wrappers (RUNPATH $ORIGIN: finds the agent)
#   lib/meridian/libmeridian_profapi.so the cudaProfilerStart/Stop interposers
#   share/meridian/SCHEMA.md            the database schema reference (aggregator/SCHEMA.md)
#   share/meridian/examples/            the recorded 2-rank job of the quick start
#   share/meridian/deploy/              Slurm, systemd, container and Kubernetes files
#   lib/systemd/system/meridiand@.service   the unit (deploy/systemd), not enabled
#   share/doc/meridian/                 README, ENVIRONMENT, COMPATIBILITY
# The agent libraries go to a private folder (lib/meridian, like /usr/lib/<package>/ in
# Debian): they are injected by path (CUDA_INJECTION64_PATH, LD_PRELOAD), never linked.
#
# Package: `cpack -G DEB --config build/CPackConfig.cmake` writes
# meridian_<version>_<arch>.deb, prefix /usr, dependencies from dpkg-shlibdeps.
include(GNUInstallDirs)

set(MRD_INSTALL_PRIVLIB lib/meridian)

install(TARGETS meridian RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT meridian)
if(TARGET meridiand)
  install(TARGETS meridiand RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT meridian)
endif()
if(TARGET meridian_agent)
  # $ORIGIN first: a copy of the agent with its libraries beside it (the container image's
  # /usr/lib/meridian, copied into training pods) loads them from there
  get_target_property(MRD_AGENT_INSTALL_RPATH meridian_agent INSTALL_RPATH)
  set_target_properties(meridian_agent PROPERTIES INSTALL_RPATH
                        "\$ORIGIN;${MRD_AGENT_INSTALL_RPATH}")
  install(TARGETS meridian_agent LIBRARY DESTINATION ${MRD_INSTALL_PRIVLIB} COMPONENT meridian)
endif()
if(TARGET meridian_mpi)
  # libmeridian_mpi.so needs libmeridian.so (its bridge), which sits beside it
  set_target_properties(meridian_mpi PROPERTIES INSTALL_RPATH "\$ORIGIN")
  install(TARGETS meridian_mpi LIBRARY DESTINATION ${MRD_INSTALL_PRIVLIB} COMPONENT meridian)
endif()
if(TARGET meridian_profapi)
  install(TARGETS meridian_profapi LIBRARY DESTINATION ${MRD_INSTALL_PRIVLIB} COMPONENT meridian)
endif()

install(FILES aggregator/SCHEMA.md DESTINATION ${CMAKE_INSTALL_DATADIR}/meridian
        COMPONENT meridian)
install(FILES README.md agent/ENVIRONMENT.md proto/COMPATIBILITY.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT meridian)
install(FILES tests/data/ref-rank0.mrdcap tests/data/ref-rank1.mrdcap
        DESTINATION ${CMAKE_INSTALL_DATADIR}/meridian/examples COMPONENT meridian)
# the unit template, not enabled (it needs /etc/meridian/RUN.env and RUN.secret first)
install(FILES deploy/systemd/meridiand@.service DESTINATION lib/systemd/system COMPONENT meridian)
foreach(part slurm systemd container k8s)
  if(IS_DIRECTORY ${PROJECT_SOURCE_DIR}/deploy/${part})
    install(DIRECTORY deploy/${part} DESTINATION ${CMAKE_INSTALL_DATADIR}/meridian/deploy
            COMPONENT meridian USE_SOURCE_PERMISSIONS)
  endif()
endforeach()

set(CPACK_PACKAGE_NAME meridian)
set(CPACK_PACKAGE_VENDOR "meridian")
set(CPACK_PACKAGE_CONTACT "meridian maintainers <meridian@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "cluster-wide GPU profiler for distributed training (agent, aggregator, launcher)")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# libmeridian_mpi.so's NEEDED libmeridian.so is ours, not a Debian library
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_BINARY_DIR}/agent)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "openmpi-bin")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "slurm-client, sqlite3")
set(CPACK_SOURCE_IGNORE_FILES "/build.*/" "/\\\\.git/")
include(CPack)
