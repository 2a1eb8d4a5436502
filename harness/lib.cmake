# fencecheck_harness: the run, the reports, the metrics and the probe (rooms below); and the CLI.
# (ChildProcess and the embedded servers' helpers are fencecheck_process, workers/process/.)

# The harness's rooms, each with its sources (src/) and public headers (include/; the include
# strings stay "fencecheck/harness/<name>.h"):
#   run/      the run: orchestrator, services, fault plan, preflight, run directory, the night's
#             suite, the network lab's scope, the history tally
#   report/   the reports: report.html, the text summary, JUnit, progress lines, retention
#   metrics/  the metrics: the live /metrics registry and the file metrics
#   probe/    `fencecheck probe`: a user's service checked for fencing in isolation
set(FC_HARNESS_ROOMS run report metrics probe)
add_library(fencecheck_harness
  run/src/orchestrator.cpp
  run/src/services.cpp
  run/src/fault_plan.cpp
  run/src/preflight.cpp
  run/src/run_dir.cpp
  run/src/night.cpp
  run/src/netns_scope.cpp
  run/src/history_tally.cpp
  run/src/run_claim.cpp
  report/src/report.cpp
  report/src/report_html.cpp
  report/src/report_retention.cpp
  report/src/junit.cpp
  report/src/progress.cpp
  metrics/src/metrics.cpp
  metrics/src/live_metrics.cpp
  probe/src/probe.cpp)
foreach(room ${FC_HARNESS_ROOMS})
  target_include_directories(fencecheck_harness PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/${room}/include)
endforeach()
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
