#include "fencecheck/faults/partition.h"

#include <arpa/inet.h>

#include <algorithm>
#include <iostream>

#include "healers.h"
#include "net_internal.h"

namespace fencecheck::faults {
namespace {

constexpr int kFullPref = 100;
constexpr int kServicePrefBase = 200;
constexpr int kHostPrefBase = 300;  // + the other host's index in the lab: one filter per peer

// Classic BPF opcodes (linux/filter.h, tc-bpf(8) "bytecode"): loads are relative to the Ethernet
// header (cls_bpf pushes the MAC header back on ingress), multi-byte loads are big-endian.
constexpr unsigned kLdwAbs = 0x20;   // BPF_LD | BPF_W | BPF_ABS:  A = u32 at [k]
constexpr unsigned kLdhAbs = 0x28;   // BPF_LD | BPF_H | BPF_ABS:  A = u16 at [k]
constexpr unsigned kLdbAbs = 0x30;   // BPF_LD | BPF_B | BPF_ABS:  A = u8 at [k]
constexpr unsigned kLdbInd = 0x50;   // BPF_LD | BPF_B | BPF_IND:  A = u8 at [X + k]
constexpr unsigned kLdxMsh = 0xb1;   // BPF_LDX | BPF_B | BPF_MSH: X = 4 * (u8 at [k] & 0xf)
constexpr unsigned kRshK = 0x74;     // BPF_ALU | BPF_RSH | BPF_K: A >>= k
constexpr unsigned kAndK = 0x54;     // BPF_ALU | BPF_AND | BPF_K: A &= k
constexpr unsigned kAddX = 0x0c;     // BPF_ALU | BPF_ADD | BPF_X: A += X
constexpr unsigned kSubX = 0x1c;     // BPF_ALU | BPF_SUB | BPF_X: A -= X
constexpr unsigned kTax = 0x07;      // BPF_MISC | BPF_TAX:        X = A
constexpr unsigned kJeqK = 0x15;     // BPF_JMP | BPF_JEQ | BPF_K
constexpr unsigned kJsetK = 0x45;    // BPF_JMP | BPF_JSET | BPF_K: jump if A & k
constexpr unsigned kRetK = 0x06;     // BPF_RET | BPF_K
constexpr unsigned kShot = 2;        // TC_ACT_SHOT: drop
constexpr unsigned kUnspec = 0xffffffffu;  // TC_ACT_UNSPEC (-1): not ours, next filter

// Frame layout (Ethernet II, then IPv4 per RFC 791, then TCP per RFC 9293).
constexpr unsigned kEth = 14;                              // Ethernet header length
constexpr unsigned kEthType = 12;
constexpr unsigned kEthIpv4 = 0x0800, kEthIpv6 = 0x86dd;
constexpr unsigned kIpv4TotalLength = kEth + 2;
constexpr unsigned kIpv4Fragment = kEth + 6;               // flags (3 bits) + fragment offset (13)
constexpr unsigned kIpv4Protocol = kEth + 9;
constexpr unsigned kIpv4SrcOffset = kEth + 12, kIpv4DstOffset = kEth + 16;
constexpr unsigned kFragmentOffsetMask = 0x1fff;
constexpr unsigned kProtoTcp = 6;
constexpr unsigned kTcpDataOffset = kEth + 12;             // + X (the IPv4 header length)
constexpr unsigned kTcpFlags = kEth + 13;                  // + X
constexpr unsigned kTcpFinOrRst = 0x01 | 0x04;

// A classic-BPF program with named jump targets. Jumps go forward only (classic BPF has no
// backward jumps) and jt/jf are 8-bit offsets from the next instruction.
class Program {
 public:
  void op(unsigned code, unsigned k = 0) { insns_.push_back({code, k, {}, {}}); }
  /// A conditional jump; an empty target is the next instruction.
  void jump(unsigned code, unsigned k, std::string jt, std::string jf) {
    insns_.push_back({code, k, std::move(jt), std::move(jf)});
  }
  void label(const std::string& name) { labels_.emplace_back(name, insns_.size()); }

  [[nodiscard]] std::string bytecode() const {
    std::string out = std::to_string(insns_.size());
    for (std::size_t i = 0; i < insns_.size(); ++i) {
      const Insn& n = insns_[i];
      out += "," + std::to_string(n.code) + " " + std::to_string(offset(i, n.jt)) + " " + std::to_string(offset(i, n.jf)) +
             " " + std::to_string(n.k);
    }
    return out;
  }

