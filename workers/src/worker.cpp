#include "fencecheck/workers/worker.h"

#include <signal.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <condition_variable>
#include <limits>
#include <memory>
#include <stdexcept>
#include <ostream>
#include <thread>
#include <utility>

#include <spdlog/spdlog.h>

#include "fencecheck/proto/chunk.h"
#include "fencecheck/proto/token.h"
#include "fencecheck/resources/writer.h"
#include "fencecheck/locks/lock_client.h"

namespace fencecheck {

using std::chrono::milliseconds;

namespace {

constexpr std::array<std::pair<JobKind, std::string_view>, 3> kJobNames{{
    {JobKind::kSegments, "segments"}, {JobKind::kCounter, "counter"}, {JobKind::kSideEffect, "side-effect"}}};
constexpr std::array<std::pair<TokenSource, std::string_view>, 2> kTokenSourceNames{{
    {TokenSource::kIssuer, "issuer"}, {TokenSource::kTimestamp, "timestamp"}}};
constexpr std::array<std::pair<KeepaliveMode, std::string_view>, 2> kKeepaliveNames{{
    {KeepaliveMode::kThread, "thread"}, {KeepaliveMode::kInline, "inline"}}};
constexpr std::array<std::pair<SelfStopAt, std::string_view>, 3> kSelfStopNames{{
    {SelfStopAt::kNever, "never"}, {SelfStopAt::kCheck, "check"}, {SelfStopAt::kEffect, "effect"}}};

template <typename E, std::size_t N>
std::string_view name_of(const std::array<std::pair<E, std::string_view>, N>& table, E value) {
  for (const auto& [v, n] : table)
    if (v == value) return n;
  return table.front().second;
}

template <typename E, std::size_t N>
std::optional<E> value_of(const std::array<std::pair<E, std::string_view>, N>& table, std::string_view name) {
  for (const auto& [v, n] : table)
    if (n == name) return v;
  return std::nullopt;
}

}  // namespace

std::string_view job_kind_name(JobKind kind) { return name_of(kJobNames, kind); }
std::optional<JobKind> job_kind_from_name(std::string_view name) { return value_of(kJobNames, name); }
std::string_view token_source_name(TokenSource source) { return name_of(kTokenSourceNames, source); }
std::optional<TokenSource> token_source_from_name(std::string_view name) {
  if (name == "etcd") return TokenSource::kIssuer;  // the name before the lock-service axis
  return value_of(kTokenSourceNames, name);
}
std::string_view keepalive_mode_name(KeepaliveMode mode) { return name_of(kKeepaliveNames, mode); }
std::optional<KeepaliveMode> keepalive_mode_from_name(std::string_view name) { return value_of(kKeepaliveNames, name); }
std::string_view self_stop_at_name(SelfStopAt at) { return name_of(kSelfStopNames, at); }
std::optional<SelfStopAt> self_stop_at_from_name(std::string_view name) {
  auto at = value_of(kSelfStopNames, name);
  if (at == SelfStopAt::kNever) return std::nullopt;  // "never" is the absence of the flag, not a value
  return at;
}

std::chrono::milliseconds WorkerOptions::effective_keepalive_interval() const {
  if (keepalive_interval) return *keepalive_interval;
  auto third = std::chrono::duration_cast<milliseconds>(ttl) / 3;
  return third.count() < 1 ? milliseconds(1) : third;
}

nlohmann::json WorkerOptions::lock_service_endpoint() const {
  if (lock_service.empty()) return {{"kind", "etcd"}, {"endpoints", {etcd}}};
  auto j = nlohmann::json::parse(lock_service, nullptr, false);
  if (!j.is_object())
    throw std::invalid_argument("--lock-service must be a JSON object {\"kind\": ...}, got '" + lock_service + "'");
  return j;
}

nlohmann::json WorkerOptions::resource_endpoint() const {
  if (resource.empty()) return {{"kind", "store"}, {"url", store}};
  auto j = nlohmann::json::parse(resource, nullptr, false);
  if (!j.is_object()) throw std::invalid_argument("--resource must be a JSON object {\"kind\": ...}, got '" + resource + "'");
  return j;
}

std::vector<std::string> validate(const WorkerOptions& o) {
  std::vector<std::string> errors;
  auto need = [&](bool ok, std::string message) {
    if (!ok) errors.push_back(std::move(message));
  };
  need(is_safe_name(o.id, 64), "--id must be 1-64 characters of [A-Za-z0-9_.-], got '" + o.id + "'");
  need(is_safe_name(o.key, 256), "--key must be 1-256 characters of [A-Za-z0-9_.-], got '" + o.key + "'");
  need(!o.lock.empty(), "--lock must not be empty");
  if (o.etcd.empty() == o.lock_service.empty()) {
    errors.push_back("exactly one of --etcd and --lock-service is required");
  } else if (o.lock_service.empty()) {
    need(o.etcd.rfind("http://", 0) == 0, "--etcd must be http://host:port, got '" + o.etcd + "'");
  } else {
    try {
      (void)locks::make_lock_client(o.lock_service_endpoint());
    } catch (const std::exception& err) {
      errors.push_back(std::string("--lock-service: ") + err.what());
    }
  }
  if (o.resource.empty()) {
    need(o.store.rfind("http://", 0) == 0, "--store must be http://host:port, got '" + o.store + "'");
  } else {
    try {
      (void)make_resource_writer(o.resource_endpoint(), o.store_timeout);
    } catch (const std::exception& err) {
      errors.push_back(std::string("--resource: ") + err.what());
    }
  }
  need(o.ttl.count() >= 1, "--ttl-s / --ttl-ms must be >= 1 ms, got " + std::to_string(o.ttl.count()) + " ms");
  need(o.segments >= 1, "--segments must be >= 1, got " + std::to_string(o.segments));
  need(o.chunks >= 1, "--chunks must be >= 1, got " + std::to_string(o.chunks));
  need(o.chunk_bytes >= 1 && o.chunk_bytes <= 16u * 1024 * 1024,
       "--chunk-bytes must be 1..16777216, got " + std::to_string(o.chunk_bytes));
  need(o.chunk_interval.count() >= 0, "--chunk-interval-ms must be >= 0");
  need(o.tick.count() >= 1, "--tick-ms must be >= 1, got " + std::to_string(o.tick.count()));
  need(o.pause_threshold > o.tick, "--pause-threshold-ms must be greater than --tick-ms");
  need(!o.keepalive_interval || o.keepalive_interval->count() >= 1, "--keepalive-interval-ms must be >= 1");
  need(o.max_acquires >= 1, "--max-acquires must be >= 1, got " + std::to_string(o.max_acquires));
  need(o.lock_timeout.count() >= 1, "--lock-timeout-ms must be >= 1");
  need(o.store_timeout.count() >= 1, "--store-timeout-ms must be >= 1");
  need(o.lock_service_timeout.count() >= 1, "--lock-service-timeout-ms must be >= 1");
  need(o.increments >= 1, "--increments must be >= 1, got " + std::to_string(o.increments));
  need(!o.abort_on_pause || *o.abort_on_pause > o.tick,
       "--abort-on-pause-ms must be greater than --tick-ms (" + std::to_string(o.tick.count()) + "), got " +
           std::to_string(o.abort_on_pause ? o.abort_on_pause->count() : 0));
  need(o.self_stop_at != SelfStopAt::kCheck || o.check_lease_before_write,
       "--self-stop-at check needs --check-lease-before-write: it stops the worker right after that check");
  need(o.cpu_per_write.count() >= 0 && o.cpu_per_write.count() <= 60'000,
       "--cpu-per-write-ms must be 0..60000, got " + std::to_string(o.cpu_per_write.count()));
  need(o.self_stop_at != SelfStopAt::kEffect || o.job == JobKind::kSideEffect,
       "--self-stop-at effect needs --job side-effect: it stops the worker right before a side effect");
  return errors;
}

EventWriter::EventWriter(std::ostream& out, std::string source) : out_(out), source_(std::move(source)) {}

void EventWriter::emit(Event e) {
  e.source = source_;
  std::lock_guard lock(mu_);
  e.src_ns = monotonic_ns();  // under the lock: lines come out in src_ns order
  try {
    out_ << to_json_line(e) << '\n';
    out_.flush();
  } catch (const std::exception& err) {  // the event is lost: say which, on stderr (the worker's log)
    spdlog::error("event {} not written: {}", kind_name(e.kind), err.what());
  }
}

std::optional<std::chrono::nanoseconds> PauseDetector::observe(std::chrono::steady_clock::time_point now) {
  std::optional<std::chrono::nanoseconds> gap;
  if (last_ && now - *last_ > threshold_) gap = now - *last_;
  last_ = now;
  return gap;
}

namespace {

Event make(EventKind kind) {
  Event e;
  e.kind = kind;
  return e;
}

/// Sleeps for d unless stop is requested first; false when stopped.
bool sleep_unless_stopped(milliseconds d, std::stop_token stop) {
  std::mutex m;
  std::condition_variable_any cv;
  std::unique_lock lock(m);
  cv.wait_for(lock, stop, d, [] { return false; });
  return !stop.stop_requested();
}

/// Renews one lease (session) every interval on its own thread until stopped. Reports a lost
/// lease once (then stops: a lease that is gone cannot come back) and each failed round trip. It
/// never tells the main thread: the holder's belief that it holds the lock is left alone on purpose.
class Keepalive {
 public:
  Keepalive(locks::LockClient& lock, EventWriter& events, locks::Session session, milliseconds interval)
      : session_(session), thread_([this, &lock, &events, interval](std::stop_token stop) {
          while (sleep_unless_stopped(interval, stop)) {
            try {
              if (!lock.keepalive(session_)) {
                Event e = make(EventKind::kLeaseLost);
                e.lease_id = session_.id;
                if (auto t = token_.load(); t != 0) e.token = t;
                e.detail = lock.session_lost_detail();
                events.emit(std::move(e));
                spdlog::warn("lease {:x} lost ({})", session_.id, lock.session_lost_detail());
                return;
              }
            } catch (const std::exception& err) {
              Event e = make(EventKind::kKeepaliveFail);
              e.lease_id = session_.id;
              if (auto t = token_.load(); t != 0) e.token = t;
              e.detail = err.what();
              events.emit(std::move(e));
              spdlog::warn("keepalive of lease {:x} failed: {}", session_.id, err.what());
            }
          }
        }) {}
  Keepalive(const Keepalive&) = delete;
  Keepalive& operator=(const Keepalive&) = delete;
  ~Keepalive() { stop(); }

