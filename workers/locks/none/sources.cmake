# workers/locks/none/: the lock-service kind `none` (docs/scenario-format.md, "lock_service"): a
# lock fencecheck does not manage (PostgreSQL advisory locks, a lease table). Nothing to start,
# watch or link: the harness's side is the kind alone, the worker's side a client that refuses.
list(APPEND FC_LOCK_CLIENT_SOURCES ${CMAKE_CURRENT_LIST_DIR}/none_lock_client.cpp)
list(APPEND FC_LOCK_KIND_SOURCES ${CMAKE_CURRENT_LIST_DIR}/none_kind.cpp)
