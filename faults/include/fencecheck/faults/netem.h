// fencecheck — the netem fault: a worker host's link gets slow or lossy (tc-netem(8)), so the
// lock service's keepalive replies arrive late or not at all while the worker keeps working.
//
// Mechanism: a netem root qdisc on both ends of the host's veth pair, so each direction is
// delayed by `delay` (± `jitter`, which reorders packets: tc-netem(8)) and loses `loss_percent`
// of its packets; a round trip therefore gains 2 x delay.
//   tc -n <host netns> qdisc add dev fc<tag><i>b root netem delay 100ms 10ms loss 5%
//   tc -n <hub netns>  qdisc add dev fc<tag><i>a root netem delay 100ms 10ms loss 5%
// Heal deletes both root qdiscs (`tc ... qdisc del dev ... root`), restoring the veth default
// (noqueue). It composes with partition.h (which uses the separate clsact hook).
// Needs sch_netem in the kernel (CONFIG_NET_SCH_NETEM); inject() throws FaultUnavailable
// without it (the project's test machine lacks it).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "fencecheck/faults/command.h"
#include "fencecheck/faults/fault.h"
#include "fencecheck/faults/netns.h"

namespace fencecheck::faults {

struct NetemSpec {
  std::chrono::microseconds delay{0};   ///< one-way, per direction; >= 0
  std::chrono::microseconds jitter{0};  ///< 0 <= jitter <= delay; needs delay > 0
  double loss_percent = 0;              ///< 0 .. 100, per direction
  /// Throws std::invalid_argument: negative values, jitter without delay or above it, loss
  /// outside 0..100, or nothing to do (no delay and no loss).
  void validate() const;
  /// The netem arguments: {"delay","100ms","10ms","loss","5%"} (times in ms when whole, else us).
  [[nodiscard]] std::vector<std::string> tc_args() const;
};

/// Not thread-safe (fault.h). The lab's runner must outlive it.
class NetemFault final : public Fault {
 public:
  /// Throws std::out_of_range for an unknown host, std::invalid_argument for a bad spec.
  NetemFault(const NetworkLab& lab, const std::string& host, NetemSpec spec);
  ~NetemFault() override;

  [[nodiscard]] std::string_view kind() const override { return "netem"; }
  /// "w1 (fc-<run>-w1) delay 100ms 10ms loss 5%".
  [[nodiscard]] std::string target() const override;
  /// Adds both qdiscs. Throws FaultUnavailable when the kernel has no netem qdisc, FaultError on
  /// any other tc failure, after deleting through heal() a qdisc it had added first; when that
  /// delete fails, active() stays true and the message says why (Fault::inject()).
  void inject() override;
  /// Deletes both root qdiscs. Never throws; a namespace, link or qdisc already gone counts as
  /// healed. Another failure goes to stderr, active() stays true and heal() returns false
  /// (heal_failure() says why).
  [[nodiscard]] bool heal() noexcept override;
  [[nodiscard]] bool active() const override { return active_; }
  /// {"target","links":[{"netns","device"},{"netns","device"}],"args":[...]}.
  [[nodiscard]] nlohmann::json ledger_record() const override;

  [[nodiscard]] std::vector<std::vector<std::string>> inject_commands() const;
  [[nodiscard]] std::vector<std::vector<std::string>> heal_commands() const;

 private:
  CommandRunner* runner_;
  std::string host_, host_netns_, hub_netns_, host_link_, hub_link_;
  NetemSpec spec_;
  bool active_ = false;
  std::size_t qdiscs_in_effect_ = 0;  // inject_commands() that took effect, in order: what heal() deletes
};

}  // namespace fencecheck::faults