  void set_token(std::int64_t token) { token_.store(token); }
  /// Stops and joins; waits for an in-flight keepalive (bounded by the lock-service timeout).
  void stop() {
    thread_.request_stop();
    if (thread_.joinable()) thread_.join();
  }

 private:
  locks::Session session_;
  std::atomic<std::int64_t> token_{0};
  std::jthread thread_;  // last: starts after the fields above are initialised
};

struct Holding {
  locks::Session session;  ///< session.id: the lease_id of every event about this holding
  std::string lock_key;
  std::int64_t token = 0;
  std::unique_ptr<Keepalive> keepalive;  ///< null with --keepalive inline
  std::chrono::steady_clock::time_point last_renewal{};  ///< --keepalive inline: the last renewal sent
  bool lease_lost = false;  ///< --keepalive inline: the issuer said the lease is gone (stop renewing it)
};

/// What the ticker has seen, for --abort-on-pause-ms: written by the ticker thread, read by the
/// main thread.
struct PauseWatch {
  std::atomic<std::int64_t> last_tick_ns{0};    ///< steady_clock ns of the ticker's latest reading
  std::atomic<std::int64_t> longest_gap_ns{0};  ///< the longest gap since the main thread last reset it
};

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// CLOCK_REALTIME in ns: the "timestamp" token source. Called through libc, so libfaketime moves it.
std::int64_t realtime_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::string designs_summary(const WorkerOptions& o) {
  std::string d;
  auto add = [&d](const std::string& s) { d += (d.empty() ? "" : ",") + s; };
  if (o.retry_same_token) add("retry-same-token");
  if (o.release_by_name) add("release-by-name");
  if (o.check_lease_before_write) add("check-lease-before-write");
  if (o.abort_on_pause) add("abort-on-pause-ms=" + std::to_string(o.abort_on_pause->count()));
  if (o.token_source != TokenSource::kIssuer) add("token-source=" + std::string(token_source_name(o.token_source)));
  if (o.self_stop_at != SelfStopAt::kNever) add("self-stop-at=" + std::string(self_stop_at_name(o.self_stop_at)));
  if (o.keepalive != KeepaliveMode::kThread) add("keepalive=" + std::string(keepalive_mode_name(o.keepalive)));
  if (o.cpu_per_write.count() > 0) add("cpu-per-write-ms=" + std::to_string(o.cpu_per_write.count()));
  return d.empty() ? "none" : d;
}

/// A remaining TTL for the lease-check log: whole seconds ("2"), a fraction when the kind gives
/// milliseconds ("1.5"), -1 when the lease is gone (what etcd's LeaseTimeToLive says).
std::string ttl_seconds(const std::optional<milliseconds>& ttl) {
  if (!ttl) return "-1";
  if (ttl->count() % 1000 == 0) return std::to_string(ttl->count() / 1000);
  std::string text = fmt::format("{:.3f}", static_cast<double>(ttl->count()) / 1000.0);
  while (text.back() == '0') text.pop_back();
  return text;
}

/// "<kind>=<endpoint>[,...]" for the start event ("etcd=http://127.0.0.1:2379").
std::string lock_service_summary(const nlohmann::json& endpoint) {
  std::string out = endpoint.value("kind", std::string("?")) + "=";
  if (auto it = endpoint.find("endpoints"); it != endpoint.end() && it->is_array())
    for (std::size_t i = 0; i < it->size(); ++i)
      out += (i ? "," : "") + ((*it)[i].is_string() ? (*it)[i].get<std::string>() : (*it)[i].dump());
  return out;
}

/// This thread's CPU time (CLOCK_THREAD_CPUTIME_ID), ns.
std::int64_t thread_cpu_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

/// Spends `cpu` of this thread's CPU time (not wall time) computing; returns early, false, when a
/// stop is requested.
bool spend_cpu(milliseconds cpu, const std::stop_token& stop) {
  const std::int64_t until = thread_cpu_ns() + std::chrono::duration_cast<std::chrono::nanoseconds>(cpu).count();
  volatile std::uint64_t sink = 0x9e3779b97f4a7c15ULL;
  while (thread_cpu_ns() < until) {
    if (stop.stop_requested()) return false;
    for (int i = 0; i < 4096; ++i) sink = sink * 6364136223846793005ULL + 1442695040888963407ULL;
  }
  return true;
}

/// The lock client's bounds, and its failovers (a clustered service's client moving off a member
/// that did not answer: lock_client.h) as `log` events, with the token held then, on the history's
/// timeline.
locks::LockClientOptions lock_client_options(const WorkerOptions& o, EventWriter& events,
                                             const std::atomic<std::int64_t>& current_token) {
  locks::LockClientOptions options{milliseconds(2000), o.lock_service_timeout, {}};
  options.on_failover = [&events, &current_token](const std::string& what) {
    Event e = make(EventKind::kLog);
    e.detail = "lock service failover: " + what;
    if (auto t = current_token.load(); t != 0) e.token = t;
    spdlog::warn("{}", e.detail);
    events.emit(std::move(e));
  };
  return options;
}

class Worker {
 public:
  Worker(const WorkerOptions& o, EventWriter& events, std::stop_token stop, std::atomic<std::int64_t>& current_token,
         PauseWatch& pauses)
      : o_(o),
        events_(events),
        stop_(std::move(stop)),
        current_token_(current_token),
        pauses_(pauses),
        lock_(locks::make_lock_client(o.lock_service_endpoint(), lock_client_options(o, events, current_token))),
        store_(make_resource_writer(o.resource_endpoint(), o.store_timeout)) {}

