// Every fault kind through the real harness (issue 3):
//  - FaultScenario: each scenario of scenarios/faults/ runs for real and meets its expectation,
//    with the values that make it what it claims (the fault injected and healed at its planned
//    length, a lease expiry during work, the stale writes rejected or accepted, a partitioned
//    holder that never paused).
//  - KillNineDuringFault: `kill -9` of the harness while each kind is active, then `fencecheck
//    cleanup RUN_DIR`: no stopped or frozen process, no process of the run, no cgroup, no
//    namespace, no link is left.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "run_util.h"

using nlohmann::json;
namespace fs = std::filesystem;
namespace bp = boost::process;

namespace {

const fs::path kFaults = fs::path(FENCECHECK_SOURCE_DIR) / "scenarios" / "faults";

json read_json(const fs::path& p) { return json::parse(fctest::slurp(p)); }

/// The pids the harness logged as "started worker <id> (pid N)".
std::vector<pid_t> worker_pids(const std::vector<json>& history) {
  std::vector<pid_t> out;
  std::regex re("started worker [^ ]+ \\(pid ([0-9]+)[,)]");
  for (const auto& e : history) {
    std::smatch m;
    std::string detail = e.value("detail", "");
    if (e["kind"] == "log" && std::regex_search(detail, m, re)) out.push_back(std::stoi(m[1]));
  }
  return out;
}

bool alive(pid_t pid) {
  // A zombie is not alive for our purpose (its parent, the dead harness, is gone anyway).
  std::string stat = fctest::slurp(fs::path("/proc") / std::to_string(pid) / "stat");
  auto close = stat.rfind(')');
  return !stat.empty() && close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

/// PIDs of live processes whose command line contains `needle`.
std::vector<pid_t> processes_naming(const std::string& needle) {
  std::vector<pid_t> out;
  for (const auto& d : fs::directory_iterator("/proc")) {
    const std::string pid = d.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos || std::stoi(pid) == ::getpid()) continue;
    std::string cmd = fctest::slurp(d.path() / "cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.find(needle) != std::string::npos && alive(std::stoi(pid))) out.push_back(std::stoi(pid));
  }
  return out;
}

std::set<std::string> netns_names() {
  std::set<std::string> out;
  std::error_code ec;
  if (fs::exists("/run/netns", ec))
    for (const auto& d : fs::directory_iterator("/run/netns", ec)) out.insert(d.path().filename().string());
  return out;
}

/// Interface names in the host's own (root) network namespace.
std::set<std::string> host_links() {
  std::set<std::string> out;
  for (const auto& d : fs::directory_iterator("/sys/class/net")) out.insert(d.path().filename().string());
  return out;
}

std::vector<json> ledger_injects(const fs::path& dir) {
  std::vector<json> out;
  std::ifstream in(dir / "faults.ledger");
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) {
      auto e = json::parse(line, nullptr, false);
      if (!e.is_discarded() && e.value("op", "") == "inject") out.push_back(e);
    }
  return out;
}

// --- each fault scenario, for real ---------------------------------------------------------

class FaultScenario : public ::testing::TestWithParam<std::string> {};

TEST_P(FaultScenario, MeetsItsExpectationWithTheValuesThatMakeItSo) {
  const std::string name = GetParam();
  auto work = fctest::fresh_dir("fault-" + name);
  auto r = fctest::run_fencecheck({"run", (kFaults / (name + ".yaml")).string(), "--run-root", (work / "runs").string()},
                                  work);
  const fs::path dir = fctest::only_run_dir(work / "runs");
  ASSERT_FALSE(dir.empty()) << r.out << r.err;
  const json v = read_json(dir / "verdict.json");
  const json& f = v["figures"];
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_TRUE(v["expectation"]["met"].get<bool>()) << v["expectation"].dump();

  // The fault was injected once on w1 and healed at its planned length (within 1 s: a heal is
  // never early, and lands on the orchestrator's next turn).
  ASSERT_EQ(f["faults"].size(), 1u) << f["faults"].dump();
  const json& fault = f["faults"][0];
  EXPECT_EQ(fault["target"], "w1");
  EXPECT_GE(fault["actual_ns"].get<std::int64_t>(), fault["planned_ns"].get<std::int64_t>());
  EXPECT_LT(fault["actual_ns"].get<std::int64_t>(), fault["planned_ns"].get<std::int64_t>() + 1'000'000'000);
  // Every kind takes the holder past its lease: etcd expired it while w1 was mid-job.
  EXPECT_GE(f["lease_expiries_during_work"].get<int>(), 1);

  const bool unfenced = name.find("unfenced") != std::string::npos;
  std::set<std::string> anomalies;
  for (const auto& c : v["checkers"])
    if (!c["anomalies"].empty()) anomalies.insert(c["name"].get<std::string>());
  if (unfenced) {
    EXPECT_EQ(v["verdict"], "invalid");
    EXPECT_EQ(anomalies.count("stale-write-accepted"), 1u) << v["checkers"].dump();
    EXPECT_EQ(f["rejected_writes_total"].get<int>(), 0);
  } else {
    EXPECT_EQ(v["verdict"], "valid");
    EXPECT_TRUE(anomalies.empty()) << v["checkers"].dump();
    // Fencing was exercised: w1's stale token bounced, once, and w1 then re-acquired.
    EXPECT_GE(f["rejected_writes_total"].get<int>(), 1);
    EXPECT_EQ(f["max_rejections_per_token"].get<int>(), 1);
    EXPECT_TRUE(f["progress_after_heal"]["made_progress"].get<bool>()) << f["progress_after_heal"].dump();
  }

  const std::string kind = fault["fault"];
  if (kind == "partition") {
    // The partitioned holder never paused: it kept running (and writing) while its lease expired.
    for (const auto& p : f["pauses"]) {
      if (p.value("worker", "") == "w1") {
        EXPECT_LT(p["duration_ns"].get<std::int64_t>(), 1'000'000'000) << p.dump();
      }
    }
  } else if (kind == "freeze") {
    // A frozen holder measures the freeze itself with its monotonic ticker, within 0.5 s.
    std::int64_t longest = 0;
    for (const auto& p : f["pauses"]) {
      if (p.value("worker", "") == "w1") longest = std::max(longest, p["duration_ns"].get<std::int64_t>());
    }
    EXPECT_GT(longest, fault["planned_ns"].get<std::int64_t>() - 500'000'000) << f["pauses"].dump();
  }
  // Whatever the kind, nothing of the run is left: no cgroup, no namespace.
  for (const auto& e : ledger_injects(dir)) {
    if (e.contains("cgroup_dir")) {
      EXPECT_FALSE(fs::exists(e["cgroup_dir"].get<std::string>()));
    }
    if (e.contains("namespaces")) {
      for (const auto& ns : e["namespaces"]) EXPECT_EQ(netns_names().count(ns.get<std::string>()), 0u) << ns;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Each, FaultScenario,
                         ::testing::Values("throttle-past-lease", "throttle-past-lease-unfenced", "freeze-past-lease",
                                           "freeze-past-lease-unfenced", "partition-from-lock-service",
                                           "partition-from-lock-service-unfenced"),
                         [](const auto& param_info) {
                           std::string n = param_info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// --- one-way partitions: the request acts, the reply is lost --------------------------------

/// A finished run of one of scenarios/faults/, with its verdict and history.
struct FinishedRun {
  fctest::Result result;
  fs::path dir;
  json verdict;
  std::vector<json> history;
};

FinishedRun run_fault_scenario(const std::string& name) {
  FinishedRun r;
  auto work = fctest::fresh_dir("fault-" + name);
  r.result = fctest::run_fencecheck(
      {"run", (kFaults / (name + ".yaml")).string(), "--run-root", (work / "runs").string()}, work);
  r.dir = fctest::only_run_dir(work / "runs");
  if (r.dir.empty()) return r;
  r.verdict = read_json(r.dir / "verdict.json");
  r.history = fctest::read_history(r.dir / "history.jsonl");
  return r;
}

/// The history's events of `source` and `kind`.
std::vector<json> events(const std::vector<json>& history, const std::string& source, const std::string& kind) {
  std::vector<json> out;
  for (const auto& e : history)
    if (e.value("source", "") == source && e.value("kind", "") == kind) out.push_back(e);
  return out;
}

/// The run met its expectation (safe) with no anomaly at all, and its one partition was w1's,
/// one way, as its history event and its ledger record say.
void expect_safe_one_way_partition(const FinishedRun& r, const std::string& from, const std::string& direction,
                                   const std::string& hook) {
  ASSERT_FALSE(r.dir.empty()) << r.result.out << r.result.err;
  EXPECT_EQ(r.result.code, 0) << r.result.out << r.result.err;
  EXPECT_TRUE(r.verdict["expectation"]["met"].get<bool>()) << r.verdict["expectation"].dump();
  EXPECT_EQ(r.verdict["verdict"], "valid");
  for (const auto& c : r.verdict["checkers"]) EXPECT_TRUE(c["anomalies"].empty()) << c.dump();
  const auto injects = events(r.history, "harness", "fault.inject");
  ASSERT_EQ(injects.size(), 1u);
  EXPECT_EQ(injects[0]["fault"], "partition");
  EXPECT_EQ(injects[0]["target"], "w1");
  const std::string detail = injects[0].value("detail", "");
  EXPECT_NE(detail.find(" from " + from + " "), std::string::npos) << detail;
  EXPECT_EQ(detail.substr(detail.size() - direction.size() - 3), " (" + direction + ")") << detail;
  EXPECT_EQ(events(r.history, "harness", "fault.heal").size(), 1u);
  bool recorded = false;
  for (const auto& e : ledger_injects(r.dir))
    if (e.value("kind", "") == "partition") {
      recorded = true;
      EXPECT_EQ(e["direction"], direction) << e.dump();
      EXPECT_EQ(e["hooks"], json::array({hook})) << e.dump();
    }
  EXPECT_TRUE(recorded);
}

TEST(OneWayPartition, RepliesFromTheResourceTheWriteIsAppliedItsAcknowledgementLost) {
  const FinishedRun r = run_fault_scenario("partition-replies-from-resource");
  expect_safe_one_way_partition(r, "resource", "replies", "egress");
  if (HasFatalFailure()) return;
  const json& f = r.verdict["figures"];

  // w1 never heard back from the store: its write's outcome was unknown to it ...
  const auto infos = events(r.history, "w1", "write.info");
  ASSERT_GE(infos.size(), 1u);
  EXPECT_NE(infos[0].value("detail", "").find("no reply"), std::string::npos) << infos[0].dump();
  // ... yet the store accepted every one of them: its accept log holds each (same writer, key,
  // segment, chunk and token), and the verdict's figure says so with the seq.
  const json rb = read_json(r.dir / "readback.json");
  ASSERT_EQ(f["unknown_outcomes"].size(), infos.size()) << f["unknown_outcomes"].dump();
  for (std::size_t k = 0; k < infos.size(); ++k) {
    const json& info = infos[k];
    const json& u = f["unknown_outcomes"][k];
    EXPECT_EQ(u["resolution"], "applied") << u.dump();
    bool logged = false;
    for (const auto& w : rb["log"])
      if (w["client"] == "w1" && w["key"] == info["key"] && w["segment"] == info["segment"] && w["chunk"] == info["chunk"] &&
          w["token"] == info["token"]) {
        logged = true;
        EXPECT_EQ(u["seq"], w["seq"]);
      }
    EXPECT_TRUE(logged) << info.dump() << " is not in the store's accept log";
  }
  // The lock service was never cut: no lease expired; w1 gave up its holding on the unknown
  // outcome, w2 took the lock with a higher token, and nothing was fenced or lost.
  EXPECT_EQ(f["lease_expiries_during_work"], 0);
  EXPECT_EQ(f["rejected_writes_total"], 0);
  EXPECT_GE(events(r.history, "w2", "acquire.ok").size(), 1u);
  EXPECT_TRUE(f["progress_after_heal"]["made_progress"].get<bool>()) << f["progress_after_heal"].dump();
}

TEST(OneWayPartition, RepliesFromTheLockServiceKeepalivesAndTheUnlockActUnheard) {
  const FinishedRun r = run_fault_scenario("partition-replies-from-lock-service");
  expect_safe_one_way_partition(r, "lock-service", "replies", "egress");
  if (HasFatalFailure()) return;
  const json& f = r.verdict["figures"];
  const std::int64_t inject_t = events(r.history, "harness", "fault.inject")[0]["t_ns"];
  const std::int64_t heal_t = events(r.history, "harness", "fault.heal")[0]["t_ns"];

  // w1's keepalives failed at w1, every one of them ...
  const auto acquired = events(r.history, "w1", "acquire.ok");
  ASSERT_GE(acquired.size(), 1u);
  const std::int64_t token = acquired[0]["token"];
  EXPECT_GE(events(r.history, "w1", "keepalive.fail").size(), 1u);
  // ... yet they renewed its lease at etcd: its key lived on more than the lease TTL (10s) past
  // the partition's start, after which w1 heard of no renewal, until w1's own unlock deleted it.
  std::optional<json> deleted;
  for (const auto& e : events(r.history, "lock", "lock.delete"))
    if (e.value("token", std::int64_t{0}) == token) deleted = e;
  ASSERT_TRUE(deleted) << "w1's lock key was never deleted";
  EXPECT_GT((*deleted)["t_ns"].get<std::int64_t>() - inject_t, 10'000'000'000LL);
  EXPECT_LT((*deleted)["t_ns"].get<std::int64_t>(), heal_t);
  EXPECT_EQ(f["lease_expiries_during_work"], 0);
  EXPECT_EQ(f["rejected_writes_total"], 0);
  // The unlock acted, its reply was lost: w1 asked (release.invoke before the delete, by its own
  // stamp), got release.fail and never a release.ok for that token; the issuer deleted the key
  // and granted w2 at that very revision.
  const auto asked = events(r.history, "w1", "release.invoke");
  ASSERT_GE(asked.size(), 1u);
  EXPECT_EQ(asked[0]["token"], token);
  EXPECT_LE(asked[0]["src_ns"].get<std::int64_t>(), (*deleted)["t_ns"].get<std::int64_t>());
  const auto failed = events(r.history, "w1", "release.fail");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0]["token"], token);
  EXPECT_NE(failed[0].value("detail", "").find("no reply"), std::string::npos) << failed[0].dump();
  for (const auto& ok : events(r.history, "w1", "release.ok")) EXPECT_NE(ok["token"], token) << ok.dump();
  const auto w2 = events(r.history, "w2", "acquire.ok");
  ASSERT_EQ(w2.size(), 1u);
  EXPECT_EQ(w2[0]["revision"], (*deleted)["revision"]);
  EXPECT_GT(w2[0]["token"].get<std::int64_t>(), token);
  // The report tells it.
  const std::string html = fctest::slurp(r.dir / "report.html");
  EXPECT_NE(html.find("at w1&#39;s request: its unlock arrived and acted"), std::string::npos);
}

// --- kill -9 while each kind is active ------------------------------------------------------

struct KillCase {
  std::string name;   ///< test name
  std::string fault;  ///< the faults: entry's kind-specific lines
  bool namespaces = false;
  /// w1 is a command worker that forks the holder two levels down (tests/command_worker/worker.sh):
  /// PR_SET_PDEATHSIG kills only the process the harness started, so cleanup must end the rest.
  bool forking_command = false;
  /// The lock service's kind ("" = the default, etcd). zookeeper: its embedded JVM is the
  /// harness's child too, and names the run directory (its zoo.cfg) in its command line.
  std::string lock_service;
  /// The resource is kind http with a start that forks the service (sh -c "store & wait"): the
  /// harness's death ends the shell only, so cleanup must end the store from the ledger's record.
  bool http_start = false;
  /// w1's command instead of fencecheck-worker ("" = fencecheck-worker): a flow-style argv, e.g. the
  /// Node.js redlock example for lock service redlock, which fencecheck-worker cannot take.
  std::string worker_command;
};

/// Every live process in process group `pgid` (a command worker's own group): /proc/*/stat field 5.
std::vector<pid_t> group_pids(pid_t pgid) {
  std::vector<pid_t> out;
  for (const auto& d : fs::directory_iterator("/proc")) {
    const std::string pid = d.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = fctest::slurp(d.path() / "stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 2));
    std::string state, ppid, pgrp;
    fields >> state >> ppid >> pgrp;
    if (pgrp == std::to_string(pgid) && state != "Z") out.push_back(std::stoi(pid));
  }
  return out;
}

void PrintTo(const KillCase& c, std::ostream* os) { *os << c.name; }

std::string scenario_text(const KillCase& c) {
  return "name: kill9-" + c.name +
         "\n"
         "lease_ttl: 2s\n"
         "timeout: 120s\n" +
         std::string(c.http_start ? "resource: {kind: http, start: [/bin/sh, -c, \"'{bin_dir}/fencecheck-store' --listen "
                         "{host}:{port} --data-dir '{run_dir}/service-data' & wait\"]}\n"
                       : "resource: {kind: store, fencing: per-key}\n") +
         (c.lock_service.empty() ? "" : "lock_service: {kind: " + c.lock_service + "}\n") +
         (c.namespaces ? "network: namespaces\n" : "") +
         "job: {key: ledger, segments: 3, chunks: 4, chunk_bytes: 256, chunk_interval: 100ms}\n"
         "workers:\n" +
         (c.forking_command ? "  - {id: w1, command: [" + std::string(FENCECHECK_SOURCE_DIR) + "/tests/command_worker/worker.sh, forking]}\n"
          : !c.worker_command.empty() ? "  - {id: w1, command: " + c.worker_command + "}\n"
                                      : std::string("  - id: w1\n")) +
         "faults:\n"
         "  - " +
         c.fault +
         "\n"
         "    trigger: {worker: w1, event: write.ok, count: 1}\n"
         "    duration: 60s\n"
         "expect: {outcome: safe}\n";
}

class KillNineDuringFault : public ::testing::TestWithParam<KillCase> {};

TEST_P(KillNineDuringFault, CleanupLeavesNothingBehind) {
  const KillCase& c = GetParam();
  if (c.worker_command.find("redlock-node") != std::string::npos &&
      !fs::exists(fs::path(FENCECHECK_SOURCE_DIR) / "workers/examples/redlock-node/node_modules/redlock"))
    GTEST_SKIP() << "the Node.js redlock example is not installed (scripts/install-deps.sh node)";
  auto work = fctest::fresh_dir("kill9-" + c.name);
  const fs::path file = work / "s.yaml";
  std::ofstream(file) << scenario_text(c);
  const fs::path runs = work / "runs";
  const std::set<std::string> links_before = host_links();
  bp::child harness(FENCECHECK_BIN, bp::args({"run", file.string(), "--run-root", runs.string()}),
                    bp::std_out > (work / "out.txt").string(), bp::std_err > (work / "err.txt").string(),
                    bp::std_in < bp::null);
  fs::path dir;
  std::vector<json> history;
  ASSERT_TRUE(fctest::wait_until([&] {
    if (!fs::exists(runs)) return false;
    dir = fctest::only_run_dir(runs);
    if (dir.empty() || !fs::exists(dir / "history.jsonl")) return false;
    history = fctest::read_history(dir / "history.jsonl");
    return std::any_of(history.begin(), history.end(), [](const json& e) { return e["kind"] == "fault.inject"; });
  })) << "the harness never injected its fault: " << fctest::slurp(work / "err.txt");

  // The fault is active: what it made exists now (so the checks below can fail).
  const auto injects = ledger_injects(dir);
  ASSERT_FALSE(injects.empty());
  std::vector<std::string> cgroups, namespaces;
  std::vector<std::pair<fs::path, fs::path>> worker_dirs;  // a command worker's FENCECHECK_WORKER_DIR, kept
  for (const auto& e : injects) {
    if (e.contains("cgroup_dir")) cgroups.push_back(e["cgroup_dir"]);
    if (e["kind"] == "worker-dir") worker_dirs.emplace_back(e["scratch"].get<std::string>(), e["kept"].get<std::string>());
    if (e.contains("namespaces"))
      for (const auto& ns : e["namespaces"]) namespaces.push_back(ns);
  }
  for (const auto& cg : cgroups) EXPECT_TRUE(fs::exists(cg)) << cg;
  for (const auto& ns : namespaces) EXPECT_EQ(netns_names().count(ns), 1u) << ns;
  for (const auto& [scratch, kept] : worker_dirs) EXPECT_TRUE(fs::is_directory(scratch)) << scratch;
  auto workers = worker_pids(history);
  ASSERT_FALSE(workers.empty());
  if (c.forking_command) {  // the whole tree: sh, its subshells, fencecheck-worker
    ASSERT_EQ(worker_dirs.size(), 1u) << "a command worker's directory is in the ledger";
    EXPECT_EQ(worker_dirs[0].second, dir / "workers" / "w1");
    workers = group_pids(workers.front());
    ASSERT_GE(workers.size(), 3u);
  }

  // The embedded ZooKeeper runs now (its JVM names the run's zookeeper.cfg), so its end below is
  // the harness's death's doing (PR_SET_PDEATHSIG) or cleanup's.
  if (c.lock_service == "zookeeper" && c.fault.find("lock-service-restart") == std::string::npos) {
    EXPECT_FALSE(processes_naming((dir / "zookeeper.cfg").string()).empty()) << "no ZooKeeper server runs";
  }
  // clock-jump: the member's clock offset file holds the jump now (ClockOffsetLayout,
  // fencecheck/faults/clock_offset.h: offset_ns is the int64 at byte 16).
  std::vector<std::string> clock_files;
  for (const auto& e : injects)
    if (e.contains("clock_file")) clock_files.push_back(e["clock_file"]);
  const auto clock_offset_ns = [](const std::string& f) {
    std::int64_t ns = -1;
    std::ifstream in(f, std::ios::binary);
    in.seekg(16);
    in.read(reinterpret_cast<char*>(&ns), sizeof ns);
    return ns;
  };
  for (const auto& f : clock_files) EXPECT_EQ(clock_offset_ns(f), 15'000'000'000LL) << f;
  ASSERT_EQ(::kill(harness.id(), SIGKILL), 0);
  harness.wait();

  // A new run under the same run root names what the dead run left, and gets names of its own.
  const fs::path quick = work / "quick.yaml";
  std::ofstream(quick) << "name: quick\nlease_ttl: 2s\nresource: {kind: store}\njob: {key: k, segments: 1, chunks: 1}\n"
                          "workers: [{id: w1}]\nexpect: {outcome: safe}\n";
  auto next = fctest::run_fencecheck({"run", quick.string(), "--run-root", runs.string()}, work);
  EXPECT_EQ(next.code, 0) << next.out << next.err;
  EXPECT_NE(next.err.find("run " + dir.filename().string() + " left " + std::to_string(injects.size()) +
                          " fault(s) unhealed (its harness is gone): run `fencecheck cleanup " + dir.string() + "`"),
            std::string::npos)
      << next.err;

  auto r = fctest::run_fencecheck({"cleanup", dir.string()}, work);
  EXPECT_EQ(r.code, 0) << r.out << r.err;

  // Nothing is left: every process of the run ends (a frozen or stopped one once cleanup thawed
  // or continued it), and every cgroup, namespace and link it made is gone.
  for (pid_t pid : workers) EXPECT_TRUE(fctest::wait_until([&] { return !alive(pid); }, std::chrono::seconds(20))) << pid;
  EXPECT_TRUE(fctest::wait_until([&] { return processes_naming(dir.string()).empty(); }, std::chrono::seconds(20)))
      << "a process of the run is still alive";
  for (pid_t pid : workers) EXPECT_FALSE(fctest::is_stopped(pid)) << pid;
  for (const auto& cg : cgroups) EXPECT_FALSE(fs::exists(cg)) << cg;
  for (const auto& ns : namespaces) EXPECT_EQ(netns_names().count(ns), 0u) << ns;
  // The worker's directory under /tmp is gone, moved where the run's end would have put it.
  for (const auto& [scratch, kept] : worker_dirs) {
    EXPECT_FALSE(fs::exists(scratch)) << scratch;
    EXPECT_TRUE(fs::is_directory(kept)) << kept;
  }
  for (const auto& f : clock_files) EXPECT_EQ(clock_offset_ns(f), 0) << "cleanup set the member's clock back: " << f;
  for (const auto& link : host_links())
    EXPECT_TRUE(links_before.count(link) || link.rfind("fc", 0) != 0) << "a link was left in the host namespace: " << link;
  // A second cleanup finds nothing more to do.
  auto again = fctest::run_fencecheck({"cleanup", dir.string()}, work);
  EXPECT_NE(again.out.find("0 entries handled"), std::string::npos) << again.out;
}

INSTANTIATE_TEST_SUITE_P(Each, KillNineDuringFault,
                         ::testing::Values(KillCase{"sigstop", "kind: sigstop\n    target: w1", false, false, ""},
                                           KillCase{"cpu_throttle", "kind: cpu-throttle\n    target: w1\n    quota: 1%", false, false, ""},
                                           KillCase{"freeze", "kind: freeze\n    target: w1", false, false, ""},
                                           KillCase{"sigstop_forking_command", "kind: sigstop\n    target: w1", false, true, ""},
                                           KillCase{"sigstop_http_service_started_by_a_shell", "kind: sigstop\n    target: w1",
                                                    false, false, "", true},
                                           KillCase{"partition", "kind: partition\n    target: w1\n    from: full", true, false, ""},
                                           KillCase{"lock_service_restart",
                                                    "kind: lock-service-restart\n    target: lock-service", false, false, ""},
                                           KillCase{"sigstop_zookeeper", "kind: sigstop\n    target: w1", false, false,
                                                    "zookeeper"},
                                           KillCase{"lock_service_restart_zookeeper",
                                                    "kind: lock-service-restart\n    target: lock-service", false, false,
                                                    "zookeeper"},
                                           // A redlock master's wall clock jumped (issue 35): the masters
                                           // and the etcd counter end with the harness, cleanup sets the
                                           // offset back to 0 and ends the Node.js worker's group.
                                           KillCase{"clock_jump_redlock",
                                                    "kind: clock-jump\n    target: {lock_service: {member: 1}}\n    jump: +15s",
                                                    false, false, "redlock", false,
                                                    "[node, " + std::string(FENCECHECK_SOURCE_DIR) +
                                                        "/workers/examples/redlock-node/worker.js, --correct]"},
                                           // Two redlock masters, each in a namespace of its own, cut off
                                           // (issue 35): cleanup deletes the lab, the filters with it, and
                                           // ends the Node.js worker's group.
                                           KillCase{"partition_redlock_minority",
                                                    "kind: partition\n    target: {lock_service: minority}\n    from: full",
                                                    true, false, "redlock", false,
                                                    "[node, " + std::string(FENCECHECK_SOURCE_DIR) +
                                                        "/workers/examples/redlock-node/worker.js, --correct]"}),
                         [](const auto& param_info) { return param_info.param.name; });

}  // namespace

// --- a fault that did not happen proves nothing ----------------------------------------------

namespace {

const char* kNeverFires =
    "name: never-fires\n"
    "lease_ttl: 2s\n"
    "timeout: 30s\n"
    "resource: {kind: store, fencing: per-key}\n"
    "job: {key: ledger, segments: 1, chunks: 2, chunk_interval: 10ms}\n"
    "workers:\n"
    "  - id: w1\n"
    "faults:\n"
    "  - {kind: sigstop, target: w1, trigger: {worker: w1, event: write.ok, count: 50}, duration: 3s}\n"
    "expect: {outcome: safe}\n";

const char* kPartitioned =
    "name: needs-namespaces\n"
    "lease_ttl: 2s\n"
    "timeout: 30s\n"
    "resource: {kind: store, fencing: per-key}\n"
    "network: namespaces\n"
    "job: {key: ledger, segments: 1, chunks: 2, chunk_interval: 10ms}\n"
    "workers:\n"
    "  - id: w1\n"
    "faults:\n"
    "  - {kind: partition, target: w1, trigger: {worker: w1, event: write.ok, count: 1}, duration: 3s, from: full}\n"
    "expect: {outcome: safe}\n";

/// An environment whose PATH has etcd (the lock service) but not iproute2's ip and tc.
bp::environment path_without_iproute2(const fs::path& work) {
  const fs::path bin = work / "bin";
  fs::create_directories(bin);
  const fs::path etcd = bp::search_path("etcd").string();
  if (!etcd.empty()) fs::create_symlink(etcd, bin / "etcd");
  bp::environment env = boost::this_process::environment();  // a copy, not this process's own
  env["PATH"] = bin.string();
  return env;
}

}  // namespace

TEST(FaultAccounting, AFaultWhoseTriggerNeverHappensFailsTheExpectation) {
  auto work = fctest::fresh_dir("never-fires");
  std::ofstream(work / "s.yaml") << kNeverFires;
  auto r = fctest::run_fencecheck({"run", (work / "s.yaml").string(), "--run-root", (work / "runs").string()}, work);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("faults[0] (sigstop on w1) never fired: its trigger did not happen before the run ended"),
            std::string::npos)
      << r.out;
  const json v = read_json(fctest::only_run_dir(work / "runs") / "verdict.json");
  EXPECT_EQ(v["verdict"], "valid") << "the history itself is fine";
  EXPECT_FALSE(v["expectation"]["met"].get<bool>());
  EXPECT_EQ(v["expectation"]["reasons"][0],
            "faults[0] (sigstop on w1) never fired: its trigger did not happen before the run ended");
}

TEST(SkipUnavailable, AMissingPrerequisiteExits3NamingItAndStartsNothing) {
  auto work = fctest::fresh_dir("unavailable");
  std::ofstream(work / "s.yaml") << kPartitioned;
  auto r = fctest::run_fencecheck({"run", (work / "s.yaml").string(), "--run-root", (work / "runs").string()}, work,
                                  path_without_iproute2(work));
  EXPECT_EQ(r.code, 3) << r.out << r.err;
  EXPECT_NE((r.out + r.err).find("network: namespaces needs iproute2's `ip`"), std::string::npos) << r.out << r.err;
  // One listing: begin() and end() of two separate calls' sets (namespaces of tests running
  // alongside come and go) would walk from one set into the other.
  const std::set<std::string> names = netns_names();
  EXPECT_TRUE(std::none_of(names.begin(), names.end(), [](const std::string& n) {
    return n.find("needs-namespaces") != std::string::npos;
  }));
}

TEST(SkipUnavailable, WithTheFlagTheScenarioIsSkippedNeverPassed) {
  auto work = fctest::fresh_dir("skipped");
  std::ofstream(work / "s.yaml") << kPartitioned;
  const fs::path junit = work / "junit.xml";
  auto r = fctest::run_fencecheck({"run", (work / "s.yaml").string(), "--run-root", (work / "runs").string(),
                                   "--skip-unavailable", "--json", "--junit", junit.string()},
                                  work, path_without_iproute2(work));
  EXPECT_EQ(r.code, 0) << "a skipped scenario is not a failure of the suite: " << r.out << r.err;
  const json out = json::parse(r.out);
  const json& s = out.is_array() ? out[0] : out["scenarios"][0];
  EXPECT_TRUE(s["skipped"].get<bool>()) << out.dump();
  EXPECT_FALSE(s["met"].get<bool>()) << "skipped is never passed: " << out.dump();
  const std::string xml = fctest::slurp(junit);
  EXPECT_NE(xml.find("skipped=\"1\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("<skipped message=\"network: namespaces needs iproute2"), std::string::npos) << xml;
}

// A scenario whose story ZooKeeper cannot give (keepalive: inline), moved onto it by
// --lock-service: unavailable there, exit 3 naming the worker and why; with --skip-unavailable
// skipped with that reason. No ZooKeeper server is started for it (the check comes first), so
// this runs on a machine without one too.
TEST(SkipUnavailable, AScenarioTheLockServiceKindCannotGiveIsSkippedWithTheReason) {
  auto work = fctest::fresh_dir("inline-on-zk");
  std::ofstream(work / "s.yaml") << "name: inline-on-zk\nlease_ttl: 2s\nresource: {kind: store}\njob: {key: k}\n"
                                    "workers: [{id: w1, design: {keepalive: inline}}]\nexpect: {outcome: safe}\n";
  const std::string why = "worker w1's keepalive: inline cannot be had with lock service zookeeper: ZooKeeper's C client";
  auto plain = fctest::run_fencecheck({"run", (work / "s.yaml").string(), "--lock-service", "zookeeper", "--run-root",
                                       (work / "runs").string()},
                                      work);
  EXPECT_EQ(plain.code, 3) << plain.out << plain.err;
  EXPECT_NE((plain.out + plain.err).find(why), std::string::npos) << plain.out << plain.err;
  auto skipped = fctest::run_fencecheck({"run", (work / "s.yaml").string(), "--lock-service", "zookeeper",
                                         "--skip-unavailable", "--json", "--run-root", (work / "runs").string()},
                                        work);
  EXPECT_EQ(skipped.code, 0) << skipped.out << skipped.err;
  const json out = json::parse(skipped.out);
  const json& s = out.is_array() ? out[0] : out["scenarios"][0];
  EXPECT_TRUE(s["skipped"].get<bool>()) << out.dump();
  ASSERT_FALSE(s["reasons"].empty()) << out.dump();
  EXPECT_NE(s["reasons"][0].get<std::string>().find(why), std::string::npos) << out.dump();
  // Nothing started: no scenario's run directory. The run root holds only the nights' summaries
  // (night.h: a night that skipped everything is still a night, and says so).
  ASSERT_TRUE(fs::is_directory(work / "runs"));
  for (const auto& e : fs::directory_iterator(work / "runs"))
    EXPECT_FALSE(fs::is_directory(e.path())) << "nothing started, yet there is " << e.path();
  EXPECT_TRUE(fs::exists(work / "runs" / "latest-night.json"));
}

// --- a heal that does not take effect ---------------------------------------------------------

// The cpu-throttle cgroup cannot be removed while it has a child cgroup (rmdir: EBUSY), so its heal
// fails. The harness must not record that heal: the ledger keeps the entry outstanding, the run
// names the fault in its reasons and exits 3, and `fencecheck cleanup` heals it once it can.
TEST(HealFailure, AFaultThatCannotBeHealedStaysOutstandingIsNamedAndExits3) {
  if (::geteuid() != 0) GTEST_SKIP() << "cgroups need root";
  auto work = fctest::fresh_dir("heal-fails");
  const fs::path file = work / "s.yaml";
  std::ofstream(file) << "name: heal-fails\nlease_ttl: 2s\ntimeout: 60s\nresource: {kind: store, fencing: per-key}\n"
                         "job: {key: ledger, segments: 1, chunks: 4, chunk_bytes: 256, chunk_interval: 100ms}\n"
                         "workers:\n  - id: w1\n"
                         "faults:\n  - {kind: cpu-throttle, target: w1, quota: 50%, "
                         "trigger: {worker: w1, event: write.ok, count: 1}, duration: 1s}\n"
                         "expect: {outcome: safe}\n";
  const fs::path runs = work / "runs";
  bp::child harness(FENCECHECK_BIN, bp::args({"run", file.string(), "--run-root", runs.string()}),
                    bp::std_out > (work / "out.txt").string(), bp::std_err > (work / "err.txt").string(),
                    bp::std_in < bp::null);
  fs::path dir, cgroup;
  ASSERT_TRUE(fctest::wait_until([&] {
    if (!fs::exists(runs)) return false;
    dir = fctest::only_run_dir(runs);
    if (dir.empty() || !fs::exists(dir / "history.jsonl")) return false;
    const auto history = fctest::read_history(dir / "history.jsonl");
    if (std::none_of(history.begin(), history.end(), [](const json& e) { return e["kind"] == "fault.inject"; }))
      return false;
    for (const auto& e : ledger_injects(dir))
      if (e["kind"] == "cpu-throttle") cgroup = e["cgroup_dir"].get<std::string>();
    return !cgroup.empty();
  })) << "the harness never injected its fault: " << fctest::slurp(work / "err.txt");
  const fs::path blocker = cgroup / "blocker";
  ASSERT_TRUE(fs::create_directory(blocker)) << blocker;  // a child cgroup: the heal's rmdir fails
  harness.wait();
  const std::string out = fctest::slurp(work / "out.txt"), err = fctest::slurp(work / "err.txt");
  EXPECT_EQ(harness.exit_code(), 3) << out << err;
  EXPECT_NE(out.find("fault not healed, still in effect when the run ended: cpu-throttle on w1: cpu-throttle w1 (pid "),
            std::string::npos)
      << out;
  EXPECT_NE(err.find("fault not healed, still in effect: cpu-throttle on w1: "), std::string::npos) << err;
  EXPECT_NE(err.find("run `fencecheck cleanup " + dir.string() + "`"), std::string::npos) << err;
  const json v = read_json(dir / "verdict.json");
  EXPECT_FALSE(v["expectation"]["met"].get<bool>());
  EXPECT_TRUE(fs::exists(cgroup));

  // The ledger holds the fault outstanding: an inject without a heal.
  std::map<std::int64_t, int> ops;
  std::int64_t throttle_id = 0;
  std::ifstream ledger(dir / "faults.ledger");
  for (std::string line; std::getline(ledger, line);) {
    const json e = json::parse(line);
    if (e["op"] == "inject" && e["kind"] == "cpu-throttle") throttle_id = e["id"];
    ops[e["id"].get<std::int64_t>()] += e["op"] == "heal" ? 1 : 0;
  }
  ASSERT_NE(throttle_id, 0);
  EXPECT_EQ(ops[throttle_id], 0) << fctest::slurp(dir / "faults.ledger");

  // While the cgroup cannot go, cleanup cannot heal it either: it says so and exits 3, and the
  // entry stays outstanding for its next call.
  auto stuck = fctest::run_fencecheck({"cleanup", dir.string()}, work);
  EXPECT_EQ(stuck.code, 3) << stuck.out << stuck.err;
  EXPECT_NE(stuck.out.find("cpu-throttle: heal failed: "), std::string::npos) << stuck.out;
  EXPECT_NE(stuck.out.find(": still outstanding, not healed: "), std::string::npos) << stuck.out;
  EXPECT_NE(stuck.out.find(", 1 of them NOT healed (still in effect or still running; the next cleanup retries)\n"),
            std::string::npos)
      << stuck.out;
  EXPECT_TRUE(fs::exists(cgroup));

  // Cleanup heals it once the cgroup can go, and records that.
  fs::remove(blocker);
  auto r = fctest::run_fencecheck({"cleanup", dir.string()}, work);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("cpu-throttle w1: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("removed cgroup " + cgroup.string()), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(cgroup));
  auto again = fctest::run_fencecheck({"cleanup", dir.string()}, work);
  EXPECT_NE(again.out.find("0 entries handled"), std::string::npos) << again.out;
}

