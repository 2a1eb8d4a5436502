#include "fencecheck/harness/report_html.h"
#include "fencecheck/locks/lock_service_kind.h"
#include "fencecheck/resources/resource_kind.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "report_text.h"

namespace fencecheck::harness {
namespace fs = std::filesystem;
namespace rt = report_text;
using rt::html;

namespace {

// ---- geometry --------------------------------------------------------------------------------

constexpr double kSvgWidth = 1200;
constexpr double kPlotX0 = 140;   // left edge of the time axis
constexpr double kPlotX1 = 1170;  // right edge
constexpr double kCharWidth = 6.7;  // 11 px DejaVu Sans, average advance (generous)
constexpr double kRowHeight = 15;
constexpr int kMaxLabelRows = 10;
constexpr std::size_t kMaxTableEvents = 4000;

std::string num(double v) { return rt::format("%.1f", v); }

/// The resource's fencing design as its kind names it ("per-key", "user SQL").
std::string resource_design(const Scenario& sc) {
  const auto* kind = resources::find_resource_kind(sc.resource().kind);
  return kind ? kind->design(sc.resource().config) : sc.resource().fencing();
}
/// What the scenario's lock service uses as its fencing token and what a restart does to it, as its
/// kind says (LockServiceKind::token_description, restart_effect): the lock-service figure's tooltip.
std::string lock_service_summary(const Scenario& sc) {
  const auto* kind = locks::find_lock_service_kind(sc.lock_service().kind);
  if (kind == nullptr) return "";
  return "fencing token: " + kind->token_description() +
         ". Restart: " + kind->restart_effect(sc.lock_service().config);
}
std::string secs(double s) { return rt::format("%.2f", s); }

/// The run's claim on its lock service as <run dir>/claim.json records it (run_claim.h): the
/// figure's text ("held" or "none") and its tooltip (the held claim, or why there is none: an
/// embedded service, kind none, a refusal); nullopt when the run has no claim.json (made before
/// claims, or it never got that far).
std::optional<std::pair<std::string, std::string>> claim_figure(const fs::path& run_dir) {
  if (run_dir.empty()) return std::nullopt;
  std::ifstream in(run_dir / "claim.json");
  if (!in) return std::nullopt;
  const auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  const auto text = [&](const char* name) { return j.contains(name) && j[name].is_string() ? j[name].get<std::string>() : ""; };
  if (j.value("claimed", false)) return std::pair<std::string, std::string>{"held", text("held")};
  if (!text("refused").empty()) return std::pair<std::string, std::string>{"refused", text("refused")};
  if (!text("error").empty()) return std::pair<std::string, std::string>{"failed", text("error")};
  return std::pair<std::string, std::string>{"none", text("why")};
}

/// Maps history times (ns) to x.
struct TimeScale {
  std::int64_t t0 = 0;
  std::int64_t t1 = 1;
  [[nodiscard]] double x(std::int64_t t) const {
    const double f = static_cast<double>(t - t0) / static_cast<double>(t1 - t0);
    return kPlotX0 + std::clamp(f, 0.0, 1.0) * (kPlotX1 - kPlotX0);
  }
  [[nodiscard]] double rel_s(std::int64_t t) const { return static_cast<double>(t - t0) / 1e9; }
};

enum class Align { kStart, kMiddle, kEnd };

/// Stacks labels in rows below a lane's band so that no two overlap (by estimated width).
class LabelRows {
 public:
  /// Finds the first row with room; adjusts x/align to stay inside the plot. nullopt: no room
  /// (the mark keeps its tooltip).
  std::optional<int> place(double& x, Align& align, double width) {
    double l = 0, r = 0;
    auto span = [&] {
      l = align == Align::kStart ? x : align == Align::kEnd ? x - width : x - width / 2;
      r = l + width;
    };
    span();
    if (r > kSvgWidth - 4) align = Align::kEnd, span();
    if (l < kPlotX0 - 30) align = Align::kStart, span();
    for (int row = 0; row < kMaxLabelRows; ++row) {
      if (static_cast<std::size_t>(row) == rows_.size()) rows_.emplace_back();
      auto& used = rows_[static_cast<std::size_t>(row)];
      const bool clash = std::any_of(used.begin(), used.end(), [&](const auto& iv) { return l < iv.second + 6 && iv.first < r + 6; });
      if (!clash) {
        used.emplace_back(l, r);
        return row;
      }
    }
    return std::nullopt;
  }
  [[nodiscard]] int rows() const {
    int n = 0;
    for (std::size_t i = 0; i < rows_.size(); ++i)
      if (!rows_[i].empty()) n = static_cast<int>(i) + 1;
    return n;
  }

 private:
  std::vector<std::vector<std::pair<double, double>>> rows_;
};

double text_width(std::string_view s) {
  std::size_t glyphs = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++glyphs;  // count UTF-8 lead bytes only
  return static_cast<double>(glyphs) * kCharWidth;
}

const char* anchor_name(Align a) { return a == Align::kStart ? "start" : a == Align::kEnd ? "end" : "middle"; }

/// One lane under construction: marks (SVG, lane coordinates) and labels placed in rows below
/// `label_top`.
struct Lane {
  std::string cls;    ///< "worker", "lock", "faults", "high-water"
  std::string title;  ///< left column, bold
  std::string subtitle;
  std::string attrs;  ///< extra attributes of the lane's <g>
  double label_top = 48;  ///< y of the first label row (lane coordinates)
  double leader_from = 44;
  std::ostringstream body;  ///< shapes, drawn first
  LabelRows rows;
  int hidden_labels = 0;
  std::optional<double> leader_override;  ///< the next mark's leader starts here (then resets)

  /// A mark: <g class="mark ..." id=... data...><title/><a href="#ev-N">shape</a>[leader, label]</g>.
  void mark(const std::string& mark_cls, std::optional<std::size_t> event, const std::string& id, const std::string& data,
            const std::string& tooltip, const std::string& shape, const std::string& label = {}, double label_x = 0,
            Align align = Align::kStart, const std::string& label_cls = {}) {
    body << "<g class=\"mark " << mark_cls << "\"";
    if (!id.empty()) body << " id=\"" << id << "\"";
    if (event) body << " data-event=\"" << *event << "\"";
    body << data << "><title>" << html(tooltip) << "</title>";
    if (event) body << "<a href=\"#ev-" << *event << "\">" << shape << "</a>";
    else body << shape;
    const double from = leader_override.value_or(leader_from);
    leader_override.reset();
    if (!label.empty()) {
      const double w = text_width(label);
      double x = label_x;
      Align a = align;
      if (auto row = rows.place(x, a, w)) {
        const double y = label_top + *row * kRowHeight;
        body << "<line class=\"leader\" x1=\"" << num(label_x) << "\" y1=\"" << num(from) << "\" x2=\""
             << num(label_x) << "\" y2=\"" << num(y + 2) << "\"/>";
        body << "<text class=\"label" << (label_cls.empty() ? "" : " " + label_cls) << "\" x=\"" << num(x)
             << "\" y=\"" << num(y + 11) << "\" text-anchor=\"" << anchor_name(a) << "\">" << html(label) << "</text>";
      } else {
        ++hidden_labels;
      }
    }
    body << "</g>\n";
  }

  [[nodiscard]] double height() const { return label_top + rows.rows() * kRowHeight + 8; }
};

std::string data_attr(const char* name, const std::string& value) {
  return std::string(" data-") + name + "=\"" + html(value) + "\"";
}
std::string data_attr(const char* name, std::int64_t value) { return data_attr(name, std::to_string(value)); }

std::string rect(double x0, double y, double x1, double h, const std::string& cls, const std::string& extra = {}) {
  const double w = std::max(1.5, x1 - x0);
  return "<rect class=\"" + cls + "\" x=\"" + num(x0) + "\" y=\"" + num(y) + "\" width=\"" + num(w) + "\" height=\"" +
         num(h) + "\"" + extra + "/>";
}

std::string opt_str(const std::optional<std::int64_t>& v) { return v ? std::to_string(*v) : std::string("?"); }

// ---- reading the history -------------------------------------------------------------------

const std::vector<std::string> kTokenColors = {"#4e79a7", "#59a14f", "#76b7b2", "#9c755f", "#b07aa1",
                                               "#edc948", "#86bcb6", "#8cd17d", "#a0cbe8", "#d4a6c8"};

struct Model {
  const History& h;
  const Analysis& a;
  TimeScale ts;
  std::vector<std::string> workers;               ///< lane order
  /// (lock_key, token) -> worker, from acquire.ok: a client that keeps one key for every holder
  /// (python-etcd3's /locks/N) gives each holding the same key, so the key alone names no owner.
  std::map<std::pair<std::string, std::int64_t>, std::string> key_owner;
  std::map<std::int64_t, std::string> token_owner;  ///< token -> worker
  std::map<std::int64_t, std::string> token_color;
  std::set<std::size_t> evidence;                 ///< every event an anomaly cites
  std::set<std::size_t> expiry_deletes;           ///< lock.delete events that are lease expiries during work
  /// write.ok index -> the high-water it was below: exactly the writes the stale-write-accepted
  /// checker names (stale_writes), never decided here.
  std::map<std::size_t, std::int64_t> stale_accepted;
  /// Why no write can be marked accepted below the mark when the stale-write-accepted checker did
  /// not judge ("the stale-write-accepted check did not run", "... was unknown: <why>"); empty
  /// when it judged (valid or invalid).
  std::string stale_unjudged;
  std::set<std::size_t> drawn;                    ///< events that have a mark-N
  std::set<std::int64_t> release_revisions;       ///< revisions of release.ok events (deletes they explain)
  /// (lock_key, token) of every release.invoke -> the first one's history index: a delete of that
  /// key after it is its holder's unlock, even when no release.ok came back (a lost reply); a
  /// delete before it is not (the lease ran out first).
  std::map<std::pair<std::string, std::int64_t>, std::size_t> release_invokes;

  /// The worker holding `lock_key` with `token` (its acquire.ok), else the token's holder, else "".
  [[nodiscard]] std::string owner(const std::string& lock_key, std::optional<std::int64_t> token) const {
    if (token)
      if (auto it = key_owner.find({lock_key, *token}); it != key_owner.end()) return it->second;
    return token ? who(*token) : std::string();
  }
  /// Whether the holder of (lock_key, token) had asked to release it before history index `i`.
  [[nodiscard]] bool asked_before(const std::string& lock_key, std::int64_t token, std::size_t i) const {
    auto it = release_invokes.find({lock_key, token});
    return it != release_invokes.end() && it->second < i;
  }

