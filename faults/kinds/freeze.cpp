// Fault kind freeze: the cgroup v2 freezer on the target's cgroup (faults/freeze.h): every thread
// stops at once, as a VM suspend does. No parameters.
#include "../src/healers.h"
#include "fencecheck/faults/cgroup.h"
#include "fencecheck/faults/freeze.h"
#include "kinds.h"

namespace fencecheck::faults::detail {
namespace {

class Freeze final : public FaultKind {
 public:
  std::string_view name() const override { return "freeze"; }
  bool stops_process() const override { return true; }
  std::vector<std::string> missing_prerequisites(const nlohmann::json&, const std::string& what) const override {
    std::vector<std::string> missing = cgroup_root_need(what);
    const auto cg = detect_cgroups();
    if (!cg.freezer) missing.push_back(what + " needs the cgroup freezer: " + cg.freezer_missing);
    return missing;
  }
  std::unique_ptr<Fault> make(const nlohmann::json&, const FaultContext& ctx) const override {
    return std::make_unique<FreezeFault>(ctx.need_process(name()), ctx.target, ctx.run_id);
  }
  std::string heal_record(const nlohmann::json& entry) const override { return heal_freeze_record(entry); }
};

}  // namespace

const FaultKind& freeze_kind() {
  static const Freeze k;
  return k;
}

}  // namespace fencecheck::faults::detail
