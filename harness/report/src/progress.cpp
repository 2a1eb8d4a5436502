#include "fencecheck/harness/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>

#include <spdlog/sinks/sink.h>

#include "fencecheck/harness/analysis.h"
#include "report_text.h"

namespace fencecheck::harness {
namespace rt = report_text;
using Clock = std::chrono::steady_clock;

Duration expected_duration(const Scenario& sc) {
  // A schedule's run lasts its duration (its repeating workers are stopped then).
  if (sc.schedule()) return std::min<Duration>(std::chrono::seconds(1) + sc.schedule()->duration, sc.timeout());
  const auto& job = sc.job();
  const Duration one_job = job.chunk_interval * (job.segments * job.chunks);
  Duration body = one_job * static_cast<std::int64_t>(sc.workers().size());
  for (const auto& f : sc.faults()) {
    Duration start{};
    if (auto* t = std::get_if<TimeTrigger>(&f.trigger)) start = t->at;
    else if (auto* e = std::get_if<EventTrigger>(&f.trigger)) start = job.chunk_interval * e->count;
    body = std::max(body, start + f.duration + one_job);
  }
  return std::min<Duration>(std::chrono::seconds(1) + body, sc.timeout());
}

struct ProgressObserver::State {
  std::mutex mu;
  std::condition_variable cv;
  Options opt;
  bool alive = true;       // false once the observer is gone (sinks then only forward)
  bool shown = false;      // a status line is on the screen
  bool running = false;    // a scenario is running
  std::size_t index = 0, total = 0;
  std::string scenario;
  std::string phase;
  Clock::time_point started{};
  Duration expected{};
  Duration timeout{};
  std::int64_t rejected = 0;
  std::int64_t anomalies = 0;  // found while the run goes (on_anomaly)
  std::vector<std::string> active_faults;  // "sigstop w1"
  std::string latest;                     // the latest notable event
  std::map<std::int64_t, std::string> holder;  // token -> the worker that acquired it
  std::set<std::int64_t> releasing;            // tokens whose holder sent release.invoke

  void write_raw(const std::string& s) const {
    const char* p = s.data();
    std::size_t left = s.size();
    while (left > 0) {
      const ssize_t n = ::write(opt.fd, p, left);
      if (n <= 0) return;  // a terminal that went away: give up quietly
      p += n;
      left -= static_cast<std::size_t>(n);
    }
  }
  int columns() const {
    if (opt.width > 0) return opt.width;
    winsize ws{};
    if (::ioctl(opt.fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20) return ws.ws_col;
    return 100;
  }
  std::string line() const {
    if (!running) return {};
    const double elapsed = std::chrono::duration<double>(Clock::now() - started).count();
    const double expect = std::chrono::duration<double>(expected).count();
    std::string s = rt::format("[%zu/%zu] ", index, total) + scenario + "  " + phase + "  " +
                    rt::format("%.1fs / ~%.0fs", elapsed, expect);
    if (elapsed > expect) s += rt::format(" (timeout in %.0fs)", std::max(0.0, std::chrono::duration<double>(timeout).count() - elapsed));
    for (const auto& f : active_faults) s += "  " + f;
    s += "  rejected " + std::to_string(rejected);
    if (anomalies > 0) s += "  ANOMALIES " + std::to_string(anomalies);
    if (!latest.empty()) s += "  | " + latest;
    return s;
  }
  void clear_locked() {
    if (shown) write_raw("\r\033[K");
    shown = false;
  }
  void draw_locked() {
    if (!opt.enabled || !alive || !running) return;
    std::string s = line();
    const auto cols = static_cast<std::size_t>(columns() - 1);
    if (s.size() > cols) s = s.substr(0, cols);  // ASCII apart from names: cutting bytes is fine here
    write_raw("\r\033[K" + s);
    shown = true;
  }
};

namespace {

/// Erases the status line around each log line (see progress.h).
class ProgressSink final : public spdlog::sinks::sink {
 public:
  ProgressSink(std::shared_ptr<ProgressObserver::State> state, std::shared_ptr<spdlog::sinks::sink> inner)
      : state_(std::move(state)), inner_(std::move(inner)) {
    set_level(inner_->level());
  }
  void log(const spdlog::details::log_msg& msg) override {
    std::lock_guard lock(state_->mu);
    const bool redraw = state_->shown;
    state_->clear_locked();
    if (inner_->should_log(msg.level)) inner_->log(msg);
    inner_->flush();
    if (redraw) state_->draw_locked();
  }
  void flush() override { inner_->flush(); }
  void set_pattern(const std::string& pattern) override { inner_->set_pattern(pattern); }
  void set_formatter(std::unique_ptr<spdlog::formatter> f) override { inner_->set_formatter(std::move(f)); }

