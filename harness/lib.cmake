# fencecheck_harness: orchestrator, services, run directory, metrics; and the CLI.
# fencecheck_process: ChildProcess alone, for every part that starts a program (the resource kinds'
# embedded instances, the orchestrator's workers and services).
add_library(fencecheck_process src/child_process.cpp src/server_support.cpp)
target_include_directories(fencecheck_process PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
target_link_libraries(fencecheck_process PUBLIC fencecheck_proto Boost::filesystem Threads::Threads PRIVATE spdlog::spdlog)

add_library(fencecheck_harness
  src/services.cpp
  src/fault_plan.cpp
  src/run_dir.cpp
  src/netns_scope.cpp
  src/metrics.cpp
  src/live_metrics.cpp
  src/orchestrator.cpp
  src/junit.cpp
  src/history_tally.cpp
  src/report.cpp
  src/report_html.cpp
  src/report_retention.cpp
  src/progress.cpp
  src/probe.cpp
  src/preflight.cpp
  src/night.cpp)
target_include_directories(fencecheck_harness PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
target_link_libraries(fencecheck_harness PUBLIC
  fencecheck_process fencecheck_scenario fencecheck_check fencecheck_faults fencecheck_workers fencecheck_lock_kinds fencecheck_resources
  fencecheck_resource_kinds fencecheck_proto
  Boost::filesystem spdlog::spdlog prometheus-cpp::core Threads::Threads
  PRIVATE prometheus-cpp::pull prometheus-cpp::push CURL::libcurl)
# junit.xml is written with pugixml (Debian: libpugixml-dev).
find_package(pugixml REQUIRED)
target_link_libraries(fencecheck_harness PRIVATE pugixml::pugixml)
# fencecheck probe: the probe file is read with yaml-cpp; token-required speaks raw HTTP.
target_link_libraries(fencecheck_harness PRIVATE yaml-cpp fencecheck_http)

add_executable(fencecheck main.cpp)
target_link_libraries(fencecheck PRIVATE fencecheck_harness)
# `fencecheck --version` prints project(VERSION) of the top-level CMakeLists.txt.
target_compile_definitions(fencecheck PRIVATE FENCECHECK_VERSION="${PROJECT_VERSION}")
# The orchestrator finds its workers and store beside itself.
add_dependencies(fencecheck fencecheck-worker fencecheck-store)
