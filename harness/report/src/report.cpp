#include "fencecheck/harness/report.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>
#include <ostream>
#include <set>
#include <sstream>
#include <system_error>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "fencecheck/harness/history_tally.h"
#include "fencecheck/harness/report_html.h"
#include "fencecheck/harness/stream_check.h"
#include "fencecheck/harness/verdict_json.h"
#include "report_text.h"

namespace fencecheck::harness {
namespace fs = std::filesystem;
namespace rt = report_text;

RunFileError::RunFileError(fs::path file, std::string message)
    : std::runtime_error(file.string() + ": " + message), file_(std::move(file)), message_(std::move(message)) {}

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw RunFileError(p, fs::exists(p) ? "cannot be read" : "missing");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::json read_json(const fs::path& p) {
  const std::string text = slurp(p);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw RunFileError(p, std::string("not valid JSON: ") + e.what());
  }
}

/// scenario.json as the loader takes it: to_json(Scenario) also writes "source" and spells
/// "not set" as [] or null, which the YAML loader rejects; an empty value means "not set" there.
nlohmann::json loader_form(const nlohmann::json& j) {
  if (j.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [k, v] : j.items())
      if (!v.is_null() && !(v.is_array() && v.empty())) out[k] = loader_form(v);
    return out;
  }
  if (j.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& v : j) out.push_back(loader_form(v));
    return out;
  }
  return j;
}

std::int64_t run_start_ns(const History& h) {
  for (const Event& e : h)
    if (e.kind == EventKind::kRunStart) return e.t_ns;
  return h.empty() ? 0 : h[0].t_ns;
}

/// When the run started, as wall-clock time: scenario.json's modification time (the orchestrator
/// writes it once, as the run starts; history.jsonl's clock is monotonic). Now when unreadable.
std::time_t run_started_at(const fs::path& dir) {
  struct stat st {};
  if (::stat((dir / "scenario.json").c_str(), &st) != 0) return std::time(nullptr);
  return st.st_mtime;
}

std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return {};
  return buf;
}

std::string common_suite_name(const std::vector<std::string>& names) {
  if (names.empty()) return "fencecheck";
  for (const auto& n : names)
    if (n != names.front()) return "fencecheck";
  return names.front();
}

}  // namespace

/// (report.h) run_shortfalls: the tally's reasons (history_tally.h), with the black-box workers
/// decided by the one rule for "said nothing" (checker.h).
std::vector<std::string> run_shortfalls(const Scenario& sc, const History& h) {
  HistoryTally tally;
  for (const Event& e : h) tally.observe(e);
  std::vector<std::string> ids;
  for (const auto& w : sc.workers()) ids.push_back(w.id);
  return tally.shortfalls(sc, black_box_workers(h, ids, nullptr));
}

StoredRun load_run_directory(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw RunFileError(dir, "no such run directory");
  StoredRun run;
  run.dir = dir;

  const fs::path plan = dir / "scenario.json";
  const nlohmann::json pj = read_json(plan);
  if (!pj.is_object()) throw RunFileError(plan, "expected a JSON object (the scenario plan)");
  if (auto it = pj.find("source"); it != pj.end() && it->is_string()) run.source = it->get<std::string>();
  try {
    nlohmann::json form = loader_form(pj);
    form.erase("source");  // where the plan came from: not a field of the plan
    run.scenario.emplace(parse_scenario(form.dump(2), plan.string()));
  } catch (const ScenarioError& e) {
    throw RunFileError(plan, "not a valid scenario: " + e.message() + " (line " + std::to_string(e.line()) + ", column " +
                                 std::to_string(e.column()) + " of the plan as re-read)");
  }

  const fs::path hist = history_file(dir);  // history.jsonl, or history.jsonl.zst once compressed
  if (!fs::exists(hist, ec)) throw RunFileError(hist, "missing");
  try {
    ReportHistory h = load_report_history(hist);  // every line checked; the first events kept for the page
    run.history = std::move(h.first);
    run.history_events = h.events;
    run.overview = std::move(h.overview);
  } catch (const HistoryError& e) {
    throw RunFileError(hist, (e.line() ? "line " + std::to_string(e.line()) + ": " : std::string()) + e.message());
  }

  const fs::path rb = dir / "readback.json";
  if (!fs::exists(rb, ec)) {
    // Not there at all, or not reachable (a symlink loop, a directory without search permission).
    if (ec && ec != std::errc::no_such_file_or_directory) throw RunFileError(rb, "cannot be read: " + ec.message());
    throw RunFileError(rb, "missing: the run never read the resource back (it did not finish)");
  }
  try {
    // Element by element, no DOM (readback.h); the log straight into its packed form.
    run.readback = read_readback_file(rb, run.log.sink());
  } catch (const ReadBackSyntaxError& e) {
    throw RunFileError(rb, std::string("not valid JSON: ") + e.what());
  } catch (const std::system_error& e) {
    throw RunFileError(rb, "cannot be read: " + e.code().message());
  } catch (const std::exception& e) {
    throw RunFileError(rb, std::string("not a read-back: ") + e.what());
  }
  return run;
}

