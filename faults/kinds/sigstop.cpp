// Fault kinds sigstop and self-stop: SIGSTOP the target's process group leader, SIGCONT it at the
// heal (faults/sigstop.h). self-stop is the same Fault for a worker that stopped itself at its
// design's self_stop_at point: the harness only continues it, `duration` after it stopped.
#include "../src/healers.h"
#include "fencecheck/faults/sigstop.h"
#include "kinds.h"
#include "member_faults.h"

namespace fencecheck::faults::detail {
namespace {

class Sigstop final : public FaultKind {
 public:
  std::string_view name() const override { return "sigstop"; }
  bool stops_process() const override { return true; }
  /// A worker, or lock-service members (issue 35: a member stopped past the election timeout).
  std::string check_target(const nlohmann::json&, bool) const override { return ""; }
  std::unique_ptr<Fault> make(const nlohmann::json&, const FaultContext& ctx) const override {
    if (!ctx.members.empty())
      return members_fault(name(), ctx, [&](const MemberRef& m, const std::string& who) -> std::unique_ptr<Fault> {
        if (!m.process) throw FaultError("sigstop on " + who + ": the member is not running");
        return std::make_unique<SigstopFault>(*m.process, who);
      });
    return std::make_unique<SigstopFault>(ctx.need_process(name()), ctx.target);
  }
  std::string heal_record(const nlohmann::json& entry) const override {
    return heal_parts(entry, [](const nlohmann::json& part) { return heal_sigstop_record(part); });
  }
};

/// self-stop's Faults are SigstopFaults: their ledger records say "sigstop" and are healed by it.
class SelfStop final : public FaultKind {
 public:
  std::string_view name() const override { return "self-stop"; }
  bool stops_process() const override { return true; }
  bool self_triggered() const override { return true; }
  std::unique_ptr<Fault> make(const nlohmann::json&, const FaultContext& ctx) const override {
    return std::make_unique<SigstopFault>(ctx.need_process(name()), ctx.target);
  }
  std::string heal_record(const nlohmann::json& entry) const override { return heal_sigstop_record(entry); }
};

}  // namespace

const FaultKind& sigstop_kind() {
  static const Sigstop k;
  return k;
}

const FaultKind& self_stop_kind() {
  static const SelfStop k;
  return k;
}

}  // namespace fencecheck::faults::detail
