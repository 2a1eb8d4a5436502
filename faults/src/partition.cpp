#include "fencecheck/faults/partition.h"

#include <arpa/inet.h>

#include <iostream>

#include "healers.h"
#include "net_internal.h"

namespace fencecheck::faults {
namespace {

constexpr int kFullPref = 100;
constexpr int kServicePrefBase = 200;
const char* const kHooks[] = {"ingress", "egress"};

// Classic BPF opcodes (linux/filter.h, tc-bpf(8) "bytecode"): loads are relative to the Ethernet
// header (cls_bpf pushes the MAC header back on ingress), multi-byte loads are big-endian.
constexpr unsigned kLdhAbs = 0x28;   // BPF_LD | BPF_H | BPF_ABS
constexpr unsigned kLdwAbs = 0x20;   // BPF_LD | BPF_W | BPF_ABS
constexpr unsigned kJeqK = 0x15;     // BPF_JMP | BPF_JEQ | BPF_K
constexpr unsigned kRetK = 0x06;     // BPF_RET | BPF_K
constexpr unsigned kShot = 2;        // TC_ACT_SHOT: drop
constexpr unsigned kUnspec = 0xffffffffu;  // TC_ACT_UNSPEC (-1): not ours, next filter
constexpr unsigned kEthIpv4 = 0x0800, kEthIpv6 = 0x86dd;
constexpr unsigned kIpv4SrcOffset = 14 + 12, kIpv4DstOffset = 14 + 16;

std::string insn(unsigned code, unsigned jt, unsigned jf, unsigned k) {
  return std::to_string(code) + " " + std::to_string(jt) + " " + std::to_string(jf) + " " + std::to_string(k);
}

std::vector<std::string> filter_add(const std::string& netns, const std::string& dev, const char* hook, int pref,
                                    const std::string& bytecode) {
  return {"tc", "-n", netns, "filter", "add", "dev", dev, hook, "protocol", "all", "pref", std::to_string(pref),
          "handle", "1", "bpf", "bytecode", bytecode, "da"};
}

std::vector<std::string> filter_del(const std::string& netns, const std::string& dev, const std::string& hook, int pref) {
  return {"tc", "-n", netns, "filter", "del", "dev", dev, hook, "protocol", "all", "pref", std::to_string(pref),
          "handle", "1", "bpf"};
}

}  // namespace

std::string PartitionSpec::describe() const { return kind == Kind::kFull ? "full" : "from " + service; }

std::string partition_bytecode(const PartitionSpec& spec, const std::string& hook, const std::string& address) {
  if (hook != "ingress" && hook != "egress") throw std::invalid_argument("partition: hook must be ingress or egress");
  if (spec.kind == PartitionSpec::Kind::kFull) {
    // ldh [12]; jeq #IPv4 -> drop; jeq #IPv6 -> drop; ret UNSPEC; drop: ret SHOT
    return "5," + insn(kLdhAbs, 0, 0, 12) + "," + insn(kJeqK, 2, 0, kEthIpv4) + "," + insn(kJeqK, 1, 0, kEthIpv6) + "," +
           insn(kRetK, 0, 0, kUnspec) + "," + insn(kRetK, 0, 0, kShot);
  }
  in_addr a{};
  if (::inet_pton(AF_INET, address.c_str(), &a) != 1)
    throw std::invalid_argument("partition: \"" + address + "\" is not an IPv4 address");
  const unsigned addr = ntohl(a.s_addr);
  // Towards the host (egress) the service is the source; from the host (ingress) the destination.
  const unsigned offset = hook == "ingress" ? kIpv4DstOffset : kIpv4SrcOffset;
  // ldh [12]; jne #IPv4 -> pass; ld [offset]; jne #addr -> pass; ret SHOT; pass: ret UNSPEC
  return "6," + insn(kLdhAbs, 0, 0, 12) + "," + insn(kJeqK, 0, 3, kEthIpv4) + "," + insn(kLdwAbs, 0, 0, offset) + "," +
         insn(kJeqK, 0, 1, addr) + "," + insn(kRetK, 0, 0, kShot) + "," + insn(kRetK, 0, 0, kUnspec);
}

PartitionFault::PartitionFault(const NetworkLab& lab, const std::string& host, PartitionSpec spec)
    : runner_(&lab.runner()), spec_(std::move(spec)) {
  const LabHost& h = lab.host(host);
  host_ = h.name;
  host_netns_ = h.netns;
  hub_netns_ = lab.hub_netns();
  device_ = h.hub_link;
  if (spec_.kind == PartitionSpec::Kind::kFull) {
    pref_ = kFullPref;
  } else {
    const LabService& s = lab.service(spec_.service);
    address_ = s.address;
    int index = 0;
    for (const auto& other : lab.services()) {
      if (other.name == s.name) break;
      ++index;
    }
    pref_ = kServicePrefBase + index;
  }
}

PartitionFault::~PartitionFault() { heal(); }

std::string PartitionFault::target() const {
  std::string t = host_ + " (" + host_netns_ + ") " + spec_.describe();
  if (!address_.empty()) t += " " + address_;
  return t;
}

std::vector<std::vector<std::string>> PartitionFault::inject_commands() const {
  std::vector<std::vector<std::string>> c;
  for (const char* hook : kHooks) c.push_back(filter_add(hub_netns_, device_, hook, pref_, partition_bytecode(spec_, hook, address_)));
  return c;
}

std::vector<std::vector<std::string>> PartitionFault::heal_commands() const {
  std::vector<std::vector<std::string>> c;
  for (const char* hook : kHooks) c.push_back(filter_del(hub_netns_, device_, hook, pref_));
  return c;
}

void PartitionFault::inject() {
  if (active_) return;
  const auto cmds = inject_commands();
  const auto undo = heal_commands();
  for (std::size_t i = 0; i < cmds.size(); ++i) {
    try {
      runner_->run(cmds[i]);
    } catch (const CommandError& err) {
      for (std::size_t j = 0; j < i; ++j) {
        try {
          runner_->run(undo[j]);
        } catch (const std::exception& e) {
          std::cerr << "fencecheck: partition " << target() << ": undo failed: " << e.what() << "\n";
        }
      }
      const std::string who = "partition " + target();
      if (detail::says(err, "classifier not found") || detail::says(err, "Unknown filter"))
        throw FaultUnavailable(who + ": the kernel has no bpf tc classifier (cls_bpf, CONFIG_NET_CLS_BPF): " + err.what());
      if (detail::says(err, "Parent Qdisc doesn't exist"))
        throw FaultError(who + ": " + device_ + " has no clsact qdisc (was the lab set up?): " + err.what());
      if (detail::says(err, "already exists"))
        throw FaultError(who + ": the same partition is already in effect on this host: " + err.what());
      throw FaultError(who + ": " + err.what());
    }
  }
  active_ = true;
}

void PartitionFault::heal() noexcept {
  if (!active_) return;
  bool clean = true;
  for (const auto& cmd : heal_commands()) {
    try {
      runner_->run(cmd);
    } catch (const CommandError& err) {
      if (!detail::already_gone(err)) {
        clean = false;
        std::cerr << "fencecheck: partition " << target() << ": heal: " << err.what() << "\n";
      }
    } catch (const std::exception& err) {
      clean = false;
      std::cerr << "fencecheck: partition " << target() << ": heal: " << err.what() << "\n";
    }
  }
  if (clean) active_ = false;
}

nlohmann::json PartitionFault::ledger_record() const {
  nlohmann::json j{{"target", host_}, {"spec", spec_.describe()}, {"netns", hub_netns_}, {"device", device_},
                   {"pref", pref_}, {"hooks", {"ingress", "egress"}}};
  if (!address_.empty()) j["address"] = address_;
  return j;
}

std::string detail::heal_partition_record(const nlohmann::json& entry, CommandRunner& runner) {
  const std::string who = "partition " + entry.value("target", std::string("?")) + " " + entry.value("spec", std::string());
  const std::string netns = entry.value("netns", std::string()), device = entry.value("device", std::string());
  const int pref = entry.value("pref", 0);
  if (netns.rfind("fc-", 0) != 0 || device.rfind("fc", 0) != 0 || pref <= 0)
    return who + ": the record names no fencecheck link (" + netns + " " + device + "); nothing touched";
  std::vector<std::string> hooks{"ingress", "egress"};
  if (auto h = entry.find("hooks"); h != entry.end() && h->is_array()) {
    hooks.clear();
    for (const auto& x : *h)
      if (x == "ingress" || x == "egress") hooks.push_back(x.get<std::string>());
  }
  int removed = 0;
  for (const auto& hook : hooks) {
    try {
      runner.run(filter_del(netns, device, hook, pref));
      ++removed;
    } catch (const CommandError& err) {
      if (!already_gone(err)) throw std::runtime_error(who + ": " + err.what());
    }
  }
  if (removed == 0) return who + ": already gone (" + netns + " " + device + ")";
  return who + ": removed " + std::to_string(removed) + " filter(s) at pref " + std::to_string(pref) + " on " + device +
         " in " + netns;
}

}  // namespace fencecheck::faults