  int run() {
    // --repeat: one round per holding, until a stop request (the harness's, at the end of its
    // schedule); --max-acquires bounds each round's attempts.
    while (true) {
      switch (acquire()) {
        case Acquired::kYes: break;
        case Acquired::kStopped: return terminated();
        case Acquired::kGaveUp: return kWorkerFatal;
      }
      const int rc = o_.job == JobKind::kCounter ? run_counter() : run_segments();
      if (rc != kWorkerOk) return rc;
      Event done = make(EventKind::kJobDone);
      done.token = held_->token;
      done.key = o_.key;
      events_.emit(std::move(done));
      release();
      if (!o_.repeat) return kWorkerOk;
      acquires_ = 0;
    }
  }

  /// The worker gives up for good (and says so, with why: a job.gave_up event, the protocol's one
  /// way to say it; docs/worker-protocol.md), then releases what it holds. Also the path for
  /// exceptions escaping run().
  int fatal(const std::string& why) {
    spdlog::error("{}", why);
    Event e = make(EventKind::kJobGaveUp);
    e.detail = why;
    if (held_) e.token = held_->token;
    events_.emit(std::move(e));
    try {
      release();
    } catch (const std::exception& err) {
      spdlog::error("release after a fatal error failed: {}", err.what());
    }
    return kWorkerFatal;
  }

