# The postgres resource kind (docs/architecture.md, "The resource axis"; docs/resource-postgres.md):
# included by resources/lib.cmake.
#   worker side:  the writer (postgres_writer.cpp) running the user's SQL (postgres_sql.cpp) through
#                 libpq loaded at run time (postgres_libpq.cpp)
#   harness side: the kind (postgres_kind.cpp) and the embedded server (postgres_embedded.cpp)
# Public headers: include/fencecheck/resources/postgres*.h (tests, benchmarks).
list(APPEND FC_RESOURCE_INCLUDE_DIRS ${CMAKE_CURRENT_LIST_DIR}/include)
list(APPEND FC_RESOURCE_WRITER_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/postgres_sql.cpp
  ${CMAKE_CURRENT_LIST_DIR}/postgres_libpq.cpp
  ${CMAKE_CURRENT_LIST_DIR}/postgres_writer.cpp)
list(APPEND FC_RESOURCE_KIND_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/postgres_kind.cpp
  ${CMAKE_CURRENT_LIST_DIR}/postgres_embedded.cpp)
