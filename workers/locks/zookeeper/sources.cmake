# The zookeeper lock-service kind (docs/lock-service-zookeeper.md), included by
# workers/locks/CMakeLists.txt. Debian's multi-threaded C client: libzookeeper-mt-dev
# (<zookeeper/zookeeper.h>, libzookeeper_mt); the embedded server is Debian's zookeeper package
# (a JVM, started at run time: nothing to link).
find_path(FC_ZOOKEEPER_INCLUDE zookeeper/zookeeper.h REQUIRED)
find_library(FC_ZOOKEEPER_MT zookeeper_mt REQUIRED)
list(APPEND FC_LOCK_CLIENT_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/zk_handle.cpp
  ${CMAKE_CURRENT_LIST_DIR}/zookeeper_lock_client.cpp)
list(APPEND FC_LOCK_CLIENT_LIBS ${FC_ZOOKEEPER_MT})
list(APPEND FC_LOCK_KIND_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/embedded_zookeeper.cpp
  ${CMAKE_CURRENT_LIST_DIR}/zookeeper_watch.cpp
  ${CMAKE_CURRENT_LIST_DIR}/zookeeper_kind.cpp)
# fencecheck_faults: the clock shim's offset file (fencecheck/faults/clock_offset.h), preloaded
# into each ensemble member so that clock-jump can move its wall clock.
list(APPEND FC_LOCK_KIND_LIBS ${FC_ZOOKEEPER_MT} fencecheck_faults)
