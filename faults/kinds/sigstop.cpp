// Fault kinds sigstop and self-stop: SIGSTOP the target's process group leader, SIGCONT it at the
// heal (faults/sigstop.h). self-stop is the same Fault for a worker that stopped itself at its
// design's self_stop_at point: the harness only continues it, `duration` after it stopped.
#include "../src/healers.h"
#include "fencecheck/faults/sigstop.h"
#include "kinds.h"

namespace fencecheck::faults::detail {
namespace {

class Sigstop final : public FaultKind {
 public:
  std::string_view name() const override { return "sigstop"; }
  bool stops_process() const override { return true; }
  std::unique_ptr<Fault> make(const nlohmann::json&, const FaultContext& ctx) const override {
    return std::make_unique<SigstopFault>(ctx.need_process(name()), ctx.target);
  }
  std::string heal_record(const nlohmann::json& entry) const override { return heal_sigstop_record(entry); }
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
