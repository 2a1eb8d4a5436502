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
  src/sweep.cpp
  # The fault axis (fault_kind.h): one file per kind, and their table.
  kinds/registry.cpp
  kinds/sigstop.cpp
  kinds/cpu_throttle.cpp
  kinds/freeze.cpp
  kinds/partition.cpp
  kinds/netem.cpp
  kinds/lock_service_restart.cpp)
# The field reader every axis shares (ResourceFields, a header-only interface) comes from
# resources/include; units (durations, percentages) from fencecheck_proto.
target_include_directories(fencecheck_faults PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include
                                                    ${CMAKE_SOURCE_DIR}/resources/include)
target_link_libraries(fencecheck_faults PUBLIC nlohmann_json::nlohmann_json fencecheck_proto)
