#include "fencecheck/harness/live_checker.h"

#include <algorithm>
#include <deque>
#include <iterator>
#include <limits>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "internal.h"

namespace fencecheck::harness {
namespace {

/// Where an event stands in real-time order: (detail::happened_ns, history index), the order the
/// stale-write-accepted checker sorts write.oks by.
using When = std::pair<std::int64_t, std::size_t>;

/// The event fields a later event is compared with, kept instead of the event.
struct Seen {
  std::size_t index = 0;
  std::int64_t token = 0;
  std::string source;
  std::string key;
  std::int64_t segment = -1;
  std::int64_t chunk = -1;
  std::int64_t happened = 0;
};

Seen seen_of(std::size_t index, const Event& e) {
  return {index, e.token.value_or(0), e.source, e.key, e.segment.value_or(-1), e.chunk.value_or(-1), detail::happened_ns(e)};
}

/// The same write (token, key, segment, chunk), as the checkers' same_write(); the writer is the caller's.
bool same_write(const Seen& invoke, const Event& ok) {
  return ok.token && invoke.token == *ok.token && invoke.key == ok.key && invoke.segment == ok.segment.value_or(-1) &&
         invoke.chunk == ok.chunk.value_or(-1);
}

}  // namespace

struct LiveChecker::State {
  std::string lock;  // CheckContext::lock
  std::map<std::string, std::int64_t> counts;
  std::int64_t total = 0;

  // stale-write-accepted
  std::map<std::string, Seen, std::less<>> latest_write_invoke;  // per worker
  /// Per key: the write.oks that raised the key's highest token, in real-time order (tokens
  /// strictly increase along it): the last entry before a time is the largest token before it.
  std::map<std::string, std::map<When, Seen>, std::less<>> frontier;
  std::set<std::tuple<std::string, std::string, std::int64_t>> stale_groups;  // (key, writer, token) reported

  // token-regression
  std::map<std::string, Seen, std::less<>> latest_acquire_invoke;  // per worker
  /// Per lock: (history index, the first acquire.ok with the largest token so far), one entry each
  /// time that largest token rose.
  std::map<std::string, std::deque<std::pair<std::size_t, Seen>>, std::less<>> acquire_tops;
  /// The grants seen, (token, lock key), at most kFrontierLimit: a grant seen again is a replay
  /// (a watch that resynchronised), not a grant. When the oldest (lowest token) are dropped,
  /// grants_floor is the highest token dropped: a grant at or below it may be a replay this no
  /// longer knows, so it is not judged here (the checkers judge it at the end).
  std::set<std::pair<std::int64_t, std::string>> grants_seen;
  std::int64_t grants_floor = std::numeric_limits<std::int64_t>::min();
  std::optional<Seen> top_grant;  // with its lock key in Seen::key

  void report(std::vector<LiveAnomaly>& out, Anomaly a, std::size_t at) {
    normalize(a);
    ++counts[a.name];
    ++total;
    out.push_back({std::move(a), at});
  }

  bool ours(const Event& e) const { return lock.empty() || e.lock.empty() || e.lock == lock; }

  void on_write_ok(std::size_t b, const Event& e, std::vector<LiveAnomaly>& out) {
    if (!e.token || detail::is_effect_key(e.key)) return;
    const std::int64_t token = *e.token;
    auto stale = [&](Anomaly a) {
      if (!stale_groups.insert({e.key, e.source, token}).second) return;  // one per (key, writer, token)
      a.name = "stale-write-accepted";
      a.key = e.key;
      a.segment = e.segment;
      report(out, std::move(a), b);
    };
    // (a) The resource's own reply: accepted, yet its high-water mark was already above the token.
    if (e.high_water && *e.high_water > token) {
      Anomaly a;
      a.tokens = {token, *e.high_water};
      a.clients = {e.source};
      a.evidence = {b};
      a.description = e.key + ": the resource accepted token " + std::to_string(token) + " from " + e.source +
                      " after it had already accepted a higher token (" + std::to_string(*e.high_water) +
                      "): its reply said the key's high-water mark was " + std::to_string(*e.high_water);
      stale(std::move(a));
    }
    // (b) Invoked after a write.ok for the key with a higher token had completed.
    auto& line = frontier[e.key];
    if (auto inv = latest_write_invoke.find(e.source); inv != latest_write_invoke.end() && same_write(inv->second, e)) {
      const When invoked{inv->second.happened, inv->second.index};
      if (auto after = line.lower_bound(invoked); after != line.begin()) {
        const Seen& top = std::prev(after)->second;
        if (top.token > token) {
          Anomaly a;
          a.tokens = {token, top.token};
          a.clients = {e.source, top.source};
          a.evidence = {top.index, inv->second.index, b};
          a.description = e.key + ": the resource accepted token " + std::to_string(token) + " from " + e.source +
                          " after it had already accepted a higher token (" + std::to_string(top.token) + "): " +
                          e.source + " sent the write after " + top.source + "'s write with token " +
                          std::to_string(top.token) + " had been acknowledged";
          stale(std::move(a));
        }
      }
    }
    // This write.ok joins the key's line unless an earlier one already had a token as large.
    const When at{detail::happened_ns(e), b};
    auto after = line.lower_bound(at);
    if (after != line.begin() && std::prev(after)->second.token >= token) return;
    while (after != line.end() && after->second.token <= token) after = line.erase(after);
    line.emplace_hint(after, at, seen_of(b, e));
    if (line.size() > kFrontierLimit) line.erase(line.begin());
  }

