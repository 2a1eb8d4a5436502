#include "fencecheck/harness/orchestrator.h"
#include "fencecheck/harness/worker_command.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <thread>

#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "fencecheck/locks/lock_service_kind.h"
#include "fencecheck/faults/ledger.h"
#include "fencecheck/faults/sweep.h"
#include "fencecheck/faults/process.h"
#include "fencecheck/faults/worker_group.h"
#include "fencecheck/process/child_process.h"
#include "fencecheck/process/server_support.h"
#include "fencecheck/harness/fault_plan.h"
#include "fencecheck/harness/report.h"
#include "fencecheck/harness/night.h"
#include "fencecheck/harness/metrics.h"
#include "fencecheck/harness/run_claim.h"
#include "fencecheck/harness/run_dir.h"
#include "fencecheck/harness/schedule.h"
#include "fencecheck/harness/services.h"
#include "fencecheck/harness/history.h"
#include "fencecheck/harness/history_tally.h"
#include "fencecheck/harness/stream_check.h"
#include "fencecheck/harness/analysis.h"
#include "fencecheck/harness/expectation.h"
#include "fencecheck/harness/verdict_json.h"
#include "fencecheck/proto/event.h"
#include "fencecheck/proto/worker_protocol.h"
#include "fencecheck/resources/resource_kind.h"
#include "fencecheck/workers/worker.h"

namespace fencecheck::harness {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

/// t + d, saturated at the clock's end: a scenario may give a timeout (or a fault duration) up to
/// the largest 64-bit count of nanoseconds, and steady_clock's own count since boot plus that
/// would overflow (a deadline in the past: the run "timed out" at once).
Clock::time_point after(Clock::time_point t, Duration d) {
  const auto left = Clock::time_point::max() - t;
  return d >= left ? Clock::time_point::max() : t + std::chrono::duration_cast<Clock::duration>(d);
}

/// Everything the reader threads hand to the main loop, in receive order.
struct Inbound {
  Event event;
  bool eof = false;   ///< the worker's stdout closed
  std::string from;   ///< worker id for eof
};

class Inbox {
 public:
  void push(Inbound in) {
    {
      std::lock_guard lock(mu_);
      q_.push_back(std::move(in));
    }
    cv_.notify_one();
  }
  /// Pops everything queued, waiting until `deadline` for at least one item.
  std::deque<Inbound> drain_until(Clock::time_point deadline) {
    std::unique_lock lock(mu_);
    cv_.wait_until(lock, deadline, [&] { return !q_.empty(); });
    std::deque<Inbound> out;
    out.swap(q_);
    return out;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Inbound> q_;
};

struct WorkerState {
  const WorkerSpec* spec = nullptr;
  std::unique_ptr<process::ChildProcess> proc;
  bool started = false;
  bool eof = false;     ///< its event channel closed: it is exiting
  bool exited = false;
  /// When the worker's own process was first seen gone while its event channel was still open
  /// (a process it forked holds it): the harness waits a little for the channel, then ends the group.
  std::optional<Clock::time_point> gone_at;
  /// A command worker's process group, in the ledger while it runs (faults/worker_group.h): what it
  /// forked cannot outlive a kill -9'ed harness past `fencecheck cleanup`.
  std::unique_ptr<faults::WorkerGroup> group;
  std::int64_t group_ledger_id = 0;
  bool never = false;  ///< will never start (its trigger's worker ended first)
  bool queued = false;  ///< its start trigger happened; it waits in Run::launch_queue_
  std::optional<Clock::time_point> start_at;
  /// A command worker's own directory (FENCECHECK_WORKER_DIR), in the ledger from before it is made
  /// until the run's end moves it into the run directory (collect_worker_dirs); null otherwise.
  std::unique_ptr<faults::WorkerDirectory> scratch;
  std::int64_t scratch_ledger_id = 0;
};

struct ActiveFault {
  const FaultSpec* spec = nullptr;
  std::unique_ptr<faults::Fault> fault;
  std::int64_t ledger_id = 0;
  std::int64_t injected_ns = 0;
  Clock::time_point heal_at;
  /// Its heal was tried and did not take effect: the loop no longer waits for it (heal_all()
  /// tries once more at the end of the run); it stays outstanding in the ledger.
  bool heal_failed = false;
  /// Its inject() threw and the undo of what it had done did not take effect (Fault::inject()):
  /// never in effect as planned, but not healed either; kept for heal_all() with heal_failed.
  bool inject_failed = false;
  /// The lock-service members it acts on (1-based), for a member target; empty otherwise.
  std::vector<int> members;
};


/// The run: one per scenario, owned by run_scenario's stack frame.
class Run {
 public:
  Run(const Scenario& sc, const RunOptions& opt, RunDirectory dir)
      : sc_(sc),
        opt_(opt),
        dir_(std::move(dir)),
        history_out_(dir_.path() / kHistoryFile),
        live_checker_(CheckContext::of(sc)),
        live_anomalies_out_(dir_.path() / kLiveAnomaliesFile) {}
  /// Heals (and records) whatever is still injected when the run unwinds on an error.
  ~Run() {
    try {
      heal_all();
      collect_worker_dirs();  // a run that failed before its end leaves nothing under /tmp
    } catch (const std::exception& err) {  // recording the heal's event failed; the heals themselves never throw
      spdlog::error("{}: while healing at the end of a failed run: {}", sc_.name(), err.what());
    }
  }
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  ScenarioResult execute();

 private:
  void record(Event e);
  /// The keys the run wrote: the job's, each worker's own, and every key a recorded event names
  /// (a command worker may write keys of its own). The read-back is scoped to them.
  [[nodiscard]] std::set<std::string> run_keys() const;
  void launch_worker(WorkerState& w);
  /// The worker protocol's environment (docs/worker-protocol.md) for worker `w`.
  std::vector<std::pair<std::string, std::string>> protocol_env(const WorkerSpec& w) const;
  void record_exit(WorkerState& w, const std::string& id, const std::string& how);
  void on_event(const Event& e);
  /// Injects `spec`. A member target is resolved now, unless `resolved` is what the caller
  /// resolved for it a moment ago (a scheduled fault, whose schedule.jsonl line names its members).
  void inject(const FaultSpec& spec, const MemberTarget* resolved = nullptr);
  /// Heals f; records the heal (ledger, history) only when it took effect, else a harness log
  /// event "<kind> on <target> not healed: <why>" (run_shortfalls reads it) and an error.
  void heal(ActiveFault& f);
  /// Heals every fault still active; what cannot be healed is named in unhealed_.
  void heal_all();
  /// A fault left in effect (unhealed_): exit 3, never skipped, and an error naming each and the
  /// cleanup command; add_reasons: one reason each too (else run_shortfalls already gave them).
  void name_unhealed(ScenarioResult& r, bool add_reasons = false) const;
  bool finished();
  void loop();
  /// The schedule's faults still in effect (not counting one whose heal failed).
  [[nodiscard]] std::int64_t scheduled_active() const;
  /// Fires planned fault `p`: chooses its target by its rule among the workers running now (holders_
  /// or any; never one another fault is already on), or, for a member target, resolves its members
  /// now (never one another fault is already on), appends it to schedule.jsonl, then injects it
  /// like any fault (ledger, history, heal); true. No candidate (or no leader now): false (the loop
  /// tries again: the holders change hands between rounds, an election ends), or with
  /// `last_chance` a schedule.jsonl line and a harness log event saying the fault was skipped and
  /// why, and true.
  bool fire_scheduled(const PlannedFault& p, bool last_chance);
  /// Records why `spec` did not take effect (a harness log event built on `e`); a FaultUnavailable
  /// makes the run an environment failure (exit 3, or skipped with --skip-unavailable), except for
  /// a scheduled fault under --skip-unavailable: then only that kind's later draws are skipped.
  void not_injected(const FaultSpec& spec, Event e, const std::exception& err);
  /// With an embedded cluster (lock_service.members > 1), the reference worker's endpoint JSON with
  /// its member first: the k-th worker of the scenario (0-based) talks to member k mod n + 1 (the
  /// etcd client starts on its first endpoint and fails over along the others: etcd_lock_client.h),
  /// so w1 is on member 1 (the leader at the start), w2 on member 2... Otherwise `endpoint` as it is.
  [[nodiscard]] nlohmann::json member_first(nlohmann::json endpoint, const WorkerSpec& w) const;
  /// Appends (and flushes) planned fault `p`'s line to schedule.jsonl: with "target" when it fires
  /// on spec.target (and, for a member target, "members" and "members_why": which it hit and why),
  /// with "skipped" (the reason) instead when `skipped` is not empty.
  void write_schedule_line(const PlannedFault& p, const FaultSpec& spec, const std::string& rule,
                           const std::string& skipped, const MemberTarget* members = nullptr);
  /// The schedule's duration is over: heal what is in effect, tell every worker to stop (SIGTERM:
  /// a repeating worker releases and exits 0); the loop then waits for them to exit.
  void end_schedule();
  /// Launches the next worker of launch_queue_ (start triggers that happened, in order): one per
  /// turn of the loop, so that events (fault triggers) and heals are handled between launches. A
  /// launch is a fork of the harness, ~90 ms on a paravirtualised 2-core VM: 998 workers launched
  /// in one go from on_event (bench/scale_scenario.py 1000) held a 6 s SIGSTOP in effect for 91 s,
  /// and launch slices of 20 ms delayed a fault's trigger past the write it was meant to catch.
  void launch_queued();
  /// The history is complete: closes history.jsonl and, as opt_.compress_history says, replaces
  /// it by history.jsonl.zst (a failure is logged; the plain file stays).
  void finish_history();
  /// Copies each command worker's FENCECHECK_WORKER_DIR into <run dir>/workers/<id>/ and removes it.
  void collect_worker_dirs();

