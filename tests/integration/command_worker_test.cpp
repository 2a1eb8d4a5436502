// Command workers end to end (docs/worker-protocol.md): the user's program as a worker, through
// the real harness, real etcd, real processes. The program is tests/command_worker/worker.sh,
// which wraps the reference worker in ways a user's program behaves: it forks the lock holder two
// levels down, lies on its event channel, fails, never acquires, or says nothing at all.
//
// The forking worker is the proof that each fault reaches a worker's whole process tree: the lock
// holder (fencecheck-worker) is the grandchild of the process the harness started, so a fault
// that acted on that process alone would leave the holder running, its lease alive, and the run
// without the anomaly (unfenced) or the pause the holder measured itself.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "fencecheck/locks/etcd/embedded_etcd.h"
#include "fencecheck/proto/base64.h"
#include "run_util.h"

namespace {

namespace fs = std::filesystem;

const fs::path kWorkerScript = fs::path(FENCECHECK_SOURCE_DIR) / "tests" / "command_worker" / "worker.sh";

struct RunOutcome {
  fctest::Result result;
  fs::path dir;
  nlohmann::json verdict;
  std::vector<nlohmann::json> history;

  [[nodiscard]] std::set<std::string> anomalies() const {
    std::set<std::string> out;
    if (!verdict.is_object()) return out;
    for (const auto& c : verdict.at("checkers"))
      for (const auto& a : c.at("anomalies")) out.insert(a.at("name").get<std::string>());
    return out;
  }
  [[nodiscard]] std::string reasons() const {
    std::string out;
    if (verdict.is_object())
      for (const auto& r : verdict.at("expectation").at("reasons")) out += r.get<std::string>() + "\n";
    return out;
  }
  /// The longest pause worker `id` measured itself (its pause events), in seconds.
  [[nodiscard]] double longest_pause_s(const std::string& id) const {
    double best = 0;
    for (const auto& e : history)
      if (e.value("source", "") == id && e.value("kind", "") == "pause")
        best = std::max(best, static_cast<double>(e.value("duration_ns", std::int64_t{0})) / 1e9);
    return best;
  }
};

/// Writes `yaml` as <work>/<name>.yaml and runs it.
RunOutcome run_yaml(const std::string& name, const std::string& yaml, const std::vector<std::string>& extra = {}) {
  const fs::path work = fctest::fresh_dir(name);
  const fs::path file = work / (name + ".yaml");
  std::ofstream(file) << yaml;
  const fs::path root = work / "runs";
  std::vector<std::string> args{"run", "--run-root", root.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back(file.string());
  RunOutcome r;
  r.result = fctest::run_fencecheck(args, work);
  if (fs::is_directory(root)) r.dir = fctest::only_run_dir(root);
  if (!r.dir.empty() && fs::exists(r.dir / "verdict.json"))
    r.verdict = nlohmann::json::parse(fctest::slurp(r.dir / "verdict.json"));
  if (!r.dir.empty() && fs::exists(r.dir / "history.jsonl")) r.history = fctest::read_history(r.dir / "history.jsonl");
  return r;
}

/// worker.sh and fencecheck-worker copied to a directory of their own (0755, under /tmp), which
/// the unprivileged account can reach wherever the checkout is (a clone under /root is not).
/// The workers run as `user: nobody` from there (issue 34 item 7: every fault acts on them).
struct Unprivileged {
  fs::path dir;
  Unprivileged() {
    dir = fs::temp_directory_path() / ("fc-cw-nobody-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    fs::copy_file(kWorkerScript, dir / "worker.sh");
    fs::copy_file(fs::path(FENCECHECK_BIN).parent_path() / "fencecheck-worker", dir / "fencecheck-worker");
    const auto open = fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                      fs::perms::others_exec;
    for (const auto& p : {dir, dir / "worker.sh", dir / "fencecheck-worker"}) fs::permissions(p, open);
  }
  ~Unprivileged() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  /// The worker's extra fields: the account, and where the copied fencecheck-worker is.
  [[nodiscard]] std::string fields() const {
    return ", user: nobody, env: {FC_TEST_WORKER_BIN_DIR: " + dir.string() + "}";
  }
};

/// Two forking command workers; w1 hit by `fault` (a YAML flow mapping without target/trigger)
/// after its 2nd accepted write; the store fenced or not. With `as` the workers run as nobody
/// from its copy.
std::string forking_scenario(const std::string& name, const std::string& fault, const std::string& fencing,
                             const std::string& expect, const std::string& network = "host",
                             const std::string& chunk_interval = "100ms", const std::string& worker_flags = "",
                             const Unprivileged* as = nullptr) {
  const std::string script = as ? (as->dir / "worker.sh").string() : kWorkerScript.string();
  const std::string fields = as ? as->fields() : "";
  return "name: " + name + "\n" +
         "seed: 7\n"
         "lease_ttl: 2s\n"
         "timeout: 90s\n"
         "resource: {kind: store, fencing: " + fencing + "}\n" +
         "network: " + network + "\n" +
         "job: {key: ledger, segments: 3, chunks: 4, chunk_bytes: 256, chunk_interval: " + chunk_interval + "}\n" +
         "workers:\n"
         "  - {id: w1, command: [" + script + ", forking" + worker_flags + "]" + fields + "}\n" +
         "  - {id: w2, command: [" + script + ", forking" + worker_flags +
         "], start_after: {worker: w1, event: acquire.ok}" + fields + "}\n" +
         "faults:\n"
         "  - {" + fault + ", target: w1, trigger: {worker: w1, event: write.ok, count: 2}}\n" +
         "expect: " + expect + "\n";
}

bool root() { return ::geteuid() == 0; }

/// The holder's shell said which uid it runs as (worker.sh forking), and the harness said which
/// account it started w1 as: both must be nobody's.
void expect_ran_as_nobody(const RunOutcome& r) {
  EXPECT_NE(fctest::slurp(r.dir / "logs" / "w1.stdout.log").find("forking the holder two levels down (uid 65534)"), std::string::npos)
      << fctest::slurp(r.dir / "logs" / "w1.stdout.log");
  bool said = false;
  for (const auto& e : r.history)
    said = said || e.value("detail", "").find("started worker w1 (pid ") == 0 &&
                       e.value("detail", "").find(", as nobody uid 65534: workers[].user)") != std::string::npos;
  EXPECT_TRUE(said) << "the harness did not say it started w1 as nobody";
}

TEST(CommandWorker, SigstopReachesTheForkedHolderAndAnUnfencedStoreShowsTheDamage) {
  // As nobody (the harness root: every fault must act on a worker of another account).
  const Unprivileged as;
  const RunOutcome r = run_yaml("cw-sigstop-unfenced",
                         forking_scenario("cw-sigstop-unfenced", "kind: sigstop, duration: 6s", "none",
                                          "{outcome: anomaly, anomalies: [interleaved-segment], min_expiries_during_work: 1}",
                                          "host", "100ms", "", root() ? &as : nullptr));
  if (root()) expect_ran_as_nobody(r);
  ASSERT_FALSE(r.dir.empty()) << r.result.err;
  EXPECT_EQ(r.result.code, 0) << r.reasons() << r.result.err;
  EXPECT_TRUE(r.anomalies().count("interleaved-segment")) << r.reasons();
  // The holder, two processes below the one the harness started, measured the stop itself.
  EXPECT_GE(r.longest_pause_s("w1"), 5.5);
  // The reference worker inside the script spoke the protocol on the inherited descriptor 3.
  bool hello = false;
  for (const auto& e : r.history) hello = hello || (e.value("source", "") == "w1" && e.value("kind", "") == "hello");
  EXPECT_TRUE(hello);
  EXPECT_TRUE(fs::exists(r.dir / "logs" / "w1.stdout.log"));
  EXPECT_NE(fctest::slurp(r.dir / "logs" / "w1.stdout.log").find("forking the holder two levels down"), std::string::npos);
}

TEST(CommandWorker, SigstopOfAForkingWorkerAgainstAFencedStoreIsSafe) {
  const RunOutcome r = run_yaml("cw-sigstop-fenced", forking_scenario("cw-sigstop-fenced", "kind: sigstop, duration: 6s", "per-key",
                                                               "{outcome: safe, min_rejected_writes: 1}"));
  ASSERT_FALSE(r.dir.empty()) << r.result.err;
  EXPECT_EQ(r.result.code, 0) << r.reasons() << r.result.err;
  EXPECT_EQ(r.verdict.value("verdict", ""), "valid") << r.reasons();
  EXPECT_GE(r.longest_pause_s("w1"), 5.5);
}

TEST(CommandWorker, FreezePutsTheWholeTreeInTheCgroup) {
  if (!root()) GTEST_SKIP() << "freeze needs root (cgroups)";
  const Unprivileged as;
  const RunOutcome r = run_yaml("cw-freeze", forking_scenario("cw-freeze", "kind: freeze, duration: 6s", "none",
                                                       "{outcome: anomaly, anomalies: [interleaved-segment], min_expiries_during_work: 1}",
                                                       "host", "100ms", "", &as));
  ASSERT_FALSE(r.dir.empty()) << r.result.err;
  expect_ran_as_nobody(r);
  EXPECT_EQ(r.result.code, 0) << r.reasons() << r.result.err;
  EXPECT_GE(r.longest_pause_s("w1"), 5.5);
}

TEST(CommandWorker, CpuThrottleStarvesTheWholeTree) {
  if (!root()) GTEST_SKIP() << "cpu-throttle needs root (cgroups)";
  // 0.1% of one CPU for 6 s on a holder that renews its lease on its job's thread between writes
  // that cost 5 ms of CPU each (scenarios/faults/throttle-past-lease-unfenced.yaml's design):
  // its keepalives starve and its lease expires, and its next write lands after w2's.
  const Unprivileged as;
  const RunOutcome r = run_yaml("cw-throttle",
                         forking_scenario("cw-throttle", "kind: cpu-throttle, quota: 0.1%, period: 1s, duration: 6s", "none",
                                          "{outcome: anomaly, anomalies: [stale-write-accepted], min_expiries_during_work: 1}",
                                          "host", "100ms", ", --keepalive, inline, --cpu-per-write-ms, 5", &as));
  ASSERT_FALSE(r.dir.empty()) << r.result.err;
  expect_ran_as_nobody(r);
  EXPECT_EQ(r.result.code, 0) << r.reasons() << r.result.err;
  // Under 0.1% of a CPU per 1 s period the holder's own ticker sees gaps of about a period.
  EXPECT_GE(r.longest_pause_s("w1"), 0.5);
}

TEST(CommandWorker, PartitionCutsTheWholeTreeOffFromTheLockService) {
  if (!root()) GTEST_SKIP() << "partition needs root (network namespaces)";
  // w1's tree loses the lock service but keeps the store: its lease expires while it writes on.
  const Unprivileged as;
  const RunOutcome r = run_yaml("cw-partition",
                         forking_scenario("cw-partition", "kind: partition, from: lock-service, duration: 6s", "none",
                                          "{outcome: anomaly, anomalies: [stale-write-accepted], min_expiries_during_work: 1}",
                                          "namespaces", "500ms", "", &as));
  ASSERT_FALSE(r.dir.empty()) << r.result.err;
  expect_ran_as_nobody(r);
  EXPECT_EQ(r.result.code, 0) << r.reasons() << r.result.err;
  bool lost = false;
  for (const auto& e : r.history)
    lost = lost || (e.value("source", "") == "w1" && (e.value("kind", "") == "keepalive.fail" || e.value("kind", "") == "lease.lost"));
  EXPECT_TRUE(lost) << "the forked holder's keepalives never failed: it was not partitioned";
}

std::string single_worker(const std::string& name, const std::string& mode, const std::string& expect = "{outcome: safe}") {
  return "name: " + name + "\n" +
         "lease_ttl: 2s\n"
         "timeout: 60s\n"
         "resource: {kind: store}\n"
         "job: {key: ledger, segments: 1, chunks: 2, chunk_bytes: 64, chunk_interval: 10ms}\n"
         "workers:\n"
         "  - {id: w1, command: [" + kWorkerScript.string() + ", " + mode + "]}\n" +
         "expect: " + expect + "\n";
}

TEST(CommandWorker, ALineThatBreaksTheProtocolIsKeptAndTheRunCannotBeJudgedSafe) {
  const RunOutcome r = run_yaml("cw-lying", single_worker("cw-lying", "lying"));
  ASSERT_FALSE(r.dir.empty()) << r.result.err;
  EXPECT_EQ(r.result.code, 1) << r.result.err;
  std::vector<nlohmann::json> errors;
  for (const auto& e : r.history)
    if (e.value("kind", "") == "protocol.error") errors.push_back(e);
  ASSERT_EQ(errors.size(), 2u) << "line 2 (a string token) and line 3 (the reference worker's second hello)";
  EXPECT_EQ(errors[0].value("target", ""), "w1");
  EXPECT_EQ(errors[0].value("line_no", 0), 2);
  EXPECT_NE(errors[0].value("detail", "").find("'token'"), std::string::npos) << errors[0].dump();
  EXPECT_EQ(errors[0].value("line", ""), R"({"kind":"write.ok","key":"ledger","token":"seven"})");
  EXPECT_EQ(errors[1].value("line_no", 0), 3);
  EXPECT_NE(errors[1].value("detail", "").find("second hello"), std::string::npos) << errors[1].dump();
  EXPECT_FALSE(r.verdict.at("expectation").at("met").get<bool>());
}

TEST(CommandWorker, AFailedWorkerIsNotMetWithItsLastStderrLines) {
  const RunOutcome r = run_yaml("cw-exit3", single_worker("cw-exit3", "exit3"));
  ASSERT_FALSE(r.dir.empty()) << r.result.err;
  EXPECT_EQ(r.result.code, 1);
  const std::string reasons = r.reasons();
  EXPECT_NE(reasons.find("worker w1 failed: exit 3"), std::string::npos) << reasons;
  EXPECT_NE(reasons.find("cannot reach the payments database"), std::string::npos) << reasons;
}

TEST(CommandWorker, AWorkerThatCrashesWithExit1IsNotMetWithItsTraceback) {
  // An uncaught Python exception exits 1: before issue 31 that read as "gave up", and the run was
  // valid and met with the traceback only in logs/w1.log.
  const RunOutcome r = run_yaml("cw-crashes", single_worker("cw-crashes", "crashes"));
  ASSERT_FALSE(r.dir.empty()) << r.result.err;
  EXPECT_EQ(r.result.code, 1) << r.reasons();
  const std::string reasons = r.reasons();
  EXPECT_NE(reasons.find("worker w1 crashed: exit 1 without job.gave_up (exit 1 alone does not say it gave up); see "
                         "logs/w1.log; its last stderr lines:\n"),
            std::string::npos)
      << reasons;
  EXPECT_NE(reasons.find("RuntimeError: the ledger client lost its connection (this worker crashes on purpose)"),
            std::string::npos)
      << reasons;
  EXPECT_FALSE(r.verdict.at("expectation").at("met").get<bool>());
}

TEST(CommandWorker, AWorkerThatSaysItGaveUpBeforeExit1IsJudgedByTheCheckers) {
  const RunOutcome r = run_yaml("cw-gives-up", single_worker("cw-gives-up", "gives-up"));
  ASSERT_FALSE(r.dir.empty()) << r.result.err;
  EXPECT_EQ(r.reasons().find("crashed"), std::string::npos) << r.reasons();
  EXPECT_EQ(r.result.code, 0) << r.reasons() << r.result.err;
  bool gave_up = false, exited = false;
  for (const auto& e : r.history) {
    gave_up = gave_up || (e.value("source", "") == "w1" && e.value("kind", "") == "job.gave_up");
    if (e.value("kind", "") == "worker.exit" && e.value("target", "") == "w1") {
      exited = true;
      EXPECT_EQ(e.value("detail", ""), "exit 1");
      EXPECT_EQ(e.value("line", ""), "") << "an exit its events account for keeps no stderr tail";
    }
  }
  EXPECT_TRUE(gave_up && exited);
}

TEST(CommandWorker, AWorkerThatNeverAcquiresMakesTheRunNotMetAndSaysSo) {
  const RunOutcome r = run_yaml("cw-never", single_worker("cw-never", "never-acquires"));
  ASSERT_FALSE(r.dir.empty()) << r.result.err;
  EXPECT_EQ(r.result.code, 1);
  EXPECT_NE(r.reasons().find("worker w1 never acquired the lock fencecheck/cw-never"), std::string::npos) << r.reasons();
}

TEST(CommandWorker, AWorkerThatExitsLeavingItsHolderRunningIsNotMet) {
  // worker.sh background: the reference worker runs on in the background after the program exits
  // "done"; the harness ends it a second later, and the run says so instead of judging a cut job.
  std::string yaml = single_worker("cw-background", "background");
  const std::string quick = "segments: 1, chunks: 2, chunk_bytes: 64, chunk_interval: 10ms";
  yaml.replace(yaml.find(quick), quick.size(), "segments: 1, chunks: 8, chunk_bytes: 64, chunk_interval: 500ms");  // 4 s: longer than the grace
  const RunOutcome r = run_yaml("cw-background", yaml);
  ASSERT_FALSE(r.dir.empty()) << r.result.err;
  EXPECT_EQ(r.result.code, 1) << r.reasons();
  // The function's subshell and fencecheck-worker in it.
  EXPECT_NE(r.reasons().find("worker w1 exited while 2 process(es) it started still held its event channel: killed after 1 s"),
            std::string::npos)
      << r.reasons();
}

/// PIDs of live processes whose argv is exactly {"sleep", arg}.
std::vector<pid_t> sleepers(const std::string& arg) {
  std::vector<pid_t> out;
  for (const auto& d : fs::directory_iterator("/proc")) {
    const std::string pid = d.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (fctest::slurp(d.path() / "cmdline") == std::string("sleep\0", 6) + arg + std::string(1, '\0'))
      out.push_back(std::stoi(pid));
  }
  return out;
}

TEST(CommandWorker, AProcessThatEscapedTheGroupHoldingTheChannelDoesNotHangTheHarness) {
  // worker.sh escaping: a `setsid sleep` keeps descriptor 3 open outside the worker's process
  // group, where the harness cannot end it. The run must still end, and fencecheck exit.
  const RunOutcome r = run_yaml("cw-escaping", single_worker("cw-escaping", "escaping"));
  for (pid_t pid : sleepers("987.654")) ::kill(pid, SIGKILL);  // the escaped process: ours to clean up
  ASSERT_FALSE(r.dir.empty()) << r.result.err;
  EXPECT_TRUE(fs::exists(r.dir / "verdict.json"));
  bool exited = false;
  for (const auto& e : r.history) exited = exited || (e.value("kind", "") == "worker.exit" && e.value("target", "") == "w1");
  EXPECT_TRUE(exited);
}

TEST(CommandWorker, AProgramThatIsMissingOrNotExecutableIsExit2BeforeAnythingStarts) {
  const fs::path work = fctest::fresh_dir("cw-missing");
  const fs::path root = work / "runs";
  std::ofstream(work / "missing.yaml") << "name: cw-missing\nlease_ttl: 2s\nresource: {kind: store}\n"
                                          "job: {key: ledger, segments: 1, chunks: 1}\n"
                                          "workers:\n  - id: w1\n  - id: w7\n    command: [./no-such-worker, --x]\n"
                                          "expect: {outcome: safe}\n";
  fctest::Result r = fctest::run_fencecheck({"run", "--run-root", root.string(), (work / "missing.yaml").string()}, work);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("missing.yaml:8:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("worker w7's program " + (work / "no-such-worker").string() + " does not exist"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(root)) << "nothing may start for a scenario whose worker cannot run";

  std::ofstream(work / "plain.sh") << "#!/bin/sh\nexit 0\n";  // not chmod +x
  std::ofstream(work / "noexec.yaml") << "name: cw-noexec\nlease_ttl: 2s\nresource: {kind: store}\n"
                                         "job: {key: ledger, segments: 1, chunks: 1}\n"
                                         "workers:\n  - {id: w1, command: [./plain.sh]}\nexpect: {outcome: safe}\n";
  r = fctest::run_fencecheck({"validate", (work / "noexec.yaml").string()}, work);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("noexec.yaml:6:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("is not executable"), std::string::npos) << r.err;
}

TEST(CommandWorker, ALockServiceTriggerPausesASilentWorkerWhileItIsQueued) {
  // Issue 31 item 8: neither worker says a word, yet "pause w2 while it is queued" is aimed, not
  // timed: w2 starts once the lock service shows w1's key (the first lock.grant), and is stopped
  // the moment its own waiter key appears (the second). Stopped for three lease TTLs, w2 cannot
  // renew its lease, so the lock service deletes its waiter key while it is still stopped: the
  // proof that the fault landed while w2 was queued, from the lock service's own history.
  const RunOutcome r = run_yaml(
      "cw-lock-trigger",
      "name: cw-lock-trigger\nseed: 7\nlease_ttl: 2s\ntimeout: 60s\nresource: {kind: store, fencing: per-key}\n"
      "job: {key: ledger, segments: 2, chunks: 4, chunk_bytes: 256, chunk_interval: 300ms}\n"
      "workers:\n"
      "  - {id: w1, command: [" + kWorkerScript.string() + ", silent]}\n" +
      "  - {id: w2, command: [" + kWorkerScript.string() + ", silent], start_after: {event: lock.grant}}\n" +
      "faults:\n"
      "  - {kind: sigstop, target: w2, trigger: {event: lock.grant, count: 2}, duration: 6s}\n"
      "expect: {outcome: safe}\n");
  ASSERT_FALSE(r.dir.empty()) << r.result.err;
  // Find the second lock.grant, the fault on w2, its heal, and the lock service's deletes.
  std::optional<std::size_t> second_grant, inject, heal;
  std::string w2_key;
  int grants = 0;
  for (std::size_t i = 0; i < r.history.size(); ++i) {
    const auto& e = r.history[i];
    const std::string kind = e.value("kind", "");
    if (e.value("source", "") == "lock" && kind == "lock.grant" && ++grants == 2) {
      second_grant = i;
      w2_key = e.value("lock_key", "");
    }
    if (kind == "fault.inject" && e.value("target", "") == "w2") inject = i;
    if (kind == "fault.heal" && e.value("target", "") == "w2") heal = i;
  }
  ASSERT_TRUE(second_grant.has_value()) << "the lock service showed fewer than two keys";
  ASSERT_TRUE(inject.has_value()) << r.result.err;
  ASSERT_TRUE(heal.has_value()) << r.result.err;
  ASSERT_FALSE(w2_key.empty());
  // The fault came after the second grant, with no other lock-service event between them.
  EXPECT_GT(*inject, *second_grant);
  for (std::size_t i = *second_grant + 1; i < *inject; ++i)
    EXPECT_NE(r.history[i].value("source", ""), "lock") << "a lock-service event came before the fault: " << r.history[i].dump();
  // w2's waiter key was deleted while w2 was stopped: it was queued, its lease expired.
  bool deleted_while_stopped = false;
  for (std::size_t i = *inject; i < *heal; ++i) {
    const auto& e = r.history[i];
    if (e.value("source", "") == "lock" && e.value("kind", "") == "lock.delete" && e.value("lock_key", "") == w2_key)
      deleted_while_stopped = true;
  }
  EXPECT_TRUE(deleted_while_stopped) << "w2's key " << w2_key << " was not deleted while w2 was stopped";
  // That expiry was a waiter's: w2's key never held the lock, so it is no lease expiry during work.
  EXPECT_EQ(r.verdict.at("figures").at("lease_expiries_during_work"), 0) << r.verdict.at("figures").dump();
  for (const auto& e : r.history) EXPECT_NE(e.value("source", ""), "w2") << "w2 said something: " << e.dump();
  // Two black boxes against a fenced store: the checkers that need the workers' own events cannot
  // say valid, so a safe expectation is not met (never valid without the evidence).
  EXPECT_EQ(r.verdict.value("verdict", ""), "unknown") << r.reasons();
  EXPECT_EQ(r.result.code, 1) << r.reasons() << r.result.err;
}

TEST(CommandWorker, ASilentWorkerIsJudgedAsABlackBoxFromTheLockServiceAndTheResource) {
  // Neither worker sends a single event: no trigger can name them, so w2 starts after a delay and
  // w1 is stopped at a time, mid-job, for three lease TTLs. The unfenced store accepts w1's stale
  // chunks after w2's, and its accept log proves it with no word from the workers.
  const RunOutcome r = run_yaml(
      "cw-silent",
      "name: cw-silent\nseed: 7\nlease_ttl: 2s\ntimeout: 60s\nresource: {kind: store, fencing: none}\n"
      "job: {key: ledger, segments: 3, chunks: 4, chunk_bytes: 256, chunk_interval: 150ms}\n"
      "workers:\n"
      "  - {id: w1, command: [" + kWorkerScript.string() + ", silent]}\n" +
      "  - {id: w2, command: [" + kWorkerScript.string() + ", silent], start_delay: 300ms}\n" +
      "faults:\n"
      "  - {kind: sigstop, target: w1, trigger: {at: 900ms}, duration: 6s}\n"
      "expect: {outcome: anomaly, anomalies: [stale-write-accepted]}\n");
  ASSERT_FALSE(r.dir.empty()) << r.result.err;
  EXPECT_EQ(r.result.code, 0) << r.reasons() << r.result.err;
  EXPECT_EQ(r.verdict.value("verdict", ""), "invalid");
  EXPECT_EQ(r.verdict.at("black_box_workers"), nlohmann::json::array({"w1", "w2"}));
  // etcd's watch gives no word on why a key went (the lease expiry count of /metrics was tried and
  // withdrawn: it can name a released key's delete when another lease expires in the same moment),
  // so a black box's expiry on etcd is not counted: never a figure the history does not prove.
  // w1's key, deleted while w1 was stopped, is undecided, so the figure is not measured, never 0.
  EXPECT_EQ(r.verdict.at("figures").at("lease_expiries_during_work"), 0) << r.verdict.at("figures").dump();
  EXPECT_GE(r.verdict.at("figures").at("lease_expiries_undecided").get<int>(), 1) << r.verdict.at("figures").dump();
  EXPECT_NE(r.result.out.find(">=0 (not measured)"), std::string::npos) << r.result.out;
  for (const auto& c : r.verdict.at("checkers")) {
    if (c.at("name") == "stale-write-accepted") {
      EXPECT_EQ(c.at("verdict"), "invalid");
      EXPECT_NE(c.at("evidence").dump().find("resource.accept-log"), std::string::npos) << c.dump();
    }
    // A checker that needs the workers' own events cannot call a silent run valid.
    if (c.at("name") == "fenced-out" || c.at("name") == "foreign-release") {
      EXPECT_EQ(c.at("verdict"), "unknown") << c.dump();
    }
  }
  for (const auto& e : r.history) EXPECT_NE(e.value("source", ""), "w1") << "w1 said something: " << e.dump();
  EXPECT_NE(r.result.out.find("black box: judged from the lock service and the resource"), std::string::npos) << r.result.out;
}

/// A run of the scenario file <work>/<file>, its runs under <work>/runs.
struct FileRun {
  fctest::Result result;
  fs::path dir;  ///< the run's directory; empty when the run made none
};
/// A scenario of one command worker, /usr/bin/python3 `script`, under lock_service kind none (lock
/// payments/ledger), with the YAML of its resource mapping, job mapping and expect mapping.
std::string one_python_worker(const std::string& name, const std::string& resource, const std::string& job,
                              const std::string& script, const std::string& expect) {
  return "name: " + name + "\nlease_ttl: 2s\ntimeout: 60s\nlock_service: {kind: none, lock: payments/ledger}\n" +
         "resource: " + resource + "\njob: " + job + "\nworkers:\n  - {id: w1, command: [/usr/bin/python3, " + script +
         "]}\nexpect: " + expect + "\n";
}

FileRun run_file(const fs::path& work, const std::string& file) {
  const fs::path root = work / "runs";
  FileRun r{fctest::run_fencecheck({"run", "--run-root", root.string(), (work / file).string()}, work), {}};
  if (fs::is_directory(root)) r.dir = fctest::only_run_dir(root);
  return r;
}

TEST(LockServiceNone, NothingIsStartedAndTheIssuersCheckersAreUnknown) {
  // A worker that takes a lock of its own (here: none at all, token 1) and writes the job through
  // the examples' Python helpers; it says in a log event which lock-service variables it got.
  const fs::path work = fctest::fresh_dir("cw-none");
  std::ofstream(work / "own_lock.py")
      << "import os, sys\n"
         "sys.path.insert(0, " << nlohmann::json((fs::path(FENCECHECK_SOURCE_DIR) / "workers/examples/python-common").string())
      << ")\n"
         "from fencecheck_example import Job, emit\n"
         "emit('hello', protocol=1)\n"
         "emit('log', detail='lock service %s, endpoints %s, lock %s' % (os.environ['FENCECHECK_LOCK_SERVICE'], "
         "os.environ.get('FENCECHECK_LOCK_ENDPOINTS', '(unset)'), os.environ['FENCECHECK_LOCK_NAME']))\n"
         "emit('acquire.ok', lock_key='own/1', token=1)\n"
         "assert Job().run(1) is None\n"
         "emit('job.done', token=1)\n";
  std::ofstream(work / "none.yaml") << one_python_worker(
      "cw-none", "{kind: store}", "{key: ledger, segments: 1, chunks: 2, chunk_bytes: 64, chunk_interval: 10ms}",
      "own_lock.py", "{outcome: safe}");
  const auto [r, dir] = run_file(work, "none.yaml");
  ASSERT_FALSE(dir.empty()) << r.out << r.err;
  EXPECT_EQ(r.code, 1) << "an unknown verdict never meets outcome safe\n" << r.out << r.err;
  const auto verdict = nlohmann::json::parse(fctest::slurp(dir / "verdict.json"));
  EXPECT_EQ(verdict["verdict"], "unknown");
  for (const auto& c : verdict["checkers"]) {
    const std::string name = c["name"];
    if (name == "foreign-release" || name == "token-regression" || name == "unaccounted-write") {
      EXPECT_EQ(c["verdict"], "unknown") << c.dump();
      EXPECT_EQ(c.value("error", ""), "the scenario's lock service is kind none: no issuer history") << c.dump();
    }
    if (name == "interleaved-segment" || name == "stale-write-accepted" || name == "corrupt-chunk") {
      EXPECT_EQ(c["verdict"], "valid") << c.dump();
    }
  }
  bool told = false;
  for (const auto& e : fctest::read_history(dir / "history.jsonl")) {
    EXPECT_NE(e.value("source", ""), "lock") << "nothing watched, nothing to say: " << e.dump();
    told = told || e.value("detail", "") == "lock service none, endpoints (unset), lock payments/ledger";
  }
  EXPECT_TRUE(told) << "the worker's environment";
  for (const auto& f : fs::directory_iterator(dir / "logs"))
    EXPECT_EQ(f.path().filename().string().find("etcd"), std::string::npos) << "a lock service was started: " << f.path();
}

/// The lock name against an external etcd (the user's cluster: here one this test starts on
/// loopback): exactly the scenario's, or with the run id when run_suffix asks for it; and the
/// checkers, the verdict and the metrics use the name the workers used. Before, the harness
/// appended the run id silently and the checkers kept the scenario's name, so token-regression's
/// per-lock check matched no acquire.ok at all.
void check_lock_name(bool run_suffix) {
  const fs::path work = fctest::fresh_dir(run_suffix ? "cw-lock-suffix" : "cw-lock-exact");
  fencecheck::EmbeddedEtcd etcd;
  etcd.start(work / "etcd-data", work / "etcd.log");
  const std::string name = run_suffix ? "cw-lock-suffix" : "cw-lock-exact";
  std::ofstream(work / "s.yaml") << "name: " << name << "\nlease_ttl: 2s\ntimeout: 60s\n"
                                 << "lock_service: {kind: etcd, endpoints: [\"" << etcd.client_url()
                                 << "\"], lock: staging/payments" << (run_suffix ? ", run_suffix: true" : "") << "}\n"
                                 << "resource: {kind: store}\n"
                                    "job: {key: ledger, segments: 1, chunks: 2, chunk_bytes: 64, chunk_interval: 10ms}\n"
                                    "workers: [{id: w1}, {id: w2, start_after: {worker: w1, event: acquire.ok}}]\n"
                                    "expect: {outcome: safe}\n";
  const fs::path root = work / "runs";
  const fctest::Result r = fctest::run_fencecheck({"run", "--run-root", root.string(), (work / "s.yaml").string()}, work);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const fs::path dir = fctest::only_run_dir(root);
  const std::string run_id = dir.filename().string();
  const std::string used = run_suffix ? "staging/payments/" + run_id : "staging/payments";
  int acquired = 0, grants = 0;
  for (const auto& e : fctest::read_history(dir / "history.jsonl")) {
    if (e.value("kind", "") == "acquire.ok") {
      ++acquired;
      EXPECT_EQ(e.value("lock", ""), used);
      EXPECT_EQ(e.value("lock_key", "").rfind(used + "/", 0), 0u) << e.dump();
    }
    if (e.value("kind", "") == "lock.grant") ++grants;
  }
  EXPECT_EQ(acquired, 2);
  EXPECT_EQ(grants, 2) << "the lock watch saw the grants under the name used";
  const auto plan = nlohmann::json::parse(fctest::slurp(dir / "scenario.json"));
  EXPECT_EQ(plan["lock_service"]["lock"], used);
  const auto verdict = nlohmann::json::parse(fctest::slurp(dir / "verdict.json"));
  EXPECT_EQ(verdict["lock"], used);
  // token-regression checked the workers' grants: it used the workers' events and the lock
  // service's, and found both holdings (its per-lock check matches the name used).
  for (const auto& c : verdict["checkers"]) {
    if (c["name"] == "token-regression") {
      EXPECT_EQ(c["verdict"], "valid") << c.dump();
    }
  }
  EXPECT_NE(fctest::slurp(dir / "metrics.prom").find("lock=\"" + used + "\""), std::string::npos);
  // `fencecheck report` judges the stored run again with the same name: the same verdict.
  const fctest::Result again = fctest::run_fencecheck({"report", dir.string()}, work);
  EXPECT_EQ(again.code, 0) << again.out << again.err;
}

TEST(LockName, AnExternalEtcdGetsTheScenariosNameExactly) { check_lock_name(false); }
TEST(LockName, RunSuffixAppendsTheRunIdVisibly) { check_lock_name(true); }

/// issue 34, item 4: a command worker writes through the scenario's own `write` statements
/// (resource kind postgres hands them over in FENCECHECK_PG_WRITE_*), with rows of its own JSON
/// (job.payload: opaque). The worker says in a log event which variables it got; it writes two rows
/// through python-common's ScenarioWrite (the two statements in one transaction, as
/// fencecheck-worker runs them), and the run judges them from the writer and token columns.
TEST(PostgresWrite, ACommandWorkerGetsTheScenariosStatementsAndWritesItsOwnJsonThroughThem) {
  if (std::system("/usr/bin/python3 -c 'import psycopg2' 2>/dev/null") != 0)
    GTEST_SKIP() << "psycopg2 is not installed for /usr/bin/python3 (apt-get install python3-psycopg2)";
  const fs::path work = fctest::fresh_dir("cw-pg-write");
  std::ofstream(work / "own_rows.py")
      << "import json, os, sys\n"
         "import psycopg2\n"
         "sys.path.insert(0, " << nlohmann::json((fs::path(FENCECHECK_SOURCE_DIR) / "workers/examples/python-common").string())
      << ")\n"
         "from fencecheck_example import ScenarioWrite, chunk_bytes, emit\n"
         "emit('hello', protocol=1)\n"
         "told = {k: v for k, v in os.environ.items() if k.startswith('FENCECHECK_PG_WRITE') or k == 'FENCECHECK_JOB_PAYLOAD'}\n"
         "emit('log', detail=json.dumps(told, sort_keys=True))\n"
         "conn = psycopg2.connect(os.environ['FENCECHECK_RESOURCE_DSN'])\n"
         "conn.autocommit = True\n"
         "statement = ScenarioWrite(conn)\n"
         "me, key = os.environ['FENCECHECK_WORKER_ID'], os.environ['FENCECHECK_KEY']\n"
         "emit('acquire.ok', lock_key='own/1', token=1)\n"
         "for c in range(2):\n"
         "    emit('write.invoke', key=key, segment=0, chunk=c, token=1)\n"
         "    outcome = statement.write(key=key, segment=0, chunk=c, token=1, writer=me,\n"
         "                              data=chunk_bytes(me, 1, key, 0, c, 64))\n"
         "    emit('write.ok' if outcome == 'accepted' else 'write.fail', key=key, segment=0, chunk=c, token=1,\n"
         "         **({} if outcome == 'accepted' else {'high_water': 0, 'detail': outcome}))\n"
         "emit('job.done', token=1)\n";
  const std::string lock_sql = "SELECT pg_advisory_xact_lock(hashtextextended($key, 0))";
  const std::string write_sql =
      "WITH fenced AS (INSERT INTO fencecheck_fence AS fence (key, token) VALUES ($key, $token) ON CONFLICT (key) "
      "DO UPDATE SET token = EXCLUDED.token WHERE fence.token <= EXCLUDED.token RETURNING fence.key), stored AS "
      "(INSERT INTO fencecheck_chunks (key, segment, chunk, token, writer, data) SELECT $key, $segment, $chunk, "
      "$token, $writer, $data FROM fenced ON CONFLICT (key, segment, chunk) DO UPDATE SET token = EXCLUDED.token, "
      "writer = EXCLUDED.writer, data = EXCLUDED.data) INSERT INTO fencecheck_accept_log (key, segment, chunk, "
      "token, writer) SELECT $key, $segment, $chunk, $token, $writer FROM fenced";
  const nlohmann::json resource{
      {"kind", "postgres"},
      {"write", {lock_sql, write_sql}},
      {"accept_log", "SELECT key, segment, chunk, token, writer FROM fencecheck_accept_log ORDER BY seq"},
      {"high_water", "SELECT key, token FROM fencecheck_fence ORDER BY key"}};
  std::ofstream(work / "pg.yaml") << one_python_worker(
      "cw-pg-write", resource.dump(), "{key: ledger, segments: 1, chunks: 2, chunk_interval: 10ms, payload: opaque}",
      "own_rows.py",
      "{outcome: safe, accept_unknown: [foreign-release, token-regression, unaccounted-write, ungranted-holding, "
      "corrupt-chunk]}");
  const auto [r, dir] = run_file(work, "pg.yaml");
  ASSERT_FALSE(dir.empty()) << r.out << r.err;
  EXPECT_EQ(r.code, 0) << "met: every unknown is one the scenario accepts\n" << r.out << r.err;

  // What the worker was told: each statement as written and compiled, the parameters and their
  // types, and no FENCECHECK_PG_WRITE (there are two statements).
  std::optional<nlohmann::json> told;
  for (const auto& e : fctest::read_history(dir / "history.jsonl"))
    if (e.value("source", "") == "w1" && e.value("kind", "") == "log") told = nlohmann::json::parse(e.value("detail", "{}"));
  ASSERT_TRUE(told) << "the worker's log event";
  const std::string positional_write =
      "WITH fenced AS (INSERT INTO fencecheck_fence AS fence (key, token) VALUES ($1, $4) ON CONFLICT (key) "
      "DO UPDATE SET token = EXCLUDED.token WHERE fence.token <= EXCLUDED.token RETURNING fence.key), stored AS "
      "(INSERT INTO fencecheck_chunks (key, segment, chunk, token, writer, data) SELECT $1, $2, $3, "
      "$4, $5, $6 FROM fenced ON CONFLICT (key, segment, chunk) DO UPDATE SET token = EXCLUDED.token, "
      "writer = EXCLUDED.writer, data = EXCLUDED.data) INSERT INTO fencecheck_accept_log (key, segment, chunk, "
      "token, writer) SELECT $1, $2, $3, $4, $5 FROM fenced";
  EXPECT_EQ(*told, (nlohmann::json{{"FENCECHECK_JOB_PAYLOAD", "opaque"},
                                   {"FENCECHECK_PG_WRITE_COUNT", "2"},
                                   {"FENCECHECK_PG_WRITE_1", lock_sql},
                                   {"FENCECHECK_PG_WRITE_1_POSITIONAL", "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))"},
                                   {"FENCECHECK_PG_WRITE_2", write_sql},
                                   {"FENCECHECK_PG_WRITE_2_POSITIONAL", positional_write},
                                   {"FENCECHECK_PG_WRITE_PARAMS", "key,segment,chunk,token,writer,data"},
                                   {"FENCECHECK_PG_WRITE_TYPES", "text,int8,int8,int8,text,bytea"}}));

  // The rows are the worker's own JSON, written through the scenario's statements.
  const auto readback = nlohmann::json::parse(fctest::slurp(dir / "readback.json"));
  ASSERT_EQ(readback["chunks"].size(), 2u) << readback.dump();
  for (const auto& c : readback["chunks"]) {
    EXPECT_EQ(c.value("client", ""), "w1") << c.dump();
    EXPECT_EQ(c["token"], 1);
    const auto row = nlohmann::json::parse(fencecheck::base64_decode(c.value("data_b64", "")));
    EXPECT_EQ(row["shipment"], "ledger-0-" + std::to_string(c["chunk"].get<int>())) << row.dump();
  }
  ASSERT_EQ(readback["log"].size(), 2u);

  // corrupt-chunk has nothing to judge; the checkers of the rows judged from the columns.
  const auto verdict = nlohmann::json::parse(fctest::slurp(dir / "verdict.json"));
  for (const auto& c : verdict["checkers"]) {
    const std::string name = c["name"];
    if (name == "corrupt-chunk") {
      EXPECT_EQ(c["verdict"], "unknown") << c.dump();
      EXPECT_EQ(c["error"], "payload: opaque: the bytes are the system's own") << c.dump();
    }
    if (name == "interleaved-segment" || name == "stale-write-accepted" || name == "lost-acknowledged-write")
      EXPECT_EQ(c["verdict"], "valid") << c.dump();
  }
}

}  // namespace
