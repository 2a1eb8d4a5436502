// fencecheck — the run's simulated network: a set of network namespaces (ip-netns(8)) that the
// partition and netem faults (partition.h, netem.h) act on.
//
//              hub namespace  fc-<run>-hub
//   ┌────────────────────────────────────────────────┐
//   │ bridge fc<tag>br: 10.213.0.1 (hub)              │   services listen here:
//   │                   10.213.0.2 (lock-service)     │   etcd on the lock-service address,
//   │                   10.213.0.3 (resource)         │   the store on the resource address
//   │   fc<tag>0a   fc<tag>1a   ...  (bridge ports)   │
//   └──────┼───────────┼─────────────────────────────-┘
//     veth │      veth │
//   ┌──────┼─────┐ ┌───┼────────┐
//   │ fc<tag>0b  │ │ fc<tag>1b  │   one namespace per worker host, fc-<run>-<host>,
//   │ 10.213.0.4 │ │ 10.213.0.5 │   the worker runs inside it
//   └────────────┘ └────────────┘
//
// Addresses come from a configurable subnet (default 10.213.0.0/24): hub .1, then one per
// service, then one per host. They exist ONLY inside the run's namespaces: the root namespace
// gets nothing (veths are created directly inside the namespaces, `ip -n <hub> link add ... peer
// name ... netns <host>`), so no route, address, link or firewall rule of the host changes.
// The lock service and the store get separate addresses so that a partition can cut a host off
// from one but not the other by address alone (partition.h). The scenario's own services (outside
// the lab) are reached through relays listening on those same addresses (relay.h), so the same
// partitions cut them.
// Each hub-side port gets a clsact qdisc (tc-bpf(8), "clsact") at setup, the hook for partitions.
//
// Names: namespaces "fc-<run_id>-<host>" and "fc-<run_id>-hub"; links and the bridge are
// "fc" + a 6-character tag derived from the run id + index + a/b (at most 15 characters:
// IFNAMSIZ is 16 with the NUL). Everything the lab creates is recorded in the ledger (kind
// "netns-lab") before it is created, and teardown() deletes the namespaces, which deletes their
// veths and the bridge with them (ip-netns(8): "ip netns delete ... removes the network namespace";
// a veth pair is destroyed with either end's namespace).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fencecheck/faults/command.h"
#include "fencecheck/faults/fault.h"
#include "fencecheck/faults/ledger.h"

namespace fencecheck::faults {

struct NetworkLabOptions {
  std::string run_id;              ///< [A-Za-z0-9_.-], 1..64 characters (other characters become '_')
  std::vector<std::string> hosts;  ///< worker hosts, one namespace each ("w1", "w2"); [A-Za-z0-9_.-]; not "hub"
  /// Addresses on the hub, one per service, in this order. Partitions name them ("lock-service").
  std::vector<std::string> services{"lock-service", "resource"};
  std::string subnet = "10.213.0.0/24";  ///< IPv4 CIDR, prefix 8..29
};

/// One worker host of the lab.
struct LabHost {
  std::string name;       ///< "w1"
  std::string netns;      ///< "fc-<run>-w1"
  std::string address;    ///< "10.213.0.4" (inside netns only)
  std::string hub_link;   ///< veth end in the hub, attached to the bridge: "fc<tag>0a"
  std::string host_link;  ///< veth end in the host's namespace, holding address: "fc<tag>0b"
};

/// One service address on the hub's bridge.
struct LabService {
  std::string name;     ///< "lock-service"
  std::string address;  ///< "10.213.0.2"
};

/// The run's namespaces. Owned by the run (one per run); not thread-safe for setup()/teardown(),
/// the const accessors may be used from any thread once setup() returned.
class NetworkLab {
 public:
  /// Computes every name and address (no side effects). Throws std::invalid_argument for a bad
  /// run id, host name, duplicate, subnet, or a subnet too small for hub + services + hosts.
  /// runner must outlive the lab and every fault made from it; ledger (optional) too.
  NetworkLab(NetworkLabOptions options, CommandRunner& runner, FaultLedger* ledger = nullptr);
  /// teardown().
  ~NetworkLab();
  NetworkLab(const NetworkLab&) = delete;
  NetworkLab& operator=(const NetworkLab&) = delete;

  /// Records the lab in the ledger (before anything exists), then runs setup_commands().
  /// Throws FaultUnavailable when network namespaces cannot be created here (not root, no
  /// CONFIG_NET_NS), FaultError for any other failure (e.g. a namespace of that name exists:
  /// run `fencecheck cleanup`); on throw, whatever it created is deleted again.
  void setup();
  /// Deletes the namespaces setup() created (host namespaces, then the hub); one already gone is
  /// fine. Records the heal in the ledger. Idempotent, never throws. Processes still running
  /// inside keep their namespace alive (without a name) until they exit: stop them first.
  void teardown() noexcept;
  [[nodiscard]] bool is_set_up() const { return set_up_; }

  [[nodiscard]] const std::string& run_id() const { return run_id_; }
  /// The 6-character [0-9a-z] tag in link names (FNV-1a of the run id).
  [[nodiscard]] const std::string& tag() const { return tag_; }
  [[nodiscard]] const std::string& hub_netns() const { return hub_; }
  [[nodiscard]] const std::string& bridge() const { return bridge_; }
  [[nodiscard]] const std::string& hub_address() const { return hub_address_; }
  [[nodiscard]] int prefix_length() const { return prefix_; }
  [[nodiscard]] const std::vector<LabHost>& hosts() const { return hosts_; }
  [[nodiscard]] const std::vector<LabService>& services() const { return services_; }
  /// Throws std::out_of_range naming the unknown host / service and the known ones.
  [[nodiscard]] const LabHost& host(std::string_view name) const;
  [[nodiscard]] const LabService& service(std::string_view name) const;
  /// Every namespace of the lab, hub first.
  [[nodiscard]] std::vector<std::string> namespaces() const;

  /// argv that runs argv inside namespace netns: {"ip","netns","exec",netns, argv...}
  /// (ip-netns(8) "ip netns exec"). For the orchestrator to launch etcd / the store in the hub and
  /// each worker in its host's namespace. Throws std::invalid_argument for a namespace that is
  /// not the lab's or an empty argv.
  [[nodiscard]] std::vector<std::string> exec_argv(const std::string& netns, const std::vector<std::string>& argv) const;
  /// Runs a short command inside netns through the runner; returns its stdout. Throws CommandError.
  std::string run_in(const std::string& netns, const std::vector<std::string>& argv) const;

  /// Exactly what setup() runs, in order (for dry runs, logs and tests).
  [[nodiscard]] std::vector<std::vector<std::string>> setup_commands() const;
  /// {"run_id","namespaces":[...],"bridge","links":[...],"subnet"}: what the "netns-lab" healer needs.
  [[nodiscard]] nlohmann::json ledger_record() const;
  [[nodiscard]] CommandRunner& runner() const { return *runner_; }

 private:
  std::string run_id_, tag_, hub_, bridge_, hub_address_;
  int prefix_ = 24;
  std::vector<LabHost> hosts_;
  std::vector<LabService> services_;
  std::string subnet_;
  CommandRunner* runner_;
  FaultLedger* ledger_;
  std::int64_t ledger_id_ = -1;
  bool set_up_ = false;
  std::vector<std::string> created_;  // namespaces setup() created, in order
};

/// The 6-character tag NetworkLab derives from a run id. Pure.
[[nodiscard]] std::string lab_tag(std::string_view run_id);

}  // namespace fencecheck::faults
