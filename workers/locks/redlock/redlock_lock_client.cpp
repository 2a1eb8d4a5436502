// The redlock kind's worker side: fencecheck-worker has no Redlock client (the kind is for command
// workers: workers/examples/redlock-node, node-redlock with ioredis), so make_lock_client refuses.
#include <stdexcept>

#include "../kinds.h"

namespace fencecheck::locks::detail {

std::unique_ptr<LockClient> make_redlock_lock_client(const nlohmann::json& /*endpoint*/, const LockClientOptions& /*options*/) {
  throw std::invalid_argument(
      "lock service kind redlock: fencecheck-worker has no Redlock client; run workers with a command (the example "
      "workers/examples/redlock-node uses node-redlock with ioredis: docs/lock-service-redlock.md)");
}

}  // namespace fencecheck::locks::detail