 private:
  enum class Acquired { kYes, kStopped, kGaveUp };
  /// What became of one step of the job.
  enum class Step {
    kDone,     ///< the mutation was accepted (or the effect stands)
    kRedo,     ///< the holding is over (rejected, unknown, lease lost, pause): re-acquire and redo
    kStopped,  ///< stop requested
    kFatal,    ///< fatal() was called already; return kWorkerFatal
  };

  // --- the jobs ------------------------------------------------------------------------------

  /// segments and side-effect: returns kWorkerOk with the job done and the lock still held.
  int run_segments() {
    std::int64_t segment = 0;
    bool first_write = true;
    while (segment < o_.segments) {
      Step step = Step::kDone;
      for (std::int64_t chunk = 0; chunk < o_.chunks && step == Step::kDone; ++chunk) {
        if (!first_write && !sleep_unless_stopped(o_.chunk_interval, stop_)) return terminated();
        if (stop_.stop_requested()) return terminated();
        first_write = false;
        step = guarded([&](const std::string& detail) { return write(segment_id(segment), chunk, detail); });
      }
      if (step == Step::kDone && o_.job == JobKind::kSideEffect) {
        if (stop_.stop_requested()) return terminated();
        if (o_.self_stop_at == SelfStopAt::kEffect) self_stop("effect", "between the segment's last write and its side effect");
        step = guarded([&](const std::string& detail) { return post_effect(segment_id(segment), detail); });
      }
      switch (step) {
        case Step::kDone: ++segment; continue;
        case Step::kStopped: return terminated();
        case Step::kFatal: return kWorkerFatal;
        case Step::kRedo: break;
      }
      // This holding is over. Never send its token again (unless the design says otherwise).
      spdlog::info("holding with token {} is over; releasing and re-acquiring to redo segment {}", held_->token, segment);
      if (int rc = reacquire(); rc != kWorkerOk) return rc;
      if (o_.repeat) segment = 0;  // a new holding writes a round of its own segments
    }
    return kWorkerOk;
  }

  /// The segment id written for the job's segment `segment` (0-based): the same, or with --repeat
  /// token x segments + segment, so that every holding writes segments no other holding writes and a
  /// round cut short (the run's end, a lost holding) never leaves a segment of mixed tokens.
  std::int64_t segment_id(std::int64_t segment) const {
    if (!o_.repeat) return segment;
    const std::int64_t token = held_->token;
    if (token < 0 || token > (std::numeric_limits<std::int64_t>::max() - segment) / o_.segments)
      throw std::runtime_error("--repeat numbers segments from the token, and token " + std::to_string(token) +
                               " x " + std::to_string(o_.segments) + " segments does not fit in 64 bits");
    return token * o_.segments + segment;
  }

  /// counter: --increments read-modify-write increments; returns kWorkerOk with the lock held.
  int run_counter() {
    std::int64_t done = 0;
    bool first = true;
    while (done < o_.increments) {
      if (!first && !sleep_unless_stopped(o_.chunk_interval, stop_)) return terminated();
      if (stop_.stop_requested()) return terminated();
      first = false;
      Step step = Step::kRedo;
      CounterReply read = store_->read_counter(o_.key);
      if (!read.ok) {
        Event e = make(EventKind::kLog);
        e.key = o_.key;
        e.token = held_->token;
        e.detail = "counter read failed: " + read.error;
        events_.emit(std::move(e));
        if (read.http_status >= 400 && read.http_status < 500)
          return fatal("the store called the counter read malformed; retrying cannot help");
      } else {
        const std::int64_t old_value = read.value;
        step = guarded([&](const std::string& detail) { return write_counter(old_value, old_value + 1, detail); });
      }
      switch (step) {
        case Step::kDone: ++done; continue;
        case Step::kStopped: return terminated();
        case Step::kFatal: return kWorkerFatal;
        case Step::kRedo: break;
      }
      spdlog::info("holding with token {} is over; releasing and re-acquiring to redo increment {}", held_->token, done + 1);
      if (int rc = reacquire(); rc != kWorkerOk) return rc;
    }
    return kWorkerOk;
  }

  /// Release, acquire again, and check the new token. kWorkerOk when held again.
  int reacquire() {
    const std::int64_t previous = held_->token;
    release();
    switch (acquire()) {
      case Acquired::kYes: break;
      case Acquired::kStopped: return terminated();
      case Acquired::kGaveUp: return kWorkerFatal;
    }
    if (held_->token > previous) return kWorkerOk;
    const std::string why = "the new token " + std::to_string(held_->token) + " is not greater than the previous token " +
                            std::to_string(previous);
    if (o_.token_source == TokenSource::kIssuer) return fatal(why + ": refusing to write with it");
    Event e = make(EventKind::kLog);
    e.token = held_->token;
    e.detail = why + " (token-source timestamp: not an ordering authority; writing with it anyway)";
    events_.emit(std::move(e));
    return kWorkerOk;
  }

  // --- the checks before each mutation and the mutation -----------------------------------

