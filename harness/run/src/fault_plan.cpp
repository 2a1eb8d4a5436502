#include "fencecheck/harness/fault_plan.h"

#include <unistd.h>

#include <algorithm>
#include <stdexcept>

#include "fencecheck/faults/fault_kind.h"
#include "fencecheck/process/child_process.h"
#include "fencecheck/locks/lock_service_kind.h"
#include "fencecheck/workers/worker.h"

namespace fencecheck::harness {
namespace {

constexpr const char* kFaketimeLib = kFaketimeLibrary;  // worker.h

const faults::FaultKind& kind_of(const FaultSpec& spec) {
  const faults::FaultKind* k = faults::find_fault_kind(spec.kind);
  if (k == nullptr) throw std::invalid_argument("unknown fault kind " + spec.kind);
  return *k;
}

}  // namespace

std::vector<std::string> missing_prerequisites(const Scenario& sc) {
  std::vector<std::string> missing;
  const bool root = ::geteuid() == 0;
  if (sc.network() == NetworkMode::kNamespaces) {
    if (!root) missing.push_back("network: namespaces needs root (ip netns add, veth, tc)");
    if (!process::find_on_path("ip")) missing.push_back("network: namespaces needs iproute2's `ip` (apt-get install iproute2)");
    if (!process::find_on_path("tc")) missing.push_back("network: namespaces needs iproute2's `tc` (apt-get install iproute2)");
  }
  // The fixed faults, and every kind the schedule may draw (its targets are chosen when it fires).
  std::vector<FaultSpec> planned = sc.faults();
  if (sc.schedule())
    for (const auto& k : sc.schedule()->faults) {
      planned.push_back(k.fault);
      if (targets_worker(k.fault.kind) && !k.fault.member)
        planned.back().target = "the schedule's " + std::string(to_string(k.target));
    }
  for (const auto& f : planned)
    for (auto& need : kind_of(f).missing_prerequisites(f.params, f.kind + " on " + f.target)) missing.push_back(std::move(need));
  // As keepalive: inline below: the loader refuses these in a scenario of its own kind; one moved
  // to another kind by --lock-service is unavailable there.
  for (const auto& f : planned)
    if (auto no = lock_service_refusal(f, sc.lock_service()))
      missing.push_back(f.kind + " on " + (f.member ? "lock-service " + f.member->text() : f.target) +
                        " cannot be had with lock service " + sc.lock_service().kind + ": " + no->why);
  // A scenario of its own kind cannot ask for this (the loader refuses it); one moved to another
  // kind by --lock-service can: the kind cannot give what the scenario's story rests on.
  const locks::LockServiceKind* lk = locks::find_lock_service_kind(sc.lock_service().kind);
  const std::string inline_problem = lk != nullptr ? lk->inline_keepalive_problem() : std::string();
  for (const auto& w : sc.workers())
    if (w.design.keepalive == KeepaliveMode::kInline && !inline_problem.empty())
      missing.push_back("worker " + w.id + "'s keepalive: inline cannot be had with lock service " +
                        sc.lock_service().kind + ": " + inline_problem);
  for (const auto& w : sc.workers())
    if (w.design.clock_offset && ::access(kFaketimeLib, R_OK) != 0)
      missing.push_back("worker " + w.id + "'s clock_offset needs libfaketime (" + std::string(kFaketimeLib) +
                        "): apt-get install faketime");
  return missing;
}

MemberTarget resolve_member_target(const locks::MemberSelector& selector, locks::LockServiceInstance& service) {
  const std::vector<locks::LockServiceMember> all = service.members();
  if (all.empty()) throw std::runtime_error("the lock service runs as one process: it has no members to aim at");
  std::optional<int> leader;
  std::string leader_why;
  if (selector.role != locks::MemberRole::kMember) leader = service.leader_member(leader_why);
  const locks::ResolvedMembers chosen =
      locks::resolve_members(selector, static_cast<int>(all.size()), leader, leader_why);
  MemberTarget out;
  out.why = chosen.why;
  const auto ref_of = [](const locks::LockServiceMember& m) {
    faults::MemberRef r;
    r.index = m.index;
    if (m.pid > 0) r.process = faults::ProcessRef::of(m.pid);
    r.netns = m.netns;
    r.address = m.address;
    r.endpoint = m.endpoint;
    r.data_dir = m.data_dir;
    return r;
  };
  for (int index : chosen.indices)
    for (const auto& m : all)
      if (m.index == index) out.members.push_back(ref_of(m));
  for (const auto& m : all)
    if (std::find(chosen.indices.begin(), chosen.indices.end(), m.index) == chosen.indices.end())
      out.other_members.push_back(ref_of(m));
  return out;
}

std::unique_ptr<faults::Fault> make_fault(const FaultSpec& spec, const std::optional<faults::ProcessRef>& target,
                                          const std::string& run_id, const faults::NetworkLab* lab,
                                          faults::LockServiceControl* lock_service, const MemberTarget& members) {
  faults::FaultContext ctx;
  ctx.members = members.members;
  ctx.other_members = members.other_members;
  ctx.members_why = members.why;
  ctx.target = spec.target;
  ctx.process = target;
  ctx.lab = lab;
  ctx.lock_service = lock_service;
  ctx.run_id = run_id;
  return kind_of(spec).make(spec.params, ctx);
}

}  // namespace fencecheck::harness
