// fencecheck — the lock-service kinds' private registry rows (lock_service_kind.h and
// lock_client.h are the public side). One function per kind and side, each defined in the kind's
// own folder; registry.cpp and src/lock_client.cpp list them.
#pragma once

#include <memory>

#include <nlohmann/json_fwd.hpp>

#include "fencecheck/locks/lock_client.h"

namespace fencecheck::locks {
// Declared only: this header is also the worker side's (src/lock_client.cpp), which must not need
// the harness side's headers (lock_service_kind.h pulls in the resource axis's).
class LockServiceKind;
}  // namespace fencecheck::locks

namespace fencecheck::locks::detail {

const LockServiceKind& etcd_kind();       // etcd/etcd_kind.cpp
const LockServiceKind& zookeeper_kind();  // zookeeper/zookeeper_kind.cpp
const LockServiceKind& redis_kind();      // redis/redis_kind.cpp
const LockServiceKind& none_kind();       // none/none_kind.cpp

// The worker-side clients (make_lock_client dispatches on "kind"). Each throws
// std::invalid_argument naming the field an endpoint lacks.
std::unique_ptr<LockClient> make_etcd_lock_client(const nlohmann::json& endpoint, const LockClientOptions& options);
std::unique_ptr<LockClient> make_zookeeper_lock_client(const nlohmann::json& endpoint, const LockClientOptions& options);
std::unique_ptr<LockClient> make_redis_lock_client(const nlohmann::json& endpoint, const LockClientOptions& options);
/// Kind none: always throws std::invalid_argument (fencecheck-worker has no lock to take).
std::unique_ptr<LockClient> make_none_lock_client(const nlohmann::json& endpoint, const LockClientOptions& options);

}  // namespace fencecheck::locks::detail