Judgement judge_stored_run(const StoredRun& run) {
  const Scenario& sc = *run.scenario;
  Judgement j;
  // The checkers, figures and tally read the history file as a stream (the scenario's TTL, lock,
  // job kind): the same judgement as the live run's.
  HistoryTally tally;
  const fs::path hist = history_file(run.dir);
  try {
    j.analysis = analyze_history_file(hist, run.readback, run.log, CheckContext::of(sc), {},
                                      [&](std::size_t, const Event& e) { tally.observe(e); })
                     .analysis;
  } catch (const HistoryError& e) {
    throw RunFileError(hist, (e.line() ? "line " + std::to_string(e.line()) + ": " : std::string()) + e.message());
  }
  j.expectation = evaluate(sc.expect(), j.analysis, sc);
  j.lock = tally.lock();
  const std::optional<std::int64_t> start = tally.run_start_ns(), end = tally.run_end_ns();
  const std::string& end_detail = tally.run_end_detail();
  bool finished = true;
  if (!end) {
    finished = false;
    j.expectation.reasons.insert(j.expectation.reasons.begin(), "the history has no run.end: the harness did not finish this run");
  } else if (end_detail == "timeout") {
    finished = false;
    j.expectation.reasons.insert(j.expectation.reasons.begin(), "the run hit its timeout of " + format_duration(sc.timeout()));
  } else if (end_detail == "interrupted") {
    finished = false;
    j.expectation.reasons.insert(j.expectation.reasons.begin(), "the run was interrupted");
  }
  const auto not_taken = tally.shortfalls(sc, j.analysis.black_box_workers);
  j.expectation.reasons.insert(j.expectation.reasons.begin(), not_taken.begin(), not_taken.end());
  j.expectation.met = j.expectation.met && finished && not_taken.empty();

  ScenarioResult& r = j.result;
  r.scenario = sc.name();
  r.run_dir = run.dir;
  r.expectation = expectation_text(sc.expect());
  summarize_analysis(r, j.analysis, sc);
  r.met = j.expectation.met;
  r.reasons = j.expectation.reasons;
  r.exit_code = r.met ? kExitMet : kExitNotMet;
  r.duration_s = start && end ? static_cast<double>(*end - *start) / 1e9 : 0.0;
  return j;
}

std::string protocol_error_line_text(const ProtocolError& pe, std::size_t max_bytes) {
  std::string line = pe.line;
  if (line.size() > max_bytes) {
    std::size_t cut = max_bytes;
    while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 sequence
    line = line.substr(0, cut) + "\xE2\x80\xA6";
  }
  return (pe.worker.empty() ? std::string("a worker") : pe.worker) + "'s line" +
         (pe.line_no ? " " + std::to_string(*pe.line_no) : std::string()) + " as received: " + line;
}