  const Scenario& sc_;
  const RunOptions& opt_;
  /// Workers whose start_after trigger happened, in trigger order, not launched yet.
  std::deque<WorkerState*> launch_queue_;
  RunDirectory dir_;
  std::ofstream history_out_;
  /// The checkers' rules that can be decided event by event (live_checker.h): each anomaly it
  /// finds is appended to anomalies.live.jsonl, logged and passed to the observers (/metrics) as
  /// the event that proves it is recorded.
  LiveChecker live_checker_;
  std::ofstream live_anomalies_out_;
  /// One anomaly found while the run goes: its line in anomalies.live.jsonl (flushed), a warning,
  /// RunObserver::on_anomaly.
  void found_live(const LiveAnomaly& a);
  /// What the judgement needs from the history besides the checkers (history_tally.h). The run
  /// does not hold its history: the checkers read history.jsonl back (analyze_history_file), so
  /// the harness's memory does not grow with the events of a long run.
  HistoryTally tally_;
  Inbox inbox_;
  std::map<std::string, WorkerState> workers_;
  std::map<std::pair<std::string, EventKind>, std::int64_t> counts_;
  std::set<const FaultSpec*> fired_;
  /// A fault fired but the environment lacked what it needs (faults::FaultUnavailable): exit 3,
  /// or skipped. (Why, and every other fault that did not take effect: run_shortfalls.)
  bool fault_unavailable_ = false;
  /// Kinds of the schedule whose injection failed with FaultUnavailable, and why: later draws of
  /// them are skipped.
  std::map<std::string, std::string> unavailable_kinds_;
  /// Per fault kind, how many planned faults of it this machine could not give (not injected, or
  /// a later draw of the schedule skipped for it) and the first reason: the summary says so.
  std::map<std::string, std::pair<int, std::string>> not_run_;
  std::vector<ActiveFault> active_;
  std::unique_ptr<faults::FaultLedger> ledger_;
  Services* services_ = nullptr;  // the run's services (owned by execute()'s frame)
  /// The embedded lock service as fault kinds act on it (lock-service-restart): the run's
  /// Services, and the issuer watch told before a restart on an empty data directory.
  class LockControl final : public faults::LockServiceControl {
   public:
    explicit LockControl(Run& run) : run_(run) {}
    void stop_lock_service(bool fresh_data_next) override {
      run_.services_->stop_lock_service();
      if (fresh_data_next && run_.watch_) run_.watch_->restarted_fresh();
    }
    void start_lock_service(bool fresh_data) override { run_.services_->start_lock_service(fresh_data); }
    void stop_member(int index, bool kill9) override { run_.services_->lock_service().stop_member(index, kill9); }
    void start_member(int index) override { run_.services_->lock_service().start_member(index); }