  /// Runs the designs' checks, then the mutation `send` (which emits its own invoke and result
  /// events; its argument is the write.invoke detail), resending a rejected one with the same
  /// token when --retry-same-token says so.
  template <typename Send>
  Step guarded(Send&& send) {
    if (Step s = before_write(); s != Step::kDone) return s;
    WriteOutcome outcome = send("");
    for (int retry = 1; o_.retry_same_token && outcome == WriteOutcome::kRejected && retry <= kSameTokenRetries; ++retry) {
      if (stop_.stop_requested()) return Step::kStopped;
      outcome = send("retry " + std::to_string(retry) + "/" + std::to_string(kSameTokenRetries) + " with the same token");
    }
    switch (outcome) {
      case WriteOutcome::kAccepted: return Step::kDone;
      case WriteOutcome::kRejected:
      case WriteOutcome::kUnknown: return Step::kRedo;
      case WriteOutcome::kInvalid:
        fatal("the store called a write malformed; retrying cannot help");
        return Step::kFatal;
    }
    return Step::kRedo;
  }

  Step before_write() {
    if (o_.cpu_per_write.count() > 0 && !spend_cpu(o_.cpu_per_write, stop_)) return Step::kStopped;
    if (o_.keepalive == KeepaliveMode::kInline) renew_inline();
    if (o_.abort_on_pause) {
      const std::int64_t last_tick = pauses_.last_tick_ns.load();
      const std::int64_t now_gap = last_tick == 0 ? 0 : steady_ns() - last_tick;
      const std::int64_t gap = std::max(pauses_.longest_gap_ns.load(), now_gap);
      if (gap >= std::chrono::duration_cast<std::chrono::nanoseconds>(*o_.abort_on_pause).count()) {
        pauses_.longest_gap_ns.store(0);
        Event e = make(EventKind::kLog);
        e.token = held_->token;
        e.lease_id = held_->session.id;
        e.duration_ns = gap;
        e.detail = "abort-on-pause " + std::to_string(gap / 1'000'000);
        events_.emit(std::move(e));
        spdlog::info("paused {} ms (>= {} ms): dropping the holding with token {}", gap / 1'000'000,
                     o_.abort_on_pause->count(), held_->token);
        return Step::kRedo;
      }
    }
    if (o_.check_lease_before_write) {
      Event e = make(EventKind::kLog);
      e.token = held_->token;
      e.lease_id = held_->session.id;
      try {
        const std::optional<milliseconds> ttl = lock_->remaining(held_->session);
        if (!ttl || ttl->count() <= 0) {
          e.detail = "lease-check lost ttl=" + ttl_seconds(ttl) + ": the lease is gone; releasing and re-acquiring before writing";
          events_.emit(std::move(e));
          return Step::kRedo;
        }
        e.detail = "lease-check ok ttl=" + ttl_seconds(ttl);
        events_.emit(std::move(e));
      } catch (const std::exception& err) {
        e.detail = std::string("lease-check failed: ") + err.what() + "; releasing and re-acquiring before writing";
        events_.emit(std::move(e));
        return Step::kRedo;
      }
      if (o_.self_stop_at == SelfStopAt::kCheck) self_stop("check", "between the lease check and the write");
    }
    return Step::kDone;
  }

  /// --keepalive inline: renews the holding's lease on this thread once the interval has passed.
  /// Reports like the keepalive thread (lease.lost once, keepalive.fail per failure) and, like
  /// it, leaves the holder's belief alone.
  void renew_inline() {
    const auto now = std::chrono::steady_clock::now();
    if (held_->lease_lost || now - held_->last_renewal < o_.effective_keepalive_interval()) return;
    held_->last_renewal = now;
    Event e;
    e.lease_id = held_->session.id;
    e.token = held_->token;
    try {
      if (lock_->keepalive(held_->session)) return;
      held_->lease_lost = true;
      e.kind = EventKind::kLeaseLost;
      e.detail = lock_->session_lost_detail() + " (inline renewal)";
      spdlog::warn("lease {:x} lost (inline renewal: {})", held_->session.id, lock_->session_lost_detail());
    } catch (const std::exception& err) {
      e.kind = EventKind::kKeepaliveFail;
      e.detail = err.what();
      spdlog::warn("inline keepalive of lease {:x} failed: {}", held_->session.id, err.what());
    }
    events_.emit(std::move(e));
  }

  /// The first time only: says "self-stop at <point>" and SIGSTOPs the whole process; the
  /// harness's self-stop fault continues it.
  void self_stop(std::string_view point, std::string_view where) {
    if (self_stopped_) return;
    self_stopped_ = true;
    Event stop = make(EventKind::kLog);
    stop.token = held_->token;
    stop.lease_id = held_->session.id;
    stop.detail = "self-stop at " + std::string(point);
    events_.emit(std::move(stop));  // flushed: the harness sees it before the process stops
    spdlog::info("stopping myself (SIGSTOP) {}", where);
    ::raise(SIGSTOP);  // stops every thread of the process until SIGCONT
  }

  // --- acquire and release ------------------------------------------------------------------

