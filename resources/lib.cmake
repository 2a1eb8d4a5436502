# resources/: the reference fenced store. fencecheck_store_client = StoreClient alone (plain HTTP
# on fencecheck_http: what a worker links, without cpp-httplib and so without OpenSSL);
# fencecheck_resources = FencedStore (state machine + log) and StoreServer (cpp-httplib server +
# /metrics), with StoreClient; fencecheck-store = a thin main on top.
add_library(fencecheck_store_client ${CMAKE_CURRENT_LIST_DIR}/src/store_client.cpp)
target_include_directories(fencecheck_store_client PUBLIC ${CMAKE_CURRENT_LIST_DIR}/include)
target_link_libraries(fencecheck_store_client
  PUBLIC fencecheck_proto
  PRIVATE fencecheck_http nlohmann_json::nlohmann_json)

add_library(fencecheck_resources
  ${CMAKE_CURRENT_LIST_DIR}/src/store.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/store_server.cpp)
target_include_directories(fencecheck_resources PUBLIC ${CMAKE_CURRENT_LIST_DIR}/include)
target_link_libraries(fencecheck_resources
  PUBLIC fencecheck_store_client fencecheck_proto prometheus-cpp::core Threads::Threads
  PRIVATE fc_httplib spdlog::spdlog nlohmann_json::nlohmann_json)

add_executable(fencecheck-store ${CMAKE_CURRENT_LIST_DIR}/store_main.cpp)
target_link_libraries(fencecheck-store PRIVATE fencecheck_resources spdlog::spdlog nlohmann_json::nlohmann_json)
