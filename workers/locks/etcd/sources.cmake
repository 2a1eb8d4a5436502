# The etcd lock-service kind (docs/architecture.md, "The lock-service axis"): included by
# workers/locks/CMakeLists.txt.
#   worker side: the v3 JSON-gateway client (etcd_client.cpp) and EtcdLockClient (etcd_lock_client.cpp)
#   harness side: the embedded etcd-server launcher (embedded_etcd.cpp), the embedded cluster
#                 (etcd_cluster.cpp, lock_service.members: 3 or 5), the kind, its instance and
#                 its issuer watch (etcd_kind.cpp)
# Public headers: include/fencecheck/locks/etcd/.
list(APPEND FC_LOCK_INCLUDE_DIRS ${CMAKE_CURRENT_LIST_DIR}/include)
list(APPEND FC_LOCK_CLIENT_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/etcd_client.cpp
  ${CMAKE_CURRENT_LIST_DIR}/etcd_lock_client.cpp)
list(APPEND FC_LOCK_KIND_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/embedded_etcd.cpp
  ${CMAKE_CURRENT_LIST_DIR}/etcd_cluster.cpp
  ${CMAKE_CURRENT_LIST_DIR}/etcd_kind.cpp)
