// The member seam (fencecheck/proto/lock_members.h: MemberRole, MemberSelector,
// resolve_members): naming and choosing the members of a clustered lock service a fault acts on.
#include <algorithm>
#include <stdexcept>

#include "fencecheck/proto/lock_members.h"

namespace fencecheck::locks {

std::string_view to_string(MemberRole r) {
  switch (r) {
    case MemberRole::kLeader: return "leader";
    case MemberRole::kFollower: return "follower";
    case MemberRole::kMember: return "member";
    case MemberRole::kMinority: return "minority";
    case MemberRole::kMajority: return "majority";
  }
  return "member";
}

std::optional<MemberRole> member_role(std::string_view text) {
  for (MemberRole r : {MemberRole::kLeader, MemberRole::kFollower, MemberRole::kMember, MemberRole::kMinority,
                       MemberRole::kMajority})
    if (to_string(r) == text) return r;
  return std::nullopt;
}

std::string MemberSelector::text() const {
  if (role == MemberRole::kMember) return "member " + std::to_string(member);
  return std::string(to_string(role));
}

nlohmann::json MemberSelector::to_json() const {
  if (role == MemberRole::kMember) return {{"lock_service", {{"member", member}}}};
  return {{"lock_service", std::string(to_string(role))}};
}

ResolvedMembers resolve_members(const MemberSelector& selector, int count, std::optional<int> leader,
                                const std::string& leader_why) {
  if (count < 1) throw std::out_of_range("the lock service has no members");
  if (leader && (*leader < 1 || *leader > count)) leader.reset();
  ResolvedMembers out;
  const auto list = [](const std::vector<int>& v) {
    std::string s;
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s;
  };
  // The leader first (when known), then the others by number: the order minority / majority take.
  std::vector<int> order;
  if (leader) order.push_back(*leader);
  for (int i = 1; i <= count; ++i)
    if (!leader || i != *leader) order.push_back(i);
  const auto need_leader = [&](std::string_view what) {
    if (!leader)
      throw std::runtime_error("no " + std::string(what) + " to aim at: the lock service has no leader now (" +
                               leader_why + ")");
  };
  switch (selector.role) {
    case MemberRole::kMember:
      if (selector.member < 1 || selector.member > count)
        throw std::out_of_range("member " + std::to_string(selector.member) + " is not one of the lock service's " +
                                std::to_string(count) + " members");
      out.indices = {selector.member};
      out.why = "member " + std::to_string(selector.member) + ", as the scenario names it";
      break;
    case MemberRole::kLeader:
      need_leader("leader");
      out.indices = {*leader};
      out.why = "member " + std::to_string(*leader) + ": the leader at the fault's moment (" + leader_why + ")";
      break;
    case MemberRole::kFollower:
      need_leader("follower");
      if (count < 2) throw std::runtime_error("no follower: the lock service has one member");
      out.indices = {order[1]};
      out.why = "member " + std::to_string(order[1]) + ": the lowest-numbered follower; the leader was member " +
                std::to_string(*leader) + " (" + leader_why + ")";
      break;
    case MemberRole::kMinority:
    case MemberRole::kMajority: {
      const bool minority = selector.role == MemberRole::kMinority;
      const int n = minority ? (count - 1) / 2 : count / 2 + 1;
      if (n < 1) throw std::runtime_error("a lock service of " + std::to_string(count) + " member(s) has no minority");
      out.indices.assign(order.begin(), order.begin() + n);
      out.why = "members " + list(out.indices) + ": a " + (minority ? "minority" : "majority") + " of " +
                std::to_string(count) + (leader ? ", the leader (member " + std::to_string(*leader) + ") first"
                                                 : ", lowest-numbered first (no leader: " + leader_why + ")");
      if (leader) out.why += " (" + leader_why + ")";
      break;
    }
  }
  return out;
}

}  // namespace fencecheck::locks
