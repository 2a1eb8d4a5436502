// fencecheck — the orchestrator's command line.
//
//   fencecheck run PATH...        run scenarios (files, or suite directories) for real
//   fencecheck validate PATH...   load and validate scenarios only; nothing starts
//   fencecheck cleanup [RUN_DIR]  heal what a killed harness left behind (from fault ledgers)
//   fencecheck report RUN_DIR...  judge stored runs again; rewrite verdict.json, junit.xml, report.html
//   fencecheck probe FILE         does this resource keep the fencing rule? (docs/probe.md)
//
// run and validate take --lock-service KIND: every scenario against that lock-service kind
// (with_lock_service_kind, scenario.h), so one suite runs against each lock service.
//
// Exit codes (docs/architecture.md, "Exit codes"): 0 every scenario met its expectation; 1 at least one did not; 2 bad
// scenario or arguments; 3 the environment lacks what a scenario needs; 4 internal error.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "fencecheck/locks/lock_service_kind.h"
#include "fencecheck/resources/resource_kind.h"

#include "fencecheck/faults/ledger.h"
#include "fencecheck/faults/sweep.h"
#include "fencecheck/process/child_process.h"
#include "fencecheck/harness/fault_plan.h"
#include "fencecheck/faults/sigstop.h"
#include "fencecheck/harness/live_metrics.h"
#include "fencecheck/harness/night.h"
#include "fencecheck/harness/orchestrator.h"
#include "fencecheck/harness/preflight.h"
#include "fencecheck/harness/probe.h"
#include "fencecheck/harness/progress.h"
#include "fencecheck/harness/run_dir.h"
#include "fencecheck/harness/report.h"
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
    for (auto& s : suite) {
      check_worker_commands(s);  // a command worker's program that cannot run: exit 2 before anything starts
      all.push_back(std::move(s));
    }
  }
  return all;
}

/// The ledgers of every run directory under run_root (none when it does not exist). A run root
/// or run directory that cannot be read (permissions, a symlink loop) is bad input: nullopt, and
/// the path and the cause on stderr, before anything is healed.
std::optional<std::vector<fs::path>> run_root_ledgers(const fs::path& run_root) {
  std::vector<fs::path> ledgers;
  const auto cannot = [](const fs::path& p, const std::error_code& ec) {
    std::cerr << "fencecheck cleanup: cannot read " << p.string() << ": " << ec.message() << "\n";
    return std::nullopt;
  };
  std::error_code ec;
  const bool is_dir = fs::is_directory(run_root, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) return cannot(run_root, ec);
  if (!is_dir) return ledgers;
  fs::directory_iterator it(run_root, ec);
  for (const fs::directory_iterator end{}; !ec && it != end; it.increment(ec)) {
    const fs::path ledger = it->path() / "faults.ledger";
    const bool dir = !it->is_symlink(ec) && !ec && it->is_directory(ec);
    if (ec == std::errc::no_such_file_or_directory) {  // removed since it was listed
      ec.clear();
      continue;
    }
    if (ec) return cannot(it->path(), ec);
    if (!dir) continue;
    const bool has = fs::exists(ledger, ec);  // false without an error when there is none
    if (ec) return cannot(ledger, ec);
    if (has) ledgers.push_back(ledger);
  }
  if (ec) return cannot(run_root, ec);
  return ledgers;
}

