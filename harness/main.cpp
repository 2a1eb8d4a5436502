// fencecheck — the orchestrator's command line.
//
//   fencecheck run PATH...        run scenarios (files, or suite directories) for real
//   fencecheck validate PATH...   load and validate scenarios only; nothing starts
//   fencecheck cleanup [RUN_DIR]  heal what a killed harness left behind (from fault ledgers)
//
// Exit codes (design.md): 0 every scenario met its expectation; 1 at least one did not; 2 bad
// scenario or arguments; 3 the environment lacks what a scenario needs; 4 internal error.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "fencecheck/faults/ledger.h"
#include "fencecheck/faults/sigstop.h"
#include "fencecheck/harness/orchestrator.h"
#include "fencecheck/harness/scenario.h"

namespace fs = std::filesystem;
using namespace fencecheck::harness;

namespace {

std::atomic<bool> g_interrupted{false};

extern "C" void on_signal(int sig) {
  // Async-signal-safe only: continue every stopped worker now, then let the main loop unwind,
  // heal and stop the rest. A second signal exits at once (after continuing again).
  fencecheck::faults::emergency_continue_all();
  if (g_interrupted.exchange(true)) {
    signal(sig, SIG_DFL);
    raise(sig);
  }
}

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
}

std::vector<Scenario> load_all(const std::vector<std::string>& paths) {
  std::vector<Scenario> all;
  for (const auto& p : paths) {
    auto suite = load_suite(p);
    for (auto& s : suite) all.push_back(std::move(s));
  }
  return all;
}

void print_table(const std::vector<ScenarioResult>& results) {
  std::printf("\n%-36s %-28s %-8s %-5s %8s %8s %9s %8s\n", "scenario", "expectation", "verdict", "met", "rejected",
              "expiries", "max pause", "time");
  for (const auto& r : results) {
    std::printf("%-36s %-28s %-8s %-5s %8lld %8lld %8.2fs %7.1fs\n", r.scenario.c_str(), r.expectation.c_str(),
                r.verdict.c_str(), r.skipped ? "skip" : (r.met ? "yes" : "NO"),
                static_cast<long long>(r.rejected_writes), static_cast<long long>(r.expiries_during_work),
                r.longest_pause_s, r.duration_s);
    for (const auto& a : r.anomalies) std::printf("    anomaly: %s\n", a.c_str());
    for (const auto& why : r.reasons) std::printf("    %s\n", why.c_str());
    if (!r.run_dir.empty()) std::printf("    run directory: %s\n", r.run_dir.c_str());
  }
}

int cmd_cleanup(const std::string& run_dir, const std::string& run_root, bool force) {
  std::vector<fs::path> ledgers;
  if (!run_dir.empty()) {
    ledgers.push_back(fs::path(run_dir) / "faults.ledger");
  } else if (fs::is_directory(run_root)) {
    for (const auto& d : fs::directory_iterator(run_root))
      if (d.is_directory() && !d.is_symlink() && fs::exists(d.path() / "faults.ledger"))
        ledgers.push_back(d.path() / "faults.ledger");
  }
  int healed = 0;
  for (const auto& l : ledgers) {
    if (!fs::exists(l)) {
      std::cerr << "fencecheck cleanup: no fault ledger at " << l << "\n";
      return kExitBadInput;
    }
    for (const auto& line : fencecheck::faults::heal_outstanding(l, force)) {
      std::cout << l.parent_path().filename().string() << ": " << line << "\n";
      ++healed;
    }
  }
  std::cout << "fencecheck cleanup: " << ledgers.size() << " ledger(s) read, " << healed << " entr"
            << (healed == 1 ? "y" : "ies") << " handled\n";
  return kExitMet;
}

}  // namespace

int main(int argc, char** argv) {
  // Logs go to stderr: stdout carries only results (the table, or --json).
  spdlog::set_default_logger(spdlog::stderr_color_mt("fencecheck"));
  CLI::App app{"fencecheck: proves, with real processes, whether fencing keeps a lock's users safe"};
  app.require_subcommand(1);

  std::vector<std::string> run_paths;
  RunOptions opts;
  std::string run_root = "runs";
  std::string bin_dir;
  bool json_out = false;
  auto* run = app.add_subcommand("run", "Run scenarios (YAML files or suite directories) for real");
  run->add_option("paths", run_paths, "Scenario files or directories")->required();
  run->add_option("--run-root", run_root, "Where run directories are created")->capture_default_str();
  run->add_option("--bin-dir", bin_dir, "Where fencecheck-worker and fencecheck-store are (default: beside fencecheck)");
  run->add_flag("--skip-unavailable", opts.skip_unavailable,
                "Skip (never pass) a scenario whose faults this environment cannot inject");
  run->add_flag("--json", json_out, "Print the results as JSON instead of a table");

  std::vector<std::string> validate_paths;
  auto* validate = app.add_subcommand("validate", "Load and validate scenarios; start nothing");
  validate->add_option("paths", validate_paths, "Scenario files or directories")->required();

  std::string cleanup_dir;
  bool force = false;
  auto* cleanup = app.add_subcommand("cleanup", "Heal what a killed harness left behind (from its fault ledgers)");
  cleanup->add_option("run_dir", cleanup_dir, "One run directory (default: every run under --run-root)");
  cleanup->add_option("--run-root", run_root, "Where run directories are")->capture_default_str();
  cleanup->add_flag("--force", force, "Also heal entries whose harness still looks alive");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitBadInput;
  }

  if (*cleanup) return cmd_cleanup(cleanup_dir, run_root, force);

  std::vector<Scenario> scenarios;
  try {
    scenarios = load_all(*run ? run_paths : validate_paths);
  } catch (const ScenarioError& err) {
    std::cerr << err.what() << "\n";
    return kExitBadInput;
  } catch (const std::exception& err) {
    std::cerr << "fencecheck: " << err.what() << "\n";
    return kExitBadInput;
  }
  if (*validate) {
    for (const auto& s : scenarios) std::cout << s.source() << ": ok (" << s.name() << ")\n";
    return kExitMet;
  }

  install_signal_handlers();
  opts.run_root = run_root;
  opts.bin_dir = bin_dir;
  opts.interrupted = &g_interrupted;
  std::vector<ScenarioResult> results;
  for (std::size_t i = 0; i < scenarios.size(); ++i) {
    if (g_interrupted) break;
    spdlog::info("[{}/{}] {}: {}", i + 1, scenarios.size(), scenarios[i].name(), scenarios[i].description());
    results.push_back(run_scenario(scenarios[i], opts));
  }
  if (json_out) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : results) j.push_back(r.to_json());
    std::cout << j.dump(2) << "\n";
  } else {
    print_table(results);
  }
  if (g_interrupted) return 130;
  return suite_exit_code(results);
}
