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
  src/sweep.cpp
  src/clock_offset.cpp)
# The fault axis (fault_kind.h): one file per kind and their table, every .cpp in kinds/, so a new
# kind's file needs no line here (its row goes in kinds/kinds.h).
file(GLOB FC_FAULT_KIND_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/kinds/*.cpp)
target_sources(fencecheck_faults PRIVATE ${FC_FAULT_KIND_SOURCES})
# The field reader every axis shares (KindFields, fencecheck/proto/kind_fields.h) and units
# (durations, percentages) come from fencecheck_proto; write_all from fencecheck_process.
target_include_directories(fencecheck_faults PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
target_link_libraries(fencecheck_faults PUBLIC nlohmann_json::nlohmann_json fencecheck_proto PRIVATE fencecheck_process)
# The clock shim (faults/clockshim/clock_shim.cpp, fencecheck/faults/clock_offset.h): an LD_PRELOAD
# library that moves one process's wall clock (the clock-jump fault kind). bin/ beside fencecheck,
# where clock_shim_library() finds it. Never sanitized nor fuzz-instrumented: it is preloaded into
# redis-server, which has no sanitizer runtime; it uses no C++ library at run time.
add_library(fencecheck_clockshim MODULE ${CMAKE_CURRENT_LIST_DIR}/clockshim/clock_shim.cpp)
set_target_properties(fencecheck_clockshim PROPERTIES OUTPUT_NAME fencecheck-clockshim PREFIX lib
                      LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin CXX_VISIBILITY_PRESET hidden)
target_include_directories(fencecheck_clockshim PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/include)
target_compile_options(fencecheck_clockshim PRIVATE -fno-sanitize=all -fno-exceptions -fno-rtti)
target_link_options(fencecheck_clockshim PRIVATE -fno-sanitize=all)
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  target_link_options(fencecheck_clockshim PRIVATE -nostdlib++)  # GCC 12 has no -nostdlib++: it links libstdc++, unused
endif()
add_dependencies(fencecheck_faults fencecheck_clockshim)
