// The harness's own behaviour at its edges, for real: exit codes for bad input and a missing
// environment, Ctrl-C in the middle of a SIGSTOP, and kill -9 followed by `fencecheck cleanup`.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <regex>

#include "../support/busy_port.h"
#include "run_util.h"

using nlohmann::json;
namespace fs = std::filesystem;
namespace bp = boost::process;

namespace {

const std::string kSmoke = std::string(FENCECHECK_SOURCE_DIR) + "/scenarios/smoke/sigstop-past-lease.yaml";
const std::string kSmokeDir = std::string(FENCECHECK_SOURCE_DIR) + "/scenarios/smoke";

fs::path write_file(const fs::path& dir, const std::string& name, const std::string& text) {
  fs::path p = dir / name;
  std::ofstream(p) << text;
  return p;
}

/// The scenario text of the fenced smoke scenario with one line replaced.
std::string smoke_with(const std::string& from, const std::string& to) {
  std::string text = fctest::slurp(kSmoke);
  auto pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return text.replace(pos, from.size(), to);
}

pid_t worker_pid(const std::vector<json>& history, const std::string& id) {
  std::regex re("started worker " + id + " \\(pid ([0-9]+)\\)");
  for (const auto& e : history) {
    std::smatch m;
    std::string detail = e.value("detail", "");
    if (e["kind"] == "log" && std::regex_search(detail, m, re)) return std::stoi(m[1]);
  }
  return -1;
}

bool alive(pid_t pid) { return pid > 0 && ::kill(pid, 0) == 0; }

/// Starts `fencecheck run` on the smoke scenario and waits until w1 is stopped by the harness.
struct PausedRun {
  fs::path work, runs, dir;
  std::unique_ptr<bp::child> harness;
  pid_t w1 = -1;
  std::string out_file;

  explicit PausedRun(const std::string& name) : work(fctest::fresh_dir(name)), runs(work / "runs") {
    out_file = (work / "out.txt").string();
    harness = std::make_unique<bp::child>(FENCECHECK_BIN, bp::args({"run", kSmoke, "--run-root", runs.string()}),
                                          bp::std_out > out_file, bp::std_err > (work / "err.txt").string(),
                                          bp::std_in < bp::null);
    EXPECT_TRUE(fctest::wait_until([&] {
      if (!fs::exists(runs)) return false;
      dir = fctest::only_run_dir(runs);
      if (dir.empty() || !fs::exists(dir / "history.jsonl")) return false;
      auto h = fctest::read_history(dir / "history.jsonl");
      for (const auto& e : h)
        if (e["kind"] == "fault.inject") {
          w1 = worker_pid(h, "w1");
          return true;
        }
      return false;
    })) << "the harness never injected its SIGSTOP";
    EXPECT_GT(w1, 0);
    EXPECT_TRUE(fctest::wait_until([&] { return fctest::is_stopped(w1); }));
  }
};

}  // namespace

TEST(HarnessExit, ABadScenarioExits2NamingFileLineAndColumn) {
  auto work = fctest::fresh_dir("bad");
  auto file = write_file(work, "bad.yaml", smoke_with("lease_ttl: 2s", "lease_ttl: fast"));
  auto r = fctest::run_fencecheck({"run", file.string(), "--run-root", (work / "runs").string()}, work);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(file.string() + ":14:12: lease_ttl: expected a duration"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(work / "runs")) << "a bad scenario must not start anything";
}

TEST(HarnessExit, UnknownSubcommandOrMissingPathExits2) {
  auto work = fctest::fresh_dir("args");
  auto r = fctest::run_fencecheck({"frobnicate", "scenarios/smoke"}, work);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            "fencecheck: unknown subcommand 'frobnicate'; expected one of: run, validate, cleanup, report, probe "
            "(fencecheck --help)\n");
  r = fctest::run_fencecheck({"run", (work / "nope.yaml").string()}, work);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("nope.yaml"), std::string::npos) << r.err;
}

TEST(HarnessExit, VersionPrintsTheProjectVersion) {
  auto work = fctest::fresh_dir("version");
  auto r = fctest::run_fencecheck({"--version"}, work);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, std::string("fencecheck ") + FENCECHECK_VERSION + "\n");  // CMake's project(VERSION)
}