 private:
  struct Insn {
    unsigned code, k;
    std::string jt, jf;
  };
  [[nodiscard]] std::size_t offset(std::size_t from, const std::string& target) const {
    if (target.empty()) return 0;
    for (const auto& [name, at] : labels_) {
      if (name != target) continue;
      if (at <= from || at - from - 1 > 255) throw std::logic_error("partition: bad jump to " + target);
      return at - from - 1;
    }
    throw std::logic_error("partition: no label " + target);
  }
  std::vector<Insn> insns_;
  std::vector<std::pair<std::string, std::size_t>> labels_;
};

std::vector<std::string> filter_add(const std::string& netns, const std::string& dev, const std::string& hook, int pref,
                                    const std::string& bytecode) {
  return {"tc", "-n", netns, "filter", "add", "dev", dev, hook, "protocol", "all", "pref", std::to_string(pref),
          "handle", "1", "bpf", "bytecode", bytecode, "da"};
}

std::vector<std::string> filter_del(const std::string& netns, const std::string& dev, const std::string& hook, int pref) {
  return {"tc", "-n", netns, "filter", "del", "dev", dev, hook, "protocol", "all", "pref", std::to_string(pref),
          "handle", "1", "bpf"};
}

// The TCP-aware tail of a one-way program, entered with an IPv4 packet of the partition in hand:
// passes a TCP segment without payload, FIN or RST; drops the rest.
void one_way_ipv4(Program& p) {
  p.op(kLdbAbs, kIpv4Protocol);
  p.jump(kJeqK, kProtoTcp, "", "drop");           // not TCP: drop
  p.op(kLdhAbs, kIpv4Fragment);
  p.jump(kJsetK, kFragmentOffsetMask, "drop", "");  // a later fragment: payload only
  p.op(kLdxMsh, kEth);                            // X = IPv4 header length (IHL * 4)
  p.op(kLdbInd, kTcpFlags);
  p.jump(kJsetK, kTcpFinOrRst, "drop", "");        // FIN or RST: drop
  p.op(kLdbInd, kTcpDataOffset);                  // data offset in the high nibble, in words
  p.op(kRshK, 2);
  p.op(kAndK, 0x3c);                              // A = TCP header length (data offset * 4)
  p.op(kAddX);                                    // A = IPv4 + TCP header length
  p.op(kTax);
  p.op(kLdhAbs, kIpv4TotalLength);
  p.op(kSubX);                                    // A = payload length (wraps when malformed)
  p.jump(kJeqK, 0, "pass", "drop");               // no payload: SYN, SYN-ACK, pure ACK
}

}  // namespace

std::string_view to_string(PartitionSpec::Direction d) {
  switch (d) {
    case PartitionSpec::Direction::kBoth: return "both";
    case PartitionSpec::Direction::kRequests: return "requests";
    case PartitionSpec::Direction::kReplies: return "replies";
  }
  return "?";
}

std::string PartitionSpec::describe() const {
  std::string d = kind == Kind::kFull ? "full" : kind == Kind::kFromHost ? "from host " + service : "from " + service;
  if (direction != Direction::kBoth) d += " (" + std::string(to_string(direction)) + ")";
  return d;
}

std::vector<std::string> PartitionSpec::hooks() const {
  switch (direction) {
    case Direction::kBoth: return {"ingress", "egress"};
    case Direction::kRequests: return {"ingress"};
    case Direction::kReplies: return {"egress"};
  }
  return {};
}

std::string partition_bytecode(const PartitionSpec& spec, const std::string& hook, const std::string& address) {
  if (hook != "ingress" && hook != "egress") throw std::invalid_argument("partition: hook must be ingress or egress");
  const auto hooks = spec.hooks();
  if (std::find(hooks.begin(), hooks.end(), hook) == hooks.end())
    throw std::invalid_argument("partition " + spec.describe() + ": no filter on " + hook);
  const bool one_way = spec.direction != PartitionSpec::Direction::kBoth;
  Program p;
  p.op(kLdhAbs, kEthType);
  if (spec.kind == PartitionSpec::Kind::kFull) {
    if (!one_way) {
      // ldh [12]; jeq #IPv4 -> drop; jeq #IPv6 -> drop; ret UNSPEC; drop: ret SHOT
      p.jump(kJeqK, kEthIpv4, "drop", "");
      p.jump(kJeqK, kEthIpv6, "drop", "");
      p.op(kRetK, kUnspec);
      p.label("drop");
      p.op(kRetK, kShot);
      return p.bytecode();
    }
    p.jump(kJeqK, kEthIpv4, "", "not-ipv4");
    one_way_ipv4(p);
    p.label("not-ipv4");
    p.jump(kJeqK, kEthIpv6, "drop", "pass");
  } else {
    in_addr a{};
    if (::inet_pton(AF_INET, address.c_str(), &a) != 1)
      throw std::invalid_argument("partition: \"" + address + "\" is not an IPv4 address");
    // Towards the host (egress) the service is the source; from the host (ingress) the destination.
    p.jump(kJeqK, kEthIpv4, "", "pass");
    p.op(kLdwAbs, hook == "ingress" ? kIpv4DstOffset : kIpv4SrcOffset);
    p.jump(kJeqK, ntohl(a.s_addr), "", "pass");
    if (one_way) one_way_ipv4(p);
    else p.op(kRetK, kShot);  // ldh [12]; jne #IPv4 -> pass; ld [offset]; jne #addr -> pass; ret SHOT
  }
  p.label("pass");
  p.op(kRetK, kUnspec);
  if (one_way) {
    p.label("drop");
    p.op(kRetK, kShot);
  }
  return p.bytecode();
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
  } else if (spec_.kind == PartitionSpec::Kind::kFromHost) {
    const LabHost& other = lab.host(spec_.service);
    address_ = other.address;
    pref_ = kHostPrefBase + static_cast<int>(&other - lab.hosts().data());
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

PartitionFault::~PartitionFault() { (void)heal(); }  // a last try; the ledger keeps it outstanding

std::string PartitionFault::target() const {
  std::string t = host_ + " (" + host_netns_ + ") " + PartitionSpec{spec_.kind, spec_.service, {}}.describe();
  if (!address_.empty()) t += " " + address_;
  if (spec_.direction != PartitionSpec::Direction::kBoth) t += " (" + std::string(to_string(spec_.direction)) + ")";
  return t;
}

std::vector<std::vector<std::string>> PartitionFault::inject_commands() const {
  std::vector<std::vector<std::string>> c;
  for (const auto& hook : spec_.hooks())
    c.push_back(filter_add(hub_netns_, device_, hook, pref_, partition_bytecode(spec_, hook, address_)));
  return c;
}

std::vector<std::vector<std::string>> PartitionFault::heal_commands() const {
  std::vector<std::vector<std::string>> c;
  for (const auto& hook : spec_.hooks()) c.push_back(filter_del(hub_netns_, device_, hook, pref_));
  return c;
}

void PartitionFault::inject() {
  if (active_) return;
  const auto cmds = inject_commands();
  hooks_in_effect_ = 0;
  for (std::size_t i = 0; i < cmds.size(); ++i) {
    try {
      runner_->run(cmds[i]);
      ++hooks_in_effect_;
    } catch (const CommandError& err) {
      const std::string who = "partition " + target();
      const bool unavailable = detail::says(err, "classifier not found") || detail::says(err, "Unknown filter");
      std::string failure;
      if (unavailable)
        failure = who + ": the kernel has no bpf tc classifier (cls_bpf, CONFIG_NET_CLS_BPF): " + err.what();
      else if (detail::says(err, "Parent Qdisc doesn't exist"))
        failure = who + ": " + device_ + " has no clsact qdisc (was the lab set up?): " + err.what();
      else if (detail::says(err, "already exists"))
        failure = who + ": a partition " + (address_.empty() ? std::string("(full)") : "from " + spec_.service) +
                  " that filters " + cmds[i][7] + " is already in effect on this host: " + err.what();
      else
        failure = who + ": " + err.what();
      if (hooks_in_effect_ > 0) {  // heal() deletes the filters this inject added, and only those
        active_ = true;
        failure = undo_failed_inject(failure);
      }
      if (unavailable) throw FaultUnavailable(failure);
      throw FaultError(failure);
    }
  }
  active_ = true;
}

bool PartitionFault::heal() noexcept {
  if (!active_) return healed();
  bool clean = true;
  std::string why;
  const auto cmds = heal_commands();
  for (std::size_t i = 0; i < hooks_in_effect_ && i < cmds.size(); ++i) {
    const auto& cmd = cmds[i];
    try {
      runner_->run(cmd);
    } catch (const CommandError& err) {
      if (!detail::already_gone(err)) {
        clean = false;
        why = err.what();
        std::cerr << "fencecheck: partition " << target() << ": heal: " << err.what() << "\n";
      }
    } catch (const std::exception& err) {
      clean = false;
      why = err.what();
      std::cerr << "fencecheck: partition " << target() << ": heal: " << err.what() << "\n";
    }
  }
  if (!clean) return not_healed("partition " + target() + ": " + why);  // still active: a later heal() retries
  active_ = false;
  hooks_in_effect_ = 0;
  return healed();
}

nlohmann::json PartitionFault::ledger_record() const {
  nlohmann::json j{{"target", host_},     {"spec", spec_.describe()}, {"direction", std::string(to_string(spec_.direction))},
                   {"netns", hub_netns_}, {"device", device_},        {"pref", pref_},
                   {"hooks", spec_.hooks()}};
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
