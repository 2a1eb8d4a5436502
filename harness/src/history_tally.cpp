#include "fencecheck/harness/history_tally.h"

#include <algorithm>
#include <charconv>

namespace fencecheck::harness {

void HistoryTally::observe(const Event& e) {
  if (events_++ == 0) first_ns_ = e.t_ns;
  if (e.kind == EventKind::kRunStart) {
    if (!run_start_) run_start_ = e.t_ns;
    if (lock_.empty() && !e.lock.empty()) lock_ = e.lock;
  }
  if (e.kind == EventKind::kRunEnd) {
    run_end_ = e.t_ns;
    run_end_detail_ = e.detail;
    if (e.detail == "timeout") timed_out_ = true;
  }
  // The issuer's highest token, and how far behind it each write's token is (metrics.h).
  if ((e.kind == EventKind::kLockGrant || e.kind == EventKind::kAcquireOk) && e.token) issued_ = std::max(issued_, *e.token);
  if (e.kind == EventKind::kWriteInvoke && e.token) ++staleness_[std::max<std::int64_t>(0, issued_ - *e.token)];
  if (e.kind == EventKind::kAcquireOk) acquired_.insert(e.source);
  if (e.source != "harness") return;
  if (!e.fault.empty()) {
    const FaultTarget id{e.fault, e.target};
    if (e.kind == EventKind::kFaultInject) ++injected_[id];
    if (e.kind == EventKind::kFaultHeal) unhealed_.erase(id);
    if (e.kind == EventKind::kLog) {
      const std::string on = e.fault + " on " + e.target;
      if (e.detail.rfind(on + " not injected: ", 0) == 0) not_injected_[id].push_back(e.detail.substr(on.size() + 15));
      if (e.detail.rfind(on + " not healed: ", 0) == 0) unhealed_[id] = e.detail.substr(on.size() + 13);
    }
  }
  // A worker that failed (exit status other than 0, done, and 1, gave up: fenced out for good,
  // which the checkers judge; or killed by a signal) did not do what the scenario planned.
  if (e.kind == EventKind::kWorkerExit && e.detail.rfind("exit ", 0) == 0) {
    const std::string code = e.detail.substr(5);
    if (code != "0" && code != "1") {
      int status = -1;
      std::from_chars(code.data(), code.data() + code.size(), status);
      std::string why = "worker " + e.target + " failed: exit " + code +
                        (status > 128 ? " (killed by signal " + std::to_string(status - 128) + ")" : "") + "; see logs/" +
                        e.target + ".log";
      if (!e.line.empty()) why += "; its last stderr lines:\n" + e.line;
      failed_workers_.push_back(std::move(why));
    }
  }
  if (e.kind == EventKind::kLog) {
    // A command worker that exited while processes it started were still at work (holding its
    // event channel): the harness cut them short, so the worker did not do what it said it did.
    if (e.detail.find("still held its event channel") != std::string::npos)
      cut_short_.push_back(e.detail + "; a worker's exit means its work is done (docs/worker-protocol.md)");
    if (e.detail.rfind("started worker ", 0) == 0) started_.insert(e.target);
  }
}

/// (report.h) One reason per planned fault the history shows never took effect: a scenario whose
/// planned fault did not happen proved nothing about it, whatever its verdict. The n-th
/// fault.inject of a (kind, target) is taken as the n-th planned fault of that kind on that
/// target; a harness log event "<kind> on <target> not injected: <why>" says why one could not be
/// injected.
std::vector<std::string> HistoryTally::shortfalls(const Scenario& sc, const std::vector<std::string>& black_box) const {
  std::map<FaultTarget, std::int64_t> injected = injected_;
  std::map<FaultTarget, std::size_t> reasons_used;
  std::vector<std::string> out;
  const auto& planned = sc.faults();
  for (std::size_t i = 0; i < planned.size(); ++i) {
    const FaultTarget id{std::string(to_string(planned[i].kind)), planned[i].target};
    if (auto& n = injected[id]; n > 0) {
      --n;
      continue;
    }
    const std::string name = "faults[" + std::to_string(i) + "] (" + id.first + " on " + id.second + ")";
    const auto why = not_injected_.find(id);
    std::size_t& used = reasons_used[id];
    if (why != not_injected_.end() && used < why->second.size()) {
      out.push_back(name + " could not be injected: " + why->second[used++]);
    } else {
      out.push_back(name + " never fired: its trigger did not happen before the run ended");
    }
  }
  out.insert(out.end(), failed_workers_.begin(), failed_workers_.end());
  // A fault whose heal did not take effect (the harness's "<kind> on <target> not healed: <why>"
  // log event) and that no later fault.heal of the same kind and target healed: still in effect
  // when the run ended, so the run did not have the shape its plan gave (and the machine is left
  // changed: the ledger holds it outstanding).
  for (const auto& [id, why] : unhealed_)
    out.push_back("fault not healed, still in effect when the run ended: " + id.first + " on " + id.second + ": " + why);
  out.insert(out.end(), cut_short_.begin(), cut_short_.end());
  // A worker that spoke the protocol and never acquired the lock did nothing the scenario planned
  // (a command worker always; fencecheck-worker when the run timed out, stuck in acquire). A
  // worker that sent no events at all is a black box: the checkers judge it from the lock
  // service and the resource, and this rule cannot see it.
  for (const auto& w : sc.workers()) {
    const bool spoke = !std::binary_search(black_box.begin(), black_box.end(), w.id);
    if (!started_.count(w.id) || !spoke || acquired_.count(w.id)) continue;
    if (!w.command && !timed_out_) continue;
    out.push_back("worker " + w.id + " never acquired the lock " + sc.lock_service().lock +
                  (timed_out_ ? " within the run's timeout of " + format_duration(sc.timeout()) : std::string()) +
                  " (no acquire.ok)");
  }
  return out;
}

}  // namespace fencecheck::harness