// A bin directory without the programs the suite needs was exit 4 "internal error" after the run
// had begun (its run directory made, etcd started); now exit 2 before anything, naming what is missing.
TEST(HarnessExit, ABadBinDirExits2NamingThePathAndWhatIsMissing) {
  auto work = fctest::fresh_dir("bad-bin-dir");
  const fs::path runs = work / "runs";
  const fs::path nowhere = work / "no-such-bin";
  auto r = fctest::run_fencecheck({"run", kSmoke, "--run-root", runs.string(), "--bin-dir", nowhere.string()}, work);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_EQ(r.err, "fencecheck: --bin-dir " + nowhere.string() + ": no such directory\n");

  const fs::path empty = work / "empty-bin";
  fs::create_directories(empty);
  r = fctest::run_fencecheck({"run", kSmoke, "--run-root", runs.string(), "--bin-dir", empty.string()}, work);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_EQ(r.err, "fencecheck: --bin-dir " + empty.string() +
                       ": missing fencecheck-worker [needed by scenarios with a reference worker], fencecheck-store "
                       "[needed by scenarios whose resource kind is store]\n");

  // The worker is there; the store is a file that cannot run.
  const fs::path half = work / "half-bin";
  fs::create_directories(half);
  fs::create_symlink(fs::path(FENCECHECK_BIN).parent_path() / "fencecheck-worker", half / "fencecheck-worker");
  std::ofstream(half / "fencecheck-store") << "not a program";
  r = fctest::run_fencecheck({"run", kSmoke, "--run-root", runs.string(), "--bin-dir", half.string()}, work);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_EQ(r.err, "fencecheck: --bin-dir " + half.string() +
                       ": missing fencecheck-store (not executable) [needed by scenarios whose resource kind is store]\n");
  EXPECT_FALSE(fs::exists(runs)) << "nothing may start";
}

TEST(HarnessExit, AnUnwritableRunRootExits2NamingIt) {
  auto work = fctest::fresh_dir("bad-run-root");
  const fs::path file = work / "a-file";
  std::ofstream(file) << "x";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {(file / "runs").string(), file.string() + " is not a directory"},
      {file.string(), file.string() + " is not a directory"},
      // /proc takes no new directory, even from root.
      {"/proc/fencecheck-runs", "cannot create a directory in /proc (No such file or directory)"},
  };
  for (const auto& [root, why] : cases) {
    auto r = fctest::run_fencecheck({"run", kSmoke, "--run-root", root}, work);
    EXPECT_EQ(r.code, 2) << r.out << r.err;
    EXPECT_EQ(r.err, "fencecheck: --run-root " + root + ": " + why + "\n");
    EXPECT_EQ(r.out, "");
  }
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(work)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"a-file", "stderr.txt", "stdout.txt"})) << "no probe left behind";
}

// `--junit` into a missing directory was a silent `mkdir -p` (as root, a typo became a tree).
TEST(HarnessExit, AJUnitFileInADirectoryThatDoesNotExistExits2AndCreatesNothing) {
  auto work = fctest::fresh_dir("junit-nodir");
  const fs::path junit = work / "no-such-dir" / "sub" / "nightly.xml";
  auto r = fctest::run_fencecheck({"run", kSmoke, "--run-root", (work / "runs").string(), "--junit", junit.string()}, work);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_EQ(r.err, "fencecheck: --junit " + junit.string() + ": its directory " + junit.parent_path().string() +
                       " does not exist (fencecheck does not create it)\n");
  EXPECT_FALSE(fs::exists(work / "no-such-dir"));
  EXPECT_FALSE(fs::exists(work / "runs")) << "nothing may start";
}

// prometheus-cpp said only "null context when constructing CivetServer".
TEST(HarnessExit, AMetricsAddressInUseExits3NamingIt) {
  auto work = fctest::fresh_dir("metrics-in-use");
  std::optional<fencecheck::testing::BusyPort> busy(std::in_place);
  const std::string address = busy->address();
  auto r = fctest::run_fencecheck({"run", kSmoke, "--run-root", (work / "runs").string(), "--metrics-listen", address}, work);
  busy.reset();
  EXPECT_EQ(r.code, 3) << r.out << r.err;
  EXPECT_EQ(r.err, "fencecheck: --metrics-listen " + address +
                       " is already in use (another process listens there): choose another port, or port 0 for any "
                       "free one\n");
  EXPECT_FALSE(fs::exists(work / "runs")) << "nothing may start";
}