int cmd_cleanup(const std::string& run_dir, const std::string& run_root, bool force) {
  std::vector<fs::path> ledgers;
  if (!run_dir.empty()) {
    ledgers.push_back(fs::path(run_dir) / "faults.ledger");
  } else if (auto found = run_root_ledgers(run_root)) {
    ledgers = std::move(*found);
  } else {
    return kExitBadInput;
  }
  int healed = 0;
  int not_healed = 0;  // a fault still in effect, an orphan still running: exit 3
  for (const auto& l : ledgers) {
    std::error_code ec;
    if (!fs::exists(l, ec)) {
      if (ec && ec != std::errc::no_such_file_or_directory)
        std::cerr << "fencecheck cleanup: cannot read " << l.string() << ": " << ec.message() << "\n";
      else
        std::cerr << "fencecheck cleanup: no fault ledger at " << l << "\n";
      return kExitBadInput;
    }
    for (const auto& line : fencecheck::faults::heal_outstanding(l, force)) {
      std::cout << l.parent_path().filename().string() << ": " << line << "\n";
      ++healed;
    }
  }
  // An embedded resource or lock-service server a dead harness left running (each kind records its
  // own in the run directory: postgres-data, zookeeper.pid; PR_SET_PDEATHSIG normally takes it
  // along with the harness). Each kind says what it found; what it could not stop is not healed.
  for (const auto& l : ledgers) {
    const auto say = [&](const auto& orphans) {
      for (const auto& line : orphans.said) std::cout << l.parent_path().filename().string() << ": " << line << "\n";
      healed += static_cast<int>(orphans.said.size()) - orphans.not_stopped;
      not_healed += orphans.not_stopped;
    };
    say(fencecheck::resources::stop_orphaned_resources(l.parent_path(), force));
    say(fencecheck::locks::stop_orphaned_lock_services(l.parent_path(), force));
  }
  // Then namespaces and cgroups that a ledger names but a crash left behind after all.
  fencecheck::faults::SweepOptions sweep;
  sweep.ledgers = ledgers;
  const std::string prefix = run_dir.empty() ? "" : fs::path(run_dir).filename().string();
  for (const auto& line : fencecheck::faults::sweep_leftovers(prefix, sweep)) {
    std::cout << "sweep: " << line << "\n";
    ++healed;
  }
  // What is still outstanding in a ledger was not healed (a heal that failed, a damaged entry, a
  // kind without a healer), unless its harness still runs and was left alone. The ledger is the
  // record, so it is read again rather than the sentences above trusted.
  for (const auto& l : ledgers) {
    std::vector<nlohmann::json> left;
    try {
      left = fencecheck::faults::FaultLedger::outstanding(l);
    } catch (const std::exception& err) {
      std::cout << l.parent_path().filename().string() << ": " << err.what() << "\n";
      ++not_healed;
      continue;
    }
    // A run killed with -9 left its machine-wide id claimed (run_dir.h); once nothing of it is
    // outstanding and no harness holds its directory, the id is free again.
    if (left.empty() && !fencecheck::harness::RunDirectory::in_use(l.parent_path())) {
      std::error_code ignored;
      fs::remove(fencecheck::harness::run_ids_directory() / l.parent_path().filename(), ignored);
    }
    for (const auto& e : left) {
      bool alive = false;
      try {
        alive = !force && fencecheck::faults::FaultLedger::writer_alive(e);
      } catch (const std::exception&) {  // a damaged entry: not healed, said below
      }
      if (alive) continue;
      std::cout << l.parent_path().filename().string() << ": still outstanding, not healed: " << e.dump()
                << " (the next `fencecheck cleanup` retries)\n";
      ++not_healed;
    }
  }
  std::cout << "fencecheck cleanup: " << ledgers.size() << " ledger(s) read, " << healed << " entr"
            << (healed == 1 ? "y" : "ies") << " handled";
  if (not_healed > 0) {
    std::cout << ", " << not_healed << " of them NOT healed (still in effect or still running; the next cleanup retries)\n";
    return kExitEnvironment;
  }
  std::cout << "\n";
  return kExitMet;
}

const char* const kLockServiceHelp =
    "Run every scenario against this lock-service kind (etcd, ...) instead of its own lock_service.kind, so one "
    "suite runs against each lock service; a scenario that names lock_service.endpoints or fields of its own "
    "kind is refused (docs/scenario-format.md)";

/// `fencecheck run`: its command line, bound by add_run().
struct RunArgs {
  std::vector<std::string> paths;
  RunOptions opts;
  std::string run_root = "runs";
  std::string bin_dir;
  bool json_out = false;
  std::string lock_service_kind;
  std::string metrics_listen;
  std::string metrics_linger = "30s";  // kDefaultMetricsLinger
  std::string pushgateway;
  std::string junit_path;
  std::size_t keep_runs = 0, keep_nights = 0, keep_days = 0;  // at most one is set (CLI11 excludes)
  std::string duration_text;
  int repeat = 1;
};

