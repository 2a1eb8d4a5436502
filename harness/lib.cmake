# fencecheck_harness: orchestrator, services, lock watch, run directory, metrics; and the CLI.
add_library(fencecheck_harness
  src/child_process.cpp
  src/services.cpp
  src/lock_watch.cpp
  src/run_dir.cpp
  src/metrics.cpp
  src/orchestrator.cpp)
target_include_directories(fencecheck_harness PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
target_link_libraries(fencecheck_harness PUBLIC
  fencecheck_scenario fencecheck_check fencecheck_faults fencecheck_workers fencecheck_resources fencecheck_proto
  Boost::filesystem spdlog::spdlog prometheus-cpp::core Threads::Threads)

add_executable(fencecheck main.cpp)
target_link_libraries(fencecheck PRIVATE fencecheck_harness)
# The orchestrator finds its workers and store beside itself.
add_dependencies(fencecheck fencecheck-worker fencecheck-store)