TEST(HarnessExit, AJUnitPathNothingCanBeWrittenToExits2BeforeAnythingStarts) {
  auto work = fctest::fresh_dir("junit");
  fs::create_directories(work / "a-directory.xml");
  // /proc takes no new file, even from root (access(2) would say it is writable).
  for (const std::string& bad : {std::string("/proc/fencecheck-junit.xml"), (work / "a-directory.xml").string()}) {
    auto r = fctest::run_fencecheck({"run", kSmoke, "--run-root", (work / "runs").string(), "--junit", bad}, work);
    EXPECT_EQ(r.code, 2) << r.out << r.err;
    EXPECT_NE(r.err.find("--junit " + bad + ": cannot write a file there"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(work / "runs")) << "nothing may start";
  }
}

TEST(HarnessExit, EtcdNotInstalledExits3SayingWhatToInstall) {
  auto work = fctest::fresh_dir("noetcd");
  fs::create_directories(work / "emptybin");
  // A copy (bp::environment): `auto` would be the native environment, and setting PATH in it
  // would change this test program's own PATH for every later test in the same process.
  bp::environment env = boost::this_process::environment();
  env["PATH"] = (work / "emptybin").string();
  auto r = fctest::run_fencecheck({"run", kSmoke, "--run-root", (work / "runs").string()}, work, env);
  EXPECT_EQ(r.code, 3) << r.out << r.err;
  EXPECT_NE((r.out + r.err).find("install Debian's etcd-server"), std::string::npos) << r.out << r.err;
}

TEST(HarnessExit, AnUnreachableEndpointExits3NamingIt) {
  auto work = fctest::fresh_dir("noendpoint");
  auto file = write_file(work, "ext.yaml",
                         smoke_with("lock_service: {kind: etcd}", "lock_service: {kind: etcd, endpoints: [http://127.0.0.1:9]}"));
  auto r = fctest::run_fencecheck({"run", file.string(), "--run-root", (work / "runs").string()}, work);
  EXPECT_EQ(r.code, 3) << r.out << r.err;
  EXPECT_NE((r.out + r.err).find("http://127.0.0.1:9"), std::string::npos) << r.out << r.err;
}

TEST(HarnessExit, LockServiceOverrideAppliesToASuiteOrExits2SayingWhy) {
  auto work = fctest::fresh_dir("lockservice");
  // Every smoke scenario runs on the embedded lock service with no field of its own kind.
  auto r = fctest::run_fencecheck({"validate", "--lock-service", "etcd", kSmokeDir}, work);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find(": ok ("), std::string::npos) << r.out;
  r = fctest::run_fencecheck({"run", "--lock-service", "consul", kSmoke, "--run-root", (work / "runs").string()}, work);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("--lock-service consul cannot apply to scenario"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("unknown lock service kind \"consul\"; expected one of: etcd, zookeeper, redis, redlock, none\n"),
            std::string::npos)
      << r.err;
  auto file = write_file(work, "ext.yaml",
                         smoke_with("lock_service: {kind: etcd}", "lock_service: {kind: etcd, endpoints: [http://127.0.0.1:9]}"));
  r = fctest::run_fencecheck({"run", "--lock-service", "etcd", file.string(), "--run-root", (work / "runs").string()}, work);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(file.string() + ": --lock-service etcd cannot apply to scenario"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("it names lock_service.endpoints"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(work / "runs")) << "nothing may start";
}

// A night is one invocation of `fencecheck run`: its summary lists every scenario, latest-failed
// points at the one that failed, and --keep-nights removes a night's run directories together.
// Two quick scenarios (one chunk, no fault): one meets `safe`, one cannot show the anomaly it expects.
TEST(Night, TheSummaryAndLatestFailedPointAtTheFailureAndKeepNightsRemovesWholeNights) {
  auto work = fctest::fresh_dir("night");
  const fs::path runs = work / "runs";
  const std::string common = "lease_ttl: 2s\ntimeout: 30s\nresource: {kind: store}\njob: {key: k, segments: 1, chunks: 1}\n"
                             "workers: [{id: w1}]\n";
  const fs::path met = write_file(work, "met.yaml", "name: night-met\n" + common + "expect: {outcome: safe}\n");
  const fs::path unmet = write_file(work, "unmet.yaml", "name: night-unmet\n" + common +
                                                            "expect: {outcome: anomaly, anomalies: [interleaved-segment]}\n");
  // --junit into the run root, which does not exist yet: fencecheck makes the run root (CI's usage).
  auto r = fctest::run_fencecheck({"run", met.string(), unmet.string(), "--run-root", runs.string(), "--junit",
                                   (runs / "junit.xml").string()},
                                  work);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_TRUE(fs::exists(runs / "junit.xml"));
  ASSERT_TRUE(fs::is_symlink(runs / "latest-night.json")) << r.out << r.err;
  const fs::path summary1 = runs / fs::read_symlink(runs / "latest-night.json");
  const json s1 = json::parse(fctest::slurp(summary1));
  const std::string night1 = s1["night"];
  EXPECT_EQ(summary1.filename(), "night-" + night1 + ".json");
  EXPECT_EQ(s1["exit_code"], 1);
  EXPECT_EQ(s1["scenarios"], 2);
  EXPECT_EQ(s1["met"], 1);
  EXPECT_EQ(s1["failed"], json::array({"night-unmet"}));
  ASSERT_EQ(s1["runs"].size(), 2u);
  EXPECT_EQ(s1["runs"][0]["scenario"], "night-met");
  EXPECT_EQ(s1["runs"][0]["verdict"], "valid");
  EXPECT_EQ(s1["runs"][0]["met"], true);
  EXPECT_EQ(s1["runs"][0]["exit_code"], 0);
  EXPECT_EQ(s1["runs"][1]["scenario"], "night-unmet");
  EXPECT_EQ(s1["runs"][1]["verdict"], "valid");
  EXPECT_EQ(s1["runs"][1]["met"], false);
  EXPECT_EQ(s1["runs"][1]["exit_code"], 1);
  const fs::path met_dir = s1["runs"][0]["run_dir"].get<std::string>();
  const fs::path unmet_dir = s1["runs"][1]["run_dir"].get<std::string>();
  EXPECT_EQ(met_dir.parent_path(), runs);
  for (const auto& d : {met_dir, unmet_dir}) EXPECT_EQ(fctest::slurp(d / "night"), night1 + "\n") << d;
  // `latest` is the newest run; latest-failed is the night's failure, whatever ran after it.
  EXPECT_EQ(fs::read_symlink(runs / "latest-failed"), unmet_dir.filename());
  EXPECT_NE(r.out.find("night " + night1 + ": 1 of 2 met their expectation\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  FAILED night-unmet (exit 1): " + (unmet_dir / "report.html").string() + "\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find((runs / "latest-failed").string() + " -> " + unmet_dir.filename().string()), std::string::npos)
      << r.out;

  // The next night passes, keeping 1 night: night 1 goes whole (both runs and its summary), and
  // latest-failed goes with the failure it pointed at.
  r = fctest::run_fencecheck({"run", met.string(), "--run-root", runs.string(), "--keep-nights", "1"}, work);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_FALSE(fs::exists(met_dir));
  EXPECT_FALSE(fs::exists(unmet_dir));
  EXPECT_FALSE(fs::exists(summary1));
  EXPECT_FALSE(fs::exists(fs::symlink_status(runs / "latest-failed")));
  const json s2 = json::parse(fctest::slurp(runs / "latest-night.json"));
  EXPECT_NE(s2["night"], night1);
  EXPECT_EQ(s2["exit_code"], 0);
  const fs::path only = fctest::only_run_dir(runs);
  EXPECT_EQ(only.string(), s2["runs"][0]["run_dir"].get<std::string>());
  EXPECT_NE(r.out.find("night " + s2["night"].get<std::string>() + ": 1 of 1 met their expectation\n"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << r.out;
}

TEST(HarnessExit, CtrlCDuringTheSigstopContinuesTheWorkerAndExits130) {
  PausedRun run("sigint");
  ASSERT_FALSE(run.dir.empty());
  ASSERT_EQ(::kill(run.harness->id(), SIGINT), 0);
  run.harness->wait();
  EXPECT_EQ(run.harness->exit_code(), 130);
  // The fault was healed and recorded as healed, in the history and in the ledger.
  auto h = fctest::read_history(run.dir / "history.jsonl");
  EXPECT_TRUE(std::any_of(h.begin(), h.end(), [](const json& e) { return e["kind"] == "fault.heal"; }));
  std::ifstream ledger(run.dir / "faults.ledger");
  int injects = 0, heals = 0;
  for (std::string line; std::getline(ledger, line);) {
    auto e = json::parse(line);
    injects += e["op"] == "inject";
    heals += e["op"] == "heal";
  }
  EXPECT_EQ(injects, 1);
  EXPECT_EQ(heals, 1);
  EXPECT_FALSE(fctest::is_stopped(run.w1));
  EXPECT_TRUE(fctest::wait_until([&] { return !alive(run.w1); }, std::chrono::seconds(10)));
}

TEST(HarnessExit, KillMinus9ThenCleanupLeavesNothingBehind) {
  PausedRun run("kill9");
  ASSERT_FALSE(run.dir.empty());
  ASSERT_EQ(::kill(run.harness->id(), SIGKILL), 0);
  run.harness->wait();
  // Children die with the harness (PR_SET_PDEATHSIG): no stopped worker, no etcd, no store.
  EXPECT_TRUE(fctest::wait_until([&] { return !alive(run.w1); }, std::chrono::seconds(10)));
  EXPECT_FALSE(fctest::is_stopped(run.w1));
  // The ledger still has the SIGSTOP outstanding; cleanup heals (here: finds it gone) and records it.
  auto r = fctest::run_fencecheck({"cleanup", run.dir.string()}, run.work);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("sigstop w1: pid " + std::to_string(run.w1) + " already gone"), std::string::npos) << r.out;
  auto again = fctest::run_fencecheck({"cleanup", run.dir.string()}, run.work);
  EXPECT_NE(again.out.find("0 entries handled"), std::string::npos) << again.out;
}

// An entry cleanup cannot heal (here: a kind no healer knows, as a damaged or newer ledger would
// hold) is not "handled": cleanup lists it as still outstanding and exits 3, on every call, until
// it is healed; a ledger with nothing left exits 0.
TEST(HarnessExit, CleanupExits3WhileAnEntryStaysOutstanding) {
  auto work = fctest::fresh_dir("cleanup-outstanding");
  const fs::path dir = work / "runs" / "r1";
  fs::create_directories(dir);
  std::ofstream(dir / "faults.ledger") << R"({"op":"inject","id":1,"kind":"no-such-kind","run_id":"r1","harness_pid":1,"harness_start_ticks":1})"
                                       << "\n";
  for (int call = 0; call < 2; ++call) {
    auto r = fctest::run_fencecheck({"cleanup", dir.string()}, work);
    EXPECT_EQ(r.code, 3) << r.out << r.err;
    EXPECT_NE(r.out.find("r1: unknown fault kind 'no-such-kind' in " + (dir / "faults.ledger").string() + "; cannot heal it\n"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("r1: still outstanding, not healed: "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("fencecheck cleanup: 1 ledger(s) read, 1 entry handled, 1 of them NOT healed (still in effect or still running; "
                        "the next cleanup retries)\n"),
              std::string::npos)
        << r.out;
  }
  std::ofstream(dir / "faults.ledger", std::ios::app) << R"({"op":"heal","id":1})" << "\n";
  auto r = fctest::run_fencecheck({"cleanup", dir.string()}, work);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "fencecheck cleanup: 1 ledger(s) read, 0 entries handled\n");
}

// A run root cleanup cannot read threw a std::filesystem::filesystem_error out of main (abort,
// exit 134); now it is bad input: exit 2 naming the path and the cause, before anything is healed.
TEST(HarnessExit, CleanupOnAnUnreadableRunRootExits2NamingItAndWhy) {
  auto work = fctest::fresh_dir("cleanup-unreadable");
  // A symlink loop: even root cannot resolve it (ELOOP).
  const fs::path loop = work / "loop";
  fs::create_symlink("loop", loop);
  auto r = fctest::run_fencecheck({"cleanup", "--run-root", loop.string()}, work);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_EQ(r.err, "fencecheck cleanup: cannot read " + loop.string() + ": Too many levels of symbolic links\n");
  EXPECT_EQ(r.out, "");

  // A run root its user may not list: root's 0700 directory, cleanup run as nobody.
  if (::geteuid() != 0) GTEST_SKIP() << "the permission case needs root (it runs cleanup as nobody)";
  const fs::path runs = work / "runs";
  fs::create_directories(runs / "r1");
  fs::permissions(runs, fs::perms::owner_all);
  // Files of their own: boost.process opens an existing file without truncating it.
  const fs::path out = work / "nobody-stdout.txt", err = work / "nobody-stderr.txt";
  bp::child c(bp::search_path("setpriv"), "--reuid=65534", "--regid=65534", "--clear-groups", FENCECHECK_BIN, "cleanup",
              "--run-root", runs.string(), bp::std_out > out.string(), bp::std_err > err.string(), bp::std_in < bp::null,
              bp::start_dir = work.string());
  c.wait();
  EXPECT_EQ(c.exit_code(), 2) << fctest::slurp(out) << fctest::slurp(err);
  EXPECT_EQ(fctest::slurp(err), "fencecheck cleanup: cannot read " + runs.string() + ": Permission denied\n");
}

TEST(HarnessExit, AWorkerThatFailsMakesTheRunNotMetNamingIt) {
  // A fake fencecheck-worker that exits 2 at once (as on bad arguments), beside the real store.
  auto work = fctest::fresh_dir("failing-worker");
  const fs::path bin = work / "bin";
  fs::create_directories(bin);
  std::ofstream(bin / "fencecheck-worker") << "#!/bin/sh\necho 'fencecheck-worker: broken on purpose' >&2\nexit 2\n";
  fs::permissions(bin / "fencecheck-worker", fs::perms::owner_all);
  fs::create_symlink(fs::path(FENCECHECK_BIN).parent_path() / "fencecheck-store", bin / "fencecheck-store");
  const fs::path file = write_file(work, "s.yaml",
                                   "name: failing-worker\nlease_ttl: 2s\ntimeout: 30s\nresource: {kind: store}\n"
                                   "job: {key: k, segments: 1, chunks: 1}\nworkers: [{id: w1}]\nexpect: {outcome: safe}\n");
  auto r = fctest::run_fencecheck(
      {"run", file.string(), "--run-root", (work / "runs").string(), "--bin-dir", bin.string()}, work);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("worker w1 failed: exit 2; see logs/w1.log"), std::string::npos) << r.out;
  const json v = json::parse(fctest::slurp(fctest::only_run_dir(work / "runs") / "verdict.json"));
  EXPECT_FALSE(v["expectation"]["met"].get<bool>());
}

TEST(HarnessExit, AStalledStoreEndsTheRunNotMetSayingTheResourceDidNotAnswer) {
  auto work = fctest::fresh_dir("stalled-store");
  const fs::path file = write_file(work, "s.yaml",
                                   "name: stalled-store\nlease_ttl: 2s\ntimeout: 4s\nresource: {kind: store}\n"
                                   "job: {key: k, segments: 1, chunks: 200, chunk_interval: 50ms}\n"
                                   "workers: [{id: w1}]\nexpect: {outcome: safe}\n");
  const fs::path runs = work / "runs";
  bp::child harness(FENCECHECK_BIN, bp::args({"run", file.string(), "--run-root", runs.string()}),
                    bp::std_out > (work / "out.txt").string(), bp::std_err > (work / "err.txt").string(),
                    bp::std_in < bp::null);
  fs::path dir;
  ASSERT_TRUE(fctest::wait_until([&] {
    if (!fs::exists(runs)) return false;
    dir = fctest::only_run_dir(runs);
    if (dir.empty() || !fs::exists(dir / "history.jsonl")) return false;
    auto h = fctest::read_history(dir / "history.jsonl");
    return std::any_of(h.begin(), h.end(), [](const json& e) { return e["kind"] == "write.ok"; });
  }));
  // Stop the run's store (its command line names its data directory inside the run directory).
  pid_t store = -1;
  for (const auto& d : fs::directory_iterator("/proc")) {
    const std::string name = d.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmd = fctest::slurp(d.path() / "cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.find("fencecheck-store") != std::string::npos && cmd.find(dir.string()) != std::string::npos)
      store = std::stoi(name);
  }
  ASSERT_GT(store, 0);
  ASSERT_EQ(::kill(store, SIGSTOP), 0);
  harness.wait();
  ::kill(store, SIGCONT);  // if it outlived the harness (it should not: PDEATHSIG)
  EXPECT_EQ(harness.exit_code(), 1);
  const std::string out = fctest::slurp(work / "out.txt");
  EXPECT_NE(out.find("the run hit its timeout of 4s"), std::string::npos) << out;
  EXPECT_NE(out.find("the resource did not answer its read-back, so nothing could be checked"), std::string::npos)
      << out;
  EXPECT_NE(out.find("unknown"), std::string::npos) << out;
}
