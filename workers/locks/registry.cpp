// The lock-service kinds registered by name (lock_service_kind.h): the constant table, one row per
// kind in kinds.h's FC_LOCK_SERVICE_KINDS, then the kinds register_lock_service_kind added at run
// time (tests, out-of-tree kinds); proto/kind_registry.h holds both.
#include "fencecheck/locks/lock_service_kind.h"
#include "fencecheck/proto/kind_registry.h"
#include "kinds.h"

namespace fencecheck::locks {
namespace {

using Registry = KindRegistry<LockServiceKind>;
#define FC_LOCK_SERVICE_KIND_ROW(kind) &detail::kind##_kind,
constexpr Registry::Row kKinds[] = {FC_LOCK_SERVICE_KINDS(FC_LOCK_SERVICE_KIND_ROW)};
#undef FC_LOCK_SERVICE_KIND_ROW

Registry& registry() {
  static Registry r(kKinds, "lock service kind");
  return r;
}

}  // namespace

const LockServiceKind* find_lock_service_kind(std::string_view name) { return registry().find(name); }

std::vector<std::string_view> lock_service_kind_names() { return registry().names(); }

void register_lock_service_kind(const LockServiceKind& kind) {
  registry().add(kind, [] {});
}

OrphanReport stop_orphaned_lock_services(const std::filesystem::path& run_dir, bool force) {
  return registry().stop_orphans<OrphanReport>(run_dir, force);
}

}  // namespace fencecheck::locks
