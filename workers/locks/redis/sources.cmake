# workers/locks/redis/: the redis lock-service kind (docs/lock-service-redis.md), on Debian's hiredis
# 0.14 (libhiredis-dev), found through pkg-config: its CMake package file
# (/usr/lib/x86_64-linux-gnu/cmake/Hiredis) defines variables but no target. GLOBAL, so that the
# tests (tests/locks/) can use the same target.
if(NOT TARGET PkgConfig::HIREDIS)
  pkg_check_modules(HIREDIS REQUIRED IMPORTED_TARGET GLOBAL hiredis)
endif()
# The worker's side: the connection, the lock's Lua scripts and RedisLockClient.
list(APPEND FC_LOCK_CLIENT_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/redis_connection.cpp
  ${CMAKE_CURRENT_LIST_DIR}/redis_lock_client.cpp)
list(APPEND FC_LOCK_CLIENT_LIBS PkgConfig::HIREDIS)
# The harness's side: the embedded redis-server, the keyspace-notification watch, the kind.
list(APPEND FC_LOCK_KIND_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/embedded_redis.cpp
  ${CMAKE_CURRENT_LIST_DIR}/redis_watch.cpp
  ${CMAKE_CURRENT_LIST_DIR}/redis_kind.cpp)
list(APPEND FC_LOCK_KIND_LIBS PkgConfig::HIREDIS)
