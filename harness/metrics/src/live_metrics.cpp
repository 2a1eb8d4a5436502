#include "fencecheck/harness/live_metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <set>
#include <utility>

#include <curl/curl.h>
#include <prometheus/exposer.h>
#include <nlohmann/json.hpp>
#include <prometheus/gateway.h>
#include <spdlog/spdlog.h>

#include "fencecheck/harness/analysis.h"
#include "fencecheck/harness/night.h"
#include "fencecheck/harness/scenario.h"
#include "fencecheck/proto/event.h"

namespace fencecheck::harness {
namespace {

constexpr std::string_view kListenForms = "expected 127.0.0.1:PORT (any 127.x.y.z, or localhost:PORT)";

std::optional<int> parse_port(std::string_view s, int min) {
  if (s.empty() || s.size() > 5) return std::nullopt;
  int port = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), port);
  if (ec != std::errc() || end != s.data() + s.size() || port < min || port > 65535) return std::nullopt;
  return port;
}

bool safe_label_value(const std::string& v) {
  return !v.empty() && std::all_of(v.begin(), v.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_' || c == '.' || c == '-';
  });
}

std::string base64url(const std::string& in) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8) |
                       static_cast<unsigned char>(in[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i + 1 == in.size()) {
    const unsigned v = static_cast<unsigned char>(in[i]) << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    const unsigned v = (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

/// One grouping-key label as prometheus-cpp's Gateway appends it: "/name/value" (or base64).
std::pair<std::string, std::string> grouping_label(const std::string& name, const std::string& value) {
  if (safe_label_value(value)) return {name, value};
  return {name + "@base64", value.empty() ? std::string("=") : base64url(value)};
}

std::string push_error_text(int status) {
  if (status < 0) {
    return std::string("no answer: ") + curl_easy_strerror(static_cast<CURLcode>(-status)) + " (libcurl error " +
           std::to_string(-status) + ")";
  }
  return "HTTP " + std::to_string(status) + " from the Pushgateway";
}

std::int64_t emitted_ns(const Event& e) { return e.src_ns != 0 ? e.src_ns : e.t_ns; }

}  // namespace

// ---------------------------------------------------------------------------------------------
// Addresses

std::string ListenAddress::civetweb() const { return host + ":" + std::to_string(port); }

ListenAddress parse_listen_address(std::string_view text) {
  const std::string shown = "--metrics-listen " + std::string(text) + ": ";
  if (!text.empty() && text.front() == '[')
    throw MetricsConfigError(shown + "IPv6 is not supported (the Exposer's civetweb is built without it); " +
                             std::string(kListenForms));
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos)
    throw MetricsConfigError(shown + "no host: a bare port would listen on every interface; " + std::string(kListenForms));
  const std::string host(text.substr(0, colon));
  const auto port = parse_port(text.substr(colon + 1), 0);
  if (!port) throw MetricsConfigError(shown + "the port must be a number 0..65535 (0: any free port)");
  if (host.empty())
    throw MetricsConfigError(shown + "no host: that would listen on every interface; " + std::string(kListenForms));
  if (host == "localhost") return {"127.0.0.1", *port};
  in_addr a{};
  if (host.find(':') != std::string::npos)
    throw MetricsConfigError(shown + "IPv6 is not supported (the Exposer's civetweb is built without it); " +
                             std::string(kListenForms));
  if (inet_pton(AF_INET, host.c_str(), &a) != 1)
    throw MetricsConfigError(shown + "'" + host + "' is not an IPv4 address; metrics are served on loopback only, " +
                             std::string(kListenForms));
  if ((ntohl(a.s_addr) >> 24) != 127)
    throw MetricsConfigError(shown + host + " is not a loopback address; metrics are served on loopback only (127.0.0.0/8)");
  char buf[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &a, buf, sizeof buf);
  return {buf, *port};
}

PushgatewayUrl parse_pushgateway_url(std::string_view text) {
  const std::string shown = "--pushgateway " + std::string(text) + ": ";
  const auto sep = text.find("://");
  if (sep == std::string_view::npos) throw MetricsConfigError(shown + "expected http://HOST:PORT");
  PushgatewayUrl u;
  u.scheme = std::string(text.substr(0, sep));
  std::transform(u.scheme.begin(), u.scheme.end(), u.scheme.begin(), [](unsigned char c) { return std::tolower(c); });
  if (u.scheme != "http" && u.scheme != "https")
    throw MetricsConfigError(shown + "the scheme must be http or https, not '" + u.scheme + "'");
  std::string_view rest = text.substr(sep + 3);
  const auto end = rest.find_first_of("/?#");
  const std::string_view authority = rest.substr(0, end);
  if (end != std::string_view::npos && rest.substr(end) != "/")
    throw MetricsConfigError(shown + "no path, query or fragment allowed (fencecheck adds /metrics/job/...)");
  if (authority.find('@') != std::string_view::npos)
    throw MetricsConfigError(shown + "user info in the URL is not supported");
  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) throw MetricsConfigError(shown + "unterminated [IPv6] host");
    u.host = std::string(authority.substr(0, close + 1));
    const auto after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') throw MetricsConfigError(shown + "expected :PORT after the [IPv6] host");
      port_text = after.substr(1);
      if (port_text.empty()) throw MetricsConfigError(shown + "empty port");
    }
  } else {
    const auto colon = authority.find(':');
    u.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) throw MetricsConfigError(shown + "empty port");
    }
  }
  if (u.host.empty() || u.host == "[]") throw MetricsConfigError(shown + "no host");
  if (!port_text.empty()) {
    const auto port = parse_port(port_text, 1);
    if (!port) throw MetricsConfigError(shown + "the port must be a number 1..65535");
    u.port = std::to_string(*port);
  } else {
    u.port = u.scheme == "https" ? "443" : "80";
  }
  return u;
}

