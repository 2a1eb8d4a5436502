// fencecheck — the partition fault: a worker host loses the network to the lock service (or the
// resource, or everything) while it keeps running and believing it holds the lock.
//
// Packets are DROPPED, not refused: no RST, no ICMP unreachable, so in-flight connections stall
// and new ones time out, as in a real partition. Mechanism (iproute2 only, no iptables/nftables):
// a tc filter on the host's bridge port in the hub namespace (the veth end fc<tag><i>a, which has
// a clsact qdisc from NetworkLab::setup()), on both hooks:
//   ingress (host -> hub) drops what the host sends to the service's address,
//   egress  (hub -> host) drops what the service's address sends to the host.
// The drop is done in the "network" (the hub), so the host's own kernel sees its packets leave
// normally. The filter is a classic-BPF program in direct-action mode returning TC_ACT_SHOT
// (tc-bpf(8): "bytecode", "da"; cls_bpf, in stock kernels) rather than u32 + "action drop"
// because act_gact is not built into every kernel (it is missing on the project's test machine);
// non-matching packets get TC_ACT_UNSPEC and continue to the next filter.
//   from service S:  IPv4 packets to (ingress) / from (egress) S's address are dropped; ARP still
//                    works, so the link stays up and nothing is refused.
//   full:            every IPv4 and IPv6 packet in both directions is dropped (ARP still works).
// Heal deletes exactly the filters inject added (by hook and preference: full 100, service k
// 200 + k), which also makes a partition of the same kind on the same host twice impossible.
#pragma once

#include <string>
#include <vector>

#include "fencecheck/faults/command.h"
#include "fencecheck/faults/fault.h"
#include "fencecheck/faults/netns.h"

namespace fencecheck::faults {

struct PartitionSpec {
  enum class Kind { kFull, kFromService };
  Kind kind = Kind::kFull;
  std::string service;  ///< kFromService: a NetworkLab service name, e.g. "lock-service", "resource"

  [[nodiscard]] static PartitionSpec full() { return {}; }
  [[nodiscard]] static PartitionSpec from(std::string service) { return {Kind::kFromService, std::move(service)}; }
  /// "full" or "from lock-service".
  [[nodiscard]] std::string describe() const;
};

/// Not thread-safe (fault.h). Copies the names it needs from the lab; the lab's runner must
/// outlive it.
class PartitionFault final : public Fault {
 public:
  /// Throws std::out_of_range for a host or service the lab does not have.
  PartitionFault(const NetworkLab& lab, const std::string& host, PartitionSpec spec);
  ~PartitionFault() override;

  [[nodiscard]] std::string_view kind() const override { return "partition"; }
  /// "w1 (fc-<run>-w1) from lock-service 10.213.0.2" / "w1 (fc-<run>-w1) full".
  [[nodiscard]] std::string target() const override;
  /// Adds the ingress and egress filters. Throws FaultError when tc fails (e.g. the same
  /// partition is already in effect) and FaultUnavailable when the kernel lacks the bpf
  /// classifier or clsact (then nothing is left: a half-added filter is deleted again).
  void inject() override;
  /// Deletes both filters. Never throws; a namespace, link or filter already gone counts as
  /// healed. Another failure goes to stderr and active() stays true (heal() again retries).
  void heal() noexcept override;
  [[nodiscard]] bool active() const override { return active_; }
  /// {"target","spec","netns","device","pref","hooks":["ingress","egress"],"address"}.
  [[nodiscard]] nlohmann::json ledger_record() const override;

  /// The argv inject() / heal() run, in order.
  [[nodiscard]] std::vector<std::vector<std::string>> inject_commands() const;
  [[nodiscard]] std::vector<std::vector<std::string>> heal_commands() const;

 private:
  CommandRunner* runner_;
  std::string host_, host_netns_, hub_netns_, device_, address_;
  PartitionSpec spec_;
  int pref_;
  bool active_ = false;
};

/// The classic-BPF program (tc's "bytecode" syntax: "<count>,<code> <jt> <jf> <k>,...") that
/// drops the partition's packets on one hook ("ingress" or "egress") and lets the rest through.
/// address is the service's IPv4 address (ignored for full). Pure; throws std::invalid_argument
/// for a malformed address.
[[nodiscard]] std::string partition_bytecode(const PartitionSpec& spec, const std::string& hook,
                                             const std::string& address);

}  // namespace fencecheck::faults
