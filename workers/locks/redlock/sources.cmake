# workers/locks/redlock/: the redlock lock-service kind (docs/lock-service-redlock.md): Redlock over
# independent embedded redis-server masters (the redis kind's EmbeddedRedis and RedisWatch, on
# hiredis), the clock shim preloaded into each (fencecheck_faults: clock_offset.h), and an embedded
# etcd (the etcd kind) as the linearizable token counter.
# The worker's side: no client (fencecheck-worker refuses the kind; command workers only).
list(APPEND FC_LOCK_CLIENT_SOURCES ${CMAKE_CURRENT_LIST_DIR}/redlock_lock_client.cpp)
# The harness's side: the kind, its instance and the majority watch.
list(APPEND FC_LOCK_KIND_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/redlock_watch.cpp
  ${CMAKE_CURRENT_LIST_DIR}/redlock_kind.cpp)
list(APPEND FC_LOCK_KIND_LIBS PkgConfig::HIREDIS fencecheck_faults)