   private:
    Run& run_;
  };
  LockControl lock_control_{*this};
  locks::IssuerWatch* watch_ = nullptr;  // the lock service's own history (owned by execute()'s frame)
  std::string lock_name_;
  std::int64_t start_ns_ = 0;
  Clock::time_point start_{};
  bool timed_out_ = false;
  bool interrupted_ = false;
  /// "<kind> on <target>: <why>" for each fault still in effect after the run's last heal_all().
  std::vector<std::string> unhealed_;
  // The fault schedule (Scenario::schedule): its plan, the next planned fault, the specs of the
  // faults it fired (a deque: ActiveFault::spec points into it), and schedule.jsonl.
  std::vector<PlannedFault> plan_;
  std::size_t next_planned_ = 0;
  std::deque<FaultSpec> scheduled_;
  std::set<const FaultSpec*> scheduled_specs_;
  std::ofstream schedule_out_;
  /// Workers holding the lock as their own events say: acquire.ok, until release.invoke or exit
  /// (a holder whose lease expired still believes it holds: it stays one).
  std::set<std::string> holders_;
  std::set<std::string> event_keys_;  ///< every resource key a recorded event named (record())
  bool stopping_ = false;  ///< the schedule's duration ended: the workers were told to stop
  /// Workers that exited while the schedule still ran (why each is a reason the run is not met).
  std::vector<std::string> early_exits_;
  // A long run's progress, logged once a minute (log_progress): what the history holds so far.
  std::int64_t events_ = 0;
  std::int64_t rejected_ = 0;
  Clock::time_point next_progress_log_ = Clock::time_point::max();
  /// One log line: elapsed of the schedule, faults fired and in effect, events, rejected writes.
  void log_progress();
};

template <typename F>
void notify(const RunOptions& opt, F&& call) {
  for (auto* o : opt.observers) {
    try {
      call(*o);
    } catch (const std::exception& err) {
      spdlog::warn("run observer failed: {}", err.what());
    }
  }
}

void Run::record(Event e) {
  if (e.t_ns == 0) e.t_ns = monotonic_ns();
  if (e.src_ns == 0) e.src_ns = e.t_ns;
  history_out_ << to_json_line(e) << '\n';
  history_out_.flush();  // a killed harness still leaves the history up to here
  ++events_;
  if (e.kind == EventKind::kWriteFail && e.high_water) ++rejected_;  // without one: an invalid request
  notify(opt_, [&](RunObserver& o) { o.on_event(sc_, e); });
  for (const LiveAnomaly& a : live_checker_.observe(static_cast<std::size_t>(events_ - 1), e)) found_live(a);
  tally_.observe(e);
  if (!e.key.empty()) event_keys_.insert(e.key);  // the keys a worker's events name (run_keys())
}

std::set<std::string> Run::run_keys() const {
  std::set<std::string> keys = event_keys_;
  keys.insert(sc_.job().key);
  for (const auto& w : sc_.workers()) keys.insert(sc_.key_of(w));
  return keys;
}

void Run::found_live(const LiveAnomaly& a) {
  const std::int64_t t_ms = start_ns_ > 0 ? (monotonic_ns() - start_ns_) / 1'000'000 : 0;
  live_anomalies_out_ << live_anomaly_json_line(a, t_ms) << '\n';
  live_anomalies_out_.flush();  // there the moment it is found, whatever happens to the harness later
  spdlog::warn("{}: anomaly found while running: {} (history event {}): {}", sc_.name(), a.anomaly.name, a.found_at,
               a.anomaly.description);
  notify(opt_, [&](RunObserver& o) { o.on_anomaly(sc_, a); });
}

void Run::launch_queued() {
  while (!launch_queue_.empty()) {
    WorkerState* w = launch_queue_.front();
    launch_queue_.pop_front();
    if (!w->queued) continue;  // launched early by inject(), or taken off by end_schedule()
    w->queued = false;
    launch_worker(*w);
    return;
  }
}

void Run::collect_worker_dirs() {
  for (auto& [id, w] : workers_) {
    if (!w.scratch) continue;
    // The ledger's heal moves it (faults::keep_worker_directory); what it could not keep is named.
    if (!ledger_->heal(*w.scratch, w.scratch_ledger_id)) {
      spdlog::warn("{}: worker {}'s directory stays outstanding in faults.ledger: {}", sc_.name(), id,
                   w.scratch->heal_failure());
      unhealed_.push_back("worker-dir of " + id + ": " + w.scratch->heal_failure());
    } else if (!w.scratch->copy_failure().empty()) {
      spdlog::warn("{}: worker {}'s directory {}", sc_.name(), id, w.scratch->copy_failure());
    }
    w.scratch.reset();
  }
}

void Run::finish_history() {
  history_out_.close();
  using Mode = RunOptions::CompressHistory;
  if (opt_.compress_history == Mode::kNever) return;
  const fs::path plain = dir_.path() / kHistoryFile;
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(plain, ec);
  if (ec || (opt_.compress_history == Mode::kAuto && size < kCompressHistoryFromBytes)) return;
  try {
    const CompressedHistory c = compress_history(plain);
    spdlog::info("{}: {} compressed to {}: {} -> {} bytes ({:.1f}x smaller)", sc_.name(), kHistoryFile,
                 kCompressedHistoryFile, c.plain_bytes, c.compressed_bytes,
                 c.compressed_bytes ? static_cast<double>(c.plain_bytes) / static_cast<double>(c.compressed_bytes) : 0.0);
  } catch (const std::exception& err) {
    spdlog::warn("{}: {} left uncompressed: {}", sc_.name(), kHistoryFile, err.what());
  }
}

std::vector<std::pair<std::string, std::string>> Run::protocol_env(const WorkerSpec& w) const {
  const auto& job = sc_.job();
  const nlohmann::json& endpoint = services_->resource_endpoint();
  std::vector<std::pair<std::string, std::string>> env{
      {"FENCECHECK_PROTOCOL", std::to_string(kWorkerProtocolVersion)},
      {"FENCECHECK_WORKER_ID", w.id},
      {"FENCECHECK_SCENARIO", sc_.name()},
      {"FENCECHECK_RUN_ID", dir_.run_id()},
      {"FENCECHECK_RUN_DIR", dir_.path().string()},
      {"FENCECHECK_SEED", std::to_string(sc_.seed())},
      {"FENCECHECK_LOCK_SERVICE", sc_.lock_service().kind},
      {"FENCECHECK_LOCK_ENDPOINTS", services_->worker_lock_endpoints_text(sc_.issuer_of(w))},
      {"FENCECHECK_LOCK_NAME", lock_name_},
      {"FENCECHECK_LEASE_TTL_S", std::to_string(std::chrono::ceil<std::chrono::seconds>(sc_.lease_ttl()).count())},
      {"FENCECHECK_LEASE_TTL_MS", std::to_string(sc_.lease_ttl().count())},
      {"FENCECHECK_RESOURCE_KIND", sc_.resource().kind},
      {"FENCECHECK_RESOURCE", endpoint.dump()},
      {"FENCECHECK_KEY", sc_.key_of(w)},
      {"FENCECHECK_JOB_KIND", std::string(to_string(job.kind))},
      {"FENCECHECK_JOB_SEGMENTS", std::to_string(job.segments)},
      {"FENCECHECK_JOB_CHUNKS", std::to_string(job.chunks)},
      {"FENCECHECK_CHUNK_BYTES", std::to_string(job.chunk_bytes)},
      {"FENCECHECK_CHUNK_INTERVAL_MS",
       std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(job.chunk_interval).count())},
      {"FENCECHECK_JOB_REPEAT", job.repeat ? "1" : "0"},
      {"FENCECHECK_JOB_PAYLOAD", std::string(to_string(job.payload))},
      {"FENCECHECK_EVENTS_FD", std::to_string(kWorkerEventsFd)},
      {"FENCECHECK_BIN_DIR", (opt_.bin_dir.empty() ? process::self_bin_dir() : opt_.bin_dir).string()},
  };
  // The name in the scenario's client library's spelling (lock_service.client), after run_suffix.
  if (const std::string& client = sc_.lock_service().client; !client.empty())
    for (const auto& layout : locks::find_lock_service_kind(sc_.lock_service().kind)->clients())
      if (layout.client == client) env.emplace_back("FENCECHECK_LOCK_CLIENT_NAME", locks::client_lock_name(layout, lock_name_));
  // Kind none: no lock service, so no endpoint to give (FENCECHECK_LOCK_SERVICE says "none").
  if (sc_.lock_service().kind == kNoLockService)
    std::erase_if(env, [](const auto& kv) { return kv.first == "FENCECHECK_LOCK_ENDPOINTS"; });
  // The lock service's own conventional variables (etcd: ETCDCTL_ENDPOINTS, ETCDCTL_API).
  for (auto& [name, value] : services_->worker_lock_env(sc_.issuer_of(w))) env.emplace_back(name, value);
  // The resource kind's own variables: its address in the form its clients take (a URL, a DSN).
  for (auto& [name, value] : resources::find_resource_kind(sc_.resource().kind)->worker_env(endpoint))
    env.emplace_back(std::move(name), std::move(value));
  return env;
}

void Run::launch_worker(WorkerState& w) {
  const auto& job = sc_.job();
  const std::string id = w.spec->id;
  process::ChildSpec spec;
  std::optional<WorkerAccount> account;  // a command worker's
  spec.name = id;
  spec.stderr_log = dir_.log_path(id);
  spec.stdout_log = dir_.path() / "logs" / (id + ".stdout.log");
  spec.events_fd = kWorkerEventsFd;
  spec.prefix = services_->worker_prefix(id);
  spec.env = protocol_env(*w.spec);
  if (const auto& command = w.spec->command) {
    // The user's program (docs/worker-protocol.md): its argv, its directory, its variables; a
    // process group of its own so that ending it ends what it forked.
    const auto program = resolve_worker_program(*command);
    if (!program) {
      Event e;
      e.source = "harness";
      e.kind = EventKind::kLog;
      e.target = id;
      e.detail = "worker " + id + " not started: its program " + command->argv.front() + " is gone or not executable";
      record(std::move(e));
      w.started = true;
      w.exited = true;
      return;
    }
    spec.exe = *program;
    spec.args.assign(command->argv.begin() + 1, command->argv.end());
    spec.cwd = command->cwd;
    spec.own_process_group = true;
    // The account it runs as (docs/worker-protocol.md, "The worker's account"): setpriv(1) after
    // the namespace's `ip netns exec`, so the harness, as root, still signals, throttles and
    // isolates it. Its own HOME, USER and LOGNAME (a team's ~/.pgpass is its account's).
    account = resolve_worker_account(command->user, AccountDefaults::from_environment());
    if (account->switches) {
      const auto setpriv = process::find_on_path("setpriv");
      if (!setpriv) throw EnvironmentError("setpriv (util-linux) is not on PATH: it runs command workers as " + account->name);
      const auto prefix = account_prefix(*account, setpriv->string());
      spec.prefix.insert(spec.prefix.end(), prefix.begin(), prefix.end());
      spec.env.insert(spec.env.end(), {{"HOME", account->home}, {"USER", account->name}, {"LOGNAME", account->name}});
      spec.owner = std::pair{account->uid, account->gid};
    }
    // Its own directory, its account's to write: the run directory is the harness's evidence
    // (history, verdict), which the system under test must not be able to touch, and may sit
    // under a directory its account cannot enter. So a fresh directory under the system's
    // temporary directory (sticky, every account's), copied into <run dir>/workers/<id>/ when
    // the run ends (collect_worker_dirs).
    // Recorded in the ledger before it exists: a harness killed with -9 leaves it to `fencecheck
    // cleanup`, which moves it into the run directory as the end of the run would have.
    const fs::path scratch = fs::temp_directory_path() / ("fencecheck-" + dir_.run_id() + "-" + id);
    w.scratch = std::make_unique<faults::WorkerDirectory>(scratch, dir_.path() / "workers" / id, id, dir_.run_id());
    w.scratch->inject();
    w.scratch_ledger_id = ledger_->record_inject(*w.scratch);
    std::error_code ec;
    fs::remove_all(scratch, ec);
    if (!fs::create_directory(scratch, ec) || ::chmod(scratch.c_str(), 0700) != 0 ||
        (account->switches && ::chown(scratch.c_str(), account->uid, account->gid) != 0))
      throw EnvironmentError("cannot make " + scratch.string() + " for worker " + id + " (" + account->name + "): " +
                             (ec ? ec.message() : std::string(std::strerror(errno))));
    spec.env.emplace_back("FENCECHECK_WORKER_DIR", scratch.string());
    spec.env.insert(spec.env.end(), command->env.begin(), command->env.end());
  } else {
    spec.exe = (opt_.bin_dir.empty() ? process::self_bin_dir() : opt_.bin_dir) / "fencecheck-worker";
    // The lease TTL in whole seconds when it is (etcd's always is), else in milliseconds.
    const auto ttl_ms = sc_.lease_ttl().count();
    spec.args = {"--id", id, "--lock-service", member_first(services_->worker_lock_endpoint(sc_.issuer_of(*w.spec)), *w.spec).dump(), "--resource",
                 services_->resource_endpoint().dump(), "--lock", lock_name_, "--key", sc_.key_of(*w.spec),
                 ttl_ms % 1000 == 0 ? "--ttl-s" : "--ttl-ms", std::to_string(ttl_ms % 1000 == 0 ? ttl_ms / 1000 : ttl_ms),
                 "--segments", std::to_string(job.segments),
                 "--chunks", std::to_string(job.chunks), "--chunk-bytes", std::to_string(job.chunk_bytes),
                 "--chunk-interval-ms",
                 std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(job.chunk_interval).count()),
                 "--seed", std::to_string(sc_.seed())};
    // The job's kind and the worker's design (docs/catalogue-plan.md): flags of fencecheck-worker.
    if (job.kind != JobKind::kSegments) {
      spec.args.insert(spec.args.end(), {"--job", std::string(to_string(job.kind))});
      if (job.kind == JobKind::kCounter) spec.args.insert(spec.args.end(), {"--increments", std::to_string(job.increments)});
    }
    if (job.repeat) spec.args.emplace_back("--repeat");  // until the schedule ends (end_schedule's SIGTERM)
    const auto& d = w.spec->design;
    if (d.retry_same_token) spec.args.emplace_back("--retry-same-token");
    if (d.release_by_name) spec.args.emplace_back("--release-by-name");
    if (d.check_lease_before_write) spec.args.emplace_back("--check-lease-before-write");
    if (d.abort_on_pause)
      spec.args.insert(spec.args.end(), {"--abort-on-pause-ms",
                                         std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(*d.abort_on_pause).count())});
    if (d.token_source != TokenSource::kIssuer)
      spec.args.insert(spec.args.end(), {"--token-source", std::string(to_string(d.token_source))});
    if (d.self_stop_at != SelfStopAt::kNever)
      spec.args.insert(spec.args.end(), {"--self-stop-at", std::string(to_string(d.self_stop_at))});
    if (d.keepalive != KeepaliveMode::kThread)
      spec.args.insert(spec.args.end(), {"--keepalive", std::string(to_string(d.keepalive))});
    if (d.cpu_per_write)
      spec.args.insert(spec.args.end(), {"--cpu-per-write-ms",
                                         std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(*d.cpu_per_write).count())});
    if (d.clock_offset) {
      // libfaketime (Debian's faketime): the worker's CLOCK_REALTIME runs offset; its monotonic
      // clock, which the pause ticker uses, is left alone (FAKETIME_DONT_FAKE_MONOTONIC).
      // faketime_environment() also carries the ASAN_OPTIONS a sanitizer build needs (its doc).
      for (auto& kv : faketime_environment(std::chrono::duration_cast<std::chrono::milliseconds>(*d.clock_offset),
                                           std::getenv("ASAN_OPTIONS")))
        spec.env.push_back(std::move(kv));
    }
  }
  // The reader thread's own count of the channel's lines (it alone touches it).
  auto line_no = std::make_shared<std::int64_t>(0);
  try {
    w.proc = std::make_unique<process::ChildProcess>(spec, [this, id, line_no](std::string_view line, std::int64_t recv_ns, bool eof) {
      Inbound in;
      in.from = id;
      if (eof) {
        in.eof = true;
        inbox_.push(std::move(in));
        return;
      }
      const std::int64_t n = ++*line_no;
      WorkerLine read = read_worker_line(line, n == 1);
      if (read.event) {
        in.event = std::move(*read.event);
        in.event.source = id;  // a worker speaks only for itself
      } else {
        // Kept, named and located: the run cannot be judged safe through it (docs/worker-protocol.md).
        in.event.kind = EventKind::kProtocolError;
        in.event.source = "harness";
        in.event.target = id;
        in.event.line_no = n;
        // The parser's message can quote the whole line: the line is kept in `line`, cut.
        if (read.error.size() > 512) read.error = read.error.substr(0, 512) + "...";
        in.event.detail = id + "'s event line " + std::to_string(n) + ": " + read.error;
        in.event.line = std::string(line.substr(0, kProtocolLineKept));
        if (line.size() > kProtocolLineKept) in.event.line += "...";
      }
      in.event.t_ns = recv_ns;
      inbox_.push(std::move(in));
    });
  } catch (const std::exception& err) {
    if (!w.spec->command) throw;  // fencecheck-worker itself missing: the harness's installation is broken
    Event e;
    e.source = "harness";
    e.kind = EventKind::kWorkerExit;
    e.target = id;
    e.detail = "exit 127";
    e.line = err.what();
    record(std::move(e));
    w.started = true;
    w.exited = true;
    return;
  }
  w.started = true;
  if (w.spec->command)
    if (auto leader = faults::ProcessRef::of(w.proc->pid())) {
      w.group = std::make_unique<faults::WorkerGroup>(*leader, id);
      w.group->inject();
      w.group_ledger_id = ledger_->record_inject(*w.group);
    }
  Event e;
  e.source = "harness";
  e.kind = EventKind::kLog;
  e.target = id;
  e.detail = "started worker " + id + " (pid " + std::to_string(w.proc->pid()) +
             (account ? ", as " + account->name + " uid " + std::to_string(account->uid) + ": " + account->chosen_by : std::string()) +
             ")";
  record(std::move(e));
}

