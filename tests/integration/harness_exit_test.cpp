// The harness's own behaviour at its edges, for real: exit codes for bad input and a missing
// environment, Ctrl-C in the middle of a SIGSTOP, and kill -9 followed by `fencecheck cleanup`.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <fstream>
#include <regex>

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
  EXPECT_EQ(fctest::run_fencecheck({"frobnicate"}, work).code, 2);
  auto r = fctest::run_fencecheck({"run", (work / "nope.yaml").string()}, work);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("nope.yaml"), std::string::npos) << r.err;
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
  EXPECT_NE(r.err.find("unknown lock service kind \"consul\"; expected one of: etcd"), std::string::npos) << r.err;
  auto file = write_file(work, "ext.yaml",
                         smoke_with("lock_service: {kind: etcd}", "lock_service: {kind: etcd, endpoints: [http://127.0.0.1:9]}"));
  r = fctest::run_fencecheck({"run", "--lock-service", "etcd", file.string(), "--run-root", (work / "runs").string()}, work);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(file.string() + ": --lock-service etcd cannot apply to scenario"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("it names lock_service.endpoints"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(work / "runs")) << "nothing may start";
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
