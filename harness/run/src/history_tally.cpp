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
  // How each worker said its job ended (docs/worker-protocol.md, "How a worker ends").
  if (e.kind == EventKind::kJobDone) done_.insert(e.source);
  if (e.kind == EventKind::kJobGaveUp) gave_up_.insert(e.source);
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
  // The harness's own word that the workers must stop (the schedule is over: a repeating job ends
  // there, and an exit 0 then is the job's end).
  if (e.kind == EventKind::kLog && e.detail.rfind("schedule over after ", 0) == 0) stop_asked_ = true;
  // A worker's own exit ("exit N"; the harness's "terminated by the harness, ..." is not one),
  // read against what it said: shortfalls() judges it once the black-box workers are known.
  if (e.kind == EventKind::kWorkerExit && e.detail.rfind("exit ", 0) == 0)
    exits_.push_back(Exit{e.target, e.detail.substr(5), e.line, exit_accounted(e.target, e.detail.substr(5))});
  if (e.kind == EventKind::kLog) {
    // A command worker that exited while processes it started were still at work (holding its
    // event channel): the harness cut them short, so the worker did not do what it said it did.
    if (e.detail.find("still held its event channel") != std::string::npos)
      cut_short_.push_back(e.detail + "; a worker's exit means its work is done (docs/worker-protocol.md)");
    if (e.detail.rfind("started worker ", 0) == 0) started_.insert(e.target);
  }
}

bool HistoryTally::exit_accounted(const std::string& worker, std::string_view code) const {
  if (code == "1") return gave_up_.count(worker) != 0;
  return code == "0" && (done_.count(worker) || gave_up_.count(worker) || stop_asked_);
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
    const FaultTarget id{planned[i].kind, planned[i].target};
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
  // A worker that failed (an exit status other than 0 and 1, or a signal: always), or crashed (it
  // exited without saying how its job ended: exit 1 without job.gave_up, exit 0 without job.done
  // or job.gave_up while its work was not over; a black box, which says nothing, exit 1) did not
  // do what the scenario planned, and its exit status alone cannot say "gave up".
  for (const auto& x : exits_) {
    const bool silent = std::binary_search(black_box.begin(), black_box.end(), x.worker);
    const std::string log = "; see logs/" + x.worker + ".log";
    const std::string tail = x.stderr_tail.empty() ? std::string() : "; its last stderr lines:\n" + x.stderr_tail;
    if (x.code != "0" && x.code != "1") {
      int status = -1;
      std::from_chars(x.code.data(), x.code.data() + x.code.size(), status);
      out.push_back("worker " + x.worker + " failed: exit " + x.code +
                    (status > 128 ? " (killed by signal " + std::to_string(status - 128) + ")" : "") + log + tail);
    } else if (x.accounted) {
      continue;
    } else if (x.code == "1") {
      out.push_back("worker " + x.worker + " crashed: exit 1 " +
                    (silent ? std::string("from a black box (it sends no events, so only exit 0 says its job is done)")
                            : std::string("without job.gave_up (exit 1 alone does not say it gave up)")) +
                    log + tail);
    } else if (!silent && acquired_.count(x.worker)) {  // one that never acquired is named below
      out.push_back("worker " + x.worker + " crashed: exit 0 with its job unfinished (no job.done, no job.gave_up)" + log + tail);
    }
  }
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