  void on_acquire_ok(std::size_t x, const Event& e, std::vector<LiveAnomaly>& out) {
    if (!e.token || !ours(e)) return;
    auto& tops = acquire_tops[e.lock];
    if (auto inv = latest_acquire_invoke.find(e.source); inv != latest_acquire_invoke.end()) {
      const std::size_t invoke = inv->second.index;
      // The largest token among this lock's acquire.oks recorded before the invoke.
      auto after = std::lower_bound(tops.begin(), tops.end(), invoke,
                                    [](const auto& entry, std::size_t index) { return entry.first < index; });
      if (after != tops.begin()) {
        const Seen& t = std::prev(after)->second;
        if (t.token >= *e.token) {
          Anomaly a;
          a.name = "token-regression";
          a.tokens = {*e.token, t.token};
          a.clients = {e.source, t.source};
          a.evidence = {t.index, invoke, x};
          a.description = detail::acquire_regression_text(e, t.source, t.token);
          report(out, std::move(a), x);
        }
      }
    }
    if (tops.empty() || *e.token > tops.back().second.token) {
      tops.emplace_back(x, seen_of(x, e));
      if (tops.size() > kFrontierLimit) tops.pop_front();
    }
  }

  void on_grant(std::size_t i, const Event& g, std::vector<LiveAnomaly>& out) {
    if (!g.token) return;
    // This lock's keys: "<lock>/..." (etcd, zookeeper) or the lock name itself (redis).
    if (!lock.empty() && !g.lock_key.empty() && g.lock_key != lock && g.lock_key.rfind(lock + "/", 0) != 0) return;
    if (*g.token <= grants_floor) return;                             // may be a replay it no longer knows
    if (!grants_seen.insert({*g.token, g.lock_key}).second) return;  // a replay, not a grant
    if (grants_seen.size() > kFrontierLimit) {
      grants_floor = std::max(grants_floor, grants_seen.begin()->first);
      grants_seen.erase(grants_seen.begin());
    }
    if (top_grant && (*g.token < top_grant->token || (*g.token == top_grant->token && g.lock_key != top_grant->key))) {
      Anomaly a;
      a.name = "token-regression";
      a.tokens = {*g.token, top_grant->token};
      a.evidence = {top_grant->index, i};
      a.description = detail::grant_regression_text(g, top_grant->key, top_grant->token);
      report(out, std::move(a), i);
    }
    if (!top_grant || *g.token > top_grant->token) {
      top_grant = seen_of(i, g);
      top_grant->key = g.lock_key;
    }
  }
};

LiveChecker::LiveChecker(const CheckContext& context) : s_(std::make_unique<State>()) { s_->lock = context.lock; }
LiveChecker::~LiveChecker() = default;
LiveChecker::LiveChecker(LiveChecker&&) noexcept = default;
LiveChecker& LiveChecker::operator=(LiveChecker&&) noexcept = default;

std::vector<LiveAnomaly> LiveChecker::observe(std::size_t index, const Event& e) {
  std::vector<LiveAnomaly> out;
  State& s = *s_;
  switch (e.kind) {
    case EventKind::kWriteInvoke:
      if (e.token) s.latest_write_invoke[e.source] = seen_of(index, e);
      break;
    case EventKind::kWriteOk:
      s.on_write_ok(index, e, out);
      break;
    case EventKind::kAcquireInvoke:
      s.latest_acquire_invoke[e.source] = seen_of(index, e);
      break;
    case EventKind::kAcquireOk:
      s.on_acquire_ok(index, e, out);
      break;
    case EventKind::kLockGrant:
      s.on_grant(index, e, out);
      break;
    default:
      break;
  }
  return out;
}

const std::map<std::string, std::int64_t>& LiveChecker::counts() const { return s_->counts; }
std::int64_t LiveChecker::total() const { return s_->total; }

std::vector<LiveAnomaly> live_anomalies(const History& history, const CheckContext& context) {
  LiveChecker checker(context);
  std::vector<LiveAnomaly> all;
  for (std::size_t i = 0; i < history.size(); ++i)
    for (auto& a : checker.observe(i, history[i])) all.push_back(std::move(a));
  return all;
}

std::string live_anomaly_json_line(const LiveAnomaly& a, std::int64_t t_ms) {
  nlohmann::json j{{"found_at", a.found_at},          {"t_ms", t_ms},
                   {"anomaly", a.anomaly.name},       {"key", a.anomaly.key},
                   {"tokens", a.anomaly.tokens},      {"clients", a.anomaly.clients},
                   {"evidence", a.anomaly.evidence},  {"description", a.anomaly.description}};
  if (a.anomaly.segment) j["segment"] = *a.anomaly.segment;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace fencecheck::harness