CLI::App* add_run(CLI::App& app, RunArgs& a) {
  auto* run = app.add_subcommand("run", "Run scenarios (YAML files or suite directories) for real");
  run->add_option("paths", a.paths, "Scenario files or directories")->required();
  run->add_option("--run-root", a.run_root, "Where run directories are created")->capture_default_str();
  run->add_option("--bin-dir", a.bin_dir, "Where fencecheck-worker and fencecheck-store are (default: beside fencecheck)");
  run->add_flag("--skip-unavailable", a.opts.skip_unavailable,
                "Skip (never pass) a scenario whose faults this environment cannot inject");
  run->add_flag("--json", a.json_out, "Print the results as JSON instead of a table");
  run->add_flag("--keep-data", a.opts.keep_data,
                "Keep the embedded services' data directories (etcd-data, store-data, ...) in each run directory; "
                "by default they are removed once the run has ended (history, read-back, verdict, report and "
                "logs always stay)");
  run->add_option("--lock-service", a.lock_service_kind, kLockServiceHelp);
  auto* listen_opt = run->add_option("--metrics-listen", a.metrics_listen,
                                     "Serve /metrics while the run goes, on a loopback HOST:PORT (127.0.0.1:9464; port 0: any)");
  run->add_option("--metrics-linger", a.metrics_linger,
                  "After the run, keep /metrics up until one scrape has read the final results, at most this long "
                  "(e.g. 30s, 2m; 0s: exit at once)")
      ->needs(listen_opt)
      ->capture_default_str();
  run->add_option("--pushgateway", a.pushgateway,
                  "Push each scenario's metrics to this Pushgateway (http://HOST:PORT) when it ends");
  run->add_option("--junit", a.junit_path,
                  "Also write the suite's JUnit XML here; its directory must exist (each run directory gets its own junit.xml)");
  // Retention afterwards (report.h, RetentionPolicy): one of three units, never this night's runs.
  auto* keep_opt = run->add_option("--keep", a.keep_runs, "Keep only the newest N run directories under --run-root (never this run's)")
                       ->check(CLI::Range(std::size_t{1}, std::size_t{1000000}));
  auto* nights_opt =
      run->add_option("--keep-nights", a.keep_nights,
                      "Keep the run directories of the newest N nights (invocations of fencecheck run) under --run-root, each "
                      "night whole")
          ->check(CLI::Range(std::size_t{1}, std::size_t{100000}));
  auto* days_opt = run->add_option("--keep-days", a.keep_days,
                                   "Keep the nights that began less than D x 24 h ago under --run-root, each night whole")
                       ->check(CLI::Range(std::size_t{1}, std::size_t{100000}));
  keep_opt->excludes(nights_opt)->excludes(days_opt);
  nights_opt->excludes(days_opt);
  run->add_option("--duration", a.duration_text,
                  "How long each scenario's fault schedule runs (90s, 30m, 1h), instead of its schedule.duration; the "
                  "timeout moves with it. Scenarios without a schedule are left alone");
  static const std::map<std::string, RunOptions::CompressHistory> compress_modes{
      {"auto", RunOptions::CompressHistory::kAuto},
      {"always", RunOptions::CompressHistory::kAlways},
      {"never", RunOptions::CompressHistory::kNever}};
  run->add_option("--compress-history", a.opts.compress_history,
                  "At the end of each run, replace history.jsonl by history.jsonl.zst (zstd): auto (when it is 16 MiB "
                  "or more: a long run's), always, never. fencecheck report reads either")
      ->transform(CLI::CheckedTransformer(compress_modes, CLI::ignore_case))
      ->default_str("auto");
  run->add_option("--repeat", a.repeat,
                  "Run each scenario N times in a row, each run its own run directory (is its verdict repeatable?)")
      ->check(CLI::Range(1, 1000));
  return run;
}

/// `fencecheck validate`: its command line, bound by add_validate().
struct ValidateArgs {
  std::vector<std::string> paths;
  std::string lock_service_kind;
};

CLI::App* add_validate(CLI::App& app, ValidateArgs& a) {
  auto* validate = app.add_subcommand("validate", "Load and validate scenarios; start nothing");
  validate->add_option("paths", a.paths, "Scenario files or directories")->required();
  validate->add_option("--lock-service", a.lock_service_kind, kLockServiceHelp);
  return validate;
}

/// `fencecheck cleanup`: its command line, bound by add_cleanup().
struct CleanupArgs {
  std::string run_dir;
  std::string run_root = "runs";
  bool force = false;
};

