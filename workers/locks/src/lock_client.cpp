// make_lock_client: the worker side's registry (lock_client.h), one row per kind of kinds.h.
#include "fencecheck/locks/lock_client.h"

#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "kinds.h"

namespace fencecheck::locks {
namespace {

using Make = std::unique_ptr<LockClient> (*)(const nlohmann::json&, const LockClientOptions&);
// One row per kind of kinds.h's FC_LOCK_SERVICE_KINDS.
#define FC_LOCK_CLIENT_ROW(kind) std::pair<std::string_view, Make>{#kind, &detail::make_##kind##_lock_client},
constexpr std::pair<std::string_view, Make> kClients[] = {FC_LOCK_SERVICE_KINDS(FC_LOCK_CLIENT_ROW)};
#undef FC_LOCK_CLIENT_ROW

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
