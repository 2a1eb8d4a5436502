// fencecheck — how a fault names the members of a clustered lock service (issue 35; the member
// seam, docs/architecture.md "Lock services as clusters: the member seam"): the roles, the
// scenario's selector, and the choice of members when the fault fires. Below every axis (the
// scenario loader, the checkers' expectations and the lock-service kinds all read it), so it lives
// with the other shared shapes in fencecheck_proto.
//
// Thread-safety: values and pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace fencecheck::locks {

/// How a fault names the members it acts on (a scenario's `target: {lock_service: ...}`):
///  - kLeader: the member the service itself names leader at the moment the fault fires;
///  - kFollower: one member that is not the leader then (the lowest-numbered);
///  - kMember: member `member` (1-based);
///  - kMinority: floor((n-1)/2) members: the leader first when the service has one, then the
///    lowest-numbered others (a minority holding the leader: the partition that moves leadership);
///  - kMajority: floor(n/2)+1 members, chosen the same way.
/// A kind says which roles it has (LockServiceKind::member_roles: etcd all five; redlock, whose
/// masters are independent, only member / minority / majority).
enum class MemberRole { kLeader, kFollower, kMember, kMinority, kMajority };
/// "leader", "follower", "member", "minority", "majority". Pure.
[[nodiscard]] std::string_view to_string(MemberRole r);
/// The role spelt `text`, or nullopt. Pure.
[[nodiscard]] std::optional<MemberRole> member_role(std::string_view text);

/// A scenario's member target. Value type.
struct MemberSelector {
  MemberRole role = MemberRole::kLeader;
  int member = 0;  ///< 1-based, only for kMember (0 otherwise)
  /// "leader", "member 2": for logs, events and scenario.json's readers. Pure.
  [[nodiscard]] std::string text() const;
  /// {"lock_service": "leader"} or {"lock_service": {"member": 2}}: what scenario.json carries, the
  /// scenario's own spelling. Pure.
  [[nodiscard]] nlohmann::json to_json() const;
  bool operator==(const MemberSelector&) const = default;
};

/// The members a selector hits at one moment, and why (one sentence for the history: "member 2:
/// the leader, as etcd member 1's status said (term 3)").
struct ResolvedMembers {
  std::vector<int> indices;  ///< 1-based, ascending except that the leader comes first
  std::string why;
};

/// Resolves `selector` over `count` members (count >= 1) with the service's answer `leader`
/// (LockServiceInstance::leader_member at this moment; `leader_why` is what it said either way).
/// Throws std::runtime_error when the selector needs a leader and there is none (the message
/// carries leader_why: the fault is then not injected, and the history says so), or member is out
/// of 1..count (std::out_of_range). Pure.
[[nodiscard]] ResolvedMembers resolve_members(const MemberSelector& selector, int count, std::optional<int> leader,
                                              const std::string& leader_why);

}  // namespace fencecheck::locks
