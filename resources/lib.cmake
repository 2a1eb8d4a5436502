# resources/: the resource axis (docs/architecture.md, "The resource axis").
#
# fencecheck_resource_writers: the worker's side, one ResourceWriter per kind (writer.h): StoreClient
#   (plain HTTP on fencecheck_http), the postgres writer (libpq, loaded at run time) and the HTTP-contract writer. What
#   a worker links: no HTTP server, so no cpp-httplib (whose Debian build maps OpenSSL).
# fencecheck_resources: FencedStore (state machine + log) and StoreServer (cpp-httplib server +
#   /metrics); fencecheck-store = a thin main on top.
# fencecheck_resource_kinds: the harness's side, one ResourceKind per kind registered by name
#   (resource_kind.h, kinds/registry.cpp): validation of the scenario's fields, embedded start or
#   connect, health, read-back, evidence.
find_package(PostgreSQL REQUIRED)  # libpq (Debian: libpq-dev)

add_library(fencecheck_resource_writers
  ${CMAKE_CURRENT_LIST_DIR}/src/writer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/store_client.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/postgres_sql.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/postgres_libpq.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/postgres_writer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/http_writer.cpp)
target_include_directories(fencecheck_resource_writers PUBLIC ${CMAKE_CURRENT_LIST_DIR}/include)
# libpq's header only: the postgres writer loads libpq.so.5 at run time (resources/src/postgres_libpq.h),
# so that a worker writing to any other kind maps no libpq (nor the libssl, libcrypto, Kerberos, LDAP
# and GnuTLS it brings: 5.4 MiB resident per process).
target_include_directories(fencecheck_resource_writers SYSTEM PRIVATE ${PostgreSQL_INCLUDE_DIRS})
target_link_libraries(fencecheck_resource_writers
  PUBLIC fencecheck_proto nlohmann_json::nlohmann_json
  PRIVATE fencecheck_http spdlog::spdlog ${CMAKE_DL_LIBS})

add_library(fencecheck_resources
  ${CMAKE_CURRENT_LIST_DIR}/src/store.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/store_server.cpp)
target_include_directories(fencecheck_resources PUBLIC ${CMAKE_CURRENT_LIST_DIR}/include)
target_link_libraries(fencecheck_resources
  PUBLIC fencecheck_resource_writers fencecheck_proto prometheus-cpp::core Threads::Threads
  PRIVATE fc_httplib spdlog::spdlog nlohmann_json::nlohmann_json)

add_executable(fencecheck-store ${CMAKE_CURRENT_LIST_DIR}/store_main.cpp)
target_link_libraries(fencecheck-store PRIVATE fencecheck_resources spdlog::spdlog nlohmann_json::nlohmann_json)

add_library(fencecheck_resource_kinds
  ${CMAKE_CURRENT_LIST_DIR}/kinds/registry.cpp
  ${CMAKE_CURRENT_LIST_DIR}/kinds/store_kind.cpp
  ${CMAKE_CURRENT_LIST_DIR}/kinds/postgres_kind.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/postgres_embedded.cpp
  ${CMAKE_CURRENT_LIST_DIR}/kinds/http_kind.cpp)
target_include_directories(fencecheck_resource_kinds PUBLIC ${CMAKE_CURRENT_LIST_DIR}/include)
# fencecheck_process (harness/: ChildProcess) is defined later; CMake resolves it at generate time.
target_link_libraries(fencecheck_resource_kinds
  PUBLIC fencecheck_resource_writers fencecheck_proto nlohmann_json::nlohmann_json
  PRIVATE fencecheck_process fencecheck_http PostgreSQL::PostgreSQL spdlog::spdlog Boost::filesystem)
