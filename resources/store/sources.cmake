# The store resource kind (docs/architecture.md, "The resource axis"; docs/store.md): included by
# resources/lib.cmake.
#   worker side:  StoreClient (store_client.cpp), plain HTTP on fencecheck_http
#   harness side: the kind (store_kind.cpp), which starts fencecheck-store
#   its own targets: fencecheck_resources (FencedStore: state machine + log, store.cpp; StoreServer:
#                 cpp-httplib server + /metrics, store_server.cpp) and fencecheck-store (store_main.cpp)
# Public headers: include/fencecheck/resources/store*.h (tests, benchmarks).
list(APPEND FC_RESOURCE_INCLUDE_DIRS ${CMAKE_CURRENT_LIST_DIR}/include)
list(APPEND FC_RESOURCE_WRITER_SOURCES ${CMAKE_CURRENT_LIST_DIR}/store_client.cpp)
list(APPEND FC_RESOURCE_KIND_SOURCES ${CMAKE_CURRENT_LIST_DIR}/store_kind.cpp)

add_library(fencecheck_resources
  ${CMAKE_CURRENT_LIST_DIR}/store.cpp
  ${CMAKE_CURRENT_LIST_DIR}/store_server.cpp)
target_link_libraries(fencecheck_resources
  PUBLIC fencecheck_resource_writers fencecheck_proto prometheus-cpp::core Threads::Threads
  PRIVATE fc_httplib spdlog::spdlog nlohmann_json::nlohmann_json)

add_executable(fencecheck-store ${CMAKE_CURRENT_LIST_DIR}/store_main.cpp)
target_link_libraries(fencecheck-store PRIVATE fencecheck_resources spdlog::spdlog nlohmann_json::nlohmann_json)
