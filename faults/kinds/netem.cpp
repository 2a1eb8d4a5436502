// Fault kind netem: delay, jitter and loss on the target worker's link (faults/netem.h, tc-netem(8)).
// Parameters: delay and jitter (whole microseconds, netem's resolution; jitter at most the delay,
// and only with a delay), loss (0% .. 100%); a delay or a loss must be non-zero. Needs
// `network: namespaces` and the kernel's sch_netem.
#include <sys/utsname.h>

#include <filesystem>
#include <fstream>

#include "../src/healers.h"
#include "fencecheck/faults/netem.h"
#include "fencecheck/proto/units.h"
#include "kinds.h"

namespace fencecheck::faults::detail {
namespace {

/// True only when this kernel's module lists are readable and name neither a loadable nor a
/// built-in `name` (and it is not loaded). Without /lib/modules (a container, say) it cannot
/// tell, says false, and the injection itself reports a missing module.
bool kernel_lacks_module(const std::string& name) {
  struct utsname u {};
  if (::uname(&u) != 0) return false;
  const std::filesystem::path dir = std::filesystem::path("/lib/modules") / u.release;
  std::error_code ec;
  if (std::filesystem::exists("/sys/module/" + name, ec)) return false;
  if (!std::filesystem::exists(dir / "modules.dep", ec) || !std::filesystem::exists(dir / "modules.builtin", ec)) return false;
  for (const char* list : {"modules.dep", "modules.builtin"}) {
    std::ifstream in(dir / list);
    for (std::string line; std::getline(in, line);)
      if (line.find("/" + name + ".ko") != std::string::npos) return false;
  }
  return true;
}

std::chrono::microseconds micros_of(const nlohmann::json& params, const char* name) {
  const auto d = parse_duration(params.value(name, "0s"));
  return d ? std::chrono::duration_cast<std::chrono::microseconds>(*d) : std::chrono::microseconds(0);
}

class Netem final : public FaultKind {
 public:
  std::string_view name() const override { return "netem"; }
  std::vector<std::string_view> fields() const override { return {"delay", "jitter", "loss"}; }
  nlohmann::json parse(const KindFields& f) const override {
    auto micros = [&](const char* field) {
      if (!f.has(field)) return std::chrono::nanoseconds(0);
      const auto d = f.duration_or_zero(field);
      if (d.count() % 1000 != 0)
        f.fail(field, "\"" + f.string(field) + "\" is not a whole number of microseconds (netem's resolution)");
      return d;
    };
    const auto delay = micros("delay");
    const auto jitter = micros("jitter");
    const double loss = f.has("loss") ? f.percentage("loss", 0.0, 100.0, "1%") : 0.0;
    if (jitter.count() > 0 && delay.count() == 0) f.fail("jitter", "jitter needs a non-zero delay (jitter varies the delay)");
    if (jitter > delay)
      f.fail("jitter", "jitter " + format_duration(jitter) + " exceeds the delay " + format_duration(delay));
    if (delay.count() == 0 && loss == 0.0) f.fail("", "netem needs a non-zero delay or loss: otherwise it does nothing");
    return {{"delay", format_duration(delay)}, {"jitter", format_duration(jitter)}, {"loss", format_percent(loss)}};
  }
  bool needs_network_namespaces() const override { return true; }
  std::vector<std::string> missing_prerequisites(const nlohmann::json&, const std::string& what) const override {
    if (!kernel_lacks_module("sch_netem")) return {};
    return {what + " needs the kernel's netem qdisc (sch_netem, CONFIG_NET_SCH_NETEM): this kernel's modules.dep "
                   "and modules.builtin do not list it"};
  }
  std::unique_ptr<Fault> make(const nlohmann::json& params, const FaultContext& ctx) const override {
    NetemSpec ns;
    ns.delay = micros_of(params, "delay");
    ns.jitter = micros_of(params, "jitter");
    ns.loss_percent = parse_percent(params.value("loss", "0%")).value_or(0.0) * 100.0;
    return std::make_unique<NetemFault>(ctx.need_lab(name()), ctx.target, ns);
  }
  std::string heal_record(const nlohmann::json& entry) const override { return heal_netem_record(entry, healer_runner()); }
};

}  // namespace

const FaultKind& netem_kind() {
  static const Netem k;
  return k;
}

}  // namespace fencecheck::faults::detail
