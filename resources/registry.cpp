// The resource kinds registered by name (resource_kind.h): a constant table, one row per kind in
// kinds.h's FC_RESOURCE_KINDS, rather than self-registering statics (a static library drops an
// object file nothing refers to, and with it the kind), then the kinds register_resource_kind
// added at run time (tests, out-of-tree kinds).
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kinds.h"

namespace fencecheck::resources {
namespace {

using Row = const ResourceKind& (*)();
#define FC_RESOURCE_KIND_ROW(kind) &detail::kind##_kind,
constexpr Row kKinds[] = {FC_RESOURCE_KINDS(FC_RESOURCE_KIND_ROW)};
#undef FC_RESOURCE_KIND_ROW

struct Registered {
  std::mutex mutex;
  std::vector<const ResourceKind*> kinds;  // never removed: find's pointers stay valid
};
Registered& registered() {
  static Registered r;
  return r;
}

/// Every kind, built in then registered (a snapshot: a kind registered meanwhile is not in it).
std::vector<const ResourceKind*> all_kinds() {
  std::vector<const ResourceKind*> out;
  for (Row row : kKinds) out.push_back(&row());
  auto& r = registered();
  std::lock_guard lock(r.mutex);
  out.insert(out.end(), r.kinds.begin(), r.kinds.end());
  return out;
}

}  // namespace

const ResourceKind* find_resource_kind(std::string_view name) {
  for (const ResourceKind* k : all_kinds())
    if (k->name() == name) return k;
  return nullptr;
}

std::vector<std::string_view> resource_kind_names() {
  std::vector<std::string_view> out;
  for (const ResourceKind* k : all_kinds()) out.push_back(k->name());
  return out;
}

void register_resource_kind(const ResourceKind& kind) {
  const std::string name(kind.name());
  auto& r = registered();
  std::lock_guard lock(r.mutex);  // held across the writer's registration: one name, one winner
  for (Row row : kKinds)
    if (row().name() == name) throw std::invalid_argument("resource kind \"" + name + "\" is already registered (built in)");
  for (const ResourceKind* k : r.kinds)
    if (k->name() == name) throw std::invalid_argument("resource kind \"" + name + "\" is already registered");
  register_resource_writer(name, [&kind](const nlohmann::json& endpoint, std::chrono::milliseconds timeout) {
    return kind.make_writer(endpoint, timeout);
  });
  r.kinds.push_back(&kind);
}

OrphanReport stop_orphaned_resources(const std::filesystem::path& run_dir, bool force) {
  OrphanReport out;
  for (const ResourceKind* k : all_kinds()) {
    OrphanReport one;
    try {
      one = k->stop_orphans(run_dir, force);
    } catch (const std::exception& e) {  // the hook never throws; a kind that does is not trusted to have stopped anything
      one.said.push_back(std::string(k->name()) + " cleanup of " + run_dir.string() + ": " + e.what());
      one.not_stopped = 1;
    }
    for (auto& line : one.said) out.said.push_back(std::move(line));
    out.not_stopped += one.not_stopped;
  }
  return out;
}

}  // namespace fencecheck::resources
