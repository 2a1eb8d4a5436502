// Test helpers: run the real fencecheck binary, capture its output, read run directories.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/process.hpp>
#include <nlohmann/json.hpp>

#include "../support/remove_at_end.h"

namespace fctest {

namespace fs = std::filesystem;
namespace bp = boost::process;

/// A fresh, empty directory $TMPDIR/fc-it-<pid>-<name> for one test's runs; removed when the
/// test program ends unless a test failed (tests/support/remove_at_end.h).
inline fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("fc-it-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return fencecheck::testing::remove_at_end(d);
}

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

/// Runs fencecheck with args to completion, stdout/stderr captured through files (work/stdout.txt,
/// work/stderr.txt, fresh for each call).
inline Result run_fencecheck(const std::vector<std::string>& args, const fs::path& work,
                             bp::environment env = boost::this_process::environment()) {
  const fs::path out = work / "stdout.txt", err = work / "stderr.txt";
  fs::remove(out);  // boost.process opens an existing file without truncating it: a second call's
  fs::remove(err);  // shorter output would end with the first call's tail
  bp::child c(FENCECHECK_BIN, bp::args(args), bp::std_out > out.string(), bp::std_err > err.string(),
              bp::std_in < bp::null, env, bp::start_dir = work.string());
  c.wait();
  return {c.exit_code(), slurp(out), slurp(err)};
}

/// Polls cond every 10 ms until it holds or `limit` passes: waiting on an observable event.
inline bool wait_until(const std::function<bool()>& cond, std::chrono::seconds limit = std::chrono::seconds(60)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cond();
}

/// `fencecheck run <scenario> --run-root <runs>` started in the background (output in work/out.txt
/// and work/err.txt), for a test that kills it mid-run.
inline bp::child start_run(const fs::path& scenario, const fs::path& runs, const fs::path& work) {
  return bp::child(FENCECHECK_BIN, bp::args({"run", scenario.string(), "--run-root", runs.string()}),
                   bp::std_out > (work / "out.txt").string(), bp::std_err > (work / "err.txt").string(),
                   bp::std_in < bp::null);
}

/// Every event of a history.jsonl.
inline std::vector<nlohmann::json> read_history(const fs::path& file) {
  std::vector<nlohmann::json> out;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

/// The only run directory below root (not the `latest` link).
inline fs::path only_run_dir(const fs::path& root) {
  fs::path found;
  for (const auto& d : fs::directory_iterator(root))
    if (d.is_directory() && !d.is_symlink()) found = d.path();
  return found;
}

/// Waits (bounded: 60 s) until the only run below `runs` has an event of `kind` in its history;
/// sets *dir to that run's directory. False when none came.
inline bool wait_for_run_event(const fs::path& runs, const std::string& kind, fs::path* dir) {
  return wait_until([&] {
    if (!fs::exists(runs)) return false;
    *dir = only_run_dir(runs);
    if (dir->empty() || !fs::exists(*dir / "history.jsonl")) return false;
    for (const auto& e : read_history(*dir / "history.jsonl"))
      if (e.value("kind", "") == kind) return true;
    return false;
  });
}

/// True when process `pid` exists and is in state T (stopped). Tests ask about their own run's
/// processes only: other tests running at the same time (ctest -j) stop workers of their own.
inline bool is_stopped(pid_t pid) {
  std::string stat = slurp(fs::path("/proc") / std::to_string(pid) / "stat");
  auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'T';
}

/// fencecheck-store (`bin`) on 127.0.0.1:0, as the harness starts it, standing for a user's HTTP
/// service; stopped (SIGTERM) on destruction.
class StoreProcess {
 public:
  StoreProcess(const fs::path& bin, const fs::path& data, const std::string& fencing) {
    child_ = bp::child(bin.string(), bp::args({"--listen", "127.0.0.1:0", "--data-dir", data.string(), "--fencing", fencing}),
                       bp::std_out > out_, bp::std_err > bp::null, bp::std_in < bp::null);
    std::string line;
    if (std::getline(out_, line)) {  // its first line announces the address: the event we wait for
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_object() && j.contains("listening")) url_ = "http://" + j["listening"].get<std::string>();
    }
  }
  ~StoreProcess() {
    if (child_.running()) ::kill(child_.id(), SIGTERM);
    child_.wait();
  }
  const std::string& url() const { return url_; }

 private:
  bp::ipstream out_;
  bp::child child_;
  std::string url_;
};

}  // namespace fctest