std::string format_results_table(const std::vector<ScenarioResult>& results) {
  const std::vector<std::string> head = {"scenario", "expectation", "verdict", "met", "anomalies", "rejected", "expiries",
                                         "longest pause", "duration"};
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : results) {
    std::string anomalies;
    for (const auto& a : r.anomalies) anomalies += (anomalies.empty() ? "" : ",") + a;
    rows.push_back({r.label(), r.expectation, r.verdict, r.skipped ? "skip" : (r.met ? "yes" : "NO"),
                    anomalies.empty() ? "-" : anomalies, std::to_string(r.rejected_writes), r.expiries_measured      ? std::to_string(r.expiries_during_work)
                    : r.expiries_undecided ? ">=" + std::to_string(r.expiries_during_work) + " (not measured)"
                                           : std::string("not measured"),
                    !r.longest_pause_s ? std::string("not measured")
                                       : rt::format("%.2fs", *r.longest_pause_s) +
                                             (r.longest_pause_source == "harness" ? " (harness)" : ""),
                    rt::format("%.1fs", r.duration_s)});
  }
  std::vector<std::size_t> width(head.size());
  for (std::size_t c = 0; c < head.size(); ++c) {
    width[c] = head[c].size();
    for (const auto& row : rows) width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      const bool numeric = c >= 5;  // right-align the figures
      const std::string pad(width[c] - cells[c].size(), ' ');
      s += numeric ? pad + cells[c] : cells[c] + (c + 1 < cells.size() ? pad : "");
      if (c + 1 < cells.size()) s += "  ";
    }
    return s + "\n";
  };
  std::string out = "\n" + line(head);
  for (std::size_t i = 0; i < results.size(); ++i) {
    out += line(rows[i]);
    for (const auto& why : results[i].reasons) out += "    " + why + "\n";
    for (const auto& pe : results[i].protocol_errors) out += "    " + protocol_error_line_text(pe) + "\n";
    for (const auto& w : results[i].black_box_workers) out += "    " + w + ": " + std::string(kBlackBoxNote) + "\n";
    if (!results[i].ignored.empty()) out += "    " + results[i].ignored + "\n";
    if (!results[i].run_dir.empty()) out += "    run directory: " + results[i].run_dir.string() + "\n";
  }
  return out;
}

std::string format_repeat_summary(const std::vector<ScenarioResult>& results) {
  struct Tally {
    int runs = 0, met = 0;
    std::map<std::string, int> verdicts;
  };
  std::vector<std::string> order;
  std::map<std::string, Tally> by;
  for (const auto& r : results) {
    if (r.repetitions <= 1) continue;
    if (!by.count(r.scenario)) order.push_back(r.scenario);
    Tally& t = by[r.scenario];
    ++t.runs;
    if (r.met && !r.skipped) ++t.met;
    ++t.verdicts[r.skipped ? "skipped" : r.verdict];
  }
  if (order.empty()) return "";
  std::size_t width = 0;
  for (const auto& name : order) width = std::max(width, name.size());
  std::string out = "\nrepeated runs (expectation met / runs):\n";
  for (const auto& name : order) {
    const Tally& t = by[name];
    std::string verdicts;
    for (const auto& [v, n] : t.verdicts) verdicts += (verdicts.empty() ? "" : ", ") + v + " " + std::to_string(n);
    out += "  " + name + std::string(width - name.size(), ' ') + "  " + std::to_string(t.met) + "/" +
           std::to_string(t.runs) + "  (" + verdicts + ")\n";
  }
  return out;
}

std::string format_results_json(const std::vector<ScenarioResult>& results) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& r : results) j.push_back(r.to_json());
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

/// The run directory as a command given later should name it: a symlink such as runs/latest
/// (which moves on with the next run) resolved, relative to the working directory when it is below
/// it, else absolute.
static std::string stable_dir(const fs::path& dir) {
  std::error_code ec;
  const fs::path real = fs::weakly_canonical(dir, ec);
  if (ec) return dir.string();
  const fs::path rel = real.lexically_relative(fs::current_path(ec));
  if (!ec && !rel.empty() && *rel.begin() != "..") return rel.string();
  return real.string();
}

