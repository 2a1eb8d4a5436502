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
#include "fencecheck/resources/postgres.h"

#include "fencecheck/faults/ledger.h"
#include "fencecheck/faults/sweep.h"
#include "fencecheck/harness/child_process.h"
#include "fencecheck/harness/fault_plan.h"
#include "fencecheck/faults/sigstop.h"
#include "fencecheck/harness/live_metrics.h"
#include "fencecheck/harness/night.h"
#include "fencecheck/harness/orchestrator.h"
#include "fencecheck/harness/preflight.h"
#include "fencecheck/harness/probe.h"
#include "fencecheck/harness/progress.h"
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

/// The PID of the parent of run `dir`'s embedded PostgreSQL postmaster
/// (postgres::running_postmaster), or nullopt when none runs. The postmaster's parent is the
/// harness that started it (setpriv execs in place); 1 (or a subreaper) once that harness died.
std::optional<int> postmaster_parent(const fs::path& dir) {
  const auto pid = fencecheck::postgres::running_postmaster(dir);
  if (!pid) return std::nullopt;
  std::ifstream status("/proc/" + std::to_string(*pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("PPid:", 0) == 0) return std::stoi(line.substr(5));
  return std::nullopt;
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
  // An embedded PostgreSQL a dead harness left running (the kind re-arms PDEATHSIG after dropping
  // to the postgres user, so this is rare: a postmaster whose harness died between fork and exec,
  // or one detached by hand). A postmaster whose harness is alive is that run's, not an orphan.
  for (const auto& l : ledgers) {
    const fs::path dir = l.parent_path();
    const auto parent = postmaster_parent(dir);
    if (parent && *parent > 1 && !force) {
      std::cout << dir.filename().string() << ": its PostgreSQL belongs to a live harness (pid " << *parent
                << "); left alone (--force stops it)\n";
      continue;
    }
    if (!fencecheck::postgres::stop_orphaned_postgres(dir)) {
      std::cout << dir.filename().string() << ": its PostgreSQL" << (parent ? " (pid " + std::to_string(*parent) + ")" : "")
                << " could not be stopped (see the log above); the next cleanup retries\n";
      ++not_healed;
    } else if (parent) {
      ++healed;
    }
  }
  // An embedded lock-service server a dead harness left running (each kind records its own in the
  // run directory: zookeeper.pid; PR_SET_PDEATHSIG normally takes it along with the harness).
  for (const auto& l : ledgers) {
    const auto orphans = fencecheck::locks::stop_orphaned_lock_services(l.parent_path(), force);
    for (const auto& line : orphans.said) std::cout << l.parent_path().filename().string() << ": " << line << "\n";
    healed += static_cast<int>(orphans.said.size()) - orphans.not_stopped;
    not_healed += orphans.not_stopped;
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

}  // namespace

int main(int argc, char** argv) {
  // Logs go to stderr: stdout carries only results (the table, or --json).
  spdlog::set_default_logger(spdlog::stderr_color_mt("fencecheck"));
  register_harness_ledger_healers();
  CLI::App app{"fencecheck: proves, with real processes, whether fencing keeps a lock's users safe"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("fencecheck ") + FENCECHECK_VERSION);  // CMake's project(VERSION)

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
  run->add_flag("--keep-data", opts.keep_data,
                "Keep the embedded services' data directories (etcd-data, store-data, ...) in each run directory; "
                "by default they are removed once the run has ended (history, read-back, verdict, report and "
                "logs always stay)");
  std::string lock_service_kind;
  const std::string lock_service_help =
      "Run every scenario against this lock-service kind (etcd, ...) instead of its own lock_service.kind, so one "
      "suite runs against each lock service; a scenario that names lock_service.endpoints or fields of its own "
      "kind is refused (docs/scenario-format.md)";
  run->add_option("--lock-service", lock_service_kind, lock_service_help);
  std::string metrics_listen;
  std::string pushgateway;
  auto* listen_opt = run->add_option("--metrics-listen", metrics_listen,
                                     "Serve /metrics while the run goes, on a loopback HOST:PORT (127.0.0.1:9464; port 0: any)");
  std::string metrics_linger = "30s";  // kDefaultMetricsLinger
  run->add_option("--metrics-linger", metrics_linger,
                  "After the run, keep /metrics up until one scrape has read the final results, at most this long "
                  "(e.g. 30s, 2m; 0s: exit at once)")
      ->needs(listen_opt)
      ->capture_default_str();
  run->add_option("--pushgateway", pushgateway,
                  "Push each scenario's metrics to this Pushgateway (http://HOST:PORT) when it ends");
  std::string junit_path;
  run->add_option("--junit", junit_path,
                  "Also write the suite's JUnit XML here; its directory must exist (each run directory gets its own junit.xml)");
  // Retention afterwards (report.h, RetentionPolicy): one of three units, never this night's runs.
  RetentionPolicy retention;
  std::size_t keep_runs = 0, keep_nights = 0, keep_days = 0;
  auto* keep_opt = run->add_option("--keep", keep_runs, "Keep only the newest N run directories under --run-root (never this run's)")
                       ->check(CLI::Range(std::size_t{1}, std::size_t{1000000}));
  auto* nights_opt =
      run->add_option("--keep-nights", keep_nights,
                      "Keep the run directories of the newest N nights (invocations of fencecheck run) under --run-root, each "
                      "night whole")
          ->check(CLI::Range(std::size_t{1}, std::size_t{100000}));
  auto* days_opt = run->add_option("--keep-days", keep_days,
                                   "Keep the nights that began less than D x 24 h ago under --run-root, each night whole")
                       ->check(CLI::Range(std::size_t{1}, std::size_t{100000}));
  keep_opt->excludes(nights_opt)->excludes(days_opt);
  nights_opt->excludes(days_opt);
  std::string duration_text;
  run->add_option("--duration", duration_text,
                  "How long each scenario's fault schedule runs (90s, 30m, 1h), instead of its schedule.duration; the "
                  "timeout moves with it. Scenarios without a schedule are left alone");
  const std::map<std::string, RunOptions::CompressHistory> compress_modes{
      {"auto", RunOptions::CompressHistory::kAuto},
      {"always", RunOptions::CompressHistory::kAlways},
      {"never", RunOptions::CompressHistory::kNever}};
  run->add_option("--compress-history", opts.compress_history,
                  "At the end of each run, replace history.jsonl by history.jsonl.zst (zstd): auto (when it is 16 MiB "
                  "or more: a long run's), always, never. fencecheck report reads either")
      ->transform(CLI::CheckedTransformer(compress_modes, CLI::ignore_case))
      ->default_str("auto");
  int repeat = 1;
  run->add_option("--repeat", repeat,
                  "Run each scenario N times in a row, each run its own run directory (is its verdict repeatable?)")
      ->check(CLI::Range(1, 1000));

  std::vector<std::string> validate_paths;
  auto* validate = app.add_subcommand("validate", "Load and validate scenarios; start nothing");
  validate->add_option("paths", validate_paths, "Scenario files or directories")->required();
  validate->add_option("--lock-service", lock_service_kind, lock_service_help);

  std::string cleanup_dir;
  bool force = false;
  auto* cleanup = app.add_subcommand("cleanup", "Heal what a killed harness left behind (from its fault ledgers)");
  cleanup->add_option("run_dir", cleanup_dir, "One run directory (default: every run under --run-root)");
  cleanup->add_option("--run-root", run_root, "Where run directories are")->capture_default_str();
  cleanup->add_flag("--force", force, "Also heal entries whose harness still looks alive");

  ReportCommandOptions report_opts;
  std::vector<std::string> report_dirs;
  std::string report_junit;
  auto* report = app.add_subcommand("report", "Judge stored runs again: rewrite verdict.json, junit.xml and report.html");
  report->add_option("run_dirs", report_dirs, "Run directories (e.g. runs/latest)")->required();
  report->add_option("--junit", report_junit, "Also write the suite's JUnit XML here");
  report->add_flag("--json", report_opts.json, "Print the results as JSON instead of a table");
  double report_from = -1, report_to = -1;
  auto* from_opt = report->add_option("--from", report_from,
                                      "With --to: draw the run's events from this many seconds after its start on a page "
                                      "of their own (report-FROMs-TOs.html), nothing else rewritten");
  auto* to_opt = report->add_option("--to", report_to, "With --from: the window's end, seconds after the run's start");
  from_opt->needs(to_opt);
  to_opt->needs(from_opt);

  ProbeCommandOptions probe_opts;
  std::string probe_file;
  std::int64_t probe_timeout_ms = 5000;
  auto* probe_cmd = app.add_subcommand("probe", "Check one resource against the rules of fencing, with no lock service and no workers");
  probe_cmd->add_option("file", probe_file, "A file holding a `resource:` mapping, or a scenario")->required();
  probe_cmd->add_option("--run-root", probe_opts.run_root, "Where the probe's directory (embedded data, logs) is created")
      ->capture_default_str();
  probe_cmd->add_option("--bin-dir", probe_opts.bin_dir, "Where fencecheck-store is (default: beside fencecheck)");
  probe_cmd->add_option("--seed", probe_opts.probe.seed, "Seed of the concurrent rule's schedule")->capture_default_str();
  probe_cmd->add_option("--rounds", probe_opts.probe.rounds, "Rounds of the concurrent rule")
      ->check(CLI::Range(1, 100000))->capture_default_str();
  probe_cmd->add_option("--writers", probe_opts.probe.writers, "Concurrent writers (threads) per round")
      ->check(CLI::Range(2, 64))->capture_default_str();
  probe_cmd->add_option("--token-base", probe_opts.probe.token_base,
                        "Every token sent is above it (a resource that needs larger tokens)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 62))->capture_default_str();
  probe_cmd->add_option("--timeout-ms", probe_timeout_ms, "Bound on each request, milliseconds")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{600000}))->capture_default_str();
  probe_cmd->add_option("--json", probe_opts.json_path, "Also write the report as JSON to FILE (\"-\": JSON on stdout instead of the table)");
  probe_cmd->add_option("--junit", probe_opts.junit_path, "Also write JUnit XML to FILE (one test case per rule)");

  // An unknown word where the subcommand goes: name it and list the subcommands (CLI11 alone says
  // only "The following argument was not expected").
  std::string names;
  bool known = false;
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    names += (names.empty() ? "" : ", ") + sub->get_name();
    known = known || (argc > 1 && sub->check_name(argv[1]));
  }
  if (argc > 1 && argv[1][0] != '-' && !known) {
    std::cerr << "fencecheck: unknown subcommand '" << argv[1] << "'; expected one of: " << names
              << " (fencecheck --help)\n";
    return kExitBadInput;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitBadInput;
  }

  if (*cleanup) return cmd_cleanup(cleanup_dir, run_root, force);
  if (*probe_cmd) {
    probe_opts.file = probe_file;
    probe_opts.probe.timeout = std::chrono::milliseconds(probe_timeout_ms);
    return probe_command(probe_opts, std::cout, std::cerr);
  }
  if (*report) {
    for (const auto& d : report_dirs) report_opts.run_dirs.emplace_back(d);
    report_opts.junit = report_junit;
    if (*from_opt) report_opts.from_s = report_from;
    if (*to_opt) report_opts.to_s = report_to;
    return report_command(report_opts, std::cout, std::cerr);
  }

  std::vector<Scenario> scenarios;
  try {
    scenarios = load_all(*run ? run_paths : validate_paths);
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

  // The command line's paths, before anything starts (preflight.h): the programs the suite needs,
  // a run root that can be created and written, a --junit file whose directory exists.
  {
    const bool explicit_bin = !bin_dir.empty();
    const auto bin_problem = check_bin_dir(explicit_bin ? fs::path(bin_dir) : self_bin_dir(), explicit_bin,
                                           needed_programs(scenarios));
    std::optional<std::string> problem = bin_problem;
    if (!problem) problem = check_run_root(run_root);
    if (!problem && !junit_path.empty()) problem = check_junit_path(junit_path, run_root);
    if (problem) {
      std::cerr << "fencecheck: " << *problem << "\n";
      // The default bin directory is the installation's, not an argument: that is the environment.
      return bin_problem && !explicit_bin ? kExitEnvironment : kExitBadInput;
    }
  }

  // Metrics: refuse a bad or non-loopback address before anything starts (docs/observability.md);
  // an address another process listens on is the environment's (exit 3), named with the cause.
  std::unique_ptr<MetricsObserver> metrics;
  std::chrono::milliseconds linger{0};
  if (!metrics_listen.empty()) {
    std::string why;
    const auto d = parse_duration(metrics_linger, &why);
    if (!d) {
      std::cerr << "fencecheck: --metrics-linger " << metrics_linger << ": " << why << " (expected e.g. 30s, 2m, 0s)\n";
      return kExitBadInput;
    }
    linger = std::chrono::duration_cast<std::chrono::milliseconds>(*d);
  }
  if (!metrics_listen.empty() || !pushgateway.empty()) {
    MetricsObserver::Options mo;
    try {
      if (!metrics_listen.empty()) mo.listen = parse_listen_address(metrics_listen);
      if (!pushgateway.empty()) mo.pushgateway = parse_pushgateway_url(pushgateway);
    } catch (const MetricsConfigError& err) {
      std::cerr << "fencecheck: " << err.what() << "\n";
      return kExitBadInput;
    }
    try {
      metrics = std::make_unique<MetricsObserver>(std::move(mo));
    } catch (const std::exception& err) {
      std::cerr << "fencecheck: " << err.what() << "\n";
      return kExitEnvironment;
    }
    opts.observers.push_back(metrics.get());
  }

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
    fs::create_directories(run_root, ec);
    if (ec) {
      std::cerr << "fencecheck: --run-root " << run_root << ": " << ec.message() << "\n";
      return kExitBadInput;
    }
  }
  install_signal_handlers();
  NightSummary night;  // this invocation (night.h): its id goes into every run directory it makes
  night.started = std::time(nullptr);
  night.id = new_night_id(night.started, static_cast<long>(::getpid()));
  opts.night = night.id;
  opts.run_root = run_root;
  opts.bin_dir = bin_dir;
  opts.interrupted = &g_interrupted;
  opts.repetitions = repeat;
  std::vector<ScenarioResult> results;
  const std::size_t total = scenarios.size() * static_cast<std::size_t>(repeat);
  for (std::size_t i = 0; i < total && !g_interrupted; ++i) {
    const Scenario& sc = scenarios[i / static_cast<std::size_t>(repeat)];
    opts.repetition = static_cast<int>(i % static_cast<std::size_t>(repeat)) + 1;
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
  if (!junit_path.empty()) {
    try {
      write_junit(junit_path, reporter.suite());
    } catch (const std::exception& err) {
      std::cerr << "fencecheck: --junit: " << err.what() << "\n";
      junit_failed = true;
    }
  }
  if (keep_runs > 0 || keep_nights > 0 || keep_days > 0) {
    retention.unit = keep_runs > 0     ? RetentionPolicy::Unit::kRuns
                     : keep_nights > 0 ? RetentionPolicy::Unit::kNights
                                       : RetentionPolicy::Unit::kDays;
    retention.count = keep_runs + keep_nights + keep_days;  // exactly one is set (excludes)
    const std::string flag = keep_runs > 0 ? "--keep" : keep_nights > 0 ? "--keep-nights" : "--keep-days";
    std::vector<fs::path> mine;
    for (const auto& r : results) mine.push_back(r.run_dir);
    const PruneResult pruned = prune_run_root(run_root, retention, mine);
    if (!pruned.removed.empty())
      spdlog::info("{} {}: removed {} older run director{} under {}", flag, retention.count, pruned.removed.size(),
                   pruned.removed.size() == 1 ? "y" : "ies", run_root);
    for (const auto& e : pruned.errors) spdlog::warn("{} {}: {}", flag, retention.count, e);
  }
  // The night's summary file and the links for the on-call person (night.h): a failure here is the
  // harness failing (exit 4), like an unwritable --junit file.
  night.finished = std::time(nullptr);
  night.interrupted = g_interrupted;
  night.exit_code = g_interrupted ? 130 : junit_failed ? static_cast<int>(kExitInternal) : suite_exit_code(results);
  night.results = results;
  std::optional<NightFiles> night_files;
  try {
    night_files = write_night_summary(run_root, night);
  } catch (const std::exception& err) {
    std::cerr << "fencecheck: night summary: " << err.what() << "\n";
    if (!g_interrupted) night.exit_code = kExitInternal;
  }
  if (json_out) {
    std::cout << format_results_json(results) << std::flush;
    if (night_files) std::cerr << format_night_footer(night, *night_files, run_root);  // stdout holds only the JSON
  } else {
    std::cout << format_results_table(results) << format_repeat_summary(results);
    if (night_files) std::cout << format_night_footer(night, *night_files, run_root);
    std::cout << std::flush;
  }
  if (metrics) {  // a failed push is reported, never a verdict: the exit code stays the scenarios'
    for (const auto& p : metrics->pushes())
      if (!p.ok) (json_out ? std::cerr : std::cout) << "metrics push FAILED for " << p.scenario << " (" << p.url << "): " << p.error << "\n";
    if (!metrics->pushes().empty() && !json_out)
      std::cout << "metrics pushed to " << pushgateway << ": "
                << std::count_if(metrics->pushes().begin(), metrics->pushes().end(), [](const auto& p) { return p.ok; })
                << " of " << metrics->pushes().size() << " scenario(s)\n";
  }
  if (g_interrupted) return night.exit_code;  // 130
  // The final scrape (docs/observability.md): a Ctrl-C here only cuts the wait short.
  if (metrics) (void)metrics->linger(linger, &g_interrupted);
  return night.exit_code;
}
