// The fault kinds registered by name (fault_kind.h): the built-in table, then those registered at
// run time. Adding a built-in kind is one file in this folder and one row here (and its line in
// faults/lib.cmake).
#include <array>
#include <mutex>
#include <stdexcept>

#include "fencecheck/faults/fault_kind.h"
#include "kinds.h"

namespace fencecheck::faults {
namespace {

using Row = const FaultKind& (*)();
// The order is the one messages and docs list them in.
constexpr std::array<Row, 7> kKinds{&detail::sigstop_kind,   &detail::cpu_throttle_kind,        &detail::freeze_kind,
                                    &detail::partition_kind, &detail::netem_kind, &detail::lock_service_restart_kind,
                                    &detail::self_stop_kind};

struct Added {
  std::mutex mu;
  std::vector<const FaultKind*> kinds;
};
Added& added() {
  static Added a;
  return a;
}

}  // namespace

const FaultKind* find_fault_kind(std::string_view name) {
  for (Row row : kKinds)
    if (row().name() == name) return &row();
  Added& a = added();
  std::lock_guard lock(a.mu);
  for (const FaultKind* k : a.kinds)
    if (k->name() == name) return k;
  return nullptr;
}

std::vector<std::string_view> fault_kind_names() {
  std::vector<std::string_view> out;
  for (Row row : kKinds) out.push_back(row().name());
  Added& a = added();
  std::lock_guard lock(a.mu);
  for (const FaultKind* k : a.kinds) out.push_back(k->name());
  return out;
}

void register_fault_kind(const FaultKind& kind) {
  if (kind.name().empty()) throw std::invalid_argument("register_fault_kind: a fault kind needs a name");
  if (find_fault_kind(kind.name()) != nullptr)
    throw std::invalid_argument("register_fault_kind: fault kind " + std::string(kind.name()) + " is registered already");
  Added& a = added();
  std::lock_guard lock(a.mu);
  a.kinds.push_back(&kind);
}

nlohmann::json FaultKind::parse(const FaultFields&) const { return nlohmann::json::object(); }

std::vector<std::string> FaultKind::missing_prerequisites(const nlohmann::json&, const std::string&) const { return {}; }

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