/// The last lines of a worker's stderr log (at most 20 lines, 4 KiB), for a failed worker's reasons:
/// the process library's one log-tail helper, over the log's last 8 KiB.
std::string stderr_tail(const fs::path& log) {
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(log, ec);
  if (ec) return {};
  return process::tail_text(process::read_text(log, size > 8192 ? size - 8192 : 0), 20, 4096);
}

void Run::record_exit(WorkerState& w, const std::string& id, const std::string& how) {
  w.exited = true;
  holders_.erase(id);
  // Nothing the worker forked outlives it: the group's heal proves its members gone, or the run
  // names what is left (it stays outstanding in the ledger for `fencecheck cleanup`).
  if (w.group && !ledger_->heal(*w.group, w.group_ledger_id)) {
    Event g;
    g.source = "harness";
    g.kind = EventKind::kLog;
    g.fault = "worker-group";
    g.target = id;
    g.detail = "worker " + id + "'s process group not ended: " + w.group->heal_failure() +
               "; it stays outstanding in faults.ledger (`fencecheck cleanup` on this run's directory ends it)";
    spdlog::error("{}: {}", sc_.name(), g.detail);
    record(std::move(g));
    unhealed_.push_back("worker-group of " + id + ": " + w.group->heal_failure());
  }
  Event e;
  e.source = "harness";
  e.kind = EventKind::kWorkerExit;
  e.target = id;
  e.detail = how;
  // A failed or crashed worker (an exit its events do not account for: HistoryTally::exit_accounted,
  // docs/worker-protocol.md "How a worker ends") says why in its last stderr lines.
  const auto code = w.proc ? w.proc->exit_code() : std::nullopt;
  // Under a schedule the workload must last until the harness stops it: a worker gone before
  // then leaves the rest of the schedule without its work, and the run cannot be called met.
  if (sc_.schedule() && !stopping_)
    early_exits_.push_back("worker " + id + " ended (" + how + ") " +
                           format_duration(std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start_)) + " into the " +
                           format_duration(sc_.schedule()->duration) +
                           " schedule: the workload stopped before the schedule did (its log: logs/" + id + ".log)");
  if (code && how.rfind("exit ", 0) == 0 && !tally_.exit_accounted(id, std::to_string(*code)))
    e.line = stderr_tail(dir_.log_path(id));
  record(std::move(e));
}

nlohmann::json Run::member_first(nlohmann::json endpoint, const WorkerSpec& w) const {
  if (sc_.lock_service().members < 2) return endpoint;
  auto it = endpoint.find("endpoints");
  if (it == endpoint.end() || !it->is_array() || it->size() < 2) return endpoint;
  std::size_t position = 0;
  while (position < sc_.workers().size() && sc_.workers()[position].id != w.id) ++position;
  std::rotate(it->begin(), it->begin() + static_cast<std::ptrdiff_t>(position % it->size()), it->end());
  return endpoint;
}

void Run::not_injected(const FaultSpec& spec, Event e, const std::exception& err) {
  e.kind = EventKind::kLog;
  e.detail = e.fault + " on " + spec.target + " not injected: " + err.what();
  record(std::move(e));
  if (dynamic_cast<const faults::FaultUnavailable*>(&err) == nullptr) return;
  auto& n = not_run_[spec.kind];
  if (n.first++ == 0) n.second = err.what();
  if (scheduled_specs_.count(&spec) != 0) {
    // A kind of the schedule this machine cannot give: its later draws are skipped (schedule.jsonl
    // says why); with --skip-unavailable the rest of the schedule still runs and is judged.
    if (unavailable_kinds_.emplace(spec.kind, err.what()).second)
      spdlog::warn("{}: {} is unavailable on this machine; the schedule's later {} faults are skipped: {}", sc_.name(),
                   spec.kind, spec.kind, err.what());
    if (opt_.skip_unavailable) return;
  }
  fault_unavailable_ = true;
}

void Run::inject(const FaultSpec& spec, const MemberTarget* resolved) {
  Event e;
  e.source = "harness";
  e.fault = spec.kind;
  e.target = spec.target;
  std::optional<faults::ProcessRef> ref;
  MemberTarget members;
  if (spec.member && resolved) {
    members = *resolved;
  } else if (spec.member) {
    // A member target (issue 35): resolved now, from the service's own answer (its leader now).
    try {
      members = resolve_member_target(*spec.member, services_->lock_service());
    } catch (const std::exception& err) {
      not_injected(spec, std::move(e), err);
      return;
    }
  } else if (targets_worker(spec.kind)) {
    auto& w = workers_.at(spec.target);
    if (w.queued) {
      // Its start trigger happened and it waits for its turn to launch: a fault aimed at it
      // launches it first, as when launches happened inside the event's handling.
      w.queued = false;
      launch_worker(w);
    }
    if (w.proc && !w.exited) ref = faults::ProcessRef::of(w.proc->pid());
    if (!ref) {
      e.kind = EventKind::kLog;
      e.detail = e.fault + " on " + spec.target + " not injected: the worker is not running";
      record(std::move(e));
      return;
    }
  }
  ActiveFault af;
  af.spec = &spec;
  for (const auto& m : members.members) af.members.push_back(m.index);
  try {
    af.fault = make_fault(spec, ref, dir_.run_id(), services_->lab(),
                          sc_.lock_service().embedded() ? &lock_control_ : nullptr, members);
    af.ledger_id = ledger_->record_inject(*af.fault);  // durable before it takes effect
  } catch (const std::exception& err) {
    not_injected(spec, std::move(e), err);
    return;
  }
  try {
    af.fault->inject();
  } catch (const std::exception& err) {
    // inject() undid what it had done through heal(); the ledger records the heal only when that
    // took effect (heal() again: a no-op then). Otherwise the fault stays outstanding, and the run
    // tries once more at its end and then names it (heal_all(), name_unhealed()).
    not_injected(spec, e, err);
    if (!ledger_->heal(*af.fault, af.ledger_id)) {
      af.inject_failed = true;
      af.heal_failed = true;
      e.kind = EventKind::kLog;
      e.detail = e.fault + " on " + spec.target + " not undone after its inject failed: " + af.fault->heal_failure() +
                 "; it stays outstanding in faults.ledger (`fencecheck cleanup` on this run's directory heals it)";
      spdlog::error("{}: {}", sc_.name(), e.detail);
      record(std::move(e));
      active_.push_back(std::move(af));
    }
    return;
  }
  af.injected_ns = monotonic_ns();
  af.heal_at = after(Clock::now(), spec.duration);
  e.kind = EventKind::kFaultInject;
  e.t_ns = af.injected_ns;
  e.duration_ns = spec.duration.count();
  e.detail = af.fault->target();
  // Which members, and how they were chosen (the leader as the service named it at this moment).
  if (spec.member) e.detail += " (" + spec.member->text() + ": " + members.why + ")";
  spdlog::info("{}: {} {} for {}", sc_.name(), e.fault, e.detail, format_duration(spec.duration));
  record(std::move(e));
  active_.push_back(std::move(af));
}

