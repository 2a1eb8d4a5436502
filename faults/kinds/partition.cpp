// Fault kind partition: drop packets between the target worker's network namespace and the lock
// service, the resource, or everything (faults/partition.h). Parameters: from (lock-service,
// resource or full; required), direction (both, requests or replies; default both). Needs
// `network: namespaces`.
#include "../src/healers.h"
#include "fencecheck/faults/partition.h"
#include "kinds.h"
#include "member_faults.h"

namespace fencecheck::faults::detail {
namespace {

const std::vector<std::string_view> kFroms{"lock-service", "resource", "full", "members"};

/// The lab host a lock-service member runs in (found by its namespace).
const LabHost& member_host(const NetworkLab& lab, const MemberRef& m) {
  for (const auto& h : lab.hosts())
    if (!m.netns.empty() && h.netns == m.netns) return h;
  throw FaultUnavailable("partition of lock-service member " + std::to_string(m.index) +
                         ": the member runs in no namespace of the network lab");
}
const std::vector<std::string_view> kDirections{"both", "requests", "replies"};

class Partition final : public FaultKind {
 public:
  std::string_view name() const override { return "partition"; }
  std::vector<std::string_view> fields() const override { return {"from", "direction"}; }
  nlohmann::json parse(const KindFields& f) const override {
    const auto from = kFroms[f.choice("from", kFroms, "partition source")];
    const auto direction = f.has("direction") ? kDirections[f.choice("direction", kDirections, "partition direction")]
                                              : kDirections[0];
    return {{"from", std::string(from)}, {"direction", std::string(direction)}};
  }
  bool needs_network_namespaces() const override { return true; }
  /// from: members asks the lock service's kind for members that talk to each other
  /// (locks::LockServiceKind::member_peer_problem: redlock's masters do not).
  LockServiceNeeds lock_service_needs(const nlohmann::json& params) const override {
    LockServiceNeeds n;
    n.member_peers = params.value("from", "full") == "members";
    return n;
  }
  /// A worker: from lock-service, resource or full. Lock-service members (issue 35): from members
  /// (each member hit cut from every other member, its clients still reach it) or full (cut from
  /// everything: the other members, its clients, the harness), both ways.
  std::string check_target(const nlohmann::json& params, bool member_target) const override {
    const std::string from = params.value("from", "full");
    if (!member_target) {
      if (from == "members") return "partition from: members cuts a lock-service member from the other members; give a "
                                    "member target (target: {lock_service: leader}) or from lock-service, resource or full";
      return "";
    }
    if (from != "members" && from != "full")
      return "partition of a lock-service member is from: members (the other members; its clients still reach it) or "
             "from: full (everything, its clients too), got from: " + from;
    if (params.value("direction", "both") != "both")
      return "partition of a lock-service member cuts both ways (direction: both)";
    return "";
  }
  std::unique_ptr<Fault> make(const nlohmann::json& params, const FaultContext& ctx) const override {
    if (!ctx.members.empty()) return make_for_members(params, ctx);
    using Direction = PartitionSpec::Direction;
    const std::string direction = params.value("direction", "both");
    const Direction d = direction == "requests" ? Direction::kRequests
                        : direction == "replies" ? Direction::kReplies
                                                 : Direction::kBoth;
    const std::string from = params.value("from", "full");
    const PartitionSpec spec = from == "full" ? PartitionSpec::full(d) : PartitionSpec::from(from, d);
    return std::make_unique<PartitionFault>(ctx.need_lab(name()), ctx.target, spec);
  }
  std::string heal_record(const nlohmann::json& entry) const override {
    return heal_parts(entry, [](const nlohmann::json& part) { return heal_partition_record(part, healer_runner()); });
  }

 private:
  /// One PartitionFault per (member hit, other member) on the hit member's bridge port (from:
  /// members), or one full partition per member hit; held as one fault (MembersFault).
  std::unique_ptr<Fault> make_for_members(const nlohmann::json& params, const FaultContext& ctx) const {
    const NetworkLab& lab = ctx.need_lab(name());
    const bool full = params.value("from", "full") == "full";
    std::vector<std::unique_ptr<Fault>> parts;
    for (const auto& m : ctx.members) {
      const LabHost& host = member_host(lab, m);
      if (full) {
        parts.push_back(std::make_unique<PartitionFault>(lab, host.name, PartitionSpec::full()));
        continue;
      }
      for (const auto& o : ctx.other_members)
        parts.push_back(std::make_unique<PartitionFault>(lab, host.name, PartitionSpec::from_host(member_host(lab, o).name)));
    }
    if (parts.empty()) throw FaultError("partition of " + members_name(ctx.members) + ": no other member to cut it from");
    // Always named after the members (even one filter: a full partition of one member), so the
    // history says "lock-service member 1 full", not the lab host's name.
    return std::make_unique<MembersFault>(name(), members_name(ctx.members) + (full ? " full" : " from the other members"),
                                          ctx.members_why, std::move(parts));
  }
};

}  // namespace

const FaultKind& partition_kind() {
  static const Partition k;
  return k;
}

}  // namespace fencecheck::faults::detail
