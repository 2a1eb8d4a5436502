// The lock-service kinds registered by name (lock_service_kind.h). A constant table rather than
// self-registering statics: a static library drops an object file nothing refers to, and with it
// the kind. Adding a kind is one folder and one row here (and one in src/lock_client.cpp).
#include <array>

#include "fencecheck/locks/lock_service_kind.h"
#include "kinds.h"

namespace fencecheck::locks {
namespace {

using Row = const LockServiceKind& (*)();
// ROWS: each kind adds its row when its folder lands.
constexpr std::array<Row, 4> kKinds{&detail::etcd_kind, &detail::zookeeper_kind, &detail::redis_kind, &detail::none_kind};

}  // namespace

const LockServiceKind* find_lock_service_kind(std::string_view name) {
  for (Row row : kKinds)
    if (row().name() == name) return &row();
  return nullptr;
}

OrphanReport stop_orphaned_lock_services(const std::filesystem::path& run_dir, bool force) {
  OrphanReport out;
  for (Row row : kKinds) {
    auto r = row().stop_orphans(run_dir, force);
    for (auto& line : r.said) out.said.push_back(std::move(line));
    out.not_stopped += r.not_stopped;
  }
  return out;
}

std::vector<std::string_view> lock_service_kind_names() {
  std::vector<std::string_view> out;
  for (Row row : kKinds) out.push_back(row().name());
  return out;
}

}  // namespace fencecheck::locks