  [[nodiscard]] std::string color(std::int64_t token) const {
    auto it = token_color.find(token);
    return it == token_color.end() ? "#7f7f7f" : it->second;
  }
  [[nodiscard]] std::string who(std::int64_t token) const {
    auto it = token_owner.find(token);
    return it == token_owner.end() ? std::string() : it->second;
  }
  [[nodiscard]] std::string at(std::int64_t t) const { return rt::format("+%.3f s", ts.rel_s(t)); }
};

bool is_lane_source(const std::string& s) { return !s.empty() && s != "harness" && s != "lock" && s != "resource"; }

/// End of a pause on the history's clock: the sender's own stamp when present (it emitted the
/// event right after the gap), else receive time.
std::int64_t pause_end(const Event& e) { return e.src_ns > 0 ? e.src_ns : e.t_ns; }

/// The stale-write-accepted checker's name, and its anomalies'.
constexpr std::string_view kStaleCheck = "stale-write-accepted";

/// Fills m.stale_accepted and m.stale_unjudged from the stale-write-accepted checker's result: a
/// write is accepted below the key's high-water mark exactly when that checker names it (judged in
/// the resource's acceptance order and real time, never here in the order replies reached the
/// harness: a write accepted before a pause whose reply came after it is no stale acceptance,
/// issue 31 item 6). Each of its anomalies is one (key, client, token) (checkers.h): its lowest
/// token is the stale one, the others the higher tokens the resource had accepted before; the
/// write.oks it cites with the stale token on its key are the stale writes (the others it cites
/// are the higher writes, accepted in order), drawn below its highest token.
void stale_writes(const Analysis& a, const History& h, Model& m) {
  const auto c = std::find_if(a.checkers.begin(), a.checkers.end(), [](const CheckerResult& r) { return r.name == kStaleCheck; });
  if (c == a.checkers.end()) {
    m.stale_unjudged = "the stale-write-accepted check did not run";
    return;
  }
  if (c->verdict == Verdict::kUnknown)
    m.stale_unjudged = "the stale-write-accepted check was unknown" + (c->error.empty() ? std::string() : ": " + c->error);
  for (const auto& an : c->anomalies) {
    if (an.name != kStaleCheck || an.tokens.size() < 2) continue;
    for (std::size_t i : an.evidence)
      if (i < h.size() && h[i].kind == EventKind::kWriteOk && h[i].token == an.tokens.front() && h[i].key == an.key)
        m.stale_accepted.emplace(i, an.tokens.back());
  }
}

Model build_model(const ReportData& d) {
  Model m{d.history, d.analysis, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}};
  const History& h = d.history;
  // Time range: run.start .. run.end (else first .. last event), widened to every pause start.
  std::optional<std::int64_t> start, end;
  std::int64_t lo = 0, hi = 0;
  bool any = false;
  for (const Event& e : h) {
    if (e.t_ns == 0) continue;
    if (!any) lo = hi = e.t_ns, any = true;
    lo = std::min(lo, e.t_ns);
    hi = std::max(hi, e.t_ns);
    if (e.kind == EventKind::kRunStart && !start) start = e.t_ns;
    if (e.kind == EventKind::kRunEnd) end = e.t_ns;
    if (e.kind == EventKind::kPause && e.duration_ns) lo = std::min(lo, pause_end(e) - *e.duration_ns);
  }
  m.ts.t0 = start ? std::min(*start, lo) : lo;
  m.ts.t1 = std::max(end ? std::max(*end, hi) : hi, m.ts.t0 + 1'000'000'000);

  if (d.scenario != nullptr)
    for (const auto& w : d.scenario->workers()) m.workers.push_back(w.id);
  for (const Event& e : h)
    if (is_lane_source(e.source) && std::find(m.workers.begin(), m.workers.end(), e.source) == m.workers.end())
      m.workers.push_back(e.source);

  std::set<std::int64_t> tokens;
  for (const Event& e : h) {
    if (e.kind == EventKind::kAcquireOk) {
      if (!e.lock_key.empty() && e.token) m.key_owner[{e.lock_key, *e.token}] = e.source;
      if (e.token) m.token_owner[*e.token] = e.source;
    }
    if (e.token && (e.kind == EventKind::kAcquireOk || e.kind == EventKind::kLockGrant)) tokens.insert(*e.token);
  }
  std::size_t ci = 0;
  for (auto t : tokens) m.token_color[t] = kTokenColors[ci++ % kTokenColors.size()];

  for (std::size_t i = 0; i < h.size(); ++i) {
    const Event& e = h[i];
    if (e.kind == EventKind::kReleaseOk && e.revision) m.release_revisions.insert(*e.revision);
    if (e.kind == EventKind::kReleaseInvoke && e.token) m.release_invokes.try_emplace({e.lock_key, *e.token}, i);
  }
  for (const auto& c : d.analysis.checkers)
    for (const auto& an : c.anomalies) m.evidence.insert(an.evidence.begin(), an.evidence.end());
  for (const auto& x : d.analysis.figures.expiries_during_work)
    for (std::size_t i : x.evidence)
      if (i < h.size() && h[i].kind == EventKind::kLockDelete) m.expiry_deletes.insert(i);

  stale_writes(d.analysis, h, m);
  return m;
}

// ---- lanes -------------------------------------------------------------------------------------

/// A worker's process as the harness saw it: its first sign of life, and its worker.exit.
struct WorkerProcess {
  std::optional<std::int64_t> started, exited;
  std::optional<std::size_t> exit_index;
};

WorkerProcess worker_process(const History& h, const std::string& w) {
  WorkerProcess p;
  for (std::size_t i = 0; i < h.size(); ++i) {
    const Event& e = h[i];
    if (e.source == "harness" && e.target == w && e.kind == EventKind::kLog && e.detail.rfind("started worker", 0) == 0 && !p.started)
      p.started = e.t_ns;
    if (e.source == "harness" && e.target == w && e.kind == EventKind::kWorkerExit) p.exited = e.t_ns, p.exit_index = i;
    if (e.source == w && !p.started) p.started = e.t_ns;
  }
  return p;
}

/// The lane's title and attributes: "worker", or "black box" for a worker that sent no events.
void worker_lane_heading(const Model& m, const std::string& w, Lane& lane) {
  lane.cls = "worker";
  lane.title = w;
  lane.subtitle = "worker";
  lane.attrs = " id=\"lane-worker-" + html(w) + "\"" + data_attr("worker", w);
  const auto& silent = m.a.black_box_workers;
  if (std::binary_search(silent.begin(), silent.end(), w)) {
    // It sent no events: the lane can only show what the harness saw (its start and exit).
    lane.subtitle = "black box";
    lane.attrs += data_attr("black-box", "true");
  }
}

/// The process line (started .. exited) and the dashed waits for the lock (acquire.invoke ..
/// acquire.ok / acquire.fail).
void draw_process_and_waits(const Model& m, const std::string& w, const WorkerProcess& p, Lane& lane) {
  const History& h = m.h;
  const auto& ts = m.ts;
  const std::int64_t run_end = ts.t1;
  if (p.started) {
    lane.body << "<line class=\"process\" x1=\"" << num(ts.x(*p.started)) << "\" y1=\"15\" x2=\""
              << num(ts.x(p.exited.value_or(run_end))) << "\" y2=\"15\"/>\n";
  }
  for (std::size_t i = 0; i < h.size(); ++i) {
    const Event& e = h[i];
    if (e.source != w || e.kind != EventKind::kAcquireInvoke) continue;
    std::int64_t until = p.exited.value_or(run_end);
    for (std::size_t j = i + 1; j < h.size(); ++j)
      if (h[j].source == w && (h[j].kind == EventKind::kAcquireOk || h[j].kind == EventKind::kAcquireFail)) {
        until = h[j].t_ns;
        break;
      }
    const double x0 = ts.x(e.t_ns), x1 = ts.x(until);
    lane.body << "<line class=\"waiting\" x1=\"" << num(x0) << "\" y1=\"15\" x2=\"" << num(x1) << "\" y2=\"15\"><title>"
              << html(w + " waits for the lock " + m.at(e.t_ns) + " .. " + m.at(until)) << "</title></line>\n";
    if (x1 - x0 > text_width("waiting for the lock") + 8)
      lane.body << "<text class=\"bar-text waiting-text\" x=\"" << num(x0 + 4) << "\" y=\"11\">waiting for the lock</text>\n";
  }
}

/// When worker `w` stopped acting as the holder of the acquire.ok at `i`: its release, a rejected
/// write with that token, a new acquire, its exit (lease.lost is not an end: a worker may keep
/// writing with the token it has, as unfenced runs do); else its exit or the run's end.
struct BeliefEnd {
  std::size_t index = 0;  ///< the event that ended it; h.size() when none did
  std::int64_t t = 0;
  std::string why;
};

BeliefEnd belief_end(const Model& m, const std::string& w, std::size_t i, const WorkerProcess& p) {
  const History& h = m.h;
  const Event& a = h[i];
  BeliefEnd end{h.size(), p.exited.value_or(m.ts.t1), p.exited ? "the worker exited" : "the run ended"};
  for (std::size_t j = i + 1; j < h.size(); ++j) {
    const Event& e = h[j];
    const bool own = e.source == w;
    if ((own && (e.kind == EventKind::kReleaseInvoke || e.kind == EventKind::kAcquireInvoke ||
                 (e.kind == EventKind::kWriteFail && e.token == a.token))) ||
        (e.source == "harness" && e.target == w && e.kind == EventKind::kWorkerExit))
      return {j, e.t_ns, std::string(kind_name(e.kind))};
  }
  return end;
}

/// The hatched bar after the lock service deleted `w`'s key (event `del`) while `w` still believed
/// it held the lock (until `end`).
void draw_stale_belief(const Model& m, const std::string& w, std::int64_t token, std::size_t del, const BeliefEnd& end,
                       Lane& lane) {
  const auto& ts = m.ts;
  const Event& d = m.h[del];
  const std::string tok = std::to_string(token);
  const double s0 = ts.x(d.t_ns), s1 = ts.x(end.t);
  const std::string stip = "the lock service deleted " + w + "'s key (token " + tok + ") " + m.at(d.t_ns) + ", but " + w +
                           " still believed it held the lock until " + m.at(end.t) + " (" + end.why + ")";
  std::string long_text = "lease gone: " + w + " still believes it holds token " + tok;
  std::string sshape = rect(s0, 6, s1, 18, "stale", " fill=\"url(#hatch-stale)\"");
  std::string slabel;
  if (s1 - s0 > text_width(long_text) + 6) sshape += "<text class=\"bar-text stale-text\" x=\"" + num(s0 + 3) + "\" y=\"19\">" + html(long_text) + "</text>";
  else slabel = "stale token " + tok;
  lane.mark("holding stale", std::nullopt, {},
            data_attr("worker", w) + data_attr("token", token) + data_attr("start-s", secs(ts.rel_s(d.t_ns))) +
                data_attr("end-s", secs(ts.rel_s(end.t))),
            stip, sshape, slabel, s0, Align::kStart, "stale-label");
}

/// Holdings: a bar per acquire.ok until the worker stops acting as the holder (belief_end). The
/// lock service's delete of its key, when it comes first, splits the bar: after it, the worker's
/// belief is stale.
void draw_holdings(Model& m, const std::string& w, const WorkerProcess& p, Lane& lane) {
  const History& h = m.h;
  const auto& ts = m.ts;
  for (std::size_t i = 0; i < h.size(); ++i) {
    const Event& a = h[i];
    if (a.source != w || a.kind != EventKind::kAcquireOk) continue;
    const std::int64_t token = a.token.value_or(0);
    const BeliefEnd end = belief_end(m, w, i, p);
    std::optional<std::size_t> del;
    for (std::size_t j = i + 1; j < h.size(); ++j)
      if (h[j].kind == EventKind::kLockDelete && !a.lock_key.empty() && h[j].lock_key == a.lock_key) {
        del = j;
        break;
      }
    // Stale: the key was deleted before the worker stopped acting as the holder, and not by its own
    // release (the watch can report the release's delete before the worker's release.invoke
    // arrives; a release.ok with the delete's revision says whose delete it was).
    const bool stale = del && *del < end.index && !(h[*del].revision && m.release_revisions.count(*h[*del].revision));
    const std::int64_t solid_end = stale ? h[*del].t_ns : end.t;
    const double x0 = ts.x(a.t_ns), x1 = ts.x(solid_end);
    const std::string tok = std::to_string(token);
    std::string tip = w + " holds the lock with token " + tok + " (" + m.at(a.t_ns) + " .. " + m.at(solid_end) + ")";
    if (a.lease_id) tip += ", lease " + std::to_string(*a.lease_id);
    const std::string text = "token " + tok;
    std::string shape = rect(x0, 6, x1, 18, "holding", " fill=\"" + m.color(token) + "\"");
    const bool fits = x1 - x0 > text_width(text) + 6;
    if (fits) shape += "<text class=\"bar-text\" x=\"" + num(x0 + 3) + "\" y=\"19\">" + html(text) + "</text>";
    lane.mark("holding", i, "mark-" + std::to_string(i),
              data_attr("worker", w) + data_attr("token", token) + data_attr("start-s", secs(ts.rel_s(a.t_ns))) +
                  data_attr("end-s", secs(ts.rel_s(solid_end))),
              tip, shape, fits ? std::string() : text, x0, Align::kStart, "holding-label");
    m.drawn.insert(i);
    if (stale) draw_stale_belief(m, w, token, *del, end, lane);
  }
}

/// Pauses the worker measured itself: shaded, with their length.
void draw_pauses(Model& m, const std::string& w, Lane& lane) {
  const History& h = m.h;
  const auto& ts = m.ts;
  for (std::size_t i = 0; i < h.size(); ++i) {
    const Event& e = h[i];
    if (e.source != w || e.kind != EventKind::kPause || !e.duration_ns) continue;
    const std::int64_t end = pause_end(e), begin = end - *e.duration_ns;
    const double x0 = ts.x(begin), x1 = ts.x(end);
    const double len = static_cast<double>(*e.duration_ns) / 1e9;
    const std::string label = "paused " + rt::seconds(len);
    std::string tip = w + " measured a pause of " + rt::format("%.3f s", len) + " (" + m.at(begin) + " .. " + m.at(end) + ")";
    if (e.token) tip += " while holding token " + std::to_string(*e.token);
    std::string shape = rect(x0, 28, x1, 16, "pause", " fill=\"url(#hatch-pause)\"");
    const bool fits = x1 - x0 > text_width(label) + 8;
    if (fits)
      shape += "<text class=\"bar-text pause-text\" x=\"" + num((x0 + x1) / 2) + "\" y=\"40\" text-anchor=\"middle\">" + html(label) + "</text>";
    lane.mark("pause", i, "mark-" + std::to_string(i),
              data_attr("worker", w) + (e.token ? data_attr("token", *e.token) : std::string()) +
                  data_attr("duration-s", secs(len)) + data_attr("start-s", secs(ts.rel_s(begin))),
              tip, shape, fits ? std::string() : label, (x0 + x1) / 2, Align::kMiddle, "pause-label");
    m.drawn.insert(i);
  }
}

/// One write outcome's mark as drawn: its classes, tooltip, label (with its class) and shape.
struct WriteMark {
  std::string cls, tip, label, label_cls, shape;
};

/// The mark of the write outcome at history index `i` (write.ok, write.fail or write.info) of
/// worker `w`. `stale_labels` counts, per token, the accepted-stale labels shown so far (only the
/// first is labelled, with `stale_counts` of that token's stale writes).
WriteMark write_outcome_mark(const Model& m, const std::string& w, std::size_t i, std::map<std::int64_t, int>& stale_labels,
                             const std::map<std::int64_t, int>& stale_counts) {
  const Event& e = m.h[i];
  const std::int64_t token = e.token.value_or(0);
  const std::string tok = std::to_string(token);
  const std::string where = e.key + " segment " + opt_str(e.segment) + " chunk " + opt_str(e.chunk);
  const double x = m.ts.x(e.t_ns);
  WriteMark k;
  if (e.kind == EventKind::kWriteOk) {
    auto stale = m.stale_accepted.find(i);
    if (stale != m.stale_accepted.end()) {
      k.cls = "write accepted-stale";
      k.tip = w + " wrote " + where + " with token " + tok + ": ACCEPTED although the key's high-water mark was " +
              std::to_string(stale->second) + " " + m.at(e.t_ns);
      if (stale_labels[token]++ == 0) {
        k.label = "token " + tok + " accepted below high-water " + std::to_string(stale->second);
        if (stale_counts.at(token) > 1) k.label += " (" + std::to_string(stale_counts.at(token)) + " writes)";
      }
      k.label_cls = "stale-label";
      k.shape = rect(x - 2, 29, x + 2, 13, "write-mark accepted-stale");
    } else {
      k.cls = "write accepted";
      k.tip = w + " wrote " + where + " with token " + tok + ": accepted (high-water " + opt_str(e.high_water) + ") " + m.at(e.t_ns);
      k.shape = rect(x - 1.5, 30, x + 1.5, 11, "write-mark accepted", " fill=\"" + m.color(token) + "\"");
    }
  } else if (e.kind == EventKind::kWriteFail) {
    k.cls = "write rejected";
    k.tip = w + " wrote " + where + " with token " + tok + ": REJECTED by the fence (high-water " + opt_str(e.high_water) + ") " +
            m.at(e.t_ns) + (e.detail.empty() ? "" : ": " + e.detail);
    k.label = "token " + tok + " rejected";
    if (e.high_water) k.label += " (high-water " + std::to_string(*e.high_water) + ")";
    k.label_cls = "rejected-label";
    k.shape = rect(x - 3.5, 28, x + 3.5, 15, "write-mark rejected") + "<path class=\"cross\" d=\"M" + num(x - 3) + " 30 L" +
              num(x + 3) + " 41 M" + num(x + 3) + " 30 L" + num(x - 3) + " 41\"/>";
  } else {
    k.cls = "write unknown";
    k.tip = w + " wrote " + where + " with token " + tok + ": outcome unknown " + m.at(e.t_ns) + (e.detail.empty() ? "" : ": " + e.detail);
    k.label = "token " + tok + " outcome unknown";
    k.label_cls = "unknown-label";
    k.shape = rect(x - 2.5, 29, x + 2.5, 13, "write-mark unknown");
  }
  if (m.evidence.count(i)) k.cls += " evidence";
  return k;
}

/// Chunks written: one mark per outcome; a write.invoke that never got an outcome is unknown
/// ("no reply"), drawn after the outcomes.
void draw_writes(Model& m, const std::string& w, Lane& lane) {
  const History& h = m.h;
  std::map<std::tuple<std::string, std::int64_t, std::int64_t, std::int64_t>, std::size_t> pending;
  auto write_key = [](const Event& e) {
    return std::make_tuple(e.key, e.segment.value_or(-1), e.chunk.value_or(-1), e.token.value_or(-1));
  };
  std::map<std::int64_t, int> stale_labels;  // token -> stale-accepted labels shown (the first only)
  std::map<std::int64_t, int> stale_counts;
  for (const auto& [i, hw] : m.stale_accepted)
    if (h[i].source == w) ++stale_counts[h[i].token.value_or(0)];
  for (std::size_t i = 0; i < h.size(); ++i) {
    const Event& e = h[i];
    if (e.source != w) continue;
    if (e.kind == EventKind::kWriteInvoke) {
      pending[write_key(e)] = i;
      continue;
    }
    if (e.kind != EventKind::kWriteOk && e.kind != EventKind::kWriteFail && e.kind != EventKind::kWriteInfo) continue;
    pending.erase(write_key(e));
    std::string data = data_attr("worker", w) + data_attr("token", e.token.value_or(0)) + data_attr("key", e.key) +
                       data_attr("segment", opt_str(e.segment)) + data_attr("chunk", opt_str(e.chunk));
    if (e.high_water) data += data_attr("high-water", *e.high_water);
    const WriteMark k = write_outcome_mark(m, w, i, stale_labels, stale_counts);
    lane.mark(k.cls, i, "mark-" + std::to_string(i), data, k.tip, k.shape, k.label, m.ts.x(e.t_ns), Align::kStart, k.label_cls);
    m.drawn.insert(i);
  }
  for (const auto& [key, idx] : pending) {  // invoked, never answered
    const Event& e = h[idx];
    const double x = m.ts.x(e.t_ns);
    lane.mark("write unknown no-reply", idx, "mark-" + std::to_string(idx),
              data_attr("worker", w) + data_attr("token", e.token.value_or(0)) + data_attr("key", e.key),
              w + " sent " + e.key + " segment " + opt_str(e.segment) + " chunk " + opt_str(e.chunk) + " with token " +
                  opt_str(e.token) + " and never reported an outcome",
              rect(x - 2.5, 29, x + 2.5, 13, "write-mark unknown"), "no reply (token " + opt_str(e.token) + ")", x, Align::kStart,
              "unknown-label");
    m.drawn.insert(idx);
  }
}

/// What the worker learned (lease.lost), finished (job.done) or failed to get (acquire.fail), and
/// how it ended (its worker.exit: labelled when not "exit 0").
void draw_notes_and_exit(Model& m, const std::string& w, const WorkerProcess& p, Lane& lane) {
  const History& h = m.h;
  for (std::size_t i = 0; i < h.size(); ++i) {
    const Event& e = h[i];
    if (e.source != w) continue;
    const double x = m.ts.x(e.t_ns);
    if (e.kind == EventKind::kLeaseLost) {
      lane.mark("lease-lost", i, "mark-" + std::to_string(i), data_attr("worker", w) + (e.token ? data_attr("token", *e.token) : ""),
                w + " learned from a keepalive that its lease is gone " + m.at(e.t_ns),
                "<circle class=\"lease-lost\" cx=\"" + num(x) + "\" cy=\"15\" r=\"3.5\"/>", "lease lost", x, Align::kStart,
                "note-label");
    } else if (e.kind == EventKind::kJobDone) {
      lane.mark("job-done", i, "mark-" + std::to_string(i), data_attr("worker", w) + (e.token ? data_attr("token", *e.token) : ""),
                w + " finished its job " + m.at(e.t_ns) + (e.token ? " (token " + std::to_string(*e.token) + ")" : ""),
                "<path class=\"flag\" d=\"M" + num(x) + " 4 L" + num(x) + " 26 M" + num(x) + " 4 L" + num(x + 7) + " 8 L" +
                    num(x) + " 12\"/>",
                "job done", x, Align::kStart, "note-label");
    } else if (e.kind == EventKind::kAcquireFail) {
      lane.mark("acquire-fail", i, "mark-" + std::to_string(i), data_attr("worker", w),
                w + " failed to acquire the lock " + m.at(e.t_ns) + ": " + e.detail,
                "<circle class=\"acquire-fail\" cx=\"" + num(x) + "\" cy=\"15\" r=\"3.5\"/>", "acquire failed", x,
                Align::kStart, "unknown-label");
    } else {
      continue;
    }
    m.drawn.insert(i);
  }
  if (!p.exit_index) return;
  const Event& e = h[*p.exit_index];
  const double x = m.ts.x(e.t_ns);
  const bool clean = e.detail == "exit 0";
  lane.mark(clean ? "exit" : "exit abnormal", *p.exit_index, "mark-" + std::to_string(*p.exit_index), data_attr("worker", w),
            w + " ended " + m.at(e.t_ns) + ": " + e.detail,
            "<line class=\"exit\" x1=\"" + num(x) + "\" y1=\"8\" x2=\"" + num(x) + "\" y2=\"22\"/>",
            clean ? std::string() : e.detail, x, Align::kStart, "unknown-label");
  m.drawn.insert(*p.exit_index);
}

/// One worker's lane: its process and waits, the lock held, pauses, writes, notes and exit, drawn
/// in that order (later marks' labels take the rows left free).
void worker_lane(Model& m, const std::string& w, Lane& lane) {
  worker_lane_heading(m, w, lane);
  const WorkerProcess p = worker_process(m.h, w);
  draw_process_and_waits(m, w, p, lane);
  draw_holdings(m, w, p, lane);
  draw_pauses(m, w, lane);
  draw_writes(m, w, lane);
  draw_notes_and_exit(m, w, p, lane);
}

/// kind: the scenario's lock-service kind ("etcd", "zookeeper", ...); empty when the page has no
/// scenario (the lane then says so without naming one).
void lock_lane(Model& m, Lane& lane, const std::string& kind) {
  const History& h = m.h;
  const auto& ts = m.ts;
  lane.cls = "lock";
  lane.title = "lock service";
  lane.subtitle = kind.empty() ? "who owns the lock" : kind + ": who owns the lock";
  lane.attrs = " id=\"lane-lock\"";

  // Ownership: the live key with the lowest token (etcd: create_revision; ZooKeeper: the lock
  // znode's czxid; Redis: the fence counter's value) holds the lock.
  std::map<std::int64_t, std::pair<std::string, std::size_t>> live;  // token -> (lock_key, grant index)
  std::optional<std::int64_t> owner;
  std::int64_t owner_since = 0;
  auto close = [&](std::int64_t t) {
    if (!owner) return;
    const double x0 = ts.x(owner_since), x1 = ts.x(t);
    const std::string wname = m.who(*owner);
    const std::string text = "token " + std::to_string(*owner) + (wname.empty() ? "" : " \xC2\xB7 " + wname);
    std::string shape = rect(x0, 6, x1, 18, "owner", " fill=\"" + m.color(*owner) + "\"");
    if (x1 - x0 > text_width(text) + 6) shape += "<text class=\"bar-text\" x=\"" + num(x0 + 3) + "\" y=\"19\">" + html(text) + "</text>";
    lane.mark("owner", std::nullopt, {}, data_attr("token", *owner) + data_attr("worker", wname),
              "the lock service's view: token " + std::to_string(*owner) + (wname.empty() ? "" : " (" + wname + ")") +
                  " owns the lock " + m.at(owner_since) + " .. " + m.at(t),
              shape);
  };
  for (std::size_t i = 0; i < h.size(); ++i) {
    const Event& e = h[i];
    if (e.source != "lock" || !e.token) continue;
    if (e.kind == EventKind::kLockGrant) live[*e.token] = {e.lock_key, i};
    else if (e.kind == EventKind::kLockDelete) live.erase(*e.token);
    else continue;
    std::optional<std::int64_t> now_owner;
    if (!live.empty()) now_owner = live.begin()->first;
    if (now_owner != owner) {
      close(e.t_ns);
      owner = now_owner;
      owner_since = e.t_ns;
    }
  }
  close(ts.t1);

  for (std::size_t i = 0; i < h.size(); ++i) {
    const Event& e = h[i];
    if (e.source != "lock") continue;
    const double x = ts.x(e.t_ns);
    const std::int64_t token = e.token.value_or(0);
    std::string wname = m.owner(e.lock_key, e.token);
    std::string data = data_attr("token", token) + data_attr("worker", wname);
    if (e.kind == EventKind::kLockGrant) {
      // Was another key live at this point (then this contender queues behind it)?
      bool queued = false;
      for (std::size_t j = 0; j < i; ++j)
        if (h[j].source == "lock" && h[j].kind == EventKind::kLockGrant && h[j].token && *h[j].token < token) {
          bool deleted = false;
          for (std::size_t k = j + 1; k < i && !deleted; ++k)
            deleted = h[k].source == "lock" && h[k].kind == EventKind::kLockDelete && h[k].lock_key == h[j].lock_key;
          if (!deleted) queued = true;
        }
      const std::string who = wname.empty() ? "a contender" : wname;
      const std::string label = queued ? who + " queued: token " + std::to_string(token) : who + " granted token " + std::to_string(token);
      lane.mark(std::string("grant") + (queued ? " queued" : ""), i, "mark-" + std::to_string(i), data,
                "lock key " + e.lock_key + " created " + m.at(e.t_ns) + ": fencing token " + std::to_string(token) +
                    (e.lease_id ? ", lease " + std::to_string(*e.lease_id) : "") + (queued ? "; it waits behind a lower token" : ""),
                "<path class=\"grant\" d=\"M" + num(x - 4.5) + " 42 L" + num(x) + " 31 L" + num(x + 4.5) + " 42 Z\"/>", label, x,
                Align::kStart, "grant-label");
    } else if (e.kind == EventKind::kLockDelete) {
      const bool expiry = m.expiry_deletes.count(i) > 0;
      bool released = false;
      for (const Event& r : h)
        if (r.kind == EventKind::kReleaseOk && ((e.revision && r.revision == e.revision) || (!e.revision && r.lock_key == e.lock_key)))
          released = true;
      // Its holder asked for the delete but never heard back (a lost reply): still its release.
      const bool unanswered = !released && !expiry && m.asked_before(e.lock_key, token, i);
      released = released || unanswered;
      const std::string who = wname.empty() ? "" : wname + "'s ";
      std::string cls = expiry ? "delete expiry" : released ? "delete release" : "delete";
      std::string label = expiry ? who + "lease expired: token " + std::to_string(token) + " deleted"
                                 : released ? "token " + std::to_string(token) + " released" : "token " + std::to_string(token) + " deleted";
      if (m.evidence.count(i)) cls += " evidence";
      lane.mark(cls, i, "mark-" + std::to_string(i), data,
                "lock key " + e.lock_key + " deleted " + m.at(e.t_ns) + " (revision " + opt_str(e.revision) + ")" +
                    (expiry ? ": the lease expired while its holder was still working"
                     : unanswered ? ": released by its holder, which never got the reply"
                     : released   ? ": released by its holder"
                                  : ""),
                "<path class=\"delete-x\" d=\"M" + num(x - 4) + " 31 L" + num(x + 4) + " 41 M" + num(x + 4) + " 31 L" + num(x - 4) +
                    " 41\"/>",
                label, x, Align::kStart, expiry ? "rejected-label" : "note-label");
    } else {
      continue;
    }
    m.drawn.insert(i);
  }
}

void fault_lane(Model& m, Lane& lane) {
  const auto& ts = m.ts;
  lane.cls = "faults";
  lane.title = "faults";
  lane.subtitle = "injected by the harness";
  lane.attrs = " id=\"lane-faults\"";
  if (m.a.figures.faults.empty()) {
    lane.body << "<text class=\"empty-note\" x=\"" << num(kPlotX0 + 4) << "\" y=\"19\">no faults injected</text>\n";
    return;
  }
  for (const auto& f : m.a.figures.faults) {
    const std::int64_t end = f.heal_t_ns.value_or(ts.t1);
    const double x0 = ts.x(f.inject_t_ns), x1 = ts.x(end);
    const auto length = f.actual ? f.actual : f.planned;
    const double len = length ? static_cast<double>(length->count()) / 1e9 : ts.rel_s(end) - ts.rel_s(f.inject_t_ns);
    const std::string text = f.fault + " " + f.target + " " + rt::seconds(len) + (f.heal_t_ns ? "" : " (never healed)");
    std::string shape = rect(x0, 6, x1, 18, "fault-window");
    const bool fits = x1 - x0 > text_width(text) + 6;
    if (fits) shape += "<text class=\"bar-text fault-text\" x=\"" + num(x0 + 3) + "\" y=\"19\">" + html(text) + "</text>";
    std::string tip = f.fault + " on " + f.target + " injected " + m.at(f.inject_t_ns) +
                      (f.heal_t_ns ? ", healed " + m.at(*f.heal_t_ns) : std::string(", never healed")) + "; planned " +
                      (f.planned ? rt::format("%.3f s", static_cast<double>(f.planned->count()) / 1e9) : std::string("?")) +
                      ", actual " + (f.actual ? rt::format("%.3f s", static_cast<double>(f.actual->count()) / 1e9) : std::string("?"));
    lane.mark("fault", f.inject_index, "mark-" + std::to_string(f.inject_index),
              data_attr("fault", f.fault) + data_attr("target", f.target) + data_attr("duration-s", secs(len)), tip, shape,
              fits ? std::string() : text, x0, Align::kStart, "note-label");
    m.drawn.insert(f.inject_index);
  }
}

/// The store's high-water mark of one key over time, every write's token as a point.
void high_water_lane(Model& m, const std::string& key, const ReadBack& rb, Lane& lane) {
  const History& h = m.h;
  const auto& ts = m.ts;
  lane.cls = "high-water";
  lane.title = "high-water";
  lane.subtitle = "key " + key;
  lane.attrs = " id=\"lane-high-water-" + html(key) + "\"" + data_attr("key", key);
  constexpr double kTop = 8, kBottom = 96;
  lane.label_top = kBottom + 8;
  lane.leader_from = kBottom;

  struct Point {
    std::size_t index;
    std::int64_t t, token;
    bool ok;
  };
  std::vector<Point> points;
  std::int64_t lo = 0, hi = 0;
  bool any = false;
  auto see = [&](std::int64_t v) {
    if (!any) lo = hi = v, any = true;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  };
  for (std::size_t i = 0; i < h.size(); ++i) {
    const Event& e = h[i];
    if (e.key != key || !e.token || (e.kind != EventKind::kWriteOk && e.kind != EventKind::kWriteFail)) continue;
    points.push_back({i, e.t_ns, *e.token, e.kind == EventKind::kWriteOk});
    see(*e.token);
    if (e.high_water) see(*e.high_water);
  }
  if (auto it = rb.high_water.find(key); it != rb.high_water.end()) see(it->second);
  if (!any) {
    lane.body << "<text class=\"empty-note\" x=\"" << num(kPlotX0 + 4) << "\" y=\"19\">no writes to " << html(key) << "</text>\n";
    lane.label_top = 30;
    return;
  }
  // The span in unsigned arithmetic: a resource may report any int64 (INT64_MIN..INT64_MAX spans
  // 2^64 - 1), where hi - lo would overflow and the tick loops below never end.
  const std::uint64_t span = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo);
  auto at = [&](std::uint64_t offset) { return static_cast<std::int64_t>(static_cast<std::uint64_t>(lo) + offset); };
  const double pad = std::max(0.5, static_cast<double>(span) * 0.08);
  const double ylo = static_cast<double>(lo) - pad, yhi = static_cast<double>(hi) + pad;
  auto y = [&](double token) { return kBottom - (token - ylo) / (yhi - ylo) * (kBottom - kTop); };