/// /metrics/job/fencecheck and every other label of `labels` in name order, each as
/// grouping_label() spells it.
static std::string group_path_of(const std::map<std::string, std::string>& labels) {
  std::string path = "/metrics/job/fencecheck";
  for (const auto& [name, value] : labels) {
    if (name == "job") continue;
    const auto [n, v] = grouping_label(name, value);
    path += "/" + n + "/" + v;
  }
  return path;
}

std::string grouping_path(const std::string& scenario, const std::string& instance, const std::string& night) {
  // In prometheus-cpp's order: the Gateway's labels are a std::map (instance, night, scenario).
  return group_path_of({{"instance", instance}, {"night", night}, {"scenario", scenario}});
}

std::vector<PushedGroup> parse_pushed_groups(std::string_view body) {
  const auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw std::invalid_argument("the Pushgateway's /api/v1/metrics is not JSON");
  const auto data = j.find("data");
  if (j.value("status", "") != "success" || data == j.end() || !data->is_array())
    throw std::invalid_argument("the Pushgateway's /api/v1/metrics has no \"data\" list");
  /// The first sample's value of a family in the group ("1.7e+09" as a string), if any.
  const auto first_value = [](const nlohmann::json& group, const char* family) -> std::optional<double> {
    const auto f = group.find(family);
    if (f == group.end() || !f->is_object()) return std::nullopt;
    const auto metrics = f->find("metrics");
    if (metrics == f->end() || !metrics->is_array() || metrics->empty()) return std::nullopt;
    const auto v = metrics->front().find("value");
    if (v == metrics->front().end()) return std::nullopt;
    try {
      return v->is_string() ? std::stod(v->get<std::string>()) : v->get<double>();
    } catch (const std::exception&) {
      return std::nullopt;
    }
  };
  std::vector<PushedGroup> out;
  for (const auto& g : *data) {
    const auto labels = g.find("labels");
    if (!g.is_object() || labels == g.end() || !labels->is_object())
      throw std::invalid_argument("a group of the Pushgateway's /api/v1/metrics has no \"labels\"");
    PushedGroup group;
    for (const auto& [k, v] : labels->items())
      if (v.is_string()) group.labels[k] = v.get<std::string>();
    group.ended_s = first_value(g, "fencecheck_last_run_timestamp_seconds").value_or(first_value(g, "push_time_seconds").value_or(0));
    out.push_back(std::move(group));
  }
  return out;
}

std::vector<PushedGroup> superseded_groups(const std::vector<PushedGroup>& groups, const std::string& scenario,
                                           const std::string& instance, const std::string& night, double run_started_s,
                                           double now_s, std::chrono::seconds grace) {
  const auto label = [](const PushedGroup& g, const std::string& name) {
    const auto it = g.labels.find(name);
    return it == g.labels.end() ? std::string() : it->second;
  };
  std::vector<PushedGroup> out;
  for (const auto& g : groups) {
    if (label(g, "job") != "fencecheck" || label(g, "instance") != instance || label(g, "scenario") != scenario) continue;
    if (label(g, "night") == night) continue;  // this run's own group
    if (g.ended_s <= 0 || g.ended_s >= run_started_s) continue;  // unknown, or overlapped this run: kept
    if (g.ended_s > now_s - static_cast<double>(grace.count())) continue;  // not yet scraped for certain
    out.push_back(g);
  }
  return out;
}

