// fencecheck — the partition fault: a worker host loses the network to the lock service (or the
// resource, or everything) while it keeps running and believing it holds the lock.
//
// Packets are DROPPED, not refused: no RST, no ICMP unreachable, so in-flight connections stall
// and new ones time out, as in a real partition. Mechanism (iproute2 only, no iptables/nftables):
// a tc filter on the host's bridge port in the hub namespace (the veth end fc<tag><i>a, which has
// a clsact qdisc from NetworkLab::setup()), on one or both hooks:
//   ingress (host -> hub): what the host sends, i.e. the worker's requests;
//   egress  (hub -> host): what reaches the host, i.e. the services' replies.
// The drop is done in the "network" (the hub), so the host's own kernel sees its packets leave
// normally. The filter is a classic-BPF program in direct-action mode returning TC_ACT_SHOT
// (tc-bpf(8): "bytecode", "da"; cls_bpf, in stock kernels) rather than u32 + "action drop"
// because act_gact is not built into every kernel (it is missing on the project's test machine);
// non-matching packets get TC_ACT_UNSPEC and continue to the next filter. ARP is never dropped,
// so the link stays up and nothing is refused.
//
// What is cut (PartitionSpec::kind):
//   from service S:  IPv4 packets to S's address (ingress) / from it (egress);
//   full:            every IPv4 packet, and every IPv6 packet, whatever the peer.
//
// Which way (PartitionSpec::direction), after Jepsen's partitions: its nemesis takes a "grudge",
// a map of each node to the nodes whose messages it drops (jepsen.nemesis/partition!, carried
// out by jepsen.net's drop!: `iptables -A INPUT -s <src> -j DROP` on the receiving node), so a
// grudge that is not symmetric is a one-way partition.
//   both:      every packet both ways (the filter on both hooks). The default; what `partition`
//              always did. Nothing reaches the service, nothing comes back: nothing acts.
//   requests:  the worker's requests are lost (ingress only). The service acts on nothing.
//   replies:   the services' replies are lost (egress only): a request reaches the lock service
//              or the resource and ACTS (a write is applied, an unlock deletes the key, a
//              keepalive renews the lease), and its reply never comes back, so the worker sees a
//              timeout: outcome unknown (a lost write acknowledgement, a lost unlock).
// Jepsen drops whole IP packets one way, which suits long-lived connections between servers: on
// an ESTABLISHED connection the data of the open direction still arrives (only its ACKs are
// lost, so the sender retransmits). Our workers open a TCP connection per call (the etcd gateway
// and the store speak HTTP/1.1, one exchange per connection), and dropping every packet one way
// would break the three-way handshake (the SYN or the SYN-ACK is lost), so no connection would
// form and NOTHING would act, whatever the direction. A one-way partition here is therefore
// TCP-aware, on the cut direction:
//   - a TCP segment that carries no data and neither FIN nor RST (SYN, SYN-ACK, a pure ACK)
//     passes: connections open and data received is acknowledged, so the sender does not
//     retransmit what did arrive;
//   - a TCP segment that carries data (payload length = IPv4 total length - IPv4 header length
//     - TCP data offset > 0), or FIN, or RST, is dropped: the request (requests) or the reply
//     (replies) and the end of the stream never arrive; FIN and RST are dropped because they
//     are messages too ("done", "gone") that the application would read;
//   - a later IPv4 fragment (fragment offset != 0; it carries only payload) is dropped;
//   - every other IPv4 packet (UDP, ICMP, ...) is dropped; for `full`, every IPv6 packet (IPv6's
//     extension headers put the TCP header at no fixed place that classic BPF, without loops,
//     could find; the lab gives no IPv6 address, so nothing of the run speaks IPv6).
//   The open direction is not filtered at all.
// What TCP does with a lost segment is TCP's: the sender's kernel retransmits it (tcp(7)) until
// it is acknowledged or the kernel gives up, even after the application closed the socket (an
// orphaned socket, tcp_orphan_retries). So a request lost in a `requests` partition may still
// arrive after the heal, late, and be acted on then; a reply lost in a `replies` partition may
// reach a client that is still waiting. This is exactly what a real lossy path does.
//
// Heal deletes exactly the filters inject added, by hook and preference (full 100, service k
// 200 + k; ledger_record() lists the hooks). Two partitions that would need the same hook of the
// same preference cannot be in effect at once ("already in effect"); a `requests` and a `replies`
// partition from the same service use different hooks and may overlap.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "fencecheck/faults/command.h"
#include "fencecheck/faults/fault.h"
#include "fencecheck/faults/netns.h"

