// The fault kinds registered by name (fault_kind.h): the constant table, one row per kind in
// kinds.h's FC_FAULT_KINDS, then the kinds register_fault_kind added at run time (tests,
// out-of-tree kinds); proto/kind_registry.h holds both, as for the other axes.
#include <stdexcept>

#include "fencecheck/faults/fault_kind.h"
#include "fencecheck/proto/kind_registry.h"
#include "kinds.h"

namespace fencecheck::faults {
namespace {

using Registry = KindRegistry<FaultKind>;
#define FC_FAULT_KIND_ROW(kind) &detail::kind##_kind,
constexpr Registry::Row kKinds[] = {FC_FAULT_KINDS(FC_FAULT_KIND_ROW)};
#undef FC_FAULT_KIND_ROW

Registry& registry() {
  static Registry r(kKinds, "fault kind");
  return r;
}

}  // namespace

const FaultKind* find_fault_kind(std::string_view name) { return registry().find(name); }

std::vector<std::string_view> fault_kind_names() { return registry().names(); }

void register_fault_kind(const FaultKind& kind) {
  if (kind.name().empty()) throw std::invalid_argument("register_fault_kind: a fault kind needs a name");
  registry().add(kind, [] {});
}

nlohmann::json FaultKind::parse(const KindFields&) const { return nlohmann::json::object(); }

std::vector<std::string> FaultKind::missing_prerequisites(const nlohmann::json&, const std::string&) const { return {}; }

std::string FaultKind::check_target(const nlohmann::json&, bool member_target) const {
  if (!member_target) return "";
  return std::string(name()) + " takes no lock-service member target (target: {lock_service: ...} is for sigstop, "
         "partition and lock-service-restart)";
}

const ProcessRef& FaultContext::need_process(std::string_view kind) const {
  if (!process) throw FaultError(std::string(kind) + " on " + target + ": no such process");
  return *process;
}

const NetworkLab& FaultContext::need_lab(std::string_view kind) const {
  if (lab == nullptr) throw std::invalid_argument(std::string(kind) + " needs network: namespaces");
  return *lab;
}

LockServiceControl& FaultContext::need_lock_service(std::string_view kind) const {
  if (lock_service == nullptr) throw std::invalid_argument(std::string(kind) + " needs the embedded lock service");
  return *lock_service;
}

}  // namespace fencecheck::faults