namespace {

size_t append_body(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

/// One HTTP request with libcurl: the status (negative: minus libcurl's error code), the body.
int curl_request(const std::string& method, const std::string& url, std::string* body) {
  CURL* curl = curl_easy_init();
  if (!curl) return -static_cast<int>(CURLE_FAILED_INIT);
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 5L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 30L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append_body);
  std::string ignored;
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, body ? body : &ignored);
  const CURLcode rc = curl_easy_perform(curl);
  long status = 0;
  if (rc == CURLE_OK) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(curl);
  return rc == CURLE_OK ? static_cast<int>(status) : -static_cast<int>(rc);
}

}  // namespace

PruneOutcome prune_superseded_groups(const PushgatewayUrl& url, const std::string& scenario, const std::string& instance,
                                     const std::string& night, double run_started_s, std::chrono::seconds grace) {
  PruneOutcome out;
  std::string body;
  const int status = curl_request("GET", url.base() + "/api/v1/metrics", &body);
  if (status != 200) {
    out.error = "listing the groups (GET /api/v1/metrics): " + push_error_text(status);
    return out;
  }
  std::vector<PushedGroup> groups;
  try {
    groups = parse_pushed_groups(body);
  } catch (const std::invalid_argument& err) {
    out.error = err.what();
    return out;
  }
  const double now_s = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  for (const auto& g : superseded_groups(groups, scenario, instance, night, run_started_s, now_s, grace)) {
    const std::string path = group_path_of(g.labels);
    const int deleted = curl_request("DELETE", url.base() + path, nullptr);
    if (deleted >= 200 && deleted < 300) out.deleted.push_back(path);
    else out.error += (out.error.empty() ? "" : "; ") + ("DELETE " + path + ": " + push_error_text(deleted));
  }
  return out;
}

std::string default_instance() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