namespace fencecheck::faults {

struct PartitionSpec {
  /// kFromHost: another host of the lab (`service` holds its name), e.g. a lock-service member
  /// cut from each of the others (issue 35).
  enum class Kind { kFull, kFromService, kFromHost };
  /// Which way packets are lost (the header comment says what each drops and why).
  enum class Direction { kBoth, kRequests, kReplies };
  Kind kind = Kind::kFull;
  std::string service;  ///< kFromService: a NetworkLab service name, e.g. "lock-service", "resource"
  Direction direction = Direction::kBoth;

  [[nodiscard]] static PartitionSpec full(Direction d = Direction::kBoth) { return {Kind::kFull, {}, d}; }
  [[nodiscard]] static PartitionSpec from(std::string service, Direction d = Direction::kBoth) {
    return {Kind::kFromService, std::move(service), d};
  }
  [[nodiscard]] static PartitionSpec from_host(std::string host, Direction d = Direction::kBoth) {
    return {Kind::kFromHost, std::move(host), d};
  }
  /// "full", "from lock-service" (both ways: no suffix), "from resource (replies)",
  /// "full (requests)".
  [[nodiscard]] std::string describe() const;
  /// The tc hooks the partition filters: both {"ingress", "egress"}, requests {"ingress"},
  /// replies {"egress"}.
  [[nodiscard]] std::vector<std::string> hooks() const;
};

/// "both", "requests", "replies" (the scenario's spelling).
[[nodiscard]] std::string_view to_string(PartitionSpec::Direction d);

/// Not thread-safe (fault.h). Copies the names it needs from the lab; the lab's runner must
/// outlive it.
class PartitionFault final : public Fault {
 public:
  /// Throws std::out_of_range for a host or service the lab does not have.
  PartitionFault(const NetworkLab& lab, const std::string& host, PartitionSpec spec);
  ~PartitionFault() override;

  [[nodiscard]] std::string_view kind() const override { return "partition"; }
  /// "w1 (fc-<run>-w1) from lock-service 10.213.0.2", "w1 (fc-<run>-w1) full",
  /// "w1 (fc-<run>-w1) from resource 10.213.0.3 (replies)": the history's fault.inject and
  /// fault.heal details.
  [[nodiscard]] std::string target() const override;
  /// Adds the filter of each of spec.hooks(). Throws FaultError when tc fails (e.g. the same
  /// partition is already in effect) and FaultUnavailable when the kernel lacks the bpf
  /// classifier or clsact, after deleting through heal() the filters it had added (only those:
  /// never another partition's); when that delete fails, active() stays true (Fault::inject()).
  void inject() override;
  /// Deletes the filters inject() added. Never throws; a namespace, link or filter already gone
  /// counts as healed. Another failure goes to stderr, active() stays true and heal() returns
  /// false (heal_failure() says why; heal() again retries).
  [[nodiscard]] bool heal() noexcept override;
  [[nodiscard]] bool active() const override { return active_; }
  /// {"target","spec","direction","netns","device","pref","hooks":[...],"address"}: hooks are
  /// exactly those inject() adds a filter to; "spec" is describe(), "direction" to_string().
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
  std::size_t hooks_in_effect_ = 0;  // inject_commands() that took effect, in order: what heal() deletes
};

/// The classic-BPF program (tc's "bytecode" syntax: "<count>,<code> <jt> <jf> <k>,...", the
/// opcodes of linux/filter.h) that drops the partition's packets on one hook ("ingress" or
/// "egress") and lets the rest through (TC_ACT_UNSPEC). Loads are relative to the Ethernet header.
/// address is the service's IPv4 address (ignored for full). For both ways the program drops
/// whole packets; for requests (on ingress) and replies (on egress) it is the TCP-aware program
/// of the header comment. Pure; throws std::invalid_argument for a malformed address, or a hook
/// the spec does not filter (requests on egress, replies on ingress).
[[nodiscard]] std::string partition_bytecode(const PartitionSpec& spec, const std::string& hook,
                                             const std::string& address);

}  // namespace fencecheck::faults