void Run::heal(ActiveFault& f) {
  if (!f.fault || !f.fault->active()) return;
  if (!ledger_->heal(*f.fault, f.ledger_id)) {
    f.heal_failed = true;
    Event e;
    e.source = "harness";
    e.kind = EventKind::kLog;
    e.fault = std::string(f.fault->kind());
    e.target = f.spec->target;
    e.detail = e.fault + " on " + e.target + " not healed: " +
               (f.fault->heal_failure().empty() ? std::string("its heal did not take effect") : f.fault->heal_failure()) +
               "; it is still in effect and stays outstanding in faults.ledger (`fencecheck cleanup` on this run's directory heals it)";
    spdlog::error("{}: {}", sc_.name(), e.detail);
    record(std::move(e));
    return;
  }
  const std::int64_t now = monotonic_ns();
  Event e;
  e.source = "harness";
  e.kind = EventKind::kFaultHeal;
  e.t_ns = now;
  e.fault = std::string(f.fault->kind());
  e.target = f.spec->target;
  e.duration_ns = now - f.injected_ns;
  e.detail = f.fault->target();
  if (f.inject_failed) {  // never in effect as planned: no fault.heal, whose duration would be a lie
    e.kind = EventKind::kLog;
    e.duration_ns = 0;
    e.detail = e.fault + " on " + e.target + ": what its failed inject had left in effect is undone now";
  }
  record(std::move(e));
}

void Run::heal_all() {
  for (auto& f : active_) {
    heal(f);
    if (f.fault && f.fault->active())
      unhealed_.push_back(std::string(f.fault->kind()) + " on " + f.spec->target + ": " + f.fault->heal_failure());
  }
  active_.clear();
}

void Run::name_unhealed(ScenarioResult& r, bool add_reasons) const {
  if (unhealed_.empty()) return;
  r.met = false;
  r.exit_code = kExitEnvironment;
  r.skipped = false;  // not a missing capability: the machine is left changed
  for (const auto& u : unhealed_) {
    spdlog::error("{}: fault not healed, still in effect: {}; run `fencecheck cleanup {}`", sc_.name(), u,
                  dir_.path().string());
    if (add_reasons) r.reasons.push_back("fault not healed, still in effect when the run ended: " + u);
  }
}

void Run::on_event(const Event& e) {
  if (e.source == "harness") return;
  // The lock service's own events (the issuer watch) count only for the triggers that wait for
  // them (EventTrigger::on_lock_service: lock.grant, lock.delete); a worker's for the rest.
  const bool from_lock = e.source == "lock";
  if (from_lock && !is_lock_service_trigger_event(e.kind)) return;
  if (!from_lock && e.kind == EventKind::kAcquireOk) holders_.insert(e.source);
  if (!from_lock && e.kind == EventKind::kReleaseInvoke) holders_.erase(e.source);
  const std::int64_t n = ++counts_[{e.source, e.kind}];
  for (auto& [id, w] : workers_) {
    const auto& after = w.spec->start_after;
    if (!w.started && !w.never && !w.queued && after && after->source() == e.source && after->event == e.kind &&
        after->count == n) {
      w.queued = true;  // launched by the loop, between its other duties (launch_queued)
      launch_queue_.push_back(&w);
    }
  }
  for (const auto& f : sc_.faults()) {
    if (fired_.count(&f)) continue;
    if (auto* t = std::get_if<EventTrigger>(&f.trigger); t && t->source() == e.source && t->event == e.kind && t->count == n) {
      fired_.insert(&f);
      inject(f);
    }
    // self-stop: the worker stopped itself at its design's point and said so just before; the
    // fault starts when the kernel shows it stopped, and its heal is the harness's SIGCONT.
    if (std::holds_alternative<SelfTrigger>(f.trigger) && f.target == e.source && e.kind == EventKind::kLog &&
        e.detail.rfind("self-stop at", 0) == 0) {
      fired_.insert(&f);
      const pid_t pid = workers_.at(f.target).proc->pid();
      for (int i = 0; i < 2000 && faults::process_state(pid).value_or('T') != 'T'; ++i)
        std::this_thread::sleep_for(std::chrono::microseconds(500));
      inject(f);
    }
  }
}

bool Run::finished() {
  for (auto& [id, w] : workers_) {
    if (w.started && !w.exited) return false;
    if (w.queued) return false;
    if (!w.started && !w.never) {
      if (w.start_at) return false;
      const auto& after = w.spec->start_after;
      if (after->on_lock_service()) {
        // The lock service's events come from the workers' doing: while any worker runs (or is
        // about to), the trigger can still happen.
        const bool someone = std::any_of(workers_.begin(), workers_.end(), [](const auto& kv) {
          return (kv.second.started && !kv.second.exited) || kv.second.queued;
        });
        if (someone) return false;
      } else {
        auto src = workers_.find(after->worker);
        if (src != workers_.end() && !src->second.exited) return false;
      }
      w.never = true;  // its trigger can no longer happen
      Event e;
      e.source = "harness";
      e.kind = EventKind::kLog;
      e.target = id;
      e.detail = id + " never started: " +
                 (after->on_lock_service() ? std::string("every worker ended before the lock service's")
                                           : after->worker + " ended before its") +
                 " " + std::string(kind_name(after->event)) + " #" + std::to_string(after->count);
      record(std::move(e));
    }
  }
  return true;
}

std::int64_t Run::scheduled_active() const {
  return std::count_if(active_.begin(), active_.end(), [&](const ActiveFault& f) {
    return scheduled_specs_.count(f.spec) && f.fault && f.fault->active() && !f.heal_failed;
  });
}

void Run::write_schedule_line(const PlannedFault& p, const FaultSpec& spec, const std::string& rule,
                              const std::string& skipped, const MemberTarget* members) {
  const auto ms = [](auto d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); };
  nlohmann::json line{{"index", p.index},
                      {"t_ms", ms(Clock::now() - start_)},
                      {"planned_ms", ms(p.at)},
                      {"kind", spec.kind},
                      {"rule", rule},
                      {"duration", format_duration(spec.duration)},
                      {"duration_ms", ms(spec.duration)},
                      {"seed", sc_.schedule_seed()}};
  if (skipped.empty()) {
    line["target"] = spec.target;
    if (members) {
      auto& hit = line["members"] = nlohmann::json::array();
      for (const auto& m : members->members) hit.push_back(m.index);
      line["members_why"] = members->why;
    }
  } else {
    line["skipped"] = skipped;
  }
  schedule_out_ << line.dump() << '\n';
  schedule_out_.flush();
}

bool Run::fire_scheduled(const PlannedFault& p, bool last_chance) {
  FaultSpec spec = p.fault;
  const std::uint64_t seed = sc_.schedule_seed();
  const std::string& kind = spec.kind;
  const std::string rule = spec.member ? std::string(kLockServiceTarget) + " " + spec.member->text()
                           : targets_worker(spec.kind) ? std::string(to_string(p.rule))
                                                       : std::string(kLockServiceTarget);
  if (const auto u = unavailable_kinds_.find(spec.kind); u != unavailable_kinds_.end()) {
    write_schedule_line(p, spec, rule, "unavailable on this machine: " + u->second);
    ++not_run_[spec.kind].first;
    return true;
  }
  // No target now: wait (false) unless it is the fault's last chance; then skip it, saying why.
  const auto skip = [&](const std::string& why) {
    if (!last_chance) return false;
    write_schedule_line(p, spec, rule, why);
    Event e;
    e.source = "harness";
    e.kind = EventKind::kLog;
    e.detail = "scheduled fault #" + std::to_string(p.index) + " (" + kind + " on " + rule + ") skipped: " + why;
    record(std::move(e));
    return true;
  };
  std::optional<MemberTarget> members;
  if (spec.member) {
    // Lock-service members (issue 35), resolved now as a `faults:` item's are: the leader is the
    // one the service names at this moment. None now (an election under way): wait, as for a holder.
    try {
      members = resolve_member_target(*spec.member, services_->lock_service());
    } catch (const std::exception& err) {
      return skip(std::string("no member to aim at: ") + err.what());
    }
    std::set<int> busy;  // a member another fault is on: a second one would heal with the first
    for (const auto& f : active_)
      if (f.fault && f.fault->active()) busy.insert(f.members.begin(), f.members.end());
    for (const auto& m : members->members)
      if (busy.count(m.index))
        return skip("member " + std::to_string(m.index) + " (" + members->why + ") has another fault on it");
  } else if (targets_worker(spec.kind)) {
    std::set<std::string> busy;  // a worker another fault is on: a second one would heal with the first
    for (const auto& f : active_)
      if (f.fault && f.fault->active()) busy.insert(f.spec->target);
    std::vector<std::string> candidates;  // workers_ is ordered by id: a stable order for pick_target
    for (const auto& [id, w] : workers_)
      if (w.proc && !w.exited && !w.eof && !busy.count(id) && (p.rule == ScheduleTarget::kWorkers || holders_.count(id)))
        candidates.push_back(id);
    if (candidates.empty())
      return skip(std::string(p.rule == ScheduleTarget::kHolders ? "no worker held the lock" : "no worker was running") +
                  (busy.empty() ? "" : " without a fault already on it"));
    spec.target = candidates[pick_target(seed, p.index, candidates.size())];
  }
  // Written (and flushed) before the fault takes effect: the schedule actually applied.
  const MemberTarget* hit = members ? &*members : nullptr;
  write_schedule_line(p, spec, rule, "", hit);
  scheduled_.push_back(std::move(spec));
  scheduled_specs_.insert(&scheduled_.back());
  inject(scheduled_.back(), hit);
  return true;
}