  // Axis: token values (every one when few, else about five).
  std::set<std::int64_t> ticks;
  if (span <= 8) {
    for (std::uint64_t off = 0; off <= span; ++off) ticks.insert(at(off));
  } else {
    const std::uint64_t step = span / 5;  // >= 1 here
    for (std::uint64_t off = 0;; off += step) {  // every multiple of step up to span, as before
      ticks.insert(at(off));
      if (span - off < step) break;
    }
    ticks.insert(hi);
  }
  lane.body << "<line class=\"axis\" x1=\"" << num(kPlotX0) << "\" y1=\"" << num(kTop) << "\" x2=\"" << num(kPlotX0) << "\" y2=\""
            << num(kBottom) << "\"/>\n";
  for (auto v : ticks) {
    const double yy = y(static_cast<double>(v));
    lane.body << "<line class=\"hgrid\" x1=\"" << num(kPlotX0) << "\" y1=\"" << num(yy) << "\" x2=\"" << num(kPlotX1) << "\" y2=\""
              << num(yy) << "\"/><text class=\"tick\" x=\"" << num(kPlotX0 - 4) << "\" y=\"" << num(yy + 3.5)
              << "\" text-anchor=\"end\">" << v << "</text>\n";
  }
  lane.body << "<text class=\"axis-title\" x=\"" << num(kPlotX0 - 26) << "\" y=\"" << num(kTop + 2) << "\" text-anchor=\"end\">token</text>\n";

