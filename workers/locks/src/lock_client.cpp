// make_lock_client: the worker side's registry (lock_client.h). One row per kind.
#include "fencecheck/locks/lock_client.h"

#include <array>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "kinds.h"

namespace fencecheck::locks {
namespace {

using Make = std::unique_ptr<LockClient> (*)(const nlohmann::json&, const LockClientOptions&);
// ROWS: each kind adds its row when its folder lands.
constexpr std::array<std::pair<std::string_view, Make>, 4> kClients{
    {{"etcd", &detail::make_etcd_lock_client},
     {"zookeeper", &detail::make_zookeeper_lock_client},
     {"redis", &detail::make_redis_lock_client},
     {"none", &detail::make_none_lock_client}}};

}  // namespace

std::unique_ptr<LockClient> make_lock_client(const nlohmann::json& endpoint, const LockClientOptions& options) {
  if (!endpoint.is_object() || !endpoint.contains("kind") || !endpoint["kind"].is_string())
    throw std::invalid_argument("lock service endpoint: expected a JSON object with a \"kind\", got " + endpoint.dump());
  const std::string kind = endpoint["kind"].get<std::string>();
  std::string known;
  for (const auto& [name, make] : kClients) {
    if (name == kind) return make(endpoint, options);
    known += (known.empty() ? "" : ", ") + std::string(name);
  }
  throw std::invalid_argument("unknown lock service kind \"" + kind + "\"; expected one of: " + known);
}

}  // namespace fencecheck::locks
