// The resource kinds registered by name (resource_kind.h): the constant table, one row per kind in
// kinds.h's FC_RESOURCE_KINDS, then the kinds register_resource_kind added at run time (tests,
// out-of-tree kinds); proto/kind_registry.h holds both.
#include "fencecheck/proto/kind_registry.h"
#include "kinds.h"

namespace fencecheck::resources {
namespace {

using Registry = KindRegistry<ResourceKind>;
#define FC_RESOURCE_KIND_ROW(kind) &detail::kind##_kind,
constexpr Registry::Row kKinds[] = {FC_RESOURCE_KINDS(FC_RESOURCE_KIND_ROW)};
#undef FC_RESOURCE_KIND_ROW

Registry& registry() {
  static Registry r(kKinds, "resource kind");
  return r;
}

}  // namespace

const ResourceKind* find_resource_kind(std::string_view name) { return registry().find(name); }

std::vector<std::string_view> resource_kind_names() { return registry().names(); }

void register_resource_kind(const ResourceKind& kind) {
  registry().add(kind, [&kind] {  // the writer first: a taken writer name leaves no kind behind
    register_resource_writer(kind.name(), [&kind](const nlohmann::json& endpoint, std::chrono::milliseconds timeout) {
      return kind.make_writer(endpoint, timeout);
    });
  });
}

OrphanReport stop_orphaned_resources(const std::filesystem::path& run_dir, bool force) {
  return registry().stop_orphans<OrphanReport>(run_dir, force);
}

}  // namespace fencecheck::resources