namespace {
/// H:MM:SS, whole seconds (rounded down): both sides of the progress line in one unit.
std::string clock_text(Duration d) {
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(d).count();
  return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
}
}  // namespace

void Run::log_progress() {
  spdlog::info("{}: {} of {}: {} fault(s) fired, {} in effect; {} events, {} rejected write(s), {} anomaly(ies) so far",
               sc_.name(), clock_text(Clock::now() - start_), clock_text(sc_.schedule()->duration), scheduled_.size(),
               scheduled_active(), events_, rejected_, live_checker_.total());
}

void Run::end_schedule() {
  stopping_ = true;
  {
    Event e;
    e.source = "harness";
    e.kind = EventKind::kLog;
    e.detail = "schedule over after " + format_duration(sc_.schedule()->duration) + " (" + std::to_string(scheduled_.size()) +
               " fault(s) fired): healing what is in effect, stopping the workers";
    record(std::move(e));
  }
  for (auto& f : active_)
    if (f.fault && f.fault->active() && !f.heal_failed) heal(f);
  for (auto& [id, w] : workers_) {
    // Waiting for its launch (its trigger happened) or due after the schedule: it will not start now.
    const char* before = w.queued                      ? "before it was launched"
                         : !w.started && w.start_at ? "before its start_delay"
                                                    : nullptr;
    if (before) {
      w.queued = false;
      w.start_at.reset();
      w.never = true;
      Event e;
      e.source = "harness";
      e.kind = EventKind::kLog;
      e.target = id;
      e.detail = id + " never started: the schedule ended " + before;
      record(std::move(e));
    }
    if (w.proc && !w.exited && w.proc->running()) {
      const pid_t pid = w.proc->pid();
      ::kill(w.spec->command ? -pid : pid, SIGTERM);  // a command worker leads its own process group
    }
  }
}

void Run::loop() {
  const auto deadline = after(start_, sc_.timeout());
  const auto schedule_end = sc_.schedule() ? after(start_, sc_.schedule()->duration) : Clock::time_point::max();
  while (true) {
    // Every wake-up time below is in the future, or the loop would spin (it did: a healed fault's
    // heal_at, and a scheduled fault due but held back, kept the harness at 40% of a core for the
    // rest of the run). Events wake drain_until early; 50 ms bounds the wait for everything else.
    const auto loop_now = Clock::now();
    auto wake = std::min(deadline, loop_now + std::chrono::milliseconds(50));
    if (!stopping_) {
      wake = std::min(wake, schedule_end);
      if (next_planned_ < plan_.size()) {
        // Due but held back (the at-once limit: a heal frees it; nobody holds the lock: an event
        // does): its last chance, a lease TTL on, is the next time it must be looked at.
        const auto due = after(start_, plan_[next_planned_].at);
        const auto last_chance = after(start_, plan_[next_planned_].at + sc_.lease_ttl());
        if (due > loop_now) wake = std::min(wake, due);
        else if (last_chance > loop_now) wake = std::min(wake, last_chance);
      }
    }
    for (const auto& f : active_)
      if (f.fault && f.fault->active() && !f.heal_failed) wake = std::min(wake, f.heal_at);
    for (const auto& [id, w] : workers_)
      if (!w.started && w.start_at) wake = std::min(wake, *w.start_at);
    for (const auto& f : sc_.faults())
      if (auto* t = std::get_if<TimeTrigger>(&f.trigger); t && !fired_.count(&f))
        wake = std::min(wake, after(start_, t->at));

    for (const auto& [id, w] : workers_)
      if (w.eof && !w.exited) wake = std::min(wake, Clock::now() + std::chrono::milliseconds(2));
    if (!launch_queue_.empty()) wake = loop_now;  // take what has arrived, then launch the next

    for (auto& in : inbox_.drain_until(wake)) {
      if (in.eof) {
        workers_.at(in.from).eof = true;
        continue;
      }
      Event e = std::move(in.event);
      record(e);
      on_event(e);
    }
    // Exits: never block the loop on a child (a heal may be due). A worker is done when its
    // process has exited and its event channel is closed. A command worker's channel can outlive
    // its process (a process it forked holds descriptor 3): after a grace the rest of its process
    // group is killed, which closes the channel.
    for (auto& [id, w] : workers_) {
      if (!w.proc || w.exited || (!w.eof && !w.spec->command)) continue;
      if (w.proc->running()) continue;
      if (!w.eof) {
        if (!w.gone_at) w.gone_at = Clock::now();
        if (Clock::now() - *w.gone_at < std::chrono::seconds(1)) continue;
        // Its own process group (ChildSpec::own_process_group): the worker said it was done by
        // exiting, and what it left running is cut short. Recorded: the run is not met.
        if (const int killed = w.group ? w.group->end() : 0; killed > 0) {
          Event e;
          e.source = "harness";
          e.kind = EventKind::kLog;
          e.target = id;
          e.detail = "worker " + id + " exited while " + std::to_string(killed) +
                     " process(es) it started still held its event channel: killed after 1 s";
          record(std::move(e));
        }
        if (Clock::now() - *w.gone_at < std::chrono::seconds(3)) continue;
      }
      record_exit(w, id, "exit " + std::to_string(w.proc->exit_code().value_or(-1)));
    }
    const auto now = Clock::now();
    for (auto& f : active_)
      if (f.fault && f.fault->active() && !f.heal_failed && now >= f.heal_at) heal(f);
    // Healed faults leave: a long schedule fires thousands, and each turn of this loop looks at
    // every entry. What is still in effect (a failed heal too) stays for heal_all().
    std::erase_if(active_, [](const ActiveFault& f) { return !f.fault || !f.fault->active(); });
    for (auto& [id, w] : workers_)
      if (!w.started && w.start_at && now >= *w.start_at) launch_worker(w);
    launch_queued();
    for (const auto& f : sc_.faults())
      if (auto* t = std::get_if<TimeTrigger>(&f.trigger);
          t && !fired_.count(&f) && now >= after(start_, t->at)) {
        fired_.insert(&f);
        inject(f);
      }
    if (sc_.schedule() && !stopping_) {
      if (now >= next_progress_log_) {  // a long run says how it goes, once a minute
        log_progress();
        next_progress_log_ = now + std::chrono::minutes(1);
      }
      if (now >= schedule_end) {
        end_schedule();
      } else {
        // Due, and room under the at-once limit (a fault held back fires when one heals). With no
        // target yet (between two holdings, no worker holds the lock) it waits up to a lease TTL.
        while (next_planned_ < plan_.size() && now >= after(start_, plan_[next_planned_].at) &&
               scheduled_active() < sc_.schedule()->max_at_once) {
          const bool last_chance = now >= after(start_, plan_[next_planned_].at + sc_.lease_ttl());
          if (!fire_scheduled(plan_[next_planned_], last_chance)) break;
          ++next_planned_;
        }
      }
    }
    if (opt_.interrupted && opt_.interrupted->load()) {
      interrupted_ = true;
      break;
    }
    if (now >= deadline) {
      timed_out_ = true;
      break;
    }
    // A fault whose heal failed is not waited for: heal_all() tries it once more, then names it.
    if (finished() && std::none_of(active_.begin(), active_.end(),
                                   [](const ActiveFault& f) { return f.fault->active() && !f.heal_failed; }))
      break;
  }
  heal_all();
}