CLI::App* add_cleanup(CLI::App& app, CleanupArgs& a) {
  auto* cleanup = app.add_subcommand("cleanup", "Heal what a killed harness left behind (from its fault ledgers)");
  cleanup->add_option("run_dir", a.run_dir, "One run directory (default: every run under --run-root)");
  cleanup->add_option("--run-root", a.run_root, "Where run directories are")->capture_default_str();
  cleanup->add_flag("--force", a.force, "Also heal entries whose harness still looks alive");
  return cleanup;
}

/// `fencecheck report`: its command line, bound by add_report(); report_command() does the work.
struct ReportArgs {
  ReportCommandOptions opts;
  std::vector<std::string> dirs;
  std::string junit;
  double from = -1, to = -1;
  CLI::Option* from_opt = nullptr;
  CLI::Option* to_opt = nullptr;
};

CLI::App* add_report(CLI::App& app, ReportArgs& a) {
  auto* report = app.add_subcommand("report", "Judge stored runs again: rewrite verdict.json, junit.xml and report.html");
  report->add_option("run_dirs", a.dirs, "Run directories (e.g. runs/latest)")->required();
  report->add_option("--junit", a.junit, "Also write the suite's JUnit XML here");
  report->add_flag("--json", a.opts.json, "Print the results as JSON instead of a table");
  a.from_opt = report->add_option("--from", a.from,
                                  "With --to: draw the run's events from this many seconds after its start on a page "
                                  "of their own (report-FROMs-TOs.html), nothing else rewritten");
  a.to_opt = report->add_option("--to", a.to, "With --from: the window's end, seconds after the run's start");
  a.from_opt->needs(a.to_opt);
  a.to_opt->needs(a.from_opt);
  return report;
}

int cmd_report(ReportArgs& a) {
  for (const auto& d : a.dirs) a.opts.run_dirs.emplace_back(d);
  a.opts.junit = a.junit;
  if (*a.from_opt) a.opts.from_s = a.from;
  if (*a.to_opt) a.opts.to_s = a.to;
  return report_command(a.opts, std::cout, std::cerr);
}

/// `fencecheck probe`: its command line, bound by add_probe(); probe_command() does the work.
struct ProbeArgs {
  ProbeCommandOptions opts;
  std::string file;
  std::int64_t timeout_ms = 5000;
};

CLI::App* add_probe(CLI::App& app, ProbeArgs& a) {
  auto* probe_cmd = app.add_subcommand("probe", "Check one resource against the rules of fencing, with no lock service and no workers");
  probe_cmd->add_option("file", a.file, "A file holding a `resource:` mapping, or a scenario")->required();
  probe_cmd->add_option("--run-root", a.opts.run_root, "Where the probe's directory (embedded data, logs) is created")
      ->capture_default_str();
  probe_cmd->add_option("--bin-dir", a.opts.bin_dir, "Where fencecheck-store is (default: beside fencecheck)");
  probe_cmd->add_option("--seed", a.opts.probe.seed, "Seed of the concurrent rule's schedule")->capture_default_str();
  probe_cmd->add_option("--rounds", a.opts.probe.rounds, "Rounds of the concurrent rule")
      ->check(CLI::Range(1, 100000))->capture_default_str();
  probe_cmd->add_option("--writers", a.opts.probe.writers, "Concurrent writers (threads) per round")
      ->check(CLI::Range(2, 64))->capture_default_str();
  probe_cmd->add_option("--token-base", a.opts.probe.token_base,
                        "Every token sent is above it (a resource that needs larger tokens)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 62))->capture_default_str();
  probe_cmd->add_option("--timeout-ms", a.timeout_ms, "Bound on each request, milliseconds")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{600000}))->capture_default_str();
  probe_cmd->add_option("--json", a.opts.json_path, "Also write the report as JSON to FILE (\"-\": JSON on stdout instead of the table)");
  probe_cmd->add_option("--junit", a.opts.junit_path, "Also write JUnit XML to FILE (one test case per rule)");
  probe_cmd->add_flag("--keep", a.opts.keep,
                      "Leave the rows the probe wrote in your resource (default: removed at the end with resource.delete)");
  return probe_cmd;
}