  Acquired acquire() {
    while (true) {
      if (stop_.stop_requested()) return Acquired::kStopped;
      // A repeating worker works until it is told to stop: an outage of the lock service (a
      // restart, a partition) longer than --max-acquires x 200 ms must not end the workload
      // half-way through a soak. It backs off instead (below) and keeps trying.
      if (acquires_ >= o_.max_acquires && !o_.repeat) {
        fatal("gave up after " + std::to_string(acquires_) + " acquisition attempts (--max-acquires)");
        return Acquired::kGaveUp;
      }
      ++acquires_;
      Event invoke = make(EventKind::kAcquireInvoke);
      invoke.lock = o_.lock;
      invoke.ttl_ms = o_.ttl.count();
      events_.emit(std::move(invoke));

      std::string failure;
      std::optional<locks::Session> session;
      std::unique_ptr<Keepalive> keepalive;
      try {
        session = lock_->open_session(o_.ttl);
        // Keep the lease alive while waiting for the lock, too: a waiter whose lease expires gets
        // a key that is already gone (etcd: see EtcdClient::lock).
        keepalive = std::make_unique<Keepalive>(*lock_, events_, *session, o_.effective_keepalive_interval());
        std::optional<locks::Holding> locked = lock_->acquire(o_.lock, *session, o_.lock_timeout, stop_);
        if (!locked) {
          failure = stop_.stop_requested() ? "stop requested while waiting for the lock"
                                           : "Lock did not return within " + std::to_string(o_.lock_timeout.count()) + " ms";
        } else {
          // The fencing token is the issuer's (etcd: the key's create_revision, not the Lock
          // reply's header revision) or, by design, the wall clock.
          const bool timestamp = o_.token_source == TokenSource::kTimestamp;
          const std::int64_t token = timestamp ? realtime_ns() : locked->token;
          keepalive->set_token(token);
          // --keepalive inline: from here on the job's thread renews (renew_inline).
          if (o_.keepalive == KeepaliveMode::kInline) keepalive.reset();
          held_ = Holding{*session, locked->lock_key, token, std::move(keepalive), std::chrono::steady_clock::now(), false};
          current_token_.store(token);
          pauses_.longest_gap_ns.store(0);  // abort-on-pause counts pauses of this holding only
          Event ok = make(EventKind::kAcquireOk);
          ok.lock = o_.lock;
          ok.lock_key = locked->lock_key;
          ok.lease_id = session->id;
          ok.token = token;
          ok.revision = locked->revision;  // unset when the kind has no ordering number
          ok.ttl_ms = session->ttl.count();
          if (timestamp) ok.detail = "token-source timestamp";
          events_.emit(std::move(ok));
          spdlog::info("acquired {} as {} with token {} (lease {:x}, issuer's token {}, lock revision {})", o_.lock,
                       locked->lock_key, token, session->id, locked->token, locked->revision.value_or(-1));
          return Acquired::kYes;
        }
      } catch (const std::exception& err) {
        failure = err.what();
      }
      Event fail = make(EventKind::kAcquireFail);
      fail.lock = o_.lock;
      if (session) fail.lease_id = session->id;
      fail.detail = failure;
      events_.emit(std::move(fail));
      spdlog::warn("acquire of {} failed: {}", o_.lock, failure);
      keepalive.reset();
      if (session) close_session(*session);  // also deletes a key a late grant may have created
      // 200 ms; a repeating worker past --max-acquires doubles it up to 2 s.
      const auto over = acquires_ - o_.max_acquires;
      const auto backoff = over < 0 ? milliseconds(200)
                                    : std::min(milliseconds(2000), milliseconds(200LL << std::min<std::int64_t>(over + 1, 4)));
      if (!sleep_unless_stopped(backoff, stop_)) return Acquired::kStopped;
    }
  }

  void close_session(const locks::Session& session) {
    try {
      if (!lock_->close_session(session)) spdlog::info("lease {:x} was already gone at revoke", session.id);
    } catch (const std::exception& err) {
      Event e = make(EventKind::kLog);
      e.lease_id = session.id;
      e.detail = std::string("lease revoke failed (the lease will expire by itself): ") + err.what();
      events_.emit(std::move(e));
    }
  }

  /// Releases the current holding: delete the holder's own key, owner-checked (or,
  /// --release-by-name, whatever holds the lock name), then close the session (revoke the lease).
  void release() {
    if (!held_) return;
    Holding h = std::move(*held_);
    held_.reset();
    current_token_.store(0);
    h.keepalive.reset();

    Event invoke = make(EventKind::kReleaseInvoke);
    invoke.lock = o_.lock;
    invoke.lock_key = h.lock_key;
    invoke.lease_id = h.session.id;
    invoke.token = h.token;
    if (o_.release_by_name) invoke.detail = "release by name: deleting every key under " + o_.lock + "/";
    events_.emit(std::move(invoke));

    // Release = delete the holder's own key. release.ok carries a revision only for a real delete
    // (etcd: DeleteRange's `deleted` count, see etcd_lock_client.h), so the checker can tell this
    // release from the lock service's expiry by revision.
    try {
      if (o_.release_by_name) {
        release_by_name(h);
      } else {
        const locks::Released del = lock_->release(o_.lock, locks::Holding{h.lock_key, h.token, std::nullopt}, h.session);
        Event ok = make(EventKind::kReleaseOk);
        ok.lock = o_.lock;
        ok.lock_key = h.lock_key;
        ok.lease_id = h.session.id;
        ok.token = h.token;
        if (del.existed) ok.revision = del.revision;
        else ok.detail = "the lock key was already gone (lease expired or key deleted): nothing to release";
        events_.emit(std::move(ok));
        spdlog::info("released {} (token {}) at revision {}", h.lock_key, h.token, del.revision.value_or(-1));
      }
    } catch (const std::exception& err) {
      Event fail = make(EventKind::kReleaseFail);
      fail.lock = o_.lock;
      fail.lock_key = h.lock_key;
      fail.lease_id = h.session.id;
      fail.token = h.token;
      fail.detail = err.what();
      events_.emit(std::move(fail));
      spdlog::warn("unlock of {} failed: {}", h.lock_key, err.what());
    }
    close_session(h.session);
  }