ScenarioResult Run::execute() {
  ScenarioResult r;
  r.scenario = sc_.name();
  r.repetition = opt_.repetition;
  r.repetitions = opt_.repetitions;
  r.run_dir = dir_.path();
  r.expectation = expectation_text(sc_.expect());
  const auto wall_start = Clock::now();

  dir_.write_json("scenario.json", to_json(sc_));
  notify(opt_, [&](RunObserver& o) { o.on_start(sc_, dir_.path()); });
  notify(opt_, [&](RunObserver& o) { o.on_phase(sc_, "services"); });
  ledger_ = std::make_unique<faults::FaultLedger>(dir_.path() / "faults.ledger", dir_.run_id());

  // 1. The lock service (the scenario's kind, embedded or the user's endpoints) and the resource.
  Services services(sc_, dir_, opt_, *ledger_);
  services_ = &services;
  // The lock name exactly as the plan says (Scenario::for_run already appended the run id when
  // the scenario asked for lock_service.run_suffix): what the workers, checkers and metrics use.
  lock_name_ = sc_.lock_service().lock;
  // The run's claim on a lock service it may share (run_claim.h): another run on the same lock or
  // keys is refused here, exit 3, before any worker starts. Held until the run is judged.
  const std::unique_ptr<locks::HeldClaim> claim = claim_run(sc_, dir_, services.lock_service());

  // 2. The lock service's own history: grants and deletes under the lock prefix; with
  // lock_service.issuers > 1 every issuer's, the events of issuers 2.. saying whose they are.
  std::vector<std::unique_ptr<locks::IssuerWatch>> watches;
  for (int k = 0; k < services.issuer_count(); ++k)
    watches.push_back(services.issuer(k).watch(lock_name_, [this, k](Event e) {
      if (k > 0) e.detail = "issuer " + std::to_string(k + 1) + (e.detail.empty() ? "" : ": " + e.detail);
      Inbound in;
      in.event = std::move(e);
      inbox_.push(std::move(in));
    }));
  watch_ = watches.front().get();  // issuer 1: the one lock-service-restart acts on

  // The fault schedule's plan, from its seed (schedule.h): fired by loop(), each written to
  // schedule.jsonl as it fires.
  if (const auto& schedule = sc_.schedule()) {
    plan_ = plan_schedule(*schedule, sc_.schedule_seed());
    schedule_out_.open(dir_.path() / "schedule.jsonl");
    next_progress_log_ = Clock::now() + std::chrono::minutes(1);
    spdlog::info("{}: schedule of {} with {} planned fault(s), seed {}", sc_.name(), format_duration(schedule->duration),
                 plan_.size(), sc_.schedule_seed());
  }

  // 3. Workers.
  notify(opt_, [&](RunObserver& o) { o.on_phase(sc_, "workers"); });
  for (const auto& spec : sc_.workers()) workers_[spec.id].spec = &spec;
  start_ = Clock::now();
  start_ns_ = monotonic_ns();
  {
    Event e;
    e.source = "harness";
    e.kind = EventKind::kRunStart;
    e.detail = sc_.name();
    e.lock = lock_name_;
    e.t_ns = start_ns_;
    record(std::move(e));
  }
  // Where each member of an embedded cluster runs (issue 35), as the run's record: a member
  // fault's history names members by number, and this says which process and place each is.
  for (const auto& m : services.lock_service().members()) {
    Event e;
    e.source = "harness";
    e.kind = EventKind::kLog;
    e.target = "lock-service";
    e.detail = "lock-service member " + std::to_string(m.index) + ": " + m.endpoint + ", address " + m.address +
               (m.netns.empty() ? std::string(", on the harness's own network") : ", network namespace " + m.netns) +
               (m.pid > 0 ? ", pid " + std::to_string(m.pid) : std::string(", not running"));
    record(std::move(e));
  }
  for (auto& [id, w] : workers_) {
    if (w.spec->start_delay) w.start_at = after(start_, *w.spec->start_delay);
    else if (!w.spec->start_after) launch_worker(w);
  }

  // 4. Events, triggers, faults, until every worker is done (or timeout / interrupt).
  loop();
  for (auto& [id, w] : workers_)
    if (w.proc && !w.exited) {
      int code = w.proc->terminate(std::chrono::seconds(2));
      record_exit(w, id, "terminated by the harness, exit " + std::to_string(code));
    }
  for (auto& w : watches) w->stop();  // let the last deletes arrive, then close the streams
  for (auto& in : inbox_.drain_until(Clock::now())) {
    if (!in.eof) record(std::move(in.event));
  }
  {
    Event e;
    e.source = "harness";
    e.kind = EventKind::kRunEnd;
    e.detail = timed_out_ ? "timeout" : interrupted_ ? "interrupted" : "done";
    record(std::move(e));
  }

  // 5. Read back, check, judge, export.
  notify(opt_, [&](RunObserver& o) { o.on_phase(sc_, "reading back"); });
  ReadBack rb;
  // The accept log straight into its packed form (packed_log.h): a kind that reads its reply as it
  // arrives (the store) never holds it as AcceptedWrites (112 bytes each).
  PackedLog log;
  // Only the run's keys are judged (issue 34): the resource reads only them where its queries can
  // (postgres $keys, http ?keys=), and whatever it returns of other keys is dropped and counted.
  const std::set<std::string> run_keys = this->run_keys();
  IgnoredRows ignored_log;
  const ReadBackLogSink log_sink = log.sink();
  try {
    services.resource().set_read_scope(run_keys);
    rb = services.resource().readback_into(foreign_row_log_filter(log_sink, run_keys, ignored_log));
    drop_foreign_rows(rb, run_keys);
    rb.ignored.merge(ignored_log);
    if (!rb.ignored.empty()) spdlog::info("{}: {}", sc_.name(), rb.ignored.summary());
  } catch (const std::exception& err) {
    // The resource did not answer (stalled, dead): nothing can be checked. Not an internal error
    // of the harness: the verdict is unknown, the expectation not met, and the reasons say why.
    services.stop();
    r.verdict = "unknown";
    r.met = false;
    if (timed_out_) r.reasons.push_back("the run hit its timeout of " + format_duration(sc_.timeout()));
    if (interrupted_) r.reasons.push_back("the run was interrupted");
    r.reasons.push_back(std::string("the resource did not answer its read-back, so nothing could be checked: ") +
                        err.what());
    r.exit_code = kExitNotMet;
    r.duration_s = std::chrono::duration<double>(Clock::now() - wall_start).count();
    spdlog::error("{}: {}", sc_.name(), r.reasons.back());
    name_unhealed(r, /*add_reasons=*/true);
    notify(opt_, [&](RunObserver& o) { o.on_phase(sc_, "done"); });
    collect_worker_dirs();
    finish_history();
    return r;
  }
  // Element by element: a long run's read-back has tens of millions of log entries, and its DOM
  // would take several times the read-back's own memory (fencecheck/proto/readback.h).
  dir_.write_with("readback.json", [&](std::ostream& out) {
    fencecheck::write_readback_json(out, rb, {}, [&](const std::function<void(const AcceptedWrite&)>& each) {
      for (const LoggedWrite w : log) each(w.to_accepted_write());
    });
  });
  services.stop();

  notify(opt_, [&](RunObserver& o) { o.on_phase(sc_, "checking"); });
  // The checkers and figures read history.jsonl back in bounded memory, as `fencecheck report`
  // judges it again (record() flushes the file after every event).
  Analysis analysis;
  try {
    analysis = analyze_history_file(dir_.path() / kHistoryFile, rb, log, CheckContext::of(sc_)).analysis;
  } catch (const HistoryError& err) {
    throw std::runtime_error("the run's own " + (dir_.path() / kHistoryFile).string() + " could not be read back" +
                             (err.line() ? " at line " + std::to_string(err.line()) : std::string()) + ": " + err.message());
  }
  ExpectationResult er = evaluate(sc_.expect(), analysis, sc_);
  if (timed_out_) er.reasons.insert(er.reasons.begin(), "the run hit its timeout of " + format_duration(sc_.timeout()));
  if (interrupted_) er.reasons.insert(er.reasons.begin(), "the run was interrupted");
  const auto not_taken = tally_.shortfalls(sc_, analysis.black_box_workers);
  er.reasons.insert(er.reasons.begin(), not_taken.begin(), not_taken.end());
  er.reasons.insert(er.reasons.end(), early_exits_.begin(), early_exits_.end());
  const std::string lapsed = claim ? claim->lost() : std::string();
  if (!lapsed.empty())
    er.reasons.push_back("this run's claim on the lock service lapsed during the run (" + lapsed +
                         "): another run may have used the same lock or keys");
  const bool met = er.met && !timed_out_ && !interrupted_ && not_taken.empty() && early_exits_.empty() && lapsed.empty();
  er.met = met;  // verdict.json's expectation says the same as the table and the exit code
  r.duration_s = std::chrono::duration<double>(Clock::now() - wall_start).count();
  dir_.write_json("verdict.json", verdict_to_json(analysis, er, tally_.lock()));
  summarize_analysis(r, analysis, sc_);
  r.met = met;
  r.reasons = er.reasons;
  r.exit_code = met ? kExitMet : kExitNotMet;
  // A fault the environment could not provide (found only at injection, e.g. a kernel without
  // sch_netem): an environment failure, exit 3, or a skipped scenario with --skip-unavailable.
  if (fault_unavailable_) {
    r.exit_code = kExitEnvironment;
    r.skipped = opt_.skip_unavailable;
    // One truthful line: whether the expectation was met, and what did not run (issue 32).
    std::string what;
    for (const auto& [kind, n] : not_run_)
      what += std::string(what.empty() ? "" : "; ") + std::to_string(n.first) + " planned " + kind +
              (n.first == 1 ? " fault" : " faults") + " could not run on this machine (" + n.second + ")";
    r.reasons.insert(r.reasons.begin(), std::string(met ? "met its expectation" : "did not meet its expectation") + ", but " +
                                            (what.empty() ? "a planned fault could not run on this machine" : what) +
                                            ": exit 3 (`fencecheck run --skip-unavailable` accepts a run without them)");
  }
  for (const auto& [kind, why] : unavailable_kinds_)
    spdlog::warn("{}: the schedule did not exercise {}: unavailable on this machine ({})", sc_.name(), kind, why);
  name_unhealed(r);
  const RunFigures figures =
      run_figures(sc_, lock_name_, tally_, rb, analysis, r.met, r.duration_s, static_cast<double>(std::time(nullptr)));
  write_metrics_file(dir_.path() / "metrics.prom", figures);
  // Nothing below needs the read-back, and the report observer reads readback.json again (what
  // `fencecheck report` would read): freed here, a long run's read-back is not held twice.
  rb = ReadBack{};
  log = PackedLog{};
  notify(opt_, [&](RunObserver& o) { o.on_phase(sc_, "done"); });
  notify(opt_, [&](RunObserver& o) { o.on_finish(sc_, r, analysis, figures); });
  collect_worker_dirs();
  finish_history();
  return r;
}

}  // namespace

