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
  src/relay.cpp
  src/sweep.cpp)
# The fault axis (fault_kind.h): one file per kind and their table, every .cpp in kinds/, so a new
# kind's file needs no line here (its row goes in kinds/kinds.h).
file(GLOB FC_FAULT_KIND_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/kinds/*.cpp)
target_sources(fencecheck_faults PRIVATE ${FC_FAULT_KIND_SOURCES})
# The field reader every axis shares (KindFields, fencecheck/proto/kind_fields.h) and units
# (durations, percentages) come from fencecheck_proto; write_all from fencecheck_process.
target_include_directories(fencecheck_faults PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
target_link_libraries(fencecheck_faults PUBLIC nlohmann_json::nlohmann_json fencecheck_proto PRIVATE fencecheck_process)