PushOutcome push_metrics(const PushgatewayUrl& url, const std::shared_ptr<prometheus::Registry>& registry,
                         const std::string& scenario, const std::string& instance, const std::string& night) {
  PushOutcome out;
  out.scenario = scenario;
  out.url = url.base() + grouping_path(scenario, instance, night);
  try {
    const auto sc = grouping_label("scenario", scenario);
    const auto in = grouping_label("instance", instance);
    const auto ni = grouping_label("night", night);
    prometheus::Gateway gateway(url.scheme + "://" + url.host, url.port, "fencecheck",
                                prometheus::Labels{{sc.first, sc.second}, {in.first, in.second}, {ni.first, ni.second}});
    gateway.RegisterCollectable(registry);
    // PUT, which replaces the whole group, so a series the previous run had and this one has not
    // (an anomaly that went away) disappears. prometheus-cpp 1.0's names are the other way round
    // from the Pushgateway's: its Push() sends POST (replace same-named families only) and its
    // PushAdd() sends PUT (tests/observability checks the method).
    out.status = gateway.PushAdd();
    out.ok = out.status >= 200 && out.status < 300;
    if (!out.ok) out.error = push_error_text(out.status);
  } catch (const std::exception& err) {
    out.ok = false;
    out.error = err.what();
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// LiveMetrics

struct LiveMetrics::Run {
  std::string scenario;
  std::string resource;
  std::string lock;
  double ttl_s = 0;
  std::shared_ptr<prometheus::Registry> registry;
  std::unique_ptr<MetricFamilies> m;
  std::int64_t issued = 0;
  std::map<std::string, std::int64_t> high_water;

  struct Holding {
    std::string worker;
    std::string lock;
    bool done = false;
  };
  std::map<std::int64_t, Holding> holdings;  // token -> who held it
  std::set<std::int64_t> released_revisions;
  std::set<std::pair<std::string, std::int64_t>> released_keys;  // (lock_key, token)

  /// A delete of a holder's key nothing explained yet.
  struct Pending {
    std::int64_t token = 0;
    std::int64_t revision = -1;
    std::string lock_key;
    std::string worker;
    std::string lock;
    std::int64_t after_ns = 0;  ///< when the delete was seen
    bool issuer_says_expired = false;  ///< the delete's detail: no later release.ok explains it away
  };
  std::vector<Pending> pending;

  void raise_high_water(const std::string& key, std::int64_t token) {
    auto& hw = high_water[key];
    hw = std::max(hw, token);
    m->high_water(scenario, resource, key).Set(static_cast<double>(hw));
  }
};

LiveMetrics::LiveMetrics() = default;
LiveMetrics::~LiveMetrics() = default;

void LiveMetrics::start(const Scenario& sc) {
  auto run = std::make_unique<Run>();
  run->scenario = sc.name();
  run->resource = sc.resource().kind;
  run->lock = sc.lock_service().lock.empty() ? "fencecheck/" + sc.name() : sc.lock_service().lock;
  run->ttl_s = static_cast<double>(sc.lease_ttl().count()) / 1000.0;
  run->registry = std::make_shared<prometheus::Registry>();
  run->m = std::make_unique<MetricFamilies>(*run->registry, MetricsSource::kLive);
  run->m->lease_ttl(run->scenario).Set(run->ttl_s);
  run->m->scenario_expects_safe(run->scenario).Set(sc.expect().outcome == Outcome::kSafe ? 1 : 0);
  run->m->token_staleness(run->scenario);
  for (const auto& w : sc.workers()) {  // every worker from the start, as build_registry has them
    run->m->worker_info(run->scenario, w.id).Set(1);
    if (w.command) continue;  // a command worker's pause series come with its first pause event, if any
    run->m->holder_pause(run->scenario, w.id);
    run->m->holder_pause_max(run->scenario, w.id);
  }
  {
    std::lock_guard lock(mu_);
    finished_.erase(run->scenario);  // never two sets of series for one scenario
    current_ = run->registry;
  }
  run_ = std::move(run);
}

void LiveMetrics::event(const Event& e) {
  if (!run_) return;
  Run& r = *run_;
  auto& m = *r.m;
  const bool from_worker = e.source != "harness" && e.source != "lock" && e.source != "resource";
  switch (e.kind) {
    case EventKind::kRunStart:
      if (!e.lock.empty()) r.lock = e.lock;
      break;
    case EventKind::kFaultInject:
      m.faults_injected(r.scenario, e.fault.empty() ? "unknown" : e.fault).Increment();
      break;
    case EventKind::kFaultHeal:
      // The harness's own measure of a stopped worker's pause: the stopping fault's window.
      if (stops_process(e.fault) && e.duration_ns && !e.target.empty() && e.target != kLockServiceTarget) {
        auto& longest = m.fault_pause_max(r.scenario, e.target);
        longest.Set(std::max(longest.Value(), static_cast<double>(*e.duration_ns) / 1e9));
      }
      break;
    case EventKind::kAcquireOk:
      if (e.token && from_worker) r.holdings[*e.token] = Run::Holding{e.source, e.lock.empty() ? r.lock : e.lock, false};
      [[fallthrough]];
    case EventKind::kLockGrant:
      if (e.token) {
        r.issued = std::max(r.issued, *e.token);
        m.issuer_token(r.scenario, r.lock).Set(static_cast<double>(r.issued));
      }
      break;
    case EventKind::kWriteInvoke:
      if (e.token) m.token_staleness(r.scenario).Observe(static_cast<double>(std::max<std::int64_t>(0, r.issued - *e.token)));
      break;
    case EventKind::kWriteOk:
      if (!e.key.empty() && (e.high_water || e.token)) r.raise_high_water(e.key, e.high_water ? *e.high_water : *e.token);
      break;
    case EventKind::kWriteFail:
      if (from_worker && e.high_water) m.rejected_writes(r.scenario, r.resource, e.key, e.source).Increment();
      if (!e.key.empty() && e.high_water) r.raise_high_water(e.key, *e.high_water);
      break;
    case EventKind::kPause:
      if (from_worker && e.duration_ns) {
        const double seconds = static_cast<double>(*e.duration_ns) / 1e9;
        m.holder_pause(r.scenario, e.source).Observe(seconds);
        auto& longest = m.holder_pause_max(r.scenario, e.source);
        longest.Set(std::max(longest.Value(), seconds));
      }
      break;
    case EventKind::kJobDone:
      if (e.token) {
        auto it = r.holdings.find(*e.token);
        if (it != r.holdings.end() && it->second.worker == e.source) it->second.done = true;
      }
      break;
    case EventKind::kReleaseOk: {
      if (e.revision) r.released_revisions.insert(*e.revision);
      if (e.token) r.released_keys.insert({e.lock_key, *e.token});
      std::erase_if(r.pending, [&](const Run::Pending& p) {
        return !p.issuer_says_expired && ((e.revision && p.revision == *e.revision) ||
                                          (e.token && p.token == *e.token && p.lock_key == e.lock_key));
      });
      break;
    }
    case EventKind::kLockDelete: {
      if (!e.token) break;
      auto it = r.holdings.find(*e.token);
      if (it == r.holdings.end() || it->second.done) break;  // nobody held it, or the job was done
      const bool released = (e.revision && r.released_revisions.count(*e.revision)) ||
                            r.released_keys.count({e.lock_key, *e.token});
      if (!delete_is_expiry(e, released)) break;
      r.pending.push_back(Run::Pending{*e.token, e.revision.value_or(-1), e.lock_key, it->second.worker,
                                       it->second.lock, emitted_ns(e), e.detail == "expired"});
      break;
    }
    default:
      break;
  }
  // A holder writing with a token whose key the lock service has deleted, after the delete: the
  // lease expired while it was working.
  const bool write = e.kind == EventKind::kWriteInvoke || e.kind == EventKind::kWriteOk ||
                     e.kind == EventKind::kWriteFail || e.kind == EventKind::kWriteInfo;
  if (write && from_worker && e.token) {
    std::erase_if(r.pending, [&](const Run::Pending& p) {
      if (p.worker != e.source || p.token != *e.token || emitted_ns(e) <= p.after_ns) return false;
      m.expiries_during_work(r.scenario, p.lock, p.worker).Increment();
      return true;
    });
  }
}

void LiveMetrics::anomaly(const std::string& name) {
  if (!run_) return;
  run_->m->anomalies(run_->scenario, name).Increment();
}

void LiveMetrics::finish(const std::string& scenario, std::shared_ptr<prometheus::Registry> final_registry) {
  {
    std::lock_guard lock(mu_);
    if (run_ && run_->scenario == scenario) current_.reset();
    finished_[scenario] = std::move(final_registry);
    ++generation_;
  }
  if (run_ && run_->scenario == scenario) run_.reset();
}

std::uint64_t LiveMetrics::generation() const {
  std::lock_guard lock(mu_);
  return generation_;
}

bool LiveMetrics::wait_for_collect(std::uint64_t generation, std::chrono::steady_clock::time_point deadline,
                                   const std::atomic<bool>* stop) const {
  std::unique_lock lock(mu_);
  while (collected_ < generation) {
    if (stop && stop->load()) return false;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    // In slices, so that `stop` (set by a signal handler, which cannot notify) is seen.
    collected_cv_.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(100)));
  }
  return true;
}

