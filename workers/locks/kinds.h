// fencecheck — the lock-service kinds' registry rows (lock_service_kind.h and lock_client.h are
// the public side). Adding a kind is its folder workers/locks/<kind>/ (found by CMakeLists.txt)
// and one row in FC_LOCK_SERVICE_KINDS below; the row declares the kind's two functions, each
// defined in the kind's own folder, and puts them in both tables: registry.cpp's kinds (the
// harness's side) and src/lock_client.cpp's clients (the worker's side).
#pragma once

#include <memory>

#include <nlohmann/json_fwd.hpp>

#include "fencecheck/locks/lock_client.h"

namespace fencecheck::locks {
// Declared only: this header is also the worker side's (src/lock_client.cpp), which must not need
// the harness side's headers (lock_service_kind.h pulls in the resource axis's).
class LockServiceKind;
}  // namespace fencecheck::locks

// One row per kind, in table order (lock_service_kind_names(), the unknown-kind messages).
#define FC_LOCK_SERVICE_KINDS(ROW) \
  ROW(etcd)                        \
  ROW(zookeeper)                   \
  ROW(redis)                       \
  ROW(redlock)                     \
  ROW(none)

namespace fencecheck::locks::detail {

// const LockServiceKind& <kind>_kind(): the harness's side, in <kind>/<kind>_kind.cpp.
#define FC_LOCK_SERVICE_KIND_DECLARE(kind) const LockServiceKind& kind##_kind();
FC_LOCK_SERVICE_KINDS(FC_LOCK_SERVICE_KIND_DECLARE)
#undef FC_LOCK_SERVICE_KIND_DECLARE

// The worker-side clients (make_lock_client finds them by the endpoint's "kind"). Each throws
// std::invalid_argument naming the field an endpoint lacks; kind none's always throws
// (fencecheck-worker has no lock to take).
#define FC_LOCK_CLIENT_DECLARE(kind) \
  std::unique_ptr<LockClient> make_##kind##_lock_client(const nlohmann::json& endpoint, const LockClientOptions& options);
FC_LOCK_SERVICE_KINDS(FC_LOCK_CLIENT_DECLARE)
#undef FC_LOCK_CLIENT_DECLARE

}  // namespace fencecheck::locks::detail
