// Fault kind cpu-throttle: a cgroup v2 CPU quota on the target (faults/cpu_throttle.h). Parameters:
// quota, the share of ONE cpu, 0.1% .. 100% (default 2%); period, the CFS period, 1ms .. 1s in whole
// microseconds (default 100ms); quota x period at least the kernel's minimum of 1000us
// (Documentation/scheduler/sched-bwc.rst).
#include <unistd.h>

#include <cmath>

#include "../src/healers.h"
#include "fencecheck/faults/cgroup.h"
#include "fencecheck/faults/cpu_throttle.h"
#include "fencecheck/proto/units.h"
#include "kinds.h"

namespace fencecheck::faults::detail {
namespace {

constexpr double kDefaultQuota = 0.02;
constexpr std::chrono::microseconds kDefaultPeriod{100'000};

std::chrono::microseconds period_of(const nlohmann::json& params) {
  const auto d = parse_duration(params.value("period", "100ms"));
  return d ? std::chrono::duration_cast<std::chrono::microseconds>(*d) : kDefaultPeriod;
}

double quota_of(const nlohmann::json& params) { return parse_percent(params.value("quota", "2%")).value_or(kDefaultQuota); }

class CpuThrottle final : public FaultKind {
 public:
  std::string_view name() const override { return "cpu-throttle"; }
  std::vector<std::string_view> fields() const override { return {"quota", "period"}; }
  nlohmann::json parse(const KindFields& f) const override {
    const double quota = f.has("quota") ? f.percentage("quota", 0.1, 100.0, "2%") : kDefaultQuota;
    std::chrono::nanoseconds period = kDefaultPeriod;
    if (f.has("period")) {
      period = f.duration("period");
      if (period < std::chrono::milliseconds(1) || period > std::chrono::seconds(1))
        f.fail("period", "expected a CFS period between 1ms and 1s (the kernel's bounds), got \"" + f.string("period") + "\"");
      if (period.count() % 1000 != 0)
        f.fail("period", "\"" + f.string("period") +
                             "\" is not a whole number of microseconds (the kernel's CFS period is in microseconds)");
    }
    // cpu_throttle.h: quota us = round(fraction x period us), at least 1000 us.
    const auto period_us = std::chrono::duration_cast<std::chrono::microseconds>(period).count();
    const auto quota_us = std::llround(quota * static_cast<double>(period_us));
    if (quota_us < 1000)
      f.fail(f.has("quota") ? "quota" : (f.has("period") ? "period" : ""),
             "quota " + format_percent(quota) + " of a " + format_duration(period) + " period is " +
                 std::to_string(quota_us) +
                 "us of CPU per period, below the kernel's minimum of 1000us; raise the quota or lengthen the period");
    return {{"quota", format_percent(quota)}, {"period", format_duration(period)}};
  }
  std::vector<std::string> missing_prerequisites(const nlohmann::json&, const std::string& what) const override {
    std::vector<std::string> missing = cgroup_root_need(what);
    const auto cg = detect_cgroups();
    if (!cg.cpu) missing.push_back(what + " needs the cgroup cpu controller: " + cg.cpu_missing);
    return missing;
  }
  std::unique_ptr<Fault> make(const nlohmann::json& params, const FaultContext& ctx) const override {
    return std::make_unique<CpuThrottleFault>(ctx.need_process(name()), ctx.target, ctx.run_id,
                                              ThrottleSpec::cpu_fraction(quota_of(params), period_of(params)));
  }
  std::string heal_record(const nlohmann::json& entry) const override { return heal_cpu_throttle_record(entry); }
};

}  // namespace

std::vector<std::string> cgroup_root_need(const std::string& what) {
  if (::geteuid() == 0) return {};
  return {what + " needs root (it writes to /sys/fs/cgroup)"};
}

const FaultKind& cpu_throttle_kind() {
  static const CpuThrottle k;
  return k;
}

}  // namespace fencecheck::faults::detail
