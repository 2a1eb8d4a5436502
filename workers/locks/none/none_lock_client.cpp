// The lock-service kind `none` on the worker's side (lock_client.h): there is no lock service for
// fencecheck-worker to take a lock from. The scenario loader refuses fencecheck-worker with kind
// none (a worker needs a command), so this is reached only by a hand-made --lock-service JSON.
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "../kinds.h"

namespace fencecheck::locks::detail {

std::unique_ptr<LockClient> make_none_lock_client(const nlohmann::json& /*endpoint*/, const LockClientOptions& /*options*/) {
  throw std::invalid_argument(
      "lock service kind none: fencecheck manages no lock service, so fencecheck-worker has no lock to take "
      "(a scenario of kind none runs workers with a command, which bring their own lock)");
}

}  // namespace fencecheck::locks::detail