int cmd_probe(ProbeArgs& a) {
  a.opts.file = a.file;
  a.opts.probe.timeout = std::chrono::milliseconds(a.timeout_ms);
  return probe_command(a.opts, std::cout, std::cerr);
}

/// The scenarios of `paths`, moved onto `lock_service_kind` when given and their schedules set to
/// `duration_text` when given; nullopt after saying why on stderr (bad input: exit 2).
std::optional<std::vector<Scenario>> load_scenarios(const std::vector<std::string>& paths,
                                                    const std::string& lock_service_kind,
                                                    const std::string& duration_text) {
  try {
    std::vector<Scenario> scenarios = load_all(paths);
    if (!lock_service_kind.empty())
      for (auto& s : scenarios) s = with_lock_service_kind(s, lock_service_kind);
    if (!duration_text.empty()) {
      std::string why;
      const auto d = parse_duration(duration_text, &why);
      if (!d || d->count() == 0)
        throw std::invalid_argument("--duration \"" + duration_text + "\": expected a duration like 90s, 30m or 1h" +
                                    (why.empty() ? "" : " (" + why + ")"));
      bool any = false;
      for (auto& s : scenarios)
        if (s.schedule()) s = with_schedule_duration(s, *d), any = true;
      if (!any) throw std::invalid_argument("--duration sets how long a fault schedule runs, and no scenario given has a schedule");
    }
    return scenarios;
  } catch (const ScenarioError& err) {
    std::cerr << err.what() << "\n";
  } catch (const std::exception& err) {
    std::cerr << "fencecheck: " << err.what() << "\n";
  }
  return std::nullopt;
}

int cmd_validate(const ValidateArgs& a) {
  const auto scenarios = load_scenarios(a.paths, a.lock_service_kind, "");
  if (!scenarios) return kExitBadInput;
  for (const auto& s : *scenarios) std::cout << s.source() << ": ok (" << s.name() << ")\n";
  return kExitMet;
}

/// The metrics observer --metrics-listen and --pushgateway ask for (null when neither), and the
/// linger; checked before anything starts (docs/observability.md): a bad or non-loopback address
/// is exit 2, one another process listens on is the environment's (exit 3), named with the cause.
/// nullopt: `exit` says the exit code, the reason is on stderr.
struct MetricsSetup {
  std::unique_ptr<MetricsObserver> observer;
  std::chrono::milliseconds linger{0};
};
std::optional<MetricsSetup> make_metrics(const RunArgs& a, int& exit) {
  MetricsSetup m;
  exit = kExitBadInput;
  if (!a.metrics_listen.empty()) {
    std::string why;
    const auto d = parse_duration(a.metrics_linger, &why);
    if (!d) {
      std::cerr << "fencecheck: --metrics-linger " << a.metrics_linger << ": " << why << " (expected e.g. 30s, 2m, 0s)\n";
      return std::nullopt;
    }
    m.linger = std::chrono::duration_cast<std::chrono::milliseconds>(*d);
  }
  if (a.metrics_listen.empty() && a.pushgateway.empty()) return m;
  MetricsObserver::Options mo;
  try {
    if (!a.metrics_listen.empty()) mo.listen = parse_listen_address(a.metrics_listen);
    if (!a.pushgateway.empty()) mo.pushgateway = parse_pushgateway_url(a.pushgateway);
  } catch (const MetricsConfigError& err) {
    std::cerr << "fencecheck: " << err.what() << "\n";
    return std::nullopt;
  }
  try {
    m.observer = std::make_unique<MetricsObserver>(std::move(mo));
  } catch (const std::exception& err) {
    std::cerr << "fencecheck: " << err.what() << "\n";
    exit = kExitEnvironment;
    return std::nullopt;
  }
  return m;
}

