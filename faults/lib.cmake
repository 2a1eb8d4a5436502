# fencecheck_faults: fault kinds behind one interface (fault.h), the fault ledger, process identity.
add_library(fencecheck_faults
  src/process.cpp
  src/process_tree.cpp
  src/ledger.cpp
  src/sigstop.cpp
  src/worker_group.cpp
  src/command.cpp
  src/cgroup.cpp
  src/cpu_throttle.cpp
  src/freeze.cpp
  src/netns.cpp
  src/partition.cpp
  src/netem.cpp
  src/sweep.cpp)
target_include_directories(fencecheck_faults PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
target_link_libraries(fencecheck_faults PUBLIC nlohmann_json::nlohmann_json)