void summarize_analysis(ScenarioResult& r, const Analysis& a, const Scenario& sc) {
  r.verdict = std::string(verdict_name(a.verdict));
  std::set<std::string> names;
  for (const auto& c : a.checkers)
    for (const auto& an : c.anomalies) names.insert(an.name);
  r.anomalies.assign(names.begin(), names.end());
  r.rejected_writes = a.figures.rejected_writes_total();
  r.expiries_during_work = static_cast<std::int64_t>(a.figures.expiries_during_work.size());
  r.expiries_undecided = a.figures.expiries_undecided;
  r.expiries_measured = sc.lock_service().kind != kNoLockService && r.expiries_undecided == 0;
  // The longest pause, per worker from the best source it has (orchestrator.h).
  r.longest_pause_s.reset();
  r.longest_pause_source.clear();
  auto offer = [&](double s, const char* source) {
    if (!r.longest_pause_s || s > *r.longest_pause_s) {
      r.longest_pause_s = s;
      r.longest_pause_source = source;
    }
  };
  const auto stops = longest_stops(a.figures.faults);
  for (const auto& w : sc.workers()) {
    if (const auto it = a.figures.longest_pause.find(w.id); it != a.figures.longest_pause.end()) {
      offer(std::chrono::duration<double>(it->second.duration).count(), "holder");
    } else if (!w.command) {
      offer(0.0, "holder");  // the reference worker measured and saw no pause
    } else if (const auto s = stops.find(w.id); s != stops.end()) {
      offer(std::chrono::duration<double>(s->second).count(), "harness");
    }
  }
  // A holder's own figure wins a tie with a fault window: it is the finer measurement.
  r.black_box_workers = a.black_box_workers;
  r.protocol_errors = a.protocol_errors;
  r.ignored = a.ignored.summary();
}

std::string longest_pause_text(const ScenarioResult& r) {
  if (!r.longest_pause_s) return "not measured";
  char secs[48];
  std::snprintf(secs, sizeof secs, "%.2f s", *r.longest_pause_s);
  return secs +
         (r.longest_pause_source == "harness" ? " (harness: fault window)" : " (" + r.longest_pause_source + ")");
}

std::string expiries_text(const ScenarioResult& r) {
  if (r.expiries_measured) return std::to_string(r.expiries_during_work);
  if (r.expiries_undecided == 0) return "not measured (no issuer history)";
  return "not measured: at least " + std::to_string(r.expiries_during_work) + ", " +
         std::to_string(r.expiries_undecided) +
         " undecided (a black box's holding ended and the lock service did not say whether by expiry or release)";
}

std::string expectation_text(const Expectation& e) {
  if (e.outcome == Outcome::kSafe) return "safe";
  std::string s = "anomaly:";
  for (const auto& a : e.anomalies) s += " " + a;
  return s;
}

nlohmann::json ScenarioResult::to_json() const {
  return {{"scenario", scenario},         {"run_dir", run_dir.string()}, {"expectation", expectation},
          {"verdict", verdict},           {"met", met},                  {"skipped", skipped},
          {"exit_code", exit_code},       {"reasons", reasons},          {"anomalies", anomalies},
          {"rejected_writes", rejected_writes}, {"expiries_during_work", expiries_measured ? nlohmann::json(expiries_during_work) : nlohmann::json()},
          {"expiries_during_work_at_least", expiries_during_work}, {"expiries_undecided", expiries_undecided},
          {"longest_pause_s", longest_pause_s ? nlohmann::json(*longest_pause_s) : nlohmann::json(nullptr)},
          {"longest_pause_source", longest_pause_source}, {"duration_s", duration_s},
          {"repetition", repetition},     {"repetitions", repetitions},
          {"black_box_workers", black_box_workers}, {"ignored", ignored}, {"protocol_errors", [this] {
             nlohmann::json errors = nlohmann::json::array();
             for (const auto& pe : protocol_errors)
               errors.push_back({{"worker", pe.worker},
                                 {"line_no", pe.line_no ? nlohmann::json(*pe.line_no) : nlohmann::json(nullptr)},
                                 {"detail", pe.detail},
                                 {"line", pe.line},
                                 {"index", pe.index}});
             return errors;
           }()}};
}

std::string ScenarioResult::label() const {
  if (repetitions <= 1) return scenario;
  return scenario + " #" + std::to_string(repetition) + "/" + std::to_string(repetitions);
}

/// Names what dead runs under the run root left unhealed (a kill -9'ed harness), once per process.
static void warn_about_leftovers(const fs::path& run_root) {
  static bool warned = false;
  std::error_code ec;
  if (warned || !fs::is_directory(run_root, ec)) return;  // none yet (or unreadable: RunDirectory::create says so)
  warned = true;
  for (const auto& d : fs::directory_iterator(run_root, ec)) {
    const fs::path ledger = d.path() / "faults.ledger";
    std::error_code ec2;
    if (d.is_symlink(ec2) || !fs::exists(ledger, ec2)) continue;
    try {
      auto left = faults::FaultLedger::outstanding(ledger);
      std::erase_if(left, [](const nlohmann::json& e) { return faults::FaultLedger::writer_alive(e); });
      if (!left.empty())
        spdlog::warn("run {} left {} fault(s) unhealed (its harness is gone): run `fencecheck cleanup {}`",
                     d.path().filename().string(), left.size(), d.path().string());
    } catch (const std::exception& err) {  // a courtesy check: the run goes on without it
      spdlog::warn("cannot check {} for faults left unhealed: {}", ledger.string(), err.what());
    }
  }
  if (ec) spdlog::warn("cannot list {} for faults left unhealed: {}", run_root.string(), ec.message());
}

ScenarioResult run_scenario(const Scenario& scenario, const RunOptions& options) {
  ScenarioResult r;
  r.scenario = scenario.name();
  r.repetition = options.repetition;
  r.repetitions = options.repetitions;
  r.expectation = expectation_text(scenario.expect());
  try {
    if (auto missing = missing_prerequisites(scenario); !missing.empty()) {
      std::string all;
      for (const auto& m : missing) all += (all.empty() ? "" : "; ") + m;
      throw EnvironmentError(all);
    }
    warn_about_leftovers(options.run_root);
    RunDirectory dir = RunDirectory::create(options.run_root, scenario.name());
    r.run_dir = dir.path();
    if (!options.night.empty()) record_night(dir.path(), options.night);
    auto sink_guard = dir.attach_log();
    // The plan as this run carries it out (the lock name actually used): scenario.json, the
    // checkers, the report and the metrics all see this copy.
    const Scenario planned = scenario.for_run(dir.run_id());
    check_worker_commands(planned);  // the CLI checked at load; a program may have gone since
    ScenarioResult done;
    {
      Run run(planned, options, std::move(dir));
      done = run.execute();
    }  // every service of the run has stopped
    // A judged run (met or not) needs none of it; a run that ended in an error keeps it to look at.
    const bool judged = done.exit_code == kExitMet || done.exit_code == kExitNotMet;
    if (!options.keep_data && judged && !done.run_dir.empty()) remove_service_data(done.run_dir);
    return done;
  } catch (const ScenarioError& err) {
    // Bad input only the resource could see when it opened (resources::ResourceConfigError).
    r.exit_code = kExitBadInput;
    r.reasons.push_back(err.what());
  } catch (const RunRefused& err) {  // another run holds the lock or a key (run_claim.h): never skipped
    r.exit_code = kExitEnvironment;
    r.reasons.push_back(err.what());
  } catch (const EnvironmentError& err) {
    r.exit_code = kExitEnvironment;
    r.skipped = options.skip_unavailable;
    r.reasons.push_back(err.what());
  } catch (const std::exception& err) {
    r.exit_code = kExitInternal;
    r.reasons.push_back(std::string("internal error: ") + err.what());
  }
  spdlog::error("{}: {}", scenario.name(), r.reasons.back());
  return r;
}

std::vector<std::filesystem::path> service_data_dirs(const std::filesystem::path& run_dir) {
  static const std::regex name(R"([a-z0-9]+-data([-.][0-9]+)?)");
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(run_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::filesystem::path& p = it->path();
    if (it->is_directory(ec) && !it->is_symlink(ec) && std::regex_match(p.filename().string(), name)) out.push_back(p);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::uintmax_t remove_service_data(const std::filesystem::path& run_dir) {
  std::uintmax_t bytes = 0;
  std::vector<std::string> removed;
  for (const auto& dir : service_data_dirs(run_dir)) {
    std::error_code ec;
    std::uintmax_t size = 0;
    for (std::filesystem::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
      if (it->is_regular_file(ec)) size += it->file_size(ec);
    std::filesystem::remove_all(dir, ec);
    if (ec) {
      spdlog::warn("could not remove {} ({}): it stays in the run directory", dir.string(), ec.message());
      continue;
    }
    bytes += size;
    removed.push_back(dir.filename().string());
  }
  if (!removed.empty())
    spdlog::info("removed the embedded services' data ({:.1f} MB: {}); `fencecheck run --keep-data` keeps it",
                 static_cast<double>(bytes) / 1e6, fmt::join(removed, ", "));
  return bytes;
}

int suite_exit_code(const std::vector<ScenarioResult>& results) {
  int worst = kExitMet;
  auto rank = [](int code) {
    return code == kExitInternal ? 4 : code == kExitEnvironment ? 3 : code == kExitBadInput ? 2 : code == kExitNotMet ? 1 : 0;
  };
  for (const auto& r : results) {
    int code = (r.skipped && r.exit_code == kExitEnvironment) ? kExitMet : r.exit_code;
    if (rank(code) > rank(worst)) worst = code;
  }
  return worst;
}

}  // namespace fencecheck::harness