/// --keep, --keep-nights or --keep-days, applied to the run root once the night is over (never to
/// this night's own run directories).
void prune_after_night(const RunArgs& a, const std::vector<ScenarioResult>& results) {
  if (a.keep_runs == 0 && a.keep_nights == 0 && a.keep_days == 0) return;
  RetentionPolicy retention;
  retention.unit = a.keep_runs > 0     ? RetentionPolicy::Unit::kRuns
                   : a.keep_nights > 0 ? RetentionPolicy::Unit::kNights
                                       : RetentionPolicy::Unit::kDays;
  retention.count = a.keep_runs + a.keep_nights + a.keep_days;  // exactly one is set (excludes)
  const std::string flag = a.keep_runs > 0 ? "--keep" : a.keep_nights > 0 ? "--keep-nights" : "--keep-days";
  std::vector<fs::path> mine;
  for (const auto& r : results) mine.push_back(r.run_dir);
  const PruneResult pruned = prune_run_root(a.run_root, retention, mine);
  if (!pruned.removed.empty())
    spdlog::info("{} {}: removed {} older run director{} under {}", flag, retention.count, pruned.removed.size(),
                 pruned.removed.size() == 1 ? "y" : "ies", a.run_root);
  for (const auto& e : pruned.errors) spdlog::warn("{} {}: {}", flag, retention.count, e);
}

int cmd_run(RunArgs& a) {
  auto loaded = load_scenarios(a.paths, a.lock_service_kind, a.duration_text);
  if (!loaded) return kExitBadInput;
  const std::vector<Scenario>& scenarios = *loaded;
  RunOptions& opts = a.opts;

  // The command line's paths, before anything starts (preflight.h): the programs the suite needs,
  // a run root that can be created and written, a --junit file whose directory exists.
  {
    const bool explicit_bin = !a.bin_dir.empty();
    const auto bin_problem = check_bin_dir(explicit_bin ? fs::path(a.bin_dir) : fencecheck::process::self_bin_dir(), explicit_bin,
                                           needed_programs(scenarios));
    std::optional<std::string> problem = bin_problem;
    if (!problem) problem = check_run_root(a.run_root);
    if (!problem && !a.junit_path.empty()) problem = check_junit_path(a.junit_path, a.run_root);
    if (problem) {
      std::cerr << "fencecheck: " << *problem << "\n";
      // The default bin directory is the installation's, not an argument: that is the environment.
      return bin_problem && !explicit_bin ? kExitEnvironment : kExitBadInput;
    }
  }
  int metrics_exit = kExitBadInput;
  auto metrics_setup = make_metrics(a, metrics_exit);
  if (!metrics_setup) return metrics_exit;
  std::unique_ptr<MetricsObserver> metrics = std::move(metrics_setup->observer);
  if (metrics) opts.observers.push_back(metrics.get());

  // Reports: report.html and junit.xml in every run directory; live progress on a terminal.
  ReportObserver reporter;
  opts.observers.push_back(&reporter);
  std::unique_ptr<ProgressObserver> progress = ProgressObserver::for_terminal();
  if (progress->enabled()) {
    opts.observers.push_back(progress.get());
    for (auto& sink : spdlog::default_logger()->sinks()) sink = progress->wrap_sink(sink);
  }

  {
    std::error_code ec;  // --junit may go into the run root: it exists from here on (check_run_root vouched)
    fs::create_directories(a.run_root, ec);
    if (ec) {
      std::cerr << "fencecheck: --run-root " << a.run_root << ": " << ec.message() << "\n";
      return kExitBadInput;
    }
  }
  install_signal_handlers();
  NightSummary night;  // this invocation (night.h): its id goes into every run directory it makes
  night.started = std::time(nullptr);
  night.id = new_night_id(night.started, static_cast<long>(::getpid()));
  opts.night = night.id;
  opts.run_root = a.run_root;
  opts.bin_dir = a.bin_dir;
  opts.interrupted = &g_interrupted;
  opts.repetitions = a.repeat;
  std::vector<ScenarioResult> results;
  const auto repeat = static_cast<std::size_t>(a.repeat);
  const std::size_t total = scenarios.size() * repeat;
  for (std::size_t i = 0; i < total && !g_interrupted; ++i) {
    const Scenario& sc = scenarios[i / repeat];
    opts.repetition = static_cast<int>(i % repeat) + 1;
    if (repeat > 1)
      spdlog::info("[{}/{}] {} (run {} of {}): {}", i + 1, total, sc.name(), opts.repetition, repeat, sc.description());
    else
      spdlog::info("[{}/{}] {}: {}", i + 1, total, sc.name(), sc.description());
    progress->set_position(i + 1, total);
    results.push_back(run_scenario(sc, opts));
    reporter.add_result(sc, results.back());
    progress->scenario_done(results.back());
  }
  progress.reset();  // the status line is gone before the table
  bool junit_failed = false;  // CI reads this file: not writing it is the harness failing (exit 4)
  if (!a.junit_path.empty()) {
    try {
      write_junit(a.junit_path, reporter.suite());
    } catch (const std::exception& err) {
      std::cerr << "fencecheck: --junit: " << err.what() << "\n";
      junit_failed = true;
    }
  }
  prune_after_night(a, results);
  // The night's summary file and the links for the on-call person (night.h): a failure here is the
  // harness failing (exit 4), like an unwritable --junit file.
  night.finished = std::time(nullptr);
  night.interrupted = g_interrupted;
  night.exit_code = g_interrupted ? 130 : junit_failed ? static_cast<int>(kExitInternal) : suite_exit_code(results);
  night.results = results;
  std::optional<NightFiles> night_files;
  try {
    night_files = write_night_summary(a.run_root, night);
  } catch (const std::exception& err) {
    std::cerr << "fencecheck: night summary: " << err.what() << "\n";
    if (!g_interrupted) night.exit_code = kExitInternal;
  }
  if (a.json_out) {
    std::cout << format_results_json(results) << std::flush;
    if (night_files) std::cerr << format_night_footer(night, *night_files, a.run_root);  // stdout holds only the JSON
  } else {
    std::cout << format_results_table(results) << format_repeat_summary(results);
    if (night_files) std::cout << format_night_footer(night, *night_files, a.run_root);
    std::cout << std::flush;
  }
  if (metrics) {  // a failed push is reported, never a verdict: the exit code stays the scenarios'
    for (const auto& p : metrics->pushes())
      if (!p.ok) (a.json_out ? std::cerr : std::cout) << "metrics push FAILED for " << p.scenario << " (" << p.url << "): " << p.error << "\n";
    if (!metrics->pushes().empty() && !a.json_out)
      std::cout << "metrics pushed to " << a.pushgateway << ": "
                << std::count_if(metrics->pushes().begin(), metrics->pushes().end(), [](const auto& p) { return p.ok; })
                << " of " << metrics->pushes().size() << " scenario(s)\n";
  }
  if (g_interrupted) return night.exit_code;  // 130
  // The final scrape (docs/observability.md): a Ctrl-C here only cuts the wait short.
  if (metrics) (void)metrics->linger(metrics_setup->linger, &g_interrupted);
  return night.exit_code;
}