 private:
  std::shared_ptr<ProgressObserver::State> state_;
  std::shared_ptr<spdlog::sinks::sink> inner_;
};

}  // namespace

ProgressObserver::ProgressObserver(Options options) : state_(std::make_shared<State>()) {
  state_->opt = options;
  if (!options.enabled) return;
  ticker_ = std::jthread([st = state_](std::stop_token stop) {
    std::unique_lock lock(st->mu);
    while (!stop.stop_requested()) {
      st->cv.wait_for(lock, st->opt.refresh, [&] { return stop.stop_requested(); });
      if (!stop.stop_requested() && st->running) st->draw_locked();
    }
  });
}

std::unique_ptr<ProgressObserver> ProgressObserver::for_terminal() {
  Options o;
  o.fd = STDERR_FILENO;
  o.enabled = ::isatty(STDERR_FILENO) == 1;
  return std::make_unique<ProgressObserver>(o);
}

ProgressObserver::~ProgressObserver() {
  if (ticker_.joinable()) {
    ticker_.request_stop();
    state_->cv.notify_all();
    ticker_.join();
  }
  std::lock_guard lock(state_->mu);
  state_->clear_locked();
  state_->alive = false;
}

bool ProgressObserver::enabled() const { return state_->opt.enabled; }

void ProgressObserver::set_position(std::size_t index, std::size_t total) {
  std::lock_guard lock(state_->mu);
  state_->index = index;
  state_->total = total;
}

void ProgressObserver::on_start(const Scenario& scenario, const std::filesystem::path& /*run_dir*/) {
  std::lock_guard lock(state_->mu);
  auto& s = *state_;
  s.running = true;
  s.scenario = scenario.name();
  s.phase = "starting";
  s.started = Clock::now();
  s.expected = expected_duration(scenario);
  s.timeout = scenario.timeout();
  s.rejected = 0;
  s.anomalies = 0;
  s.active_faults.clear();
  s.latest.clear();
  s.holder.clear();
  s.releasing.clear();
  s.draw_locked();
}

void ProgressObserver::on_phase(const Scenario& /*scenario*/, std::string_view phase) {
  std::lock_guard lock(state_->mu);
  state_->phase = std::string(phase);
  state_->draw_locked();
}

void ProgressObserver::on_event(const Scenario& /*scenario*/, const Event& e) {
  std::lock_guard lock(state_->mu);
  auto& s = *state_;
  const std::string tok = e.token ? std::to_string(*e.token) : "?";
  switch (e.kind) {
    case EventKind::kAcquireOk:
      if (e.token) s.holder[*e.token] = e.source;
      s.latest = e.source + " acquired token " + tok;
      break;
    case EventKind::kReleaseInvoke:
      if (e.token) s.releasing.insert(*e.token);
      return;
    case EventKind::kWriteFail:
      if (!e.high_water) {  // an invalid request, not a rejection by the fence
        s.latest = e.source + "'s write with token " + tok + " was an invalid request";
        break;
      }
      ++s.rejected;
      s.latest = e.source + "'s write with token " + tok + " rejected";
      break;
    case EventKind::kPause:
      if (e.duration_ns) s.latest = e.source + rt::format(" paused %.2fs", static_cast<double>(*e.duration_ns) / 1e9);
      break;
    case EventKind::kFaultInject:
      s.active_faults.push_back(e.target + " " + e.fault);
      s.latest = e.fault + " " + e.target;
      break;
    case EventKind::kFaultHeal: {
      auto it = std::find(s.active_faults.begin(), s.active_faults.end(), e.target + " " + e.fault);
      if (it != s.active_faults.end()) s.active_faults.erase(it);
      s.latest = e.fault + " " + e.target + " healed";
      break;
    }
    case EventKind::kLockDelete: {
      // A delete nobody asked for is the lock service expiring a lease: say whose.
      const auto who = e.token ? s.holder.find(*e.token) : s.holder.end();
      const std::string name = who == s.holder.end() ? std::string("a holder") : who->second;
      s.latest = e.token && s.releasing.count(*e.token) ? name + " released token " + tok
                                                        : "the lock service deleted " + name + "'s key (token " + tok + ")";
      break;
    }
    case EventKind::kLeaseLost: s.latest = e.source + " lost its lease"; break;
    case EventKind::kJobDone: s.latest = e.source + " finished its job"; break;
    case EventKind::kJobGaveUp: s.latest = e.source + " gave up" + (e.detail.empty() ? "" : ": " + e.detail); break;
    default: return;  // nothing worth a redraw
  }
  s.draw_locked();
}

void ProgressObserver::on_anomaly(const Scenario& /*scenario*/, const LiveAnomaly& a) {
  std::lock_guard lock(state_->mu);
  auto& s = *state_;
  ++s.anomalies;
  s.latest = "anomaly: " + a.anomaly.name + (a.anomaly.key.empty() ? std::string() : " on " + a.anomaly.key);
  s.draw_locked();
}

void ProgressObserver::on_finish(const Scenario& /*scenario*/, const ScenarioResult& result, const Analysis& /*analysis*/,
                                 const RunFigures& /*figures*/) {
  scenario_done(result);
}

void ProgressObserver::scenario_done(const ScenarioResult& result) {
  std::lock_guard lock(state_->mu);
  auto& s = *state_;
  if (!s.running) return;
  if (s.opt.enabled && s.alive) {
    s.clear_locked();
    std::string done = rt::format("[%zu/%zu] ", s.index, s.total) + result.scenario + ": " +
                       (result.skipped ? "skipped" : result.met ? "met" : "NOT met") + " (" + result.verdict + ") " +
                       rt::format("%.1fs", result.duration_s);
    if (!result.met && !result.reasons.empty()) done += "  " + result.reasons.front();
    if (!result.run_dir.empty()) done += "  " + (result.run_dir / "report.html").string();
    s.write_raw(done + "\n");
  }
  s.running = false;
}

std::string ProgressObserver::status_line() const {
  std::lock_guard lock(state_->mu);
  return state_->line();
}

std::shared_ptr<spdlog::sinks::sink> ProgressObserver::wrap_sink(std::shared_ptr<spdlog::sinks::sink> inner) {
  return std::make_shared<ProgressSink>(state_, std::move(inner));
}

}  // namespace fencecheck::harness
