// Faults on the members of a clustered lock service (issue 35; fault_kind.h, FaultContext::members):
// one Fault per member, held together as one fault of the kind. Internal to fencecheck_faults.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "fencecheck/faults/fault.h"
#include "fencecheck/faults/fault_kind.h"

namespace fencecheck::faults::detail {

/// "lock-service member 2" / "lock-service members 1, 3": the target as faults name it. Pure.
[[nodiscard]] std::string members_name(const std::vector<MemberRef>& members);

/// Several members' Faults as one: inject() injects each in order (one failing: those injected are
/// healed, FaultError names the failure); heal() heals each (all are tried; false when any is not
/// healed). Its ledger record is {"target", "why", "parts": [each part's record]}: the kind's
/// heal_record() heals a part at a time (heal_parts()). Not thread-safe, as every Fault.
class MembersFault final : public Fault {
 public:
  MembersFault(std::string_view kind, std::string target, std::string why, std::vector<std::unique_ptr<Fault>> parts);
  ~MembersFault() override;
  std::string_view kind() const override { return kind_; }
  std::string target() const override { return target_; }
  void inject() override;
  bool heal() noexcept override;
  bool active() const override;
  nlohmann::json ledger_record() const override;

 private:
  std::string kind_, target_, why_;
  std::vector<std::unique_ptr<Fault>> parts_;
};

/// One part per member, `make_one` building each (the member and a name for it: "lock-service
/// member 2"); a single member's Fault is returned as it is. Throws what make_one throws, or
/// FaultError when `ctx.members` is empty.
template <typename MakeOne>
std::unique_ptr<Fault> members_fault(std::string_view kind, const FaultContext& ctx, MakeOne&& make_one) {
  if (ctx.members.empty()) throw FaultError(std::string(kind) + ": no lock-service member resolved for its target");
  std::vector<std::unique_ptr<Fault>> parts;
  for (const auto& m : ctx.members) parts.push_back(make_one(m, members_name({m})));
  if (parts.size() == 1) return std::move(parts.front());
  return std::make_unique<MembersFault>(kind, members_name(ctx.members), ctx.members_why, std::move(parts));
}

/// Heals a ledger record of a MembersFault (with "parts") part by part through `heal_one`, or the
/// record itself when it has no parts. The sentences joined by "; "; throws std::runtime_error
/// naming every part that could not be healed (after trying them all).
template <typename HealOne>
std::string heal_parts(const nlohmann::json& entry, HealOne&& heal_one) {
  const auto it = entry.find("parts");
  if (it == entry.end() || !it->is_array()) return heal_one(entry);
  std::string said, failed;
  for (const auto& part : *it) {
    try {
      said += (said.empty() ? "" : "; ") + heal_one(part);
    } catch (const std::exception& err) {
      failed += (failed.empty() ? "" : "; ") + std::string(err.what());
    }
  }
  if (!failed.empty()) throw std::runtime_error(failed);
  return said;
}

}  // namespace fencecheck::faults::detail