std::vector<prometheus::MetricFamily> LiveMetrics::Collect() const {
  std::vector<std::shared_ptr<prometheus::Registry>> registries;
  std::uint64_t generation = 0;
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, reg] : finished_) registries.push_back(reg);
    if (current_) registries.push_back(current_);
    generation = generation_;
  }
  std::vector<prometheus::MetricFamily> out;
  std::map<std::string, std::size_t> index;
  for (const auto& reg : registries) {
    for (auto& family : reg->Collect()) {
      auto [it, inserted] = index.emplace(family.name, out.size());
      if (inserted) {
        out.push_back(std::move(family));
      } else {
        auto& into = out[it->second].metric;
        into.insert(into.end(), std::make_move_iterator(family.metric.begin()), std::make_move_iterator(family.metric.end()));
      }
    }
  }
  {
    std::lock_guard lock(mu_);
    collected_ = std::max(collected_, generation);
  }
  collected_cv_.notify_all();
  return out;
}

// ---------------------------------------------------------------------------------------------
// MetricsObserver

std::optional<std::string> listen_address_problem(const ListenAddress& address) {
  if (address.port == 0) return std::nullopt;  // any free port: nothing to collide with
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::string("cannot open a socket: ") + std::strerror(errno);
  const int one = 1;  // as civetweb does: a port in TIME_WAIT is free, only a listener or a bound socket is not
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<std::uint16_t>(address.port));
  inet_pton(AF_INET, address.host.c_str(), &sa.sin_addr);
  const int rc = ::bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa);
  const int err = errno;
  ::close(fd);
  if (rc == 0) return std::nullopt;
  const std::string where = address.civetweb();
  if (err == EADDRINUSE)
    return where + " is already in use (another process listens there): choose another port, or port 0 for any free one";
  if (err == EACCES) return where + ": permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE)";
  if (err == EADDRNOTAVAIL) return where + ": no interface has that address";
  return where + ": " + std::strerror(err);
}

