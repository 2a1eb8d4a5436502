# The http resource kind (docs/architecture.md, "The resource axis"; docs/resource-http.md):
# included by resources/lib.cmake.
#   worker side:  the writer speaking the HTTP write contract (http_writer.cpp)
#   harness side: the kind (http_kind.cpp): the user's service, started or at its URL
# Public header: include/fencecheck/resources/http_resource.h (tests).
list(APPEND FC_RESOURCE_INCLUDE_DIRS ${CMAKE_CURRENT_LIST_DIR}/include)
list(APPEND FC_RESOURCE_WRITER_SOURCES ${CMAKE_CURRENT_LIST_DIR}/http_writer.cpp)
list(APPEND FC_RESOURCE_KIND_SOURCES ${CMAKE_CURRENT_LIST_DIR}/http_kind.cpp)
