# resources/: the resource axis (docs/architecture.md, "The resource axis").
#
# fencecheck_resource_writers: the worker's side, one ResourceWriter per kind (writer.h), found by
#   name in the writer registry (src/writer.cpp). What a worker links: no HTTP server, so no
#   cpp-httplib (whose Debian build maps OpenSSL), and no libpq (the postgres writer loads it at
#   run time).
# fencecheck_resource_kinds: the harness's side, one ResourceKind per kind registered by name
#   (resource_kind.h, registry.cpp): validation of the scenario's fields, embedded start or
#   connect, health, read-back, evidence, orphans, the worker's environment, the programs it needs.
#
# Each kind lives in its own folder <kind>/ with its sources, its private headers, its public
# headers (<kind>/include/fencecheck/resources/) and a sources.cmake that adds them to the lists
# below; every <kind>/sources.cmake found is included, so a new kind's folder needs no line here
# (its one registry row is in kinds.h). Today:
#   store/     FencedStore, StoreServer and fencecheck-store (its own targets), StoreClient, the kind
#   postgres/  embedded PostgreSQL, libpq loaded at run time, the user's SQL, the kind
#   http/      the user's HTTP service under the write contract (docs/resource-http.md), the kind
find_package(PostgreSQL REQUIRED)  # libpq (Debian: libpq-dev)

set(FC_RESOURCE_WRITER_SOURCES ${CMAKE_CURRENT_LIST_DIR}/src/writer.cpp)
set(FC_RESOURCE_KIND_SOURCES ${CMAKE_CURRENT_LIST_DIR}/registry.cpp)
set(FC_RESOURCE_INCLUDE_DIRS ${CMAKE_CURRENT_LIST_DIR}/include)
file(GLOB FC_RESOURCE_KIND_CMAKE CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*/sources.cmake)
foreach(kind_cmake ${FC_RESOURCE_KIND_CMAKE})
  include(${kind_cmake})
endforeach()

add_library(fencecheck_resource_writers ${FC_RESOURCE_WRITER_SOURCES})
target_include_directories(fencecheck_resource_writers PUBLIC ${FC_RESOURCE_INCLUDE_DIRS})
# libpq's header only: the postgres writer loads libpq.so.5 at run time (postgres/postgres_libpq.h),
# so that a worker writing to any other kind maps no libpq (nor the libssl, libcrypto, Kerberos, LDAP
# and GnuTLS it brings: 5.4 MiB resident per process).
target_include_directories(fencecheck_resource_writers SYSTEM PRIVATE ${PostgreSQL_INCLUDE_DIRS})
target_link_libraries(fencecheck_resource_writers
  PUBLIC fencecheck_proto nlohmann_json::nlohmann_json
  PRIVATE fencecheck_http spdlog::spdlog ${CMAKE_DL_LIBS})

add_library(fencecheck_resource_kinds ${FC_RESOURCE_KIND_SOURCES})
target_include_directories(fencecheck_resource_kinds PUBLIC ${FC_RESOURCE_INCLUDE_DIRS})
# fencecheck_process (workers/process/: ChildProcess, free_tcp_port, tail_text) is below both axes.
target_link_libraries(fencecheck_resource_kinds
  PUBLIC fencecheck_resource_writers fencecheck_proto nlohmann_json::nlohmann_json
  PRIVATE fencecheck_process fencecheck_http PostgreSQL::PostgreSQL spdlog::spdlog Boost::filesystem)