MetricsObserver::MetricsObserver(Options options) : options_(std::move(options)) {
  if (!options_.listen) return;
  live_ = std::make_shared<LiveMetrics>();
  const std::string where = options_.listen->civetweb();
  if (auto problem = listen_address_problem(*options_.listen))
    throw std::runtime_error("--metrics-listen " + *problem);
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(where, 2);
  } catch (const std::exception& err) {
    // civetweb says only "null context when constructing CivetServer"; the likeliest cause is a
    // listener that took the address since the probe above.
    throw std::runtime_error("--metrics-listen " + where + ": cannot serve metrics there (is it already in use by " +
                             "another process?): " + err.what());
  }
  exposer_->RegisterCollectable(live_);
  const auto ports = exposer_->GetListeningPorts();
  port_ = ports.empty() ? options_.listen->port : ports.front();
  spdlog::info("live metrics on http://{}:{}/metrics", options_.listen->host, *port_);
}

MetricsObserver::~MetricsObserver() = default;

LingerOutcome MetricsObserver::linger(std::chrono::milliseconds bound, const std::atomic<bool>* stop) {
  LingerOutcome out;
  if (!live_ || bound <= std::chrono::milliseconds::zero()) return out;
  const std::uint64_t generation = live_->generation();
  if (generation == 0) return out;  // no scenario ended: nothing final to hand over
  const auto start = std::chrono::steady_clock::now();
  spdlog::info("live metrics: waiting up to {} ms for a scrape of the final results on http://{}:{}/metrics "
               "(--metrics-linger)", bound.count(), options_.listen->host, port_.value_or(0));
  out.scraped = live_->wait_for_collect(generation, start + bound, stop);
  out.waited = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  if (out.scraped) {
    spdlog::info("live metrics: final results scraped after {} ms", out.waited.count());
  } else {
    spdlog::warn("live metrics: no scrape of the final results within {} ms; they are in each run's metrics.prom",
                 out.waited.count());
  }
  return out;
}

void MetricsObserver::on_start(const Scenario& scenario, const std::filesystem::path& /*run_dir*/) {
  if (live_) live_->start(scenario);
}

void MetricsObserver::on_event(const Scenario& /*scenario*/, const Event& event) {
  if (live_) live_->event(event);
}

void MetricsObserver::on_anomaly(const Scenario& /*scenario*/, const LiveAnomaly& anomaly) {
  if (live_) live_->anomaly(anomaly.anomaly.name);
}

void MetricsObserver::on_finish(const Scenario& scenario, const ScenarioResult& result, const Analysis& /*analysis*/,
                                const RunFigures& figures) {
  if (live_) live_->finish(scenario.name(), build_registry(figures, MetricsSource::kLive));
  if (!options_.pushgateway) return;
  // The night of the invocation that made the run directory; a run made without one (a library
  // caller) is its own night: its run id.
  const std::string night = recorded_night(result.run_dir).value_or(result.run_dir.filename().string());
  PushOutcome outcome = push_metrics(*options_.pushgateway, build_registry(figures, MetricsSource::kPush),
                                     figures.scenario, options_.instance, night);
  if (outcome.ok) {
    spdlog::info("{}: metrics pushed to {}", scenario.name(), outcome.url);
    const PruneOutcome pruned = prune_superseded_groups(*options_.pushgateway, figures.scenario, options_.instance, night,
                                                        figures.timestamp_s - figures.duration_s, options_.superseded_grace);
    for (const auto& path : pruned.deleted)
      spdlog::info("{}: deleted the superseded group {} from the Pushgateway (that run ended before this one began)",
                   scenario.name(), path);
    if (!pruned.error.empty())
      spdlog::warn("{}: cleaning superseded groups from the Pushgateway: {} (they stay; the verdict stands)",
                   scenario.name(), pruned.error);
  } else {
    spdlog::warn("{}: pushing metrics to {} failed: {} (the verdict stands)", scenario.name(), outcome.url, outcome.error);
  }
  pushes_.push_back(std::move(outcome));
}

}  // namespace fencecheck::harness