  /// The mistake: delete by NAME — whatever holds the lock (etcd: every key under its prefix),
  /// whoever created it.
  void release_by_name(const Holding& h) {
    const std::vector<locks::Released> deleted = lock_->release_by_name(o_.lock, h.session);
    if (deleted.empty()) {
      Event ok = make(EventKind::kReleaseOk);
      ok.lock = o_.lock;
      ok.lock_key = h.lock_key;
      ok.lease_id = h.session.id;
      ok.token = h.token;
      ok.detail = "release by name: no key under " + o_.lock + "/ (lease expired or keys deleted): nothing to release";
      events_.emit(std::move(ok));
      return;
    }
    for (const locks::Released& r : deleted) {
      const bool own = r.lock_key == h.lock_key;
      Event ok = make(EventKind::kReleaseOk);
      ok.lock = o_.lock;
      ok.lock_key = r.lock_key;
      ok.lease_id = r.lease_id;
      ok.token = own ? std::optional<std::int64_t>(h.token) : r.token;
      ok.revision = r.revision;
      if (!own)
        ok.detail = "release by name: deleted a key this holder did not create (" +
                    (r.token ? "token " + std::to_string(*r.token) : std::string("token unknown")) +
                    (r.lease_id ? ", lease " + std::to_string(*r.lease_id) : std::string()) + ")";
      events_.emit(std::move(ok));
      spdlog::info("released by name: deleted {}{} at revision {}", r.lock_key, own ? "" : " (NOT mine)",
                   r.revision.value_or(-1));
    }
  }

  // --- mutations: each emits write.invoke and its result ------------------------------------

  WriteOutcome write(std::int64_t segment, std::int64_t chunk, const std::string& detail) {
    const std::int64_t token = held_->token;
    Event invoke = make(EventKind::kWriteInvoke);
    invoke.key = o_.key;
    invoke.segment = segment;
    invoke.chunk = chunk;
    invoke.token = token;
    invoke.detail = detail;
    events_.emit(std::move(invoke));

    const std::string bytes = encode_chunk(ChunkHeader{o_.id, token, o_.key, segment, chunk}, o_.chunk_bytes);
    WriteReply reply = store_->write(o_.key, segment, chunk, FencingToken(token), o_.id, bytes);

    Event e = make(EventKind::kWriteInfo);
    e.key = o_.key;
    e.segment = segment;
    e.chunk = chunk;
    e.token = token;
    report(e, reply, "");
    return reply.outcome;
  }

  WriteOutcome write_counter(std::int64_t old_value, std::int64_t new_value, const std::string& detail) {
    const std::int64_t token = held_->token;
    const std::string what = "counter " + std::to_string(old_value) + " -> " + std::to_string(new_value);
    Event invoke = make(EventKind::kWriteInvoke);
    invoke.key = o_.key;
    invoke.token = token;
    invoke.detail = detail.empty() ? what : what + ": " + detail;
    events_.emit(std::move(invoke));

    WriteReply reply = store_->write_counter(o_.key, new_value, FencingToken(token), o_.id);

    Event e = make(EventKind::kWriteInfo);
    e.key = o_.key;
    e.token = token;
    report(e, reply, what);
    return reply.outcome;
  }

  /// Fills in e's kind, high_water and detail from a write reply and emits it. `what` prefixes
  /// the detail ("counter 3 -> 4"); for an accepted write it is the whole detail.
  void report(Event& e, const WriteReply& reply, const std::string& what) {
    auto with = [&what](const std::string& s) { return what.empty() ? s : what + ": " + s; };
    switch (reply.outcome) {
      case WriteOutcome::kAccepted:
        e.kind = EventKind::kWriteOk;
        e.high_water = reply.high_water;
        e.detail = what;
        break;
      case WriteOutcome::kRejected:
        e.kind = EventKind::kWriteFail;
        e.high_water = reply.high_water;
        e.detail = with(reply.error.empty() ? "fenced (HTTP 409)" : reply.error);
        break;
      case WriteOutcome::kInvalid:
        e.kind = EventKind::kWriteFail;  // definitely not written, but not fenced: no high_water
        e.detail = with("invalid request (HTTP " + std::to_string(reply.http_status) + "): " + reply.error);
        break;
      case WriteOutcome::kUnknown:
        e.kind = EventKind::kWriteInfo;
        e.detail = with(reply.error.empty() ? "no reply" : reply.error);
        break;
    }
    events_.emit(std::move(e));
  }

  WriteOutcome post_effect(std::int64_t segment, const std::string& detail) {
    const std::int64_t token = held_->token;
    // The effect's identity is the job's, not the holder's: whoever performs segment N's effect
    // performs the same payout, so an idempotent resource must see the same id from every holder.
    const std::string id = "seg" + std::to_string(segment);
    const std::string effect_key = o_.key + ".effect";
    Event invoke = make(EventKind::kWriteInvoke);
    invoke.key = effect_key;
    invoke.segment = segment;
    invoke.token = token;
    invoke.detail = "effect " + id + (detail.empty() ? "" : ": " + detail);
    events_.emit(std::move(invoke));

    // How the effect is guarded is the store's configuration (issue 14); its reply says which.
    EffectReply reply = store_->post_effect(o_.key, id, FencingToken(token), o_.id);
    const std::string guard = reply.mode ? " (" + std::string(effect_mode_name(*reply.mode)) + ")" : "";

    Event e = make(EventKind::kWriteInfo);
    e.key = effect_key;
    e.segment = segment;
    e.token = token;
    WriteOutcome outcome = WriteOutcome::kUnknown;
    switch (reply.outcome) {
      case EffectOutcome::kApplied:
      case EffectOutcome::kDuplicate:  // the effect stands either way
        e.kind = EventKind::kWriteOk;
        e.high_water = reply.high_water;
        e.detail = "effect " + id + (reply.outcome == EffectOutcome::kApplied
                                         ? " applied" + guard
                                         : " already applied: duplicate ignored" + guard);
        outcome = WriteOutcome::kAccepted;
        break;
      case EffectOutcome::kRejected:
        e.kind = EventKind::kWriteFail;
        e.high_water = reply.high_water;
        e.detail = "effect " + id + ": " + (reply.error.empty() ? "fenced (HTTP 409)" : reply.error);
        outcome = WriteOutcome::kRejected;
        break;
      case EffectOutcome::kInvalid:
        e.kind = EventKind::kWriteFail;
        e.detail = "effect " + id + ": invalid request (HTTP " + std::to_string(reply.http_status) + "): " + reply.error;
        outcome = WriteOutcome::kInvalid;
        break;
      case EffectOutcome::kUnknown:
        e.kind = EventKind::kWriteInfo;
        e.detail = "effect " + id + ": " + (reply.error.empty() ? "no reply" : reply.error);
        outcome = WriteOutcome::kUnknown;
        break;
    }
    events_.emit(std::move(e));
    return outcome;
  }