/// An unknown word where the subcommand goes: names it and lists the subcommands (CLI11 alone says
/// only "The following argument was not expected"). True when it said so (exit 2).
bool refuse_unknown_subcommand(CLI::App& app, int argc, char** argv) {
  std::string names;
  bool known = false;
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    names += (names.empty() ? "" : ", ") + sub->get_name();
    known = known || (argc > 1 && sub->check_name(argv[1]));
  }
  if (argc <= 1 || argv[1][0] == '-' || known) return false;
  std::cerr << "fencecheck: unknown subcommand '" << argv[1] << "'; expected one of: " << names << " (fencecheck --help)\n";
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  // Logs go to stderr: stdout carries only results (the table, or --json).
  spdlog::set_default_logger(spdlog::stderr_color_mt("fencecheck"));
  CLI::App app{"fencecheck: proves, with real processes, whether fencing keeps a lock's users safe"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("fencecheck ") + FENCECHECK_VERSION);  // CMake's project(VERSION)
  RunArgs run_args;
  ValidateArgs validate_args;
  CleanupArgs cleanup_args;
  ReportArgs report_args;
  ProbeArgs probe_args;
  auto* run = add_run(app, run_args);
  auto* validate = add_validate(app, validate_args);
  auto* cleanup = add_cleanup(app, cleanup_args);
  auto* report = add_report(app, report_args);
  auto* probe = add_probe(app, probe_args);
  if (refuse_unknown_subcommand(app, argc, argv)) return kExitBadInput;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitBadInput;
  }
  if (*cleanup) return cmd_cleanup(cleanup_args.run_dir, cleanup_args.run_root, cleanup_args.force);
  if (*probe) return cmd_probe(probe_args);
  if (*report) return cmd_report(report_args);
  if (*validate) return cmd_validate(validate_args);
  if (*run) return cmd_run(run_args);
  return kExitBadInput;  // require_subcommand(1): not reached
}