void write_run_reports(const StoredRun& run, const Judgement& j, bool rewrite_verdict, const std::string& generator) {
  if (rewrite_verdict)
    try {
      rt::write_file_atomically(run.dir / "verdict.json",
                                verdict_to_json(j.analysis, j.expectation, j.lock).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    } catch (const std::exception& e) {
      throw RunFileError(run.dir / "verdict.json", e.what());
    }
  const std::string suite = junit_suite_name(run.source);
  JUnitSuite s;
  s.name = suite;
  s.timestamp = junit_timestamp(run_started_at(run.dir));
  s.hostname = hostname();
  s.cases.push_back(junit_case(j.result, &j.analysis, run_start_ns(run.history), suite));
  try {
    write_junit(run.dir / "junit.xml", s);
  } catch (const std::exception& e) {
    throw RunFileError(run.dir / "junit.xml", e.what());
  }
  ReportData data{&*run.scenario, run.history,      run.readback, j.analysis, j.result, generator, run.history_events,
                  &run.log,         &run.overview,    std::nullopt, "fencecheck report " + stable_dir(run.dir)};
  try {
    write_report_html(run.dir / "report.html", data);
  } catch (const std::exception& e) {
    throw RunFileError(run.dir / "report.html", e.what());
  }
}

// ---- ReportObserver ----------------------------------------------------------------------------

ReportObserver::ReportObserver() : started_(std::time(nullptr)) {}

void ReportObserver::on_start(const Scenario& /*scenario*/, const fs::path& /*run_dir*/) { scenario_started_ = std::time(nullptr); }

void ReportObserver::on_finish(const Scenario& scenario, const ScenarioResult& result, const Analysis& analysis,
                               const RunFigures& /*figures*/) {
  const std::string suite = junit_suite_name(scenario.source());
  JUnitCase c = junit_case(result, &analysis, 0, suite);
  try {
    // The files the orchestrator just wrote: the page is drawn from exactly what
    // `fencecheck report` would read.
    // A long run's page draws its first events only (kReportHistoryEvents): the harness's memory
    // stays bounded however long the run was.
    const ReportHistory history = load_report_history(history_file(result.run_dir));
    PackedLog log;
    const ReadBack rb = read_readback_file(result.run_dir / "readback.json", log.sink());
    c = junit_case(result, &analysis, run_start_ns(history.first), suite);
    ReportData data{&scenario, history.first,     rb,           analysis,
                    result,    "fencecheck run",  history.events, &log,
                    &history.overview, std::nullopt, "fencecheck report " + stable_dir(result.run_dir)};
    write_report_html(result.run_dir / "report.html", data);
  } catch (const std::exception& e) {
    problems_.push_back("report.html for " + result.run_dir.string() + ": " + e.what());
    spdlog::warn("{}: report.html not written: {}", scenario.name(), e.what());
  }
  try {
    JUnitSuite s{suite, junit_timestamp(scenario_started_ ? scenario_started_ : std::time(nullptr)), hostname(), {c}};
    write_junit(result.run_dir / "junit.xml", s);
  } catch (const std::exception& e) {
    problems_.push_back(e.what());
    spdlog::warn("{}: junit.xml not written: {}", scenario.name(), e.what());
  }
  finished_[result.run_dir] = std::move(c);
}

void ReportObserver::add_result(const Scenario& scenario, const ScenarioResult& result) {
  const std::string suite = junit_suite_name(scenario.source());
  suite_names_.push_back(suite);
  if (auto it = finished_.find(result.run_dir); !result.run_dir.empty() && it != finished_.end()) {
    cases_.push_back(it->second);
    finished_.erase(it);
    return;
  }
  // The run never reached its verdict: still leave a junit.xml and a page with what there is.
  JUnitCase c = junit_case(result, nullptr, 0, suite);
  std::error_code ec;
  if (!result.run_dir.empty() && fs::is_directory(result.run_dir, ec)) {
    try {
      write_junit(result.run_dir / "junit.xml",
                  JUnitSuite{suite, junit_timestamp(scenario_started_ ? scenario_started_ : std::time(nullptr)), hostname(), {c}});
      ReportHistory history;
      if (const auto h = history_file(result.run_dir); fs::exists(h, ec)) history = load_report_history(h);
      const ReadBack rb;
      const Analysis analysis;  // nothing was judged: verdict unknown
      ReportData data{&scenario, history.first, rb, analysis, result, "fencecheck run", history.events, nullptr,
                      &history.overview, std::nullopt, ""};
      write_report_html(result.run_dir / "report.html", data);
    } catch (const std::exception& e) {
      problems_.push_back(e.what());
      spdlog::warn("{}: report files not written: {}", scenario.name(), e.what());
    }
  }
  cases_.push_back(std::move(c));
}

JUnitSuite ReportObserver::suite() const {
  return JUnitSuite{common_suite_name(suite_names_), junit_timestamp(started_), hostname(), cases_};
}

// ---- fencecheck report -------------------------------------------------------------------------

namespace {

/// `fencecheck report RUN_DIR --from S --to S`: the window's page (ReportCommandOptions).
int report_window(const ReportCommandOptions& o, std::ostream& out, std::ostream& err) {
  if (o.run_dirs.size() != 1) {
    err << "fencecheck report: --from and --to draw a window of one run: give one run directory\n";
    return kExitBadInput;
  }
  if (!o.from_s || !o.to_s || *o.from_s < 0 || *o.to_s <= *o.from_s) {
    err << "fencecheck report: give both --from and --to, seconds since the run's first event, with 0 <= from < to\n";
    return kExitBadInput;
  }
  StoredRun run;
  ReportWindow window;
  try {
    run = load_run_directory(o.run_dirs.front());
    window = load_report_window(history_file(run.dir), *o.from_s, *o.to_s);
  } catch (const RunFileError& e) {
    err << "fencecheck report: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const HistoryError& e) {
    err << "fencecheck report: " << history_file(o.run_dirs.front()).string() << ": " << e.message() << "\n";
    return kExitBadInput;
  }
  if (window.events.empty()) {
    err << "fencecheck report: " << run.dir.string() << ": no event between +" << *o.from_s << " s and +" << *o.to_s
        << " s (the run lasted " << run.overview.seconds.size() << " s)\n";
    return kExitBadInput;
  }
  const Judgement j = judge_stored_run(run);
  const Analysis shifted = window_analysis(j.analysis, window.first_index, window.events.size());
  const std::string name = "report-" + rt::format("%.1f", *o.from_s) + "s-" + rt::format("%.1f", *o.to_s) + "s.html";
  ReportData data{&*run.scenario, window.events, run.readback,  shifted, j.result, "fencecheck report", run.history_events,
                  &run.log,         &run.overview, window.first_index, "fencecheck report " + stable_dir(run.dir),
                  &j.analysis};
  try {
    write_report_html(run.dir / name, data);
  } catch (const std::exception& e) {
    err << "fencecheck report: " << (run.dir / name).string() << ": " << e.what() << "\n";
    return kExitBadInput;
  }
  out << (run.dir / name).string() << ": events " << window.first_index << " to "
      << window.first_index + window.events.size() - 1 << " of " << window.file_events
      << (window.cut ? " (the window holds more: its first ones are drawn)" : "") << "\n";
  return kExitMet;
}

}  // namespace

int report_command(const ReportCommandOptions& o, std::ostream& out, std::ostream& err) {
  if (o.from_s || o.to_s) return report_window(o, out, err);
  std::vector<StoredRun> runs;
  for (const auto& dir : o.run_dirs) {
    try {
      runs.push_back(load_run_directory(dir));
    } catch (const RunFileError& e) {
      err << "fencecheck report: " << e.what() << "\n";
      return kExitBadInput;
    }
  }
  std::vector<ScenarioResult> results;
  std::vector<std::string> suites;
  JUnitSuite suite;
  suite.hostname = hostname();
  for (const auto& run : runs) {
    const Judgement j = judge_stored_run(run);
    // Point out a changed conclusion (the checkers or the expectation changed since the run).
    try {
      const nlohmann::json old = read_json(run.dir / "verdict.json");
      const std::string was = old.value("verdict", std::string());
      const bool was_met = old.contains("expectation") && old["expectation"].value("met", false);
      if (!was.empty() && (was != j.result.verdict || was_met != j.result.met))
        err << "fencecheck report: " << run.dir.string() << ": the stored verdict was " << was << " (expectation "
            << (was_met ? "met" : "not met") << "); judged again: " << j.result.verdict << " (expectation "
            << (j.result.met ? "met" : "not met") << ")\n";
    } catch (const std::exception&) {
      // no stored verdict (or an unreadable one): it is written now
    }
    try {
      write_run_reports(run, j, true, "fencecheck report");
    } catch (const RunFileError& e) {
      err << "fencecheck report: " << e.what() << "\n";
      return kExitBadInput;
    }
    const std::string name = junit_suite_name(run.source);
    suites.push_back(name);
    suite.cases.push_back(junit_case(j.result, &j.analysis, run_start_ns(run.history), name));
    results.push_back(j.result);
  }
  if (!o.junit.empty()) {
    suite.name = common_suite_name(suites);
    std::time_t first = std::time(nullptr);
    for (const auto& run : runs) first = std::min(first, run_started_at(run.dir));
    suite.timestamp = junit_timestamp(first);  // when the first of these runs started
    try {
      write_junit(o.junit, suite);
    } catch (const std::exception& e) {
      err << "fencecheck report: " << e.what() << "\n";
      return kExitBadInput;
    }
  }
  out << (o.json ? format_results_json(results) : format_results_table(results));
  return suite_exit_code(results);
}

}  // namespace fencecheck::harness