  int terminated() {
    spdlog::info("stop requested; releasing and exiting");
    Event e = make(EventKind::kLog);
    e.detail = o_.repeat ? "stop requested (SIGTERM/SIGINT): the repeating job ends here; releasing"
                         : "stop requested (SIGTERM/SIGINT) before the job was done: releasing";
    if (held_) e.token = held_->token;
    events_.emit(std::move(e));
    release();
    return o_.repeat ? kWorkerOk : kWorkerTerminated;  // --repeat: a stop is how the job ends
  }

  const WorkerOptions& o_;
  EventWriter& events_;
  std::stop_token stop_;
  std::atomic<std::int64_t>& current_token_;
  PauseWatch& pauses_;
  std::unique_ptr<locks::LockClient> lock_;  ///< the lock service's client (any kind: lock_client.h)
  std::unique_ptr<ResourceWriter> store_;  ///< the resource's writer (any kind: writer.h)
  std::optional<Holding> held_;
  std::int64_t acquires_ = 0;
  bool self_stopped_ = false;
};

}  // namespace

int run_worker(const WorkerOptions& options, EventWriter& events, std::stop_token stop) {
  if (auto errors = validate(options); !errors.empty()) {
    std::string all;
    for (const auto& e : errors) all += (all.empty() ? "" : "; ") + e;
    Event e = make(EventKind::kLog);
    e.detail = "invalid options: " + all;
    events.emit(std::move(e));
    return kWorkerBadArgs;
  }
  Event start = make(EventKind::kLog);
  start.detail = "worker start: lock=" + options.lock + " key=" + options.key + " job=" +
                 std::string(job_kind_name(options.job)) + " designs=" + designs_summary(options) +
                 " " + lock_service_summary(options.lock_service_endpoint()) + " resource=" + options.resource_endpoint().value("kind", "?") + " seed=" + std::to_string(options.seed);
  events.emit(std::move(start));

  std::atomic<std::int64_t> current_token{0};
  PauseWatch pauses;
  // The pause detector: a gap between two steady_clock readings, each taken after a tick-long
  // sleep, is time this process did not run (SIGSTOP, freezer, starvation).
  std::jthread ticker([&](std::stop_token ticker_stop) {
    PauseDetector detector(options.pause_threshold);
    auto previous = std::chrono::steady_clock::now();
    detector.observe(previous);
    pauses.last_tick_ns.store(steady_ns());
    while (!ticker_stop.stop_requested()) {
      std::this_thread::sleep_for(options.tick);
      const auto now = std::chrono::steady_clock::now();
      const std::int64_t gap_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now - previous).count();
      previous = now;
      pauses.last_tick_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count());
      std::int64_t longest = pauses.longest_gap_ns.load();
      while (gap_ns > longest && !pauses.longest_gap_ns.compare_exchange_weak(longest, gap_ns)) {
      }
      if (auto gap = detector.observe(now)) {
        Event e = make(EventKind::kPause);
        e.duration_ns = gap->count();
        if (auto t = current_token.load(); t != 0) e.token = t;
        events.emit(std::move(e));
      }
    }
  });

  int rc = kWorkerFatal;
  std::optional<Worker> worker;
  try {
    worker.emplace(options, events, stop, current_token, pauses);
    rc = worker->run();
  } catch (const std::exception& err) {
    if (worker) {
      rc = worker->fatal(err.what());
    } else {
      Event e = make(EventKind::kJobGaveUp);  // it gives up before it began (a lock service or resource it cannot use)
      e.detail = err.what();
      events.emit(std::move(e));
      rc = kWorkerFatal;
    }
  }
  ticker.request_stop();
  ticker.join();
  return rc;
}

std::vector<std::pair<std::string, std::string>> faketime_environment(std::chrono::milliseconds offset,
                                                                      const char* inherited_asan_options,
                                                                      bool fake_monotonic) {
  // FAKETIME's relative form: "+"/"-" then seconds, fractions allowed (libfaketime's README).
  const auto ms = offset.count();
  const std::string sign = ms < 0 ? "-" : "+";
  const auto abs_ms = ms < 0 ? -ms : ms;
  std::string seconds = std::to_string(abs_ms / 1000);
  if (abs_ms % 1000 != 0) {
    std::string frac = std::to_string(abs_ms % 1000);
    frac.insert(0, 3 - frac.size(), '0');
    while (frac.back() == '0') frac.pop_back();
    seconds += "." + frac;
  }
  std::vector<std::pair<std::string, std::string>> env{{"LD_PRELOAD", kFaketimeLibrary},
                                                       {"FAKETIME", sign + seconds + "s"}};
  if (!fake_monotonic) env.emplace_back("FAKETIME_DONT_FAKE_MONOTONIC", "1");
  std::string asan = inherited_asan_options != nullptr ? inherited_asan_options : "";
  if (!asan.empty()) asan += ":";
  asan += "verify_asan_link_order=0:allocator_release_to_os_interval_ms=-1";
  env.emplace_back("ASAN_OPTIONS", asan);
  return env;
}

}  // namespace fencecheck
