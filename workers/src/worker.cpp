#include "fencecheck/workers/worker.h"

#include <condition_variable>
#include <memory>
#include <ostream>
#include <thread>
#include <utility>

#include <spdlog/spdlog.h>

#include "fencecheck/proto/chunk.h"
#include "fencecheck/proto/token.h"
#include "fencecheck/resources/store_client.h"
#include "fencecheck/workers/etcd_client.h"

namespace fencecheck {

using std::chrono::milliseconds;

std::chrono::milliseconds WorkerOptions::effective_keepalive_interval() const {
  if (keepalive_interval) return *keepalive_interval;
  auto third = std::chrono::duration_cast<milliseconds>(ttl) / 3;
  return third.count() < 1 ? milliseconds(1) : third;
}

std::vector<std::string> validate(const WorkerOptions& o) {
  std::vector<std::string> errors;
  auto need = [&](bool ok, std::string message) {
    if (!ok) errors.push_back(std::move(message));
  };
  need(is_safe_name(o.id, 64), "--id must be 1-64 characters of [A-Za-z0-9_.-], got '" + o.id + "'");
  need(is_safe_name(o.key, 256), "--key must be 1-256 characters of [A-Za-z0-9_.-], got '" + o.key + "'");
  need(!o.lock.empty(), "--lock must not be empty");
  need(o.etcd.rfind("http://", 0) == 0, "--etcd must be http://host:port, got '" + o.etcd + "'");
  need(o.store.rfind("http://", 0) == 0, "--store must be http://host:port, got '" + o.store + "'");
  need(o.ttl.count() >= 1, "--ttl-s must be >= 1, got " + std::to_string(o.ttl.count()));
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
  need(o.etcd_timeout.count() >= 1, "--etcd-timeout-ms must be >= 1");
  need(!o.retry_same_token, "--retry-same-token is not implemented yet");
  need(!o.release_by_name, "--release-by-name is not implemented yet");
  need(!o.check_lease_before_write, "--check-lease-before-write is not implemented yet");
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
  } catch (...) {
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

/// Renews one lease every interval on its own thread until stopped. Reports a lost lease once
/// (then stops: a lease that is gone cannot come back) and each failed round trip. It never tells
/// the main thread: the holder's belief that it holds the lock is left alone on purpose.
class Keepalive {
 public:
  Keepalive(const EtcdClient& etcd, EventWriter& events, std::int64_t lease_id, milliseconds interval)
      : lease_id_(lease_id), thread_([this, &etcd, &events, interval](std::stop_token stop) {
          while (sleep_unless_stopped(interval, stop)) {
            try {
              if (!etcd.lease_keepalive(lease_id_)) {
                Event e = make(EventKind::kLeaseLost);
                e.lease_id = lease_id_;
                if (auto t = token_.load(); t != 0) e.token = t;
                e.detail = "keepalive reply has no TTL: etcd says the lease is gone";
                events.emit(std::move(e));
                spdlog::warn("lease {:x} lost (keepalive answered without TTL)", lease_id_);
                return;
              }
            } catch (const std::exception& err) {
              Event e = make(EventKind::kKeepaliveFail);
              e.lease_id = lease_id_;
              if (auto t = token_.load(); t != 0) e.token = t;
              e.detail = err.what();
              events.emit(std::move(e));
              spdlog::warn("keepalive of lease {:x} failed: {}", lease_id_, err.what());
            }
          }
        }) {}
  Keepalive(const Keepalive&) = delete;
  Keepalive& operator=(const Keepalive&) = delete;
  ~Keepalive() { stop(); }

  void set_token(std::int64_t token) { token_.store(token); }
  /// Stops and joins; waits for an in-flight keepalive (bounded by the etcd timeout).
  void stop() {
    thread_.request_stop();
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::int64_t lease_id_;
  std::atomic<std::int64_t> token_{0};
  std::jthread thread_;  // last: starts after the fields above are initialised
};

struct Holding {
  std::int64_t lease_id = 0;
  std::string lock_key;
  std::int64_t token = 0;
  std::unique_ptr<Keepalive> keepalive;
};

class Worker {
 public:
  Worker(const WorkerOptions& o, EventWriter& events, std::stop_token stop, std::atomic<std::int64_t>& current_token)
      : o_(o),
        events_(events),
        stop_(std::move(stop)),
        current_token_(current_token),
        etcd_(o.etcd, EtcdClient::Options{milliseconds(2000), o.etcd_timeout}),
        store_(o.store, o.store_timeout) {}

  int run() {
    switch (acquire()) {
      case Acquired::kYes: break;
      case Acquired::kStopped: return terminated();
      case Acquired::kGaveUp: return kWorkerFatal;
    }
    std::int64_t segment = 0;
    bool first_write = true;
    while (segment < o_.segments) {
      bool fenced = false;
      for (std::int64_t chunk = 0; chunk < o_.chunks && !fenced; ++chunk) {
        if (!first_write && !sleep_unless_stopped(o_.chunk_interval, stop_)) return terminated();
        if (stop_.stop_requested()) return terminated();
        first_write = false;
        switch (write(segment, chunk)) {
          case WriteOutcome::kAccepted: break;
          case WriteOutcome::kRejected:
          case WriteOutcome::kUnknown: fenced = true; break;
          case WriteOutcome::kInvalid:
            return fatal("the store called a write malformed; retrying cannot help");
        }
      }
      if (!fenced) {
        ++segment;
        continue;
      }
      // Fenced (or unsure): this holding is over. Never send this token again.
      const std::int64_t rejected = held_->token;
      spdlog::info("write with token {} not accepted; releasing and re-acquiring to redo segment {}", rejected, segment);
      release();
      switch (acquire()) {
        case Acquired::kYes: break;
        case Acquired::kStopped: return terminated();
        case Acquired::kGaveUp: return kWorkerFatal;
      }
      if (held_->token <= rejected)
        return fatal("the new token " + std::to_string(held_->token) + " is not greater than the rejected token " +
                     std::to_string(rejected) + ": refusing to write with it");
    }
    Event done = make(EventKind::kJobDone);
    done.token = held_->token;
    done.key = o_.key;
    events_.emit(std::move(done));
    release();
    return kWorkerOk;
  }

  /// Fatal path for exceptions escaping run().
  int fatal(const std::string& why) {
    spdlog::error("{}", why);
    Event e = make(EventKind::kLog);
    e.detail = "fatal: " + why;
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

  Acquired acquire() {
    while (true) {
      if (stop_.stop_requested()) return Acquired::kStopped;
      if (acquires_ >= o_.max_acquires) {
        fatal("gave up after " + std::to_string(acquires_) + " acquisition attempts (--max-acquires)");
        return Acquired::kGaveUp;
      }
      ++acquires_;
      Event invoke = make(EventKind::kAcquireInvoke);
      invoke.lock = o_.lock;
      invoke.ttl_ms = std::chrono::duration_cast<milliseconds>(o_.ttl).count();
      events_.emit(std::move(invoke));

      std::string failure;
      std::int64_t lease_id = 0;
      std::unique_ptr<Keepalive> keepalive;
      try {
        LeaseGrant grant = etcd_.lease_grant(o_.ttl);
        lease_id = grant.id;
        // Keep the lease alive while waiting in Lock, too: a waiter whose lease expires gets a
        // key that is already gone (see EtcdClient::lock).
        keepalive = std::make_unique<Keepalive>(etcd_, events_, lease_id, o_.effective_keepalive_interval());
        std::optional<LockResult> locked = etcd_.lock(o_.lock, lease_id, o_.lock_timeout, stop_);
        if (!locked) {
          failure = stop_.stop_requested() ? "stop requested while waiting for the lock"
                                           : "Lock did not return within " + std::to_string(o_.lock_timeout.count()) + " ms";
        } else if (std::optional<KeyValue> kv = etcd_.range(locked->key); !kv || kv->lease != lease_id) {
          failure = "Lock returned key '" + locked->key + "' but it no longer exists with lease " +
                    std::to_string(lease_id) + " (the lease expired while waiting)";
        } else {
          // The fencing token is the key's create_revision, not the Lock reply's header revision.
          keepalive->set_token(kv->create_revision);
          held_ = Holding{lease_id, locked->key, kv->create_revision, std::move(keepalive)};
          current_token_.store(held_->token);
          Event ok = make(EventKind::kAcquireOk);
          ok.lock = o_.lock;
          ok.lock_key = locked->key;
          ok.lease_id = lease_id;
          ok.token = kv->create_revision;
          ok.revision = locked->header_revision;
          ok.ttl_ms = std::chrono::duration_cast<milliseconds>(grant.ttl).count();
          events_.emit(std::move(ok));
          spdlog::info("acquired {} as {} with token {} (lease {:x}, lock revision {})", o_.lock, locked->key,
                       kv->create_revision, lease_id, locked->header_revision);
          return Acquired::kYes;
        }
      } catch (const std::exception& err) {
        failure = err.what();
      }
      Event fail = make(EventKind::kAcquireFail);
      fail.lock = o_.lock;
      if (lease_id != 0) fail.lease_id = lease_id;
      fail.detail = failure;
      events_.emit(std::move(fail));
      spdlog::warn("acquire of {} failed: {}", o_.lock, failure);
      keepalive.reset();
      if (lease_id != 0) revoke(lease_id);  // also deletes a key a late grant may have created
      if (!sleep_unless_stopped(milliseconds(200), stop_)) return Acquired::kStopped;
    }
  }

  void revoke(std::int64_t lease_id) {
    try {
      if (!etcd_.lease_revoke(lease_id)) spdlog::info("lease {:x} was already gone at revoke", lease_id);
    } catch (const std::exception& err) {
      Event e = make(EventKind::kLog);
      e.lease_id = lease_id;
      e.detail = std::string("lease revoke failed (the lease will expire by itself): ") + err.what();
      events_.emit(std::move(e));
    }
  }

  /// Releases the current holding with the holder's own key: delete it, then revoke the lease.
  void release() {
    if (!held_) return;
    Holding h = std::move(*held_);
    held_.reset();
    current_token_.store(0);
    h.keepalive.reset();

    Event invoke = make(EventKind::kReleaseInvoke);
    invoke.lock = o_.lock;
    invoke.lock_key = h.lock_key;
    invoke.lease_id = h.lease_id;
    invoke.token = h.token;
    events_.emit(std::move(invoke));

    // Release = delete the holder's own key. v3lock's Unlock is exactly a DeleteRange of that key,
    // but its reply cannot say whether anything was deleted (for a key already gone it answers 200
    // with the current revision, which may even equal the expiry's delete revision). DeleteRange's
    // `deleted` count tells, atomically, so release.ok carries a revision only for a real delete and
    // the checker can tell this release from the lock service's expiry by revision.
    try {
      const DeleteResult del = etcd_.delete_key(h.lock_key);
      const std::int64_t revision = del.revision;
      Event ok = make(EventKind::kReleaseOk);
      ok.lock = o_.lock;
      ok.lock_key = h.lock_key;
      ok.lease_id = h.lease_id;
      ok.token = h.token;
      if (del.deleted > 0) ok.revision = revision;
      else ok.detail = "the lock key was already gone (lease expired or key deleted): nothing to release";
      events_.emit(std::move(ok));
      spdlog::info("released {} (token {}) at revision {}", h.lock_key, h.token, revision);
    } catch (const std::exception& err) {
      Event fail = make(EventKind::kReleaseFail);
      fail.lock = o_.lock;
      fail.lock_key = h.lock_key;
      fail.lease_id = h.lease_id;
      fail.token = h.token;
      fail.detail = err.what();
      events_.emit(std::move(fail));
      spdlog::warn("unlock of {} failed: {}", h.lock_key, err.what());
    }
    revoke(h.lease_id);
  }

  WriteOutcome write(std::int64_t segment, std::int64_t chunk) {
    const std::int64_t token = held_->token;
    Event invoke = make(EventKind::kWriteInvoke);
    invoke.key = o_.key;
    invoke.segment = segment;
    invoke.chunk = chunk;
    invoke.token = token;
    events_.emit(std::move(invoke));

    const std::string bytes = encode_chunk(ChunkHeader{o_.id, token, o_.key, segment, chunk}, o_.chunk_bytes);
    WriteReply reply = store_.write(o_.key, segment, chunk, FencingToken(token), o_.id, bytes);

    Event e = make(EventKind::kWriteInfo);
    e.key = o_.key;
    e.segment = segment;
    e.chunk = chunk;
    e.token = token;
    switch (reply.outcome) {
      case WriteOutcome::kAccepted:
        e.kind = EventKind::kWriteOk;
        e.high_water = reply.high_water;
        break;
      case WriteOutcome::kRejected:
        e.kind = EventKind::kWriteFail;
        e.high_water = reply.high_water;
        e.detail = reply.error.empty() ? "fenced (HTTP 409)" : reply.error;
        break;
      case WriteOutcome::kInvalid:
        e.kind = EventKind::kWriteFail;  // definitely not written, but not fenced: no high_water
        e.detail = "invalid request (HTTP " + std::to_string(reply.http_status) + "): " + reply.error;
        break;
      case WriteOutcome::kUnknown:
        e.kind = EventKind::kWriteInfo;
        e.detail = reply.error.empty() ? "no reply" : reply.error;
        break;
    }
    events_.emit(std::move(e));
    return reply.outcome;
  }

  int terminated() {
    spdlog::info("stop requested; releasing and exiting");
    Event e = make(EventKind::kLog);
    e.detail = "stop requested (SIGTERM/SIGINT) before the job was done: releasing";
    if (held_) e.token = held_->token;
    events_.emit(std::move(e));
    release();
    return kWorkerTerminated;
  }

  const WorkerOptions& o_;
  EventWriter& events_;
  std::stop_token stop_;
  std::atomic<std::int64_t>& current_token_;
  EtcdClient etcd_;
  StoreClient store_;
  std::optional<Holding> held_;
  std::int64_t acquires_ = 0;
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
  start.detail = "worker start: lock=" + options.lock + " key=" + options.key + " etcd=" + options.etcd +
                 " store=" + options.store + " seed=" + std::to_string(options.seed);
  events.emit(std::move(start));

  std::atomic<std::int64_t> current_token{0};
  // The pause detector: a gap between two steady_clock readings, each taken after a tick-long
  // sleep, is time this process did not run (SIGSTOP, freezer, starvation).
  std::jthread ticker([&](std::stop_token ticker_stop) {
    PauseDetector detector(options.pause_threshold);
    detector.observe(std::chrono::steady_clock::now());
    while (!ticker_stop.stop_requested()) {
      std::this_thread::sleep_for(options.tick);
      if (auto gap = detector.observe(std::chrono::steady_clock::now())) {
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
    worker.emplace(options, events, stop, current_token);
    rc = worker->run();
  } catch (const std::exception& err) {
    if (worker) {
      rc = worker->fatal(err.what());
    } else {
      Event e = make(EventKind::kLog);
      e.detail = std::string("fatal: ") + err.what();
      events.emit(std::move(e));
      rc = kWorkerFatal;
    }
  }
  ticker.request_stop();
  ticker.join();
  return rc;
}

}  // namespace fencecheck