  // The step line: the mark only rises (accepted tokens; a reply's high_water).
  std::int64_t mark = 0;
  bool have = false;
  std::string path;
  std::vector<std::pair<std::size_t, std::int64_t>> steps;  // (event, new mark)
  for (const auto& p : points) {
    const Event& e = h[p.index];
    std::int64_t next = have ? mark : 0;
    if (p.ok) next = std::max(next, p.token);
    if (e.high_water) next = std::max(next, *e.high_water);
    if (!have || next != mark) {
      const double x = ts.x(p.t);
      if (!have) path = "M" + num(x) + " " + num(y(static_cast<double>(next)));
      else path += " L" + num(x) + " " + num(y(static_cast<double>(mark))) + " L" + num(x) + " " + num(y(static_cast<double>(next)));
      steps.emplace_back(p.index, next);
      mark = next;
      have = true;
    }
  }
  if (have) {
    path += " L" + num(ts.x(ts.t1)) + " " + num(y(static_cast<double>(mark)));
    lane.body << "<path class=\"hw-line\" d=\"" << path << "\"><title>" << html("high-water mark of " + key) << "</title></path>\n";
  }
  for (const auto& [idx, v] : steps) {
    const double x = ts.x(h[idx].t_ns);
    lane.leader_override = y(static_cast<double>(v)) + 3;
    lane.mark("hw-step", std::nullopt, "hw-step-" + std::to_string(idx), data_attr("key", key) + data_attr("token", v),
              "the high-water mark of " + key + " becomes " + std::to_string(v) + " " + m.at(h[idx].t_ns),
              "<circle class=\"hw-step\" cx=\"" + num(x) + "\" cy=\"" + num(y(static_cast<double>(v))) + "\" r=\"2.5\"/>",
              "high-water " + std::to_string(v), x, Align::kStart, "note-label");
  }
  std::set<std::pair<std::string, std::int64_t>> stale_labelled;
  for (const auto& p : points) {
    const double x = ts.x(p.t), yy = y(static_cast<double>(p.token));
    const Event& e = h[p.index];
    const std::string who = e.source + " token " + std::to_string(p.token);
    if (p.ok) {
      const auto stale_it = m.stale_accepted.find(p.index);
      const bool stale = stale_it != m.stale_accepted.end();
      std::string label;
      if (stale && stale_labelled.insert({e.source, p.token}).second) {
        label = std::to_string(p.token) + " < " + std::to_string(stale_it->second) + ": accepted";
        lane.leader_override = yy + 4;
      }
      lane.mark(stale ? "hw-point accepted-stale" : "hw-point accepted", p.index, "hw-" + std::to_string(p.index),
                data_attr("key", key) + data_attr("token", p.token) + data_attr("worker", e.source),
                who + (stale ? " accepted BELOW the high-water mark " : " accepted ") + m.at(p.t),
                "<circle class=\"" + std::string(stale ? "pt-stale" : "pt-ok") + "\" cx=\"" + num(x) + "\" cy=\"" + num(yy) +
                    "\" r=\"2.8\"" + (stale ? "" : " fill=\"" + m.color(p.token) + "\"") + "/>",
                label, x, Align::kStart, "stale-label");
    } else {
      const std::string label = std::to_string(p.token) + " < " + opt_str(e.high_water) + ": rejected";
      lane.leader_override = yy + 5;
      lane.mark("hw-point rejected", p.index, "hw-" + std::to_string(p.index),
                data_attr("key", key) + data_attr("token", p.token) + data_attr("worker", e.source) +
                    (e.high_water ? data_attr("high-water", *e.high_water) : std::string()),
                who + " rejected: below the high-water mark " + opt_str(e.high_water) + " " + m.at(p.t),
                "<path class=\"cross\" d=\"M" + num(x - 4) + " " + num(yy - 4) + " L" + num(x + 4) + " " + num(yy + 4) + " M" +
                    num(x + 4) + " " + num(yy - 4) + " L" + num(x - 4) + " " + num(yy + 4) + "\"/>",
                label, x, Align::kStart, "rejected-label");
    }
  }
}

/// One lease the lock service expired while its holder was still working, and what followed:
/// the story the page must make visible without reading a log.
struct ExpiryStory {
  std::string worker;                      ///< the holder whose lease expired
  std::int64_t token = 0;                  ///< its fencing token
  std::size_t del = 0;                     ///< the lock.delete event
  const PauseObservation* pause = nullptr;  ///< the holder's own measured pause around the expiry
  const FaultWindow* fault = nullptr;       ///< else the fault on the holder that was active then
  std::vector<std::size_t> successors;     ///< acquire.ok of other workers with higher tokens, from the
                                           ///< expiry to the old token's next write (at most three)
  std::optional<std::size_t> outcome;      ///< the holder's first write result with the old token after it
  /// "rejected", "accepted" (below the mark: the stale-write-accepted checker's finding),
  /// "in-order" (accepted, and the checker judged it not stale: no higher token had been accepted for its
  /// key, e.g. accepted before the pause with its reply late), "unjudged" (accepted, and the checker
  /// did not judge: Model::stale_unjudged), "unknown" or "none".
  std::string outcome_kind = "none";
};

/// How an expiry's holder reads when it was a black box that the history cannot name (more than
/// one silent worker was running: LeaseExpiry::worker is "").
constexpr std::string_view kUnnamedBlackBox = "a black-box worker";

/// Every expiry during work (at most five), in history order. Pure.
std::vector<ExpiryStory> expiry_stories(const Model& m) {
  const History& h = m.h;
  std::vector<ExpiryStory> out;
  for (const auto& x : m.a.figures.expiries_during_work) {
    if (out.size() >= 5) break;
    ExpiryStory st;
    st.worker = x.worker.empty() ? std::string(kUnnamedBlackBox) : x.worker;
    st.token = x.token;
    bool have_delete = false;
    for (std::size_t i : x.evidence)
      if (i < h.size() && h[i].kind == EventKind::kLockDelete) st.del = i, have_delete = true;
    if (!have_delete) continue;
    for (const auto& p : m.a.figures.pauses) {
      if (p.worker != x.worker || p.index >= h.size()) continue;
      const std::int64_t end = pause_end(h[p.index]), begin = end - p.duration.count();
      if (begin <= x.t_ns && x.t_ns <= end + 1'000'000'000 && (!st.pause || p.duration > st.pause->duration)) st.pause = &p;
    }
    for (const auto& f : m.a.figures.faults)
      if (f.target == x.worker && f.inject_t_ns <= x.t_ns) st.fault = &f;
    for (std::size_t i = st.del; i < h.size(); ++i) {
      const Event& e = h[i];
      if (e.source != x.worker || e.token != x.token) continue;
      const char* kind = e.kind == EventKind::kWriteFail ? "rejected"
                         : e.kind == EventKind::kWriteOk ? "accepted"
                         : e.kind == EventKind::kWriteInfo ? "unknown"
                                                           : nullptr;
      if (kind != nullptr) {
        st.outcome = i;
        st.outcome_kind = kind;
        // The checkers decide whether an accepted write was stale (in acceptance order), not the
        // order its reply reached the harness.
        if (st.outcome_kind == "accepted" && !m.stale_accepted.count(i)) st.outcome_kind = m.stale_unjudged.empty() ? "in-order" : "unjudged";
        break;
      }
    }
    // Who held the lock meanwhile (the first one even when it came after the old token's write).
    for (std::size_t i = st.del; i < h.size() && st.successors.size() < 3; ++i) {
      if (!st.successors.empty() && st.outcome && i > *st.outcome) break;
      if (h[i].kind == EventKind::kAcquireOk && h[i].source != x.worker && h[i].token && *h[i].token > x.token) st.successors.push_back(i);
    }
    out.push_back(st);
  }
  return out;
}

/// The old token's write in a few words: "w1's write with token 2 bounced off high-water 3".
std::string outcome_words(const Model& m, const ExpiryStory& st) {
  if (!st.outcome) return {};
  const Event& e = m.h[*st.outcome];
  const std::string head = st.worker + "'s write with token " + std::to_string(st.token);
  if (st.outcome_kind == "rejected")
    return head + " bounced" + (e.high_water ? " off high-water " + std::to_string(*e.high_water) : std::string());
  if (st.outcome_kind == "accepted") {
    auto it = m.stale_accepted.find(*st.outcome);
    return head + " was ACCEPTED" + (it != m.stale_accepted.end() ? " below high-water " + std::to_string(it->second) : std::string());
  }
  if (st.outcome_kind == "unjudged") return head + " was accepted; whether below the high-water mark is not known: " + m.stale_unjudged;
  if (st.outcome_kind == "in-order")
    return head + " was accepted in order: no higher token had been accepted for " + e.key + " (its reply came late)";
  return head + ": outcome unknown";
}

/// Time-axis tick step: 1, 2 or 5 x 10^k seconds, at most ~12 ticks.
double tick_step(double span_s) {
  const double raw = span_s / 12.0;
  double p = std::pow(10.0, std::floor(std::log10(std::max(raw, 1e-3))));
  for (double f : {1.0, 2.0, 5.0, 10.0})
    if (f * p >= raw) return f * p;
  return 10 * p;
}

std::string timeline_svg(Model& m, const ReportData& d, const std::vector<ExpiryStory>& stories) {
  std::vector<Lane> lanes(1);
  fault_lane(m, lanes.back());
  lanes.emplace_back();
  lock_lane(m, lanes.back(), d.scenario ? d.scenario->lock_service().kind : std::string());
  for (const auto& w : m.workers) {
    lanes.emplace_back();
    worker_lane(m, w, lanes.back());
  }
  std::set<std::string> keys;
  if (d.scenario != nullptr) keys.insert(d.scenario->job().key);
  for (const auto& [k, v] : d.readback.high_water) keys.insert(k);
  for (const Event& e : m.h)
    if (!e.key.empty() && (e.kind == EventKind::kWriteOk || e.kind == EventKind::kWriteFail)) keys.insert(e.key);
  for (const auto& k : keys) {
    lanes.emplace_back();
    high_water_lane(m, k, d.readback, lanes.back());
  }

  // Cues: a dashed line across every lane at each expiry during work and at the old token's next
  // write, labelled in a band above the time axis, so the lanes read as one story.
  struct Cue {
    std::size_t event;
    std::string cls, label, worker;
    std::int64_t token;
    double x, label_x;
    Align align;
    int row;
  };
  std::vector<Cue> cues;
  LabelRows cue_rows;
  auto add_cue = [&](std::size_t i, const std::string& cls, const std::string& label, const ExpiryStory& st) {
    Cue c{i, cls, label, st.worker, st.token, m.ts.x(m.h[i].t_ns), m.ts.x(m.h[i].t_ns), Align::kStart, -1};
    if (auto row = cue_rows.place(c.label_x, c.align, text_width(label))) c.row = *row;
    cues.push_back(c);
  };
  for (const auto& st : stories) {
    add_cue(st.del, "expiry", st.worker + "'s lease expired (token " + std::to_string(st.token) + ")", st);
    if (st.outcome) add_cue(*st.outcome, st.outcome_kind, outcome_words(m, st), st);
  }
  constexpr double kGap = 6;
  const double cue_h = cue_rows.rows() > 0 ? cue_rows.rows() * kRowHeight + 4 : 0;
  const double axis_h = 30 + cue_h;
  double y = axis_h;
  std::vector<double> tops;
  for (const auto& l : lanes) {
    tops.push_back(y);
    y += l.height() + kGap;
  }
  const double lanes_bottom = y;

  const std::vector<std::pair<std::string, std::string>> legend_items = {
      {"<rect x=\"0\" y=\"0\" width=\"12\" height=\"10\" fill=\"" + kTokenColors[0] + "\"/>", "lock held (token)"},
      {"<rect x=\"0\" y=\"0\" width=\"12\" height=\"10\" fill=\"url(#hatch-stale)\"/>", "lease gone, still acting as holder"},
      {"<rect x=\"0\" y=\"0\" width=\"12\" height=\"10\" fill=\"url(#hatch-pause)\"/>", "paused (measured by the worker)"},
      {"<rect class=\"write-mark accepted\" x=\"5\" y=\"0\" width=\"3\" height=\"10\" fill=\"" + kTokenColors[1] + "\"/>", "write accepted"},
      {"<rect class=\"write-mark rejected\" x=\"4\" y=\"0\" width=\"5\" height=\"10\"/>", "write rejected"},
      {"<rect class=\"write-mark accepted-stale\" x=\"4\" y=\"0\" width=\"4\" height=\"10\"/>",
       m.stale_unjudged.empty() ? "accepted below high-water" : "accepted below high-water: not judged"},
      {"<rect class=\"write-mark unknown\" x=\"4\" y=\"0\" width=\"4\" height=\"10\"/>", "outcome unknown"},
      {"<path class=\"grant\" d=\"M1.5 10 L6 1 L10.5 10 Z\"/>", "lock key created"},
      {"<path class=\"delete-x\" d=\"M2 0 L10 10 M10 0 L2 10\"/>", "lock key deleted"},
      {"<rect x=\"3\" y=\"0\" width=\"5\" height=\"10\" fill=\"#ffffff\" stroke=\"#6a1b9a\" stroke-width=\"2\"/>",
       "cited by an anomaly"}};
  std::vector<std::pair<double, double>> legend_at;
  double lx = kPlotX0, ly = lanes_bottom + 6;
  for (const auto& [swatch, text] : legend_items) {
    const double w = 16 + text_width(text) * 10.0 / 11.0 + 18;  // the legend's font is 10 px
    if (lx + w > kPlotX1 && lx > kPlotX0) lx = kPlotX0, ly += 16;
    legend_at.emplace_back(lx, ly);
    lx += w;
  }
  const double total = ly + 22;

  std::ostringstream s;
  const double span = m.ts.rel_s(m.ts.t1);
  s << "<svg id=\"timeline\" class=\"timeline\" viewBox=\"0 0 " << num(kSvgWidth) << " " << num(total) << "\" width=\""
    << num(kSvgWidth) << "\" height=\"" << num(total) << "\" role=\"img\" aria-label=\"timeline of the run\""
    << data_attr("span-s", secs(span)) << ">\n";
  s << "<defs>"
       "<pattern id=\"hatch-stale\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
       "<rect width=\"6\" height=\"6\" fill=\"#fde7e6\"/><rect width=\"2.5\" height=\"6\" fill=\"#ef9a94\"/></pattern>"
       "<pattern id=\"hatch-pause\" width=\"8\" height=\"8\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(-45)\">"
       "<rect width=\"8\" height=\"8\" fill=\"#5d6d7e\" fill-opacity=\"0.18\"/><rect width=\"2\" height=\"8\" fill=\"#5d6d7e\" fill-opacity=\"0.45\"/></pattern>"
       "</defs>\n";
  // Axis and grid.
  const double step = tick_step(span);
  s << "<g class=\"axis time-axis\">";
  for (int k = 0; k * step <= span + 1e-9 && k < 200; ++k) {
    const double t = k * step;
    const double x = kPlotX0 + t / span * (kPlotX1 - kPlotX0);
    s << "<line class=\"vgrid\" x1=\"" << num(x) << "\" y1=\"" << num(axis_h - 6) << "\" x2=\"" << num(x) << "\" y2=\""
      << num(lanes_bottom) << "\"/>";
    s << "<text class=\"tick\" x=\"" << num(x) << "\" y=\"" << num(axis_h - 10) << "\" text-anchor=\"middle\">"
      << (step < 1 ? rt::format("%.1f", t) : rt::format("%.0f", t)) << " s</text>";
  }
  s << "<text class=\"axis-title\" x=\"8\" y=\"" << num(axis_h - 10) << "\">since run start</text></g>\n";

  for (std::size_t i = 0; i < lanes.size(); ++i) {
    const Lane& l = lanes[i];
    s << "<g class=\"lane " << l.cls << "\" data-lane=\"" << l.cls << "\"" << l.attrs << " transform=\"translate(0," << num(tops[i])
      << ")\">\n";
    s << "<rect class=\"lane-bg" << (i % 2 ? " odd" : "") << "\" x=\"0\" y=\"0\" width=\"" << num(kSvgWidth) << "\" height=\""
      << num(l.height()) << "\"/>\n";
    s << "<text class=\"lane-title\" x=\"8\" y=\"19\">" << html(l.title) << "</text>";
    s << "<text class=\"lane-subtitle\" x=\"8\" y=\"33\">" << html(l.subtitle) << "</text>\n";
    s << l.body.str();
    if (l.hidden_labels > 0)
      s << "<text class=\"hidden-note\" x=\"" << num(kPlotX1) << "\" y=\"" << num(l.height() - 4) << "\" text-anchor=\"end\">"
        << l.hidden_labels << " more labels: hover the marks</text>\n";
    s << "</g>\n";
  }

  for (const auto& c : cues) {
    s << "<g class=\"cue " << c.cls << "\" data-event=\"" << c.event << "\"" << data_attr("worker", c.worker)
      << data_attr("token", c.token) << ">";
    s << "<line class=\"cue-line\" x1=\"" << num(c.x) << "\" y1=\"" << num(c.row >= 0 ? c.row * kRowHeight + 14 : axis_h - 6)
      << "\" x2=\"" << num(c.x) << "\" y2=\"" << num(lanes_bottom) << "\"/>";
    if (c.row >= 0)
      s << "<a href=\"#ev-" << c.event << "\"><text class=\"label cue-label\" x=\"" << num(c.align == Align::kStart ? c.x + 3 : c.label_x)
        << "\" y=\"" << num(c.row * kRowHeight + 12) << "\" text-anchor=\"" << anchor_name(c.align) << "\">" << html(c.label)
        << "</text></a>";
    s << "</g>\n";
  }

  // Legend: items flow left to right, wrapping at the plot's right edge.
  s << "<g class=\"legend\">";
  for (std::size_t i = 0; i < legend_items.size(); ++i) {
    const auto& [swatch, text] = legend_items[i];
    const auto [item_x, item_y] = legend_at[i];
    s << "<g class=\"legend-item\" transform=\"translate(" << num(item_x) << "," << num(item_y) << ")\">" << swatch
      << "<text class=\"legend\" x=\"16\" y=\"9\">" << html(text) << "</text></g>";
  }
  s << "</g>\n</svg>\n";
  return s.str();
}

// ---- the page ------------------------------------------------------------------------------------

std::string event_summary(const Event& e) {
  std::string s = e.source + " " + std::string(kind_name(e.kind));
  if (e.token) s += " token " + std::to_string(*e.token);
  if (!e.key.empty()) s += " " + e.key;
  if (e.segment) s += " seg " + std::to_string(*e.segment);
  if (e.chunk) s += " chunk " + std::to_string(*e.chunk);
  if (e.high_water) s += " hw " + std::to_string(*e.high_water);
  return s;
}

std::string ev_link(const Model& m, std::size_t i) {
  std::string text = "#" + std::to_string(i);
  if (i < m.h.size()) text += " " + event_summary(m.h[i]);
  return "<a class=\"evidence-link\" href=\"#ev-" + std::to_string(i) + "\">" + html(text) + "</a>";
}

/// "In short": one line per ExpiryStory: how the holder was gone (its measured pause, or the
/// fault on it), the expiry, who took the lock next with which token, and what became of the
/// holder's next write with its old token. The sentence the issue wants visible without reading
/// a log: "w1 paused for 6.00 s holding token 2 -> the lock service expired its lease -> w2 took
/// token 3 -> w1's write with token 2 bounced off high-water 3". Each part links to its event.
std::string headline(const Model& m, const std::vector<ExpiryStory>& stories) {
  const History& h = m.h;
  std::ostringstream s;
  for (const auto& st : stories) {
    const std::string tok = std::to_string(st.token);
    auto link = [&](std::size_t i, const std::string& text, const std::string& cls) {
      return "<a class=\"" + cls + "\" href=\"#ev-" + std::to_string(i) + "\">" + html(text) + "</a>";
    };
    std::string attrs = data_attr("worker", st.worker) + data_attr("token", st.token);
    std::vector<std::string> parts;
    if (st.pause) {
      const double len = std::chrono::duration<double>(st.pause->duration).count();
      parts.push_back(link(st.pause->index, st.worker + " paused for " + rt::seconds(len) + " holding token " + tok, "hl-pause"));
      attrs += data_attr("pause-s", secs(len));
    } else if (st.fault) {
      parts.push_back(link(st.fault->inject_index, st.worker + " was cut off by " + st.fault->fault + " holding token " + tok, "hl-pause"));
    } else {
      parts.push_back(html(st.worker + " held token " + tok));
    }
    parts.push_back(link(st.del, "the lock service expired its lease", "hl-expiry"));
    std::string all;
    for (std::size_t i : st.successors) {
      const Event& e = h[i];
      parts.push_back(link(i, e.source + " took token " + std::to_string(*e.token), "hl-successor"));
      if (all.empty()) attrs += data_attr("successor", e.source) + data_attr("successor-token", *e.token);
      all += (all.empty() ? "" : " ") + e.source + ":" + std::to_string(*e.token);
    }
    if (!all.empty()) attrs += data_attr("successors", all);
    if (st.outcome) parts.push_back(link(*st.outcome, outcome_words(m, st), "hl-" + st.outcome_kind));
    attrs += data_attr("outcome", st.outcome_kind);
    s << "<li class=\"headline " << st.outcome_kind << "\"" << attrs << ">";
    for (std::size_t k = 0; k < parts.size(); ++k) s << (k ? " <span class=\"then\">\xE2\x86\x92</span> " : "") << parts[k];
    s << "</li>\n";
  }
  if (stories.empty()) return {};
  return "<ul id=\"headline\">\n" + s.str() + "</ul>\n";
}

/// "What happened": the notable events, as sentences.
std::string story(const Model& m) {
  const History& h = m.h;
  std::ostringstream s;
  std::map<std::pair<std::string, std::int64_t>, int> stale_seen, rejected_seen, keepalive_seen;
  std::map<std::pair<std::string, std::int64_t>, int> stale_total, rejected_total, keepalive_total;
  std::map<std::pair<std::string, std::int64_t>, std::size_t> deleted_at;  // (lock_key, token) -> its lock.delete
  for (const auto& [i, hw] : m.stale_accepted) ++stale_total[{h[i].source, h[i].token.value_or(0)}];
  for (std::size_t i = 0; i < h.size(); ++i) {
    const Event& e = h[i];
    if (e.kind == EventKind::kWriteFail) ++rejected_total[{e.source, e.token.value_or(0)}];
    if (e.kind == EventKind::kKeepaliveFail) ++keepalive_total[{e.source, e.token.value_or(0)}];
    if (e.kind == EventKind::kLockDelete && e.token) deleted_at.try_emplace({e.lock_key, *e.token}, i);
  }
  int n = 0;
  auto item = [&](std::size_t i, const std::string& cls, const std::string& text) {
    s << "<li class=\"" << cls << "\"><a href=\"#ev-" << i << "\"><span class=\"t\">" << html(m.at(h[i].t_ns)) << "</span></a> "
      << html(text) << "</li>\n";
    ++n;
  };
  for (std::size_t i = 0; i < h.size() && n < 200; ++i) {
    const Event& e = h[i];
    const std::string tok = e.token ? std::to_string(*e.token) : "?";
    switch (e.kind) {
      case EventKind::kAcquireOk:
        item(i, "acquire", e.source + " acquired the lock: token " + tok);
        break;
      case EventKind::kFaultInject: {
        // A network fault's own description after "<target> (<namespace>) ": a partition's
        // "from resource 10.213.0.3 (replies)", a netem's "delay 100ms" (faults/partition.h).
        std::string what;
        if ((e.fault == "partition" || e.fault == "netem") && e.detail.rfind(e.target + " (", 0) == 0)
          if (const auto close = e.detail.find(") ", e.target.size()); close != std::string::npos) what = e.detail.substr(close + 2);
        item(i, "fault", "the harness injected " + e.fault + " on " + e.target + (what.empty() ? "" : ", " + what + ",") +
                             (e.duration_ns ? " for " + rt::seconds(static_cast<double>(*e.duration_ns) / 1e9) : std::string()));
        break;
      }
      case EventKind::kFaultHeal:
        item(i, "fault", e.fault + " on " + e.target + " healed" +
                             (e.duration_ns ? " after " + rt::seconds(static_cast<double>(*e.duration_ns) / 1e9) : std::string()));
        break;
      case EventKind::kLockDelete: {
        const std::string owner = m.owner(e.lock_key, e.token);
        const std::string w = owner.empty() ? std::string("its holder") : owner;
        if (m.expiry_deletes.count(i)) {
          item(i, "expiry", "the lock service deleted " + w + "'s lock key (token " + tok + "): the lease expired while " + w +
                                " was still working");
        } else if (e.token && (!e.revision || !m.release_revisions.count(*e.revision)) &&
                   m.release_invokes.count({e.lock_key, *e.token})) {
          const std::size_t asked = m.release_invokes.at({e.lock_key, *e.token});
          if (asked < i) {
            // An unlock whose reply never reached its holder (no release.ok): the issuer's truth.
            item(i, "note", "the lock service deleted " + w + "'s lock key (token " + tok + ", revision " + opt_str(e.revision) +
                                ") at " + w + "'s request: its unlock arrived and acted");
          } else {
            // The delete came before the request: the lease ran out first (a holder cut off from the
            // lock service asks to release a key that is already gone). Cause before effect.
            item(i, "expiry", "the lock service deleted " + w + "'s lock key (token " + tok + ", revision " +
                                  opt_str(e.revision) + ") before " + w + " asked to release it (its release.invoke came " +
                                  m.at(h[asked].t_ns) + "): the lease had expired");
          }
        }
        break;
      }
      case EventKind::kReleaseFail: {
        std::string truth;
        if (e.token)
          if (auto d = deleted_at.find({e.lock_key, *e.token}); d != deleted_at.end())
            truth = "; the lock service had deleted its key all the same (revision " + opt_str(h[d->second].revision) + ")";
        item(i, "unknown", e.source + "'s release of token " + tok + " failed" + (e.detail.empty() ? "" : " (" + e.detail + ")") + truth);
        break;
      }
      case EventKind::kKeepaliveFail: {
        auto& seen = keepalive_seen[{e.source, e.token.value_or(0)}];
        if (seen++ == 0) {
          const int total = keepalive_total[{e.source, e.token.value_or(0)}];
          item(i, "unknown", e.source + "'s keepalive of token " + tok + " failed" + (e.detail.empty() ? "" : " (" + e.detail + ")") +
                                 (total > 1 ? " (" + std::to_string(total) + " failed keepalives with this token)" : ""));
        }
        break;
      }
      case EventKind::kPause:
        if (e.duration_ns)
          item(i, "pause", e.source + " measured a pause of " + rt::seconds(static_cast<double>(*e.duration_ns) / 1e9) +
                               (e.token ? " while holding token " + tok : std::string()));
        break;
      case EventKind::kWriteFail: {
        auto& seen = rejected_seen[{e.source, e.token.value_or(0)}];
        if (seen++ == 0) {
          const int total = rejected_total[{e.source, e.token.value_or(0)}];
          item(i, "rejected", e.source + "'s write with token " + tok + " (" + e.key + " segment " + opt_str(e.segment) + " chunk " +
                                  opt_str(e.chunk) + ") was rejected: high-water " + opt_str(e.high_water) +
                                  (total > 1 ? " (" + std::to_string(total) + " rejected writes with this token)" : ""));
        }
        break;
      }
      case EventKind::kWriteOk:
        if (auto it = m.stale_accepted.find(i); it != m.stale_accepted.end()) {
          auto& seen = stale_seen[{e.source, e.token.value_or(0)}];
          if (seen++ == 0) {
            const int total = stale_total[{e.source, e.token.value_or(0)}];
            item(i, "stale", e.source + "'s write with token " + tok + " (" + e.key + " segment " + opt_str(e.segment) + " chunk " +
                                 opt_str(e.chunk) + ") was ACCEPTED although the high-water mark was " + std::to_string(it->second) +
                                 (total > 1 ? " (" + std::to_string(total) + " such writes)" : ""));
          }
        }
        break;
      case EventKind::kWriteInfo:
        item(i, "unknown", e.source + "'s write with token " + tok + ": outcome unknown" + (e.detail.empty() ? "" : " (" + e.detail + ")"));
        break;
      case EventKind::kLeaseLost:
        item(i, "note", e.source + " learned its lease is gone (token " + tok + ")");
        break;
      case EventKind::kAcquireFail:
        item(i, "unknown", e.source + " failed to acquire the lock" + (e.detail.empty() ? "" : ": " + e.detail));
        break;
      case EventKind::kJobDone:
        item(i, "note", e.source + " finished its job (token " + tok + ")");
        break;
      case EventKind::kJobGaveUp:
        item(i, "note", e.source + " gave up its job" + (e.token ? " (token " + tok + ")" : std::string()) +
                            (e.detail.empty() ? "" : ": " + e.detail));
        break;
      case EventKind::kWorkerExit:
        if (e.detail != "exit 0") item(i, "unknown", e.target + " ended: " + e.detail);
        break;
      case EventKind::kRunEnd:
        if (!e.detail.empty() && e.detail != "done") item(i, "unknown", "the run ended: " + e.detail);
        break;
      default:
        break;
    }
  }
  if (n == 0) return "<p class=\"empty-note\">No notable events were recorded.</p>\n";
  return "<ol class=\"story\">\n" + s.str() + "</ol>\n";
}

std::string verdict_class(std::string_view v) { return v == "valid" ? "valid" : v == "invalid" ? "invalid" : "unknown"; }

std::string event_table(const Model& m, std::size_t history_events, std::size_t first_index = 0) {
  const History& h = m.h;
  std::ostringstream s;
  std::set<std::size_t> keep;  // with a huge history: the cited and drawn events only
  const bool all = h.size() <= kMaxTableEvents;
  if (!all) {
    keep = m.evidence;
    for (const auto& [i, e] : m.a.evidence_events) keep.insert(i);
    keep.insert(m.drawn.begin(), m.drawn.end());
  }
  // A long run's page holds only the history's first events (ReportData::history_events): the
  // events the anomalies and figures cite beyond them come from the analysis's copies.
  std::vector<std::pair<std::size_t, const Event*>> beyond;
  if (history_events > h.size())
    for (const auto& [i, e] : m.a.evidence_events)
      if (i >= h.size()) beyond.emplace_back(i, &e);
  if (!all)
    s << "<p class=\"note\">The history has " << std::max(history_events, h.size()) << " events; this table lists the "
      << keep.size() << " that are drawn or cited. history.jsonl has them all (line = index + 1).</p>\n";
  if (!beyond.empty())
    s << "<p class=\"note\">After the first " << h.size() << " events, the table lists the " << beyond.size()
      << " that the anomalies and figures cite.</p>\n";
  s << "<table class=\"events\"><thead><tr><th>#</th><th>time</th><th>source</th><th>kind</th><th>token</th><th>key / segment / "
       "chunk</th><th>high-water</th><th>other</th></tr></thead><tbody>\n";
  auto row = [&](std::size_t i, const Event& e) {
    std::string cls = "k-" + std::string(kind_name(e.kind));
    std::replace(cls.begin(), cls.end(), '.', '-');
    if (m.evidence.count(i)) cls += " evidence";
    s << "<tr id=\"ev-" << i << "\" class=\"" << cls << "\"><td>";
    // The number is history.jsonl's (line = number + 1); on a window page the ids are the page's own.
    if (m.drawn.count(i)) s << "<a href=\"#mark-" << i << "\" title=\"show in the timeline\">" << i + first_index << "</a>";
    else s << i + first_index;
    s << "</td><td>" << html(m.at(e.t_ns)) << "</td><td>" << html(e.source) << "</td><td>" << html(std::string(kind_name(e.kind)))
      << "</td><td>" << (e.token ? std::to_string(*e.token) : "") << "</td><td>" << html(e.key)
      << (e.segment ? " / " + std::to_string(*e.segment) : "") << (e.chunk ? " / " + std::to_string(*e.chunk) : "") << "</td><td>"
      << (e.high_water ? std::to_string(*e.high_water) : "") << "</td><td>";
    std::string other;
    auto add = [&other](const std::string& part) { other += (other.empty() ? "" : "; ") + part; };
    if (!e.lock_key.empty()) add("lock_key " + e.lock_key);
    if (e.lease_id) add("lease " + std::to_string(*e.lease_id));
    if (e.revision) add("revision " + std::to_string(*e.revision));
    if (e.duration_ns) add(rt::format("duration %.3f s", static_cast<double>(*e.duration_ns) / 1e9));
    if (!e.fault.empty()) add("fault " + e.fault);
    if (!e.target.empty()) add("target " + e.target);
    if (!e.detail.empty()) add(e.detail);
    s << html(other) << "</td></tr>\n";
  };
  std::size_t rows = 0;
  for (std::size_t i = 0; i < h.size(); ++i) {
    if (!all && !keep.count(i)) continue;
    if (++rows > kMaxTableEvents) break;
    row(i, h[i]);
  }
  for (const auto& [i, e] : beyond) {
    if (++rows > kMaxTableEvents + beyond.size()) break;
    row(i, *e);
  }
  s << "</tbody></table>\n";
  return s.str();
}

constexpr const char* kStyle = R"CSS(
:root { --ink:#1f2328; --muted:#59636e; --line:#d0d7de; --ok:#1a7f37; --bad:#c62828; --warn:#b26a00; }
* { box-sizing: border-box; }
body { font-family: "DejaVu Sans", Verdana, Arial, sans-serif; color: var(--ink); margin: 0; padding: 16px 24px 48px; background: #fff; font-size: 14px; }
h1 { font-size: 22px; margin: 0 0 6px; } h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 15px; margin: 14px 0 4px; }
.muted, .note { color: var(--muted); } .note { font-size: 12px; }
.badge { display: inline-block; padding: 3px 10px; border-radius: 12px; font-weight: bold; color: #fff; margin-right: 6px; font-size: 13px; }
.badge.met { background: var(--ok); } .badge.not-met { background: var(--bad); } .badge.skipped { background: var(--muted); }
.badge.valid { background: #2f6f44; } .badge.invalid { background: #8e1c1c; } .badge.unknown { background: var(--warn); }
.summary { display: flex; flex-wrap: wrap; gap: 10px; margin: 12px 0; }
.summary div { border: 1px solid var(--line); border-radius: 6px; padding: 6px 12px; min-width: 130px; }
.summary b { display: block; font-size: 18px; }
.reasons li { color: var(--bad); }
#headline { list-style: none; margin: 12px 0; padding: 10px 14px; background: #f6f8fa; border: 1px solid var(--line); border-left: 5px solid #34495e; border-radius: 4px; font-size: 16px; }
#headline li { margin: 3px 0; } #headline a { color: var(--ink); } #headline .then { color: var(--muted); padding: 0 2px; }
#headline a.hl-pause { color: #1f3a52; font-weight: bold; } #headline a.hl-expiry { color: var(--bad); }
#headline a.hl-successor { font-weight: bold; } #headline a.hl-rejected { color: var(--ok); font-weight: bold; }
#headline a.hl-accepted { color: var(--bad); font-weight: bold; } #headline a.hl-in-order { color: var(--muted); } #headline a.hl-unjudged { color: var(--warn); } #headline a.hl-unknown { color: var(--warn); }
ol.story { padding-left: 22px; margin: 6px 0; } ol.story li { margin: 2px 0; }
ol.story .t { font-family: "DejaVu Sans Mono", monospace; font-size: 12px; color: var(--muted); }
ol.story li.rejected, ol.story li.expiry { color: var(--bad); } ol.story li.stale { color: var(--warn); font-weight: bold; }
ol.story li.pause, ol.story li.fault { color: #34495e; }
.figure-wrap { overflow-x: auto; border: 1px solid var(--line); border-radius: 6px; }
svg.timeline { display: block; font-family: "DejaVu Sans", Verdana, Arial, sans-serif; font-size: 11px; }
svg text { stroke: none; }
svg rect.lane-bg { fill: #ffffff; } svg rect.lane-bg.odd { fill: #f6f8fa; }
svg text.lane-title { font-weight: bold; font-size: 13px; fill: var(--ink); } svg text.lane-subtitle { font-size: 10px; fill: var(--muted); }
svg line.vgrid { stroke: #e4e8ec; stroke-width: 1; } svg line.hgrid { stroke: #eef1f4; } svg line.axis { stroke: #8c959f; }
svg text.tick, svg text.axis-title { fill: var(--muted); font-size: 10px; }
svg line.process { stroke: #8c959f; stroke-width: 1.5; } svg line.waiting { stroke: #8c959f; stroke-width: 2; stroke-dasharray: 4 3; }
svg rect.holding, svg rect.owner { stroke: rgba(0,0,0,.25); } svg rect.stale { stroke: #c62828; }
svg rect.ov-fault { fill: rgba(120,120,120,.18); } svg rect.ov-accepted { fill: #59a14f; } svg rect.ov-rejected { fill: #c62828; }
svg rect.ov-anomaly { fill: #c62828; } svg path.ov-expiry { fill: #e15759; stroke: #7a0e0e; }
table.windows tr.anomaly td:first-child { color: var(--bad); font-weight: bold; }
svg text.bar-text { fill: #fff; font-size: 11px; font-weight: bold; pointer-events: none; }
svg text.stale-text { fill: #7a0e0e; } svg text.waiting-text { fill: var(--muted); font-weight: normal; }
svg text.fault-text { fill: #4a2a00; } svg text.pause-text { fill: #1f3a52; }
svg rect.pause { stroke: #34495e; stroke-width: 1; stroke-dasharray: 3 2; }
svg rect.fault-window { fill: #f5b041; stroke: #b9770e; }
svg rect.write-mark.accepted { stroke: none; } svg rect.write-mark.rejected { fill: #fdecea; stroke: #c62828; stroke-width: 1.2; }
svg rect.write-mark.accepted-stale { fill: #f39c12; stroke: #9a5b00; } svg rect.write-mark.unknown { fill: #bdbdbd; stroke: #616161; }
svg path.cross { stroke: #c62828; stroke-width: 2; fill: none; } svg path.delete-x { stroke: #c62828; stroke-width: 2; fill: none; }
svg g.delete.release path.delete-x { stroke: #8c959f; }
svg path.grant { fill: #2e7d32; } svg circle.lease-lost { fill: #c62828; } svg circle.acquire-fail { fill: #616161; }
svg path.flag { stroke: #2e7d32; stroke-width: 1.5; fill: #a5d6a7; } svg line.exit { stroke: #1f2328; stroke-width: 2; }
svg line.leader { stroke: #afb8c1; stroke-width: .8; }
svg line.cue-line { stroke: #c62828; stroke-width: 1.2; stroke-dasharray: 5 4; opacity: .75; pointer-events: none; }
svg g.cue.expiry line.cue-line { stroke: #8e1c1c; } svg g.cue.rejected line.cue-line { stroke: #1a7f37; }
svg g.cue.accepted line.cue-line { stroke: #b26a00; }
svg text.cue-label { font-weight: bold; font-size: 11px; } svg g.cue.expiry text.cue-label { fill: #8e1c1c; }
svg g.cue.rejected text.cue-label { fill: #1a7f37; } svg g.cue.accepted text.cue-label { fill: #9a5b00; }
svg text.label { fill: var(--ink); font-size: 11px; } svg text.rejected-label { fill: #b71c1c; font-weight: bold; }
svg text.stale-label { fill: #9a5b00; font-weight: bold; } svg text.pause-label { fill: #1f3a52; font-weight: bold; }
svg text.unknown-label { fill: #5d4037; } svg text.note-label, svg text.grant-label { fill: #3d4852; }
svg path.hw-line { stroke: #1f2328; stroke-width: 2; fill: none; } svg circle.hw-step { fill: #1f2328; }
svg circle.pt-stale { fill: #f39c12; stroke: #9a5b00; } svg circle.pt-ok { stroke: rgba(0,0,0,.35); }
svg text.empty-note, svg text.hidden-note { fill: var(--muted); font-style: italic; }
svg text.legend { font-size: 10px; fill: var(--muted); }
svg g.mark.evidence rect.write-mark { stroke: #6a1b9a; stroke-width: 2; }
svg g.mark:target rect, svg g.mark:target path, svg g.mark:target circle { stroke: #6a1b9a; stroke-width: 3; }
svg a { cursor: pointer; }
table { border-collapse: collapse; font-size: 12px; margin: 6px 0; }
th, td { border: 1px solid var(--line); padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
table.events td:nth-child(2) { font-family: "DejaVu Sans Mono", monospace; white-space: nowrap; }
tr.evidence { background: #f3e5f5; } tr:target { background: #fff3b0; outline: 2px solid #f1c40f; }
tr.k-write-fail td:nth-child(4), tr.k-lock-delete td:nth-child(4) { color: var(--bad); font-weight: bold; }
section.anomaly { border: 1px solid #e6b8b8; border-left: 5px solid var(--bad); border-radius: 4px; padding: 8px 12px; margin: 10px 0; background: #fffafa; }
section.anomaly:target { outline: 2px solid #f1c40f; }
.evidence-list { margin: 4px 0 0; padding-left: 20px; font-size: 12px; }
a { color: #0b57d0; text-decoration: none; } a:hover { text-decoration: underline; }
code { font-family: "DejaVu Sans Mono", monospace; font-size: 12px; }
code.offending-line { white-space: pre-wrap; word-break: break-all; } ul.black-box { margin: 6px 0; padding-left: 20px; }
)CSS";

/// Annotates the page after layout (for tools and the browser test); changes nothing visible.
constexpr const char* kScript = R"JS(
(function () {
  var svg = document.getElementById('timeline');
  if (!svg || !svg.getBBox) return;
  var labels = svg.querySelectorAll('text.label, text.bar-text');
  var boxes = [];
  for (var i = 0; i < labels.length && i < 3000; i++) {
    var r = labels[i].getBoundingClientRect();
    labels[i].setAttribute('data-rendered-width', Math.round(r.width));
    boxes.push(r);
  }
  var overlaps = 0;
  for (var a = 0; a < boxes.length; a++)
    for (var b = a + 1; b < boxes.length; b++) {
      var p = boxes[a], q = boxes[b];
      if (p.width > 0 && q.width > 0 && p.left < q.right - 1 && q.left < p.right - 1 && p.top < q.bottom - 1 && q.top < p.bottom - 1) overlaps++;
    }
  var box = svg.getBoundingClientRect();
  svg.setAttribute('data-label-overlaps', String(overlaps));
  svg.setAttribute('data-rendered-width', String(Math.round(box.width)));
  svg.setAttribute('data-rendered-height', String(Math.round(box.height)));
})();
)JS";

/// "12.5" seconds for a window command (one decimal, never negative).
std::string window_secs(double s) { return rt::format("%.1f", std::max(0.0, s)); }

/// The analysis of the whole run: on a window page its own (ReportData::run_analysis), not the
/// window's renumbered one.
const Analysis& whole_run_analysis(const ReportData& d) { return d.run_analysis != nullptr ? *d.run_analysis : d.analysis; }

/// A time window around something that happened, for the windows list and the overview's marks.
struct Window {
  std::string what;   ///< "sigstop w1", "anomaly stale-write-accepted"
  double from_s = 0;  ///< seconds since the first event
  double to_s = 0;
  bool anomaly = false;
};

/// A window around every fault (from a lease TTL before its inject to two TTLs after its heal)
/// and every anomaly (its evidence's first and last event, widened by a TTL), in time order.
std::vector<Window> run_windows(const ReportData& d) {
  std::vector<Window> out;
  const Analysis& a = whole_run_analysis(d);
  if (d.overview == nullptr || d.overview->t0_ns == 0) return out;
  const RunOverview& ov = *d.overview;
  const double ttl = d.scenario != nullptr ? static_cast<double>(d.scenario->lease_ttl().count()) / 1e3 : 2.0;
  const double end_s = static_cast<double>(ov.seconds.size());
  for (const auto& f : a.figures.faults) {
    const double heal = f.heal_t_ns ? ov.rel_s(*f.heal_t_ns) : end_s;
    out.push_back({f.fault + " " + f.target, ov.rel_s(f.inject_t_ns) - ttl, std::min(end_s, heal + 2 * ttl), false});
  }
  const auto t_of = [&](std::size_t i) -> std::optional<std::int64_t> {
    if (auto it = a.evidence_events.find(i); it != a.evidence_events.end()) return it->second.t_ns;
    if (!d.first_index && i < d.history.size()) return d.history[i].t_ns;
    return std::nullopt;
  };
  for (const auto& c : a.checkers)
    for (const auto& an : c.anomalies) {
      std::optional<std::int64_t> lo, hi;
      for (std::size_t i : an.evidence)
        if (const auto t = t_of(i); t && *t > 0) {
          lo = lo ? std::min(*lo, *t) : *t;
          hi = hi ? std::max(*hi, *t) : *t;
        }
      if (lo) out.push_back({"anomaly " + an.name, ov.rel_s(*lo) - ttl, std::min(end_s, ov.rel_s(*hi) + ttl), true});
    }
  std::stable_sort(out.begin(), out.end(), [](const Window& x, const Window& y) { return x.from_s < y.from_s; });
  return out;
}

/// The whole run at a glance (RunOverview), drawn whatever its length in a fixed number of
/// buckets: accepted and rejected writes per bucket as bars, every fault's window as a band, every
/// lease expiry during work and every anomaly as a mark whose tooltip gives the command that
/// renders its window.
std::string overview_svg(const ReportData& d, const std::vector<Window>& windows) {
  const RunOverview& ov = *d.overview;
  const Analysis& a = whole_run_analysis(d);
  const std::size_t n = std::max<std::size_t>(ov.seconds.size(), 1);
  constexpr std::size_t kBuckets = 240;
  const std::size_t per = (n + kBuckets - 1) / kBuckets;  // seconds per bucket
  const std::size_t buckets = (n + per - 1) / per;
  std::vector<std::uint64_t> accepted(buckets), rejected(buckets), acquired(buckets);
  for (std::size_t s = 0; s < ov.seconds.size(); ++s) {
    accepted[s / per] += ov.seconds[s].accepted;
    rejected[s / per] += ov.seconds[s].rejected;
    acquired[s / per] += ov.seconds[s].acquired;
  }
  const std::uint64_t peak = std::max<std::uint64_t>(
      {*std::max_element(accepted.begin(), accepted.end()), *std::max_element(rejected.begin(), rejected.end()), 1});
  const double span = static_cast<double>(buckets * per);
  const double x0 = kPlotX0, x1 = kPlotX1;
  const auto x = [&](double sec) { return x0 + std::clamp(sec / span, 0.0, 1.0) * (x1 - x0); };
  constexpr double kBars = 70, kTop = 22, kMarks = kTop + kBars + 14;
  const double height = kMarks + 40;
  std::ostringstream o;
  o << "<svg id=\"overview\" class=\"overview\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(x1 + 20)
    << "\" height=\"" << num(height) << "\"" << data_attr("seconds-per-bucket", static_cast<std::int64_t>(per))
    << data_attr("buckets", static_cast<std::int64_t>(buckets)) << ">\n";
  o << "<text class=\"lane-title\" x=\"8\" y=\"" << num(kTop + kBars / 2) << "\">writes</text>"
    << "<text class=\"lane-subtitle\" x=\"8\" y=\"" << num(kTop + kBars / 2 + 13) << "\">per " << per << " s</text>"
    << "<text class=\"lane-title\" x=\"8\" y=\"" << num(kMarks + 12) << "\">events</text>\n";
  for (const auto& f : a.figures.faults) {
    const double from = ov.rel_s(f.inject_t_ns);
    const double to = f.heal_t_ns ? ov.rel_s(*f.heal_t_ns) : span;
    o << "<rect class=\"ov-fault\" x=\"" << num(x(from)) << "\" y=\"" << num(kTop) << "\" width=\""
      << num(std::max(1.0, x(to) - x(from))) << "\" height=\"" << num(kBars) << "\"" << data_attr("fault", f.fault)
      << data_attr("target", f.target) << "><title>" << html(f.fault + " " + f.target) << " at +" << secs(from)
      << " s</title></rect>\n";
  }
  const double bw = (x1 - x0) / static_cast<double>(buckets);
  for (std::size_t b = 0; b < buckets; ++b) {
    const double bx = x0 + bw * static_cast<double>(b);
    const double ha = kBars * static_cast<double>(accepted[b]) / static_cast<double>(peak);
    const double hr = kBars * static_cast<double>(rejected[b]) / static_cast<double>(peak);
    if (accepted[b] > 0)
      o << "<rect class=\"ov-accepted\" x=\"" << num(bx) << "\" y=\"" << num(kTop + kBars - ha) << "\" width=\""
        << num(std::max(0.6, bw * 0.6)) << "\" height=\"" << num(ha) << "\"><title>+" << b * per << " s: " << accepted[b]
        << " accepted, " << rejected[b] << " rejected, " << acquired[b] << " acquisitions</title></rect>";
    if (rejected[b] > 0)
      o << "<rect class=\"ov-rejected\" x=\"" << num(bx + bw * 0.6) << "\" y=\"" << num(kTop + kBars - std::max(2.0, hr))
        << "\" width=\"" << num(std::max(0.6, bw * 0.4)) << "\" height=\"" << num(std::max(2.0, hr)) << "\"><title>+" << b * per
        << " s: " << rejected[b] << " rejected by the fence</title></rect>";
  }
  o << "\n";
  for (const auto& x_ : a.figures.expiries_during_work) {
    const double t = ov.rel_s(x_.t_ns);
    o << "<path class=\"ov-expiry\" d=\"M" << num(x(t)) << "," << num(kMarks) << " l-5,10 h10 z\"><title>lease expiry during work ("
      << html(x_.worker.empty() ? std::string("a black box") : x_.worker) << ", token " << x_.token << ") at +" << secs(t)
      << " s</title></path>";
  }
  for (const auto& w : windows) {
    if (!w.anomaly) continue;
    const double t = w.from_s;
    o << "<rect class=\"ov-anomaly\" x=\"" << num(x(t)) << "\" y=\"" << num(kMarks + 14) << "\" width=\""
      << num(std::max(3.0, x(w.to_s) - x(t))) << "\" height=\"8\"" << data_attr("anomaly", w.what.substr(8)) << "><title>"
      << html(w.what) << ": " << html(d.window_command) << " --from " << window_secs(w.from_s) << " --to "
      << window_secs(w.to_s) << "</title></rect>";
  }
  // The axis: 1, 2 or 5 x 10^k seconds.
  const double step = tick_step(span);
  for (double t = 0; t <= span + 1e-9; t += step)
    o << "<text class=\"tick\" x=\"" << num(x(t)) << "\" y=\"" << num(height - 4) << "\" text-anchor=\"middle\">"
      << (step >= 1 ? std::to_string(static_cast<long long>(t)) : secs(t)) << "</text>";
  o << "\n</svg>\n";
  return o.str();
}

/// "The whole run": the overview and the windows around every fault and anomaly, each with the
/// command that renders it as a page of its own (at most kListedWindows listed; then how many more).
std::string whole_run_section(const ReportData& d) {
  constexpr std::size_t kListedWindows = 200;
  const std::vector<Window> windows = run_windows(d);
  std::ostringstream o;
  o << "<section id=\"whole-run\"><h2>The whole run</h2>\n<p class=\"note\">Every event of the run, counted per "
       "time bucket (history.jsonl has "
    << std::max(d.history_events, d.history.size())
    << " events): accepted writes (green) and rejections by the fence (red), fault windows (shaded), lease expiries "
       "during work (triangles) and anomalies (red bars). Hover for the counts.</p>\n<div class=\"figure-wrap\">\n"
    << overview_svg(d, windows) << "</div>\n";
  if (!windows.empty() && !d.window_command.empty()) {
    o << "<p class=\"note\">A page of its own for any window of the run, every event drawn: <code>"
      << html(d.window_command) << " --from SECONDS --to SECONDS</code>. Around each fault and anomaly:</p>\n"
      << "<table class=\"windows\" id=\"windows\"><thead><tr><th>around</th><th>from</th><th>to</th><th>command</th></tr>"
         "</thead><tbody>\n";
    std::size_t listed = 0;
    for (const auto& w : windows) {
      if (++listed > kListedWindows) break;
      const std::string cmd = d.window_command + " --from " + window_secs(w.from_s) + " --to " + window_secs(w.to_s);
      o << "<tr" << (w.anomaly ? " class=\"anomaly\"" : "") << "><td>" << html(w.what) << "</td><td>+" << window_secs(w.from_s)
        << " s</td><td>+" << window_secs(w.to_s) << " s</td><td><code>" << html(cmd) << "</code></td></tr>\n";
    }
    o << "</tbody></table>\n";
    if (windows.size() > kListedWindows)
      o << "<p class=\"note\">and " << windows.size() - kListedWindows << " more (verdict.json lists every fault and anomaly).</p>\n";
  }
  o << "</section>\n";
  return o.str();
}

// ---- the page's sections -------------------------------------------------------------------------

/// From <!DOCTYPE> to <body>: the title (scenario, met, verdict) and the style sheet.
std::string page_head(const ReportData& d) {
  const ScenarioResult& r = d.result;
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    << "<meta name=\"generator\" content=\"" << html(d.generator) << "\">\n"
    << "<title>" << html(r.scenario) << " \xE2\x80\x94 " << html(r.skipped ? "skipped" : r.met ? "met" : "NOT met") << " (" << html(r.verdict)
    << ") \xE2\x80\x94 fencecheck</title>\n<style>" << kStyle << "</style>\n</head>\n<body>\n";
  return o.str();
}

/// The page's end: the annotating script.
std::string page_end() { return std::string("<script>") + kScript + "</script>\n</body>\n</html>\n"; }

/// The figures under the headline (<div class="summary">): anomalies, rejected writes, expiries,
/// longest pause, duration, and the scenario's lease TTL, lock service, lock, resource, fencing.
std::string summary_figures(const ReportData& d) {
  const ScenarioResult& r = d.result;
  std::string anomalies;
  for (const auto& a : r.anomalies) anomalies += (anomalies.empty() ? "" : ", ") + a;
  std::ostringstream o;
  o << "<div class=\"summary\">"
    << "<div>anomalies<b id=\"fig-anomalies\">" << (r.anomalies.empty() ? "none" : html(anomalies)) << "</b></div>"
    << "<div>rejected writes<b id=\"fig-rejected\">" << r.rejected_writes << "</b></div>"
    << "<div>lease expiries during work<b id=\"fig-expiries\">" << expiries_text(r) << "</b></div>"
    << "<div>longest pause<b id=\"fig-pause\">" << html(longest_pause_text(r)) << "</b></div>"
    << "<div>duration<b id=\"fig-duration\">" << rt::seconds(r.duration_s) << "</b></div>";
  if (d.scenario != nullptr)
    o << "<div>lease TTL<b>"
      << (d.scenario->lease_ttl().count() % 1000 == 0 ? std::to_string(d.scenario->lease_ttl().count() / 1000) + " s"
                                                       : std::to_string(d.scenario->lease_ttl().count()) + " ms")
      << "</b></div>"
      << "<div>lock service<b id=\"fig-lock-service\" title=\"" << html(lock_service_summary(*d.scenario)) << "\">"
      << html(d.scenario->lock_service().kind) << "</b></div>"
      << "<div>lock<b id=\"fig-lock\">" << html(d.scenario->lock_service().lock) << "</b></div>";
  // Whether another run could have used the same lock or keys (docs/scenario-format.md, "Runs that
  // share a lock service"): kind none cannot claim, and says so here as well as in the log.
  if (const auto claim = claim_figure(r.run_dir))
    o << "<div>claim<b id=\"fig-claim\" title=\"" << html(claim->second) << "\">" << html(claim->first) << "</b></div>";
  if (d.scenario != nullptr)
    o << "<div>resource<b>" << html(d.scenario->resource().kind) << "</b></div>"
      << "<div>fencing<b>" << html(resource_design(*d.scenario)) << "</b></div>";
  o << "</div>\n";
  return o.str();
}

/// <header id="summary">: the scenario, whether its expectation was met, the verdict, the
/// description, the reasons, the black-box workers, the headline and the summary figures.
std::string page_header(const ReportData& d, const Model& m, const std::vector<ExpiryStory>& stories) {
  const ScenarioResult& r = d.result;
  std::ostringstream o;
  const std::string met_cls = r.skipped ? "skipped" : r.met ? "met" : "not-met";
  o << "<header id=\"summary\">\n<h1>" << html(r.scenario) << "</h1>\n";
  o << "<p><span class=\"badge " << met_cls << "\" id=\"outcome\" data-met=\"" << (r.met ? "true" : "false") << "\">"
    << (r.skipped ? "SKIPPED" : r.met ? "EXPECTATION MET" : "EXPECTATION NOT MET") << "</span>"
    << "<span class=\"badge " << verdict_class(r.verdict) << "\" id=\"verdict-badge\" data-verdict=\"" << html(r.verdict) << "\">verdict: "
    << html(r.verdict) << "</span> expected: <b>" << html(r.expectation) << "</b></p>\n";
  if (d.scenario != nullptr && !d.scenario->description().empty())
    o << "<p class=\"muted description\">" << html(d.scenario->description()) << "</p>\n";
  if (!r.reasons.empty()) {
    o << "<ul class=\"reasons\">";
    for (const auto& why : r.reasons) o << "<li>" << html(why) << "</li>";
    o << "</ul>\n";
  }
  if (!d.analysis.black_box_workers.empty()) {
    o << "<ul class=\"black-box\" id=\"black-box-workers\">";
    for (const auto& w : d.analysis.black_box_workers)
      o << "<li" << data_attr("worker", w) << "><b>" << html(w) << "</b>: " << html(kBlackBoxNote)
        << " <span class=\"muted\">(it sent no worker-protocol events)</span></li>";
    o << "</ul>\n";
  }
  o << headline(m, stories) << summary_figures(d);
  o << "<p class=\"note\">Run directory: <code>" << html(r.run_dir.string()) << "</code> \xC2\xB7 written by "
    << html(d.generator) << " \xC2\xB7 times are seconds since the run started (the orchestrator's monotonic clock)</p>\n</header>\n";
  return o.str();
}

/// "Protocol errors" (only when there are any): lines a worker sent that broke the worker
/// protocol, each with the line itself.
std::string protocol_errors_section(const ReportData& d, const Model& m) {
  if (d.analysis.protocol_errors.empty()) return {};
  std::ostringstream o;
  o << "<section id=\"protocol-errors\"><h2>Protocol errors</h2>\n<p class=\"note\">Lines that broke the worker "
       "protocol: what the worker did there is unknown, so the run cannot be judged safe.</p>\n"
    << "<table class=\"protocol-errors\"><thead><tr><th>worker</th><th>line</th><th>problem</th><th>the line as "
       "received</th><th>event</th></tr></thead><tbody>\n";
  for (const auto& pe : d.analysis.protocol_errors)
    o << "<tr class=\"protocol-error\"" << data_attr("worker", pe.worker) << "><td>" << html(pe.worker) << "</td><td>"
      << (pe.line_no ? std::to_string(*pe.line_no) : std::string("?")) << "</td><td>" << html(pe.detail)
      << "</td><td><code class=\"offending-line\">" << html(pe.line) << "</code></td><td>" << ev_link(m, pe.index)
      << "</td></tr>\n";
  o << "</tbody></table>\n</section>\n";
  return o.str();
}

/// What part of the history the page draws, when not all of it: a window page's events, or a long
/// run's first events (then "The whole run" too, when there is an overview).
std::string history_scope(const ReportData& d) {
  std::ostringstream o;
  if (d.first_index) {
    // A window page: the window's events only; the verdict and the figures are the run's page's.
    o << "<p class=\"note window-page\" id=\"window-page\">A window of the run: history events " << *d.first_index << " to "
      << *d.first_index + (d.history.empty() ? 0 : d.history.size() - 1) << " of " << d.history_events
      << " (times below are seconds since the window's first event). The verdict, the anomalies and the figures are "
         "the whole run's: <a href=\"report.html\">report.html</a>.</p>\n";
  } else if (d.history_events > d.history.size()) {
    // A long run: the story, timeline and events are drawn from its first events only; the verdict,
    // anomalies and figures below are the whole run's (judged from history.jsonl as a stream).
    o << "<p class=\"note partial-history\" id=\"partial-history\">A long run: the history has " << d.history_events
      << " events, and this page draws its first " << d.history.size()
      << " (what happened, timeline, events). The verdict, the anomalies and the figures are the whole run's; "
         "history.jsonl has every event (line = index + 1), and \"The whole run\" below draws all of it, with a "
         "command for a page of any window.</p>\n";
  }
  if (d.overview != nullptr && (d.first_index || d.history_events > d.history.size())) o << whole_run_section(d);
  return o.str();
}

/// "Timeline": the note on how to read it (and, when the stale-write-accepted checker did not
/// judge, that no write is marked accepted below the mark, and why) and the drawn timeline.
std::string timeline_section(const Model& m, const std::string& svg) {
  std::string unjudged;
  if (!m.stale_unjudged.empty())
    unjudged = "<p class=\"note stale-unjudged\" id=\"stale-unjudged\">" +
               std::string(m.stale_accepted.empty() ? "No write is marked accepted below the high-water mark: "
                                                    : "Only the writes it named are marked accepted below the high-water mark: ") +
               html(m.stale_unjudged) + ", and the page does not judge that itself.</p>\n";
  return "<section id=\"timeline-section\"><h2>Timeline</h2>\n<p class=\"note\">Hover a mark for its details; click it for its "
         "event. A worker's bar is the lock held with its fencing token; hatched red: the lock service had already deleted its "
         "key while it still believed it held the lock.</p>\n" + unjudged + "<div class=\"figure-wrap\">\n" +
         svg + "</div>\n</section>\n";
}

/// One anomaly (the k-th on the page), found by checker `c`: its description, key, segment,
/// tokens, writers, store seqs, and a link to every event it cites.
std::string anomaly_section(const Model& m, const CheckerResult& c, const Anomaly& an, std::size_t k) {
  std::ostringstream o;
  o << "<section class=\"anomaly\" id=\"anomaly-" << k << "\"" << data_attr("anomaly", an.name) << ">\n<h3>" << html(an.name)
    << " <span class=\"muted\">(checker " << html(c.name) << ")</span></h3>\n<p>" << html(an.description) << "</p>\n<p class=\"note\">";
  if (!an.key.empty()) o << "key <code>" << html(an.key) << "</code> ";
  if (an.segment) o << "segment " << *an.segment << " ";
  if (!an.tokens.empty()) {
    o << "\xC2\xB7 tokens";
    for (auto t : an.tokens) o << " " << t;
    o << " ";
  }
  if (!an.clients.empty()) {
    o << "\xC2\xB7 writers";
    for (const auto& cl : an.clients) o << " " << html(cl);
    o << " ";
  }
  if (!an.readback_seqs.empty()) {
    o << "\xC2\xB7 store seqs";
    for (auto sq : an.readback_seqs) o << " " << sq;
  }
  o << "</p>\nEvidence (" << an.evidence.size() << " events):<ul class=\"evidence-list\">";
  for (std::size_t i : an.evidence) o << "<li>" << ev_link(m, i) << "</li>";
  o << "</ul>\n</section>\n";
  return o.str();
}

/// "Verdict": each checker's verdict, anomaly count and note, then every anomaly.
std::string verdict_section(const ReportData& d, const Model& m) {
  std::ostringstream o;
  o << "<section id=\"verdict\"><h2>Verdict: <span class=\"" << verdict_class(d.result.verdict) << "\">" << html(d.result.verdict)
    << "</span></h2>\n";
  o << "<table class=\"checkers\"><thead><tr><th>checker</th><th>verdict</th><th>anomalies</th><th>note</th></tr></thead><tbody>\n";
  for (const auto& c : d.analysis.checkers)
    o << "<tr class=\"checker " << verdict_class(verdict_name(c.verdict)) << "\"><td>" << html(c.name) << "</td><td>"
      << html(std::string(verdict_name(c.verdict))) << "</td><td>" << c.anomalies.size() << "</td><td>" << html(c.error) << "</td></tr>\n";
  o << "</tbody></table>\n";
  std::size_t k = 0;
  for (const auto& c : d.analysis.checkers)
    for (const auto& an : c.anomalies) o << anomaly_section(m, c, an, ++k);
  if (k == 0) o << "<p>No anomaly: every checker found the history and the read-back consistent.</p>\n";
  o << "</section>\n";
  return o.str();
}

/// The figures' first tables: rejected writes, lease expiries during work, measured pauses, faults.
std::string figure_tables(const Model& m, const Figures& f) {
  std::ostringstream o;
  o << "<h3>Rejected writes</h3><table><thead><tr><th>key</th><th>writer</th><th>write.fail events</th><th>the store's rejections</th></tr></thead><tbody>";
  for (const auto& rw : f.rejected_writes)
    o << "<tr><td>" << html(rw.key) << "</td><td>" << html(rw.client) << "</td><td>" << rw.history << "</td><td>" << rw.readback << "</td></tr>";
  if (f.rejected_writes.empty()) o << "<tr><td colspan=\"4\">none</td></tr>";
  o << "</tbody></table>\n<h3>Lease expiries during work</h3><table><thead><tr><th>worker</th><th>token</th><th>lock key</th><th>when</th><th>evidence</th></tr></thead><tbody>";
  for (const auto& x : f.expiries_during_work) {
    o << "<tr><td>" << html(x.worker.empty() ? std::string(kUnnamedBlackBox) + " (the lock service does not say which)" : x.worker)
      << "</td><td>" << x.token << "</td><td><code>" << html(x.lock_key) << "</code></td><td>"
      << html(m.at(x.t_ns)) << "</td><td>";
    for (std::size_t i : x.evidence) o << "<a href=\"#ev-" << i << "\">#" << i << "</a> ";
    o << "</td></tr>";
  }
  if (f.expiries_during_work.empty()) o << "<tr><td colspan=\"5\">none</td></tr>";
  o << "</tbody></table>\n<h3>Pauses measured by the workers</h3><table><thead><tr><th>worker</th><th>length</th><th>token held</th><th>event</th></tr></thead><tbody>";
  for (const auto& p : f.pauses)
    o << "<tr><td>" << html(p.worker) << "</td><td>" << rt::format("%.3f s", std::chrono::duration<double>(p.duration).count()) << "</td><td>"
      << (p.token ? std::to_string(*p.token) : "") << "</td><td><a href=\"#ev-" << p.index << "\">#" << p.index << "</a></td></tr>";
  if (f.pauses.empty()) o << "<tr><td colspan=\"4\">none</td></tr>";
  o << "</tbody></table>\n<h3>Faults</h3><table><thead><tr><th>fault</th><th>target</th><th>planned</th><th>actual</th><th>events</th></tr></thead><tbody>";
  for (const auto& w : f.faults) {
    o << "<tr><td>" << html(w.fault) << "</td><td>" << html(w.target) << "</td><td>"
      << (w.planned ? rt::format("%.3f s", std::chrono::duration<double>(*w.planned).count()) : "") << "</td><td>"
      << (w.actual ? rt::format("%.3f s", std::chrono::duration<double>(*w.actual).count()) : "never healed") << "</td><td><a href=\"#ev-"
      << w.inject_index << "\">#" << w.inject_index << "</a>";
    if (w.heal_index) o << " <a href=\"#ev-" << *w.heal_index << "\">#" << *w.heal_index << "</a>";
    o << "</td></tr>";
  }
  if (f.faults.empty()) o << "<tr><td colspan=\"5\">none</td></tr>";
  o << "</tbody></table>\n";
  return o.str();
}

/// "Writes of unknown outcome" (only when there are any): a write whose writer never learned what
/// became of it (a lost acknowledgement), and what the resource says it was.
std::string unknown_outcomes_table(const Model& m, const Figures& f) {
  if (f.unknown_outcomes.empty()) return {};
  std::ostringstream o;
  o << "<h3>Writes of unknown outcome</h3><p class=\"note\">The writer got no reply (write.info); the "
       "read-back says what became of each. The checkers judge what the resource holds, whatever its writer "
       "believed.</p><table class=\"unknown-outcomes\"><thead><tr><th>writer</th><th>key</th><th>segment</th>"
       "<th>chunk</th><th>token</th><th>the resource says</th><th>event</th></tr></thead><tbody>";
  auto cell = [](const std::optional<std::int64_t>& v) { return v ? std::to_string(*v) : std::string(); };
  for (const auto& u : f.unknown_outcomes)
    o << "<tr" << data_attr("resolution", std::string(resolution_name(u.resolution))) << "><td>" << html(u.worker)
      << "</td><td>" << html(u.key) << "</td><td>" << cell(u.segment) << "</td><td>" << cell(u.chunk) << "</td><td>"
      << cell(u.token) << "</td><td>" << html(u.note) << "</td><td>" << ev_link(m, u.index) << "</td></tr>";
  o << "</tbody></table>\n";
  return o.str();
}

/// "Read back from the resource" (only when it reported high-water marks): per key its final
/// mark, chunks stored, accepted writes (the accept log's entries) and rejections.
std::string readback_table(const ReportData& d) {
  if (d.readback.high_water.empty()) return {};
  std::ostringstream o;
  o << "<h3>Read back from the resource (" << html(d.readback.resource) << ", fencing " << html(d.readback.fencing)
    << ")</h3><table><thead><tr><th>key</th><th>final high-water</th><th>chunks stored</th><th>accepted writes</th><th>rejections</th></tr></thead><tbody>";
  // The log's entries per key, counted in one read (a long run's log has tens of millions).
  std::map<std::string, std::size_t, std::less<>> logged;
  if (d.log) {
    std::vector<std::size_t> by_id;
    for (const LoggedWrite w : *d.log) {
      if (by_id.size() <= w.key_id) by_id.resize(w.key_id + 1);
      ++by_id[w.key_id];
    }
    for (std::uint32_t id = 0; id < by_id.size(); ++id)
      if (by_id[id] > 0) logged[d.log->key_name(id)] = by_id[id];
  } else {
    for (const auto& w : d.readback.log) ++logged[w.key];
  }
  for (const auto& entry : d.readback.high_water) {
    const std::string& key = entry.first;
    auto rows_of_key = [&key](const auto& rows) {
      return std::count_if(rows.begin(), rows.end(), [&key](const auto& row) { return row.key == key; });
    };
    const auto log_rows = logged.find(key);
    o << "<tr><td>" << html(key) << "</td><td>" << entry.second << "</td><td>" << rows_of_key(d.readback.chunks) << "</td><td>"
      << (log_rows == logged.end() ? 0 : log_rows->second) << "</td><td>" << rows_of_key(d.readback.rejections) << "</td></tr>";
  }
  o << "</tbody></table>\n";
  return o.str();
}

/// The rows of keys the run did not write (Analysis::ignored): one sentence, never judged.
std::string ignored_rows_note(const ReportData& d) {
  const std::string said = d.analysis.ignored.summary();
  if (said.empty()) return {};
  return "<p class=\"note\" id=\"ignored-rows\">Not judged: " + html(said) +
         " (rows of other keys in the resource were dropped before the checkers).</p>\n";
}

/// "Figures": the tables of figure_tables, the writes of unknown outcome and the read-back.
std::string figures_section(const ReportData& d, const Model& m) {
  const auto& f = d.analysis.figures;
  return "<section id=\"figures\"><h2>Figures</h2>\n" + figure_tables(m, f) + unknown_outcomes_table(m, f) + readback_table(d) +
         ignored_rows_note(d) + "</section>\n";
}

/// "Events": the event table, with the note for a window page or for the run's own page.
std::string events_section(const ReportData& d, const Model& m) {
  if (d.first_index)
    return "<section id=\"events\"><h2>Events</h2>\n<p class=\"note\">The window's events (# = history.jsonl's index, "
           "line = # + 1), in the order the orchestrator received them.</p>\n" +
           event_table(m, d.history.size(), *d.first_index) + "</section>\n";
  return "<section id=\"events\"><h2>Events</h2>\n<p class=\"note\">Every event of history.jsonl (line = index + 1), in the order the "
         "orchestrator received it. Highlighted: cited by an anomaly.</p>\n" +
         event_table(m, d.history_events) + "</section>\n";
}

}  // namespace

std::string render_report_html(const ReportData& d) {
  Model m = build_model(d);
  const std::vector<ExpiryStory> stories = expiry_stories(m);
  const std::string svg = timeline_svg(m, d, stories);  // fills m.drawn, which the table uses
  std::string page = page_head(d) + page_header(d, m, stories) + protocol_errors_section(d, m) + history_scope(d) +
                     "<section id=\"story\"><h2>What happened</h2>\n" + story(m) + "</section>\n" + timeline_section(m, svg);
  // A window page stops at its events: the verdict and the figures are the run's page's.
  if (!d.first_index) page += verdict_section(d, m) + figures_section(d, m);
  return page + events_section(d, m) + page_end();
}

void RunOverview::observe(const Event& e) {
  if (e.t_ns <= 0) return;
  if (t0_ns == 0) t0_ns = e.t_ns;
  if (e.t_ns < t0_ns) return;  // receive times only grow; a stray one is not placed
  const auto s = static_cast<std::size_t>((e.t_ns - t0_ns) / 1'000'000'000);
  if (s >= seconds.size()) seconds.resize(s + 1);
  Second& at = seconds[s];
  ++at.events;
  switch (e.kind) {
    case EventKind::kWriteOk: ++at.accepted; break;
    case EventKind::kWriteFail:
      if (e.high_water) ++at.rejected;
      break;
    case EventKind::kAcquireOk: ++at.acquired; break;
    case EventKind::kLockDelete: ++at.deletes; break;
    case EventKind::kFaultInject: ++at.faults; break;
    default: break;
  }
}

ReportHistory load_report_history(const fs::path& path, std::size_t limit) {
  ReportHistory out;
  for_each_history_event(path, [&](std::size_t index, Event&& e) {
    out.overview.observe(e);
    if (index < limit) out.first.push_back(std::move(e));
    out.events = index + 1;
  });
  return out;
}

ReportWindow load_report_window(const fs::path& path, double from_s, double to_s, std::size_t limit) {
  ReportWindow out;
  std::int64_t t0 = 0;
  bool started = false;
  for_each_history_event(path, [&](std::size_t index, Event&& e) {
    out.file_events = index + 1;
    if (t0 == 0 && e.t_ns > 0) t0 = e.t_ns;
    const double rel = e.t_ns > 0 ? static_cast<double>(e.t_ns - t0) / 1e9 : (started ? from_s : -1.0);
    if (rel < from_s || rel > to_s) return;
    if (!started) {
      started = true;
      out.first_index = index;
    }
    if (out.events.size() >= limit) {
      out.cut = true;
      return;
    }
    out.events.push_back(std::move(e));
  });
  return out;
}

Analysis window_analysis(const Analysis& a, std::size_t first, std::size_t count) {
  const auto in = [&](std::size_t i) { return i >= first && i < first + count; };
  const auto shift = [&](std::vector<std::size_t>& v) {
    std::vector<std::size_t> kept;
    for (std::size_t i : v)
      if (in(i)) kept.push_back(i - first);
    v = std::move(kept);
  };
  Analysis w = a;
  for (auto& c : w.checkers)
    for (auto& an : c.anomalies) shift(an.evidence);
  auto& f = w.figures;
  for (auto& x : f.expiries_during_work) shift(x.evidence);
  std::erase_if(f.expiries_during_work, [](const LeaseExpiry& x) { return x.evidence.empty(); });
  std::erase_if(f.pauses, [&](const PauseObservation& p) { return !in(p.index); });
  for (auto& p : f.pauses) p.index -= first;
  std::erase_if(f.faults, [&](const FaultWindow& x) { return !in(x.inject_index); });
  for (auto& x : f.faults) {
    x.inject_index -= first;
    if (x.heal_index) x.heal_index = in(*x.heal_index) ? std::optional<std::size_t>(*x.heal_index - first) : std::nullopt;
  }
  std::erase_if(f.unknown_outcomes, [&](const UnknownOutcome& u) { return !in(u.index); });
  for (auto& u : f.unknown_outcomes) u.index -= first;
  f.longest_pause.clear();
  for (const auto& p : f.pauses)
    if (auto it = f.longest_pause.find(p.worker); it == f.longest_pause.end() || it->second.duration < p.duration)
      f.longest_pause[p.worker] = p;
  f.progress_after_heal.reset();
  std::erase_if(w.protocol_errors, [&](const ProtocolError& p) { return !in(p.index); });
  for (auto& p : w.protocol_errors) p.index -= first;
  std::map<std::size_t, Event> events;
  for (auto& [i, e] : w.evidence_events)
    if (in(i)) events.emplace(i - first, std::move(e));
  w.evidence_events = std::move(events);
  return w;
}

void write_report_html(const fs::path& path, const ReportData& data) {
  rt::write_file_atomically(path, render_report_html(data));
}

}  // namespace fencecheck::harness
