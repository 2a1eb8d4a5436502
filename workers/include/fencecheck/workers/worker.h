// fencecheck — the worker: a lock holder doing a job against a fenced resource, the way a real
// system using a distributed lock would, and reporting every step as events (fencecheck/proto/event.h).
// It talks to "a lock client" (fencecheck/locks/lock_client.h: etcd, and every other lock-service
// kind) and "a resource writer" (fencecheck/resources/writer.h), never to a service by name.
// Below, each step names the LockClient call and, in brackets, what it is for etcd
// (workers/locks/etcd/: etcd_lock_client.h).
//
// Protocol, with the events each step emits (fields in parentheses; every event also has
// src_ns and source = worker id):
//   start:   log (detail: options and seed)
//   acquire: acquire.invoke (lock, ttl_ms) -> open_session(ttl) [LeaseGrant] -> keepalive thread ->
//            acquire(lock, session) [Lock(lock, lease), then Range(lock key)] -> token = the
//            issuer's token [the key's create_revision] ->
//            acquire.ok (lock, lock_key, lease_id = the session id [lease id], token, ttl_ms = TTL
//            granted, revision = the issuer's ordering number at which the lock was seen held,
//            unset when the kind has none [the Lock reply's header revision: equal to the token
//            when uncontended and at or after the previous holder's delete when contended]).
//            Any failure: acquire.fail (lock, lease_id when granted, detail), the session is closed
//            [the lease revoked], retry after 200 ms; --max-acquires attempts in the whole run,
//            then job.gave_up (detail: why) and exit 1 (every exit 1 below says job.gave_up first).
//   job:     for each segment, for each chunk: write.invoke (key, segment, chunk, token) -> PUT
//            chunk with the token -> write.ok (.., high_water) / write.fail (.., high_water,
//            detail: fenced) / write.info (.., detail: outcome unknown). A 4xx other than 409
//            gives write.fail without high_water and exit 1 (a bug, not a fence).
//   fenced:  on write.fail or write.info: stop, release (below), acquire again (new lease, new,
//            strictly greater token; a token not greater than the rejected one is a fatal
//            error, exit 1) and restart the CURRENT segment from chunk 0. A rejected token is
//            never sent again.
//   done:    job.done (key, token) then release.
//   release: release.invoke (lock, lock_key, lease_id, token) -> release(own key, owner-checked)
//            [DeleteRange of the own key] -> release.ok (.., revision = the delete's revision when
//            the kind has one; when the key was already gone, detail says so and no revision) or
//            release.fail (.., detail) -> close_session [LeaseRevoke] (a failure: log).
//   threads: keepalive: lease.lost (lease_id, token) once when the issuer says the session is
//            gone, keepalive.fail (lease_id, token, detail) per failed round trip; ticker: pause
//            (duration_ns, token while holding).
// The keepalive thread never tells the main thread: the holder keeps believing it holds the lock,
// which is the bug fencing exists to contain. A stop request (SIGTERM) gives a log event, a
// release and exit 143.
//
// Jobs (--job; docs/catalogue-plan.md):
//   segments:    the job above.
//   side-effect: the segments job plus, after each completed segment N, one side effect: POST
//                /v1/effects/{key} with id "seg<N>" (the store guards it as it was configured:
//                fenced, unfenced or idempotent; the worker cannot choose),
//                reported as write.invoke / write.ok / write.fail / write.info with key
//                "<key>.effect" and segment N (no chunk; detail "effect <id> ..."). A rejected or
//                unknown effect counts as a rejected write of the segment: re-acquire, redo it
//                (chunks and effect). An idempotent duplicate is write.ok ("... duplicate ignored").
//   --repeat:    the job over and over, one round per holding, until a stop request (exit 0);
//                segment ids become token x segments + segment (see WorkerOptions::repeat).
//   counter:     --increments times: GET /v1/counters/{key} (value N), then PUT N+1 with the
//                token: write.invoke / write.ok (.., high_water) / write.fail / write.info with key
//                and detail "counter <N> -> <N+1>" (no segment, no chunk). Rejected or unknown:
//                release, re-acquire and do that increment again. A failed GET: `log`, then the same.
//
// Designs (the catalogue's broken — or merely insufficient — holders; all off by default). The
// checks below run, in this order, right before each store mutation (chunk PUT, effect POST; for
// the counter job between its GET and its PUT, so a pause there is a classic lost update):
//   --abort-on-pause-ms N:   when the ticker saw a gap >= N ms since this holding began (or the
//                            ticker itself has not run for N ms), `log` "abort-on-pause <ms>",
//                            then release + re-acquire (as after a rejection).
//   --check-lease-before-write: the session's remaining TTL (LockClient::remaining; etcd:
//                            LeaseTimeToLive); gone (ttl=-1) or <= 0 or an error: `log`
//                            "lease-check lost ttl=<s>: ..." / "lease-check failed: ..." then
//                            release + re-acquire; else `log` "lease-check ok ttl=<s>" (seconds;
//                            a fraction only when the kind gives milliseconds).
//   --self-stop-at check:    (needs --check-lease-before-write) right after the FIRST successful
//                            lease check, `log` "self-stop at check" and raise(SIGSTOP) on itself:
//                            the pause lands between the check and the write; whoever started the
//                            worker sends SIGCONT.
//   --cpu-per-write-ms N:    (first) spend N ms of this thread's CPU time, the work that produces
//                            the mutation; under a CPU quota of q per period p it takes N/q periods.
//   --keepalive inline:      (second) when the keepalive interval has passed since the last renewal,
//                            renew the lease here, on the job's thread: lease.lost / keepalive.fail
//                            as the thread does, and the holder goes on believing it holds the lock.
// and in the mutation itself:
//   --retry-same-token:      a rejected mutation (write.fail, HTTP 409) is sent again with the SAME
//                            token up to 5 more times (each: write.invoke with detail "retry i/5
//                            with the same token", then its result), then release + re-acquire.
// and in acquire / release:
//   --token-source timestamp: token = CLOCK_REALTIME ns when the lock was obtained (libfaketime
//                            moves it), acquire.ok detail "token-source timestamp". Not an
//                            ordering authority: a new token not above a rejected one is logged,
//                            not fatal (the resource judges; --max-acquires bounds the retries).
//   --release-by-name:       release deletes whatever holds the lock NAME (no owner check;
//                            etcd: every key under "<lock>/"), one release.ok per deleted key:
//                            lock_key = that key, revision = the delete's (when the kind has
//                            one), token = that key's token (the holder's own token for its own
//                            key), lease_id = its session; a foreign key's detail says so.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "fencecheck/proto/design.h"  // JobKind, TokenSource, KeepaliveMode, SelfStopAt
#include "fencecheck/proto/event.h"
#include "fencecheck/resources/effect_mode.h"

namespace fencecheck {

/// Wire names ("segments", "counter", "side-effect"; "issuer", "timestamp"; "check", "effect"), total and
/// pure, and their inverses (nullopt for an unknown name; token_source_from_name also takes "etcd",
/// the old name of "issuer"). Thread-safe.
[[nodiscard]] std::string_view job_kind_name(JobKind kind);
[[nodiscard]] std::optional<JobKind> job_kind_from_name(std::string_view name);
[[nodiscard]] std::string_view token_source_name(TokenSource source);
[[nodiscard]] std::optional<TokenSource> token_source_from_name(std::string_view name);
[[nodiscard]] std::string_view keepalive_mode_name(KeepaliveMode mode);
[[nodiscard]] std::optional<KeepaliveMode> keepalive_mode_from_name(std::string_view name);
[[nodiscard]] std::string_view self_stop_at_name(SelfStopAt at);  ///< "never" for kNever
[[nodiscard]] std::optional<SelfStopAt> self_stop_at_from_name(std::string_view name);

/// The number of times --retry-same-token resends a rejected mutation before re-acquiring.
inline constexpr int kSameTokenRetries = 5;

/// Everything a worker is told. Durations are std::chrono; CLI flags in parentheses.
struct WorkerOptions {
  std::string id;          ///< (--id) worker id, [A-Za-z0-9_.-]{1,64}; the `source` of its events
  /// (--lock-service) the lock service's endpoint JSON ({"kind":"etcd","endpoints":[...]}:
  /// fencecheck/locks/lock_client.h); exactly one of lock_service and etcd is given.
  /// lock_service_endpoint() gives the one in effect.
  std::string lock_service;
  std::string etcd;        ///< (--etcd) etcd endpoint, http://host:port: short for an etcd lock-service endpoint
  std::string store;       ///< (--store) fenced store base URL, http://host:port: short for a store endpoint
  /// (--resource) the resource's endpoint JSON ({"kind":"postgres",...}: fencecheck/resources/writer.h);
  /// exactly one of store and resource is given. resource_endpoint() gives the one in effect.
  std::string resource;
  std::string lock;        ///< (--lock) lock name (etcd: the lock prefix of "<lock>/<lease hex>" keys)
  std::string key;         ///< (--key) resource key written, [A-Za-z0-9_.-]{1,256}
  /// (--ttl-s, or --ttl-ms) lease / session TTL asked for, >= 1 ms; etcd takes whole seconds (rounded
  /// up) and raises it to its minimum (2 s by default).
  std::chrono::milliseconds ttl{2000};
  std::int64_t segments = 3;    ///< (--segments) segments in the job, >= 1
  std::int64_t chunks = 4;      ///< (--chunks) chunks per segment, >= 1
  std::size_t chunk_bytes = 256;  ///< (--chunk-bytes) size of each chunk (encode_chunk's minimum), 1..16 MiB
  std::chrono::milliseconds chunk_interval{50};  ///< (--chunk-interval-ms) delay between consecutive writes
  std::chrono::milliseconds tick{5};             ///< (--tick-ms) pause-detector sleep, >= 1
  std::chrono::milliseconds pause_threshold{50};  ///< (--pause-threshold-ms) gap above which `pause` is emitted
  /// (--keepalive-interval-ms) time between keepalives; unset = ttl / 3 (what etcd's clientv3 does).
  std::optional<std::chrono::milliseconds> keepalive_interval;
  /// (--max-acquires) acquisition attempts in the whole run; then exit 1. With `repeat` a round's
  /// attempts beyond it back off (400 ms doubling to 2 s) and go on until a stop request: a soak's
  /// workload outlives a lock-service restart or partition of any length.
  std::int64_t max_acquires = 20;
  std::uint64_t seed = 0;          ///< (--seed) recorded in the start event; reserved for randomised designs
  std::chrono::milliseconds lock_timeout{30000};  ///< (--lock-timeout-ms) how long one Lock call may block
  std::chrono::milliseconds store_timeout{5000};  ///< (--store-timeout-ms) per write; past it the outcome is unknown
  /// (--lock-service-timeout-ms, alias --etcd-timeout-ms) per lock-service call other than acquire
  std::chrono::milliseconds lock_service_timeout{5000};

  JobKind job = JobKind::kSegments;  ///< (--job) segments | counter | side-effect
  std::int64_t increments = 10;      ///< (--increments) counter job: increments to make, >= 1
  /// (--repeat) do the job again and again, one round per holding (acquire, the job, job.done,
  /// release), until a stop request, which then ends the run with exit 0. With the segment jobs
  /// each holding writes segments of its own: ids token x segments + 0 .. segments-1 (a redo
  /// after a lost holding starts a new round under the new token). --max-acquires counts per round.
  bool repeat = false;

  // The catalogue's designs (see the top of this file). Off by default.
  bool retry_same_token = false;          ///< (--retry-same-token) resend a rejected write with the same token
  bool release_by_name = false;           ///< (--release-by-name) release by deleting every key under the lock name
  bool check_lease_before_write = false;  ///< (--check-lease-before-write) ask the issuer for the lease TTL before writing
  /// (--abort-on-pause-ms) drop the holding before the next write after a pause of at least this
  /// long; must be greater than --tick-ms.
  std::optional<std::chrono::milliseconds> abort_on_pause;
  TokenSource token_source = TokenSource::kIssuer;  ///< (--token-source) issuer (alias etcd) | timestamp
  SelfStopAt self_stop_at = SelfStopAt::kNever;   ///< (--self-stop-at) check | effect
  /// (--keepalive) thread | inline. Inline renewals happen only while holding; while waiting in
  /// Lock a thread renews (the job's thread is blocked in Lock).
  KeepaliveMode keepalive = KeepaliveMode::kThread;
  /// (--cpu-per-write-ms) CPU time the job's thread spends before each mutation (computing the
  /// chunk), measured with CLOCK_THREAD_CPUTIME_ID: wall time stretches when the CPU is starved
  /// (a cgroup quota), CPU time does not. 0 = none.
  std::chrono::milliseconds cpu_per_write{0};

  /// The resource endpoint in effect: `resource` parsed, or {"kind":"store","url":store}. Throws
  /// std::invalid_argument when `resource` is not a JSON object.
  [[nodiscard]] nlohmann::json resource_endpoint() const;
  /// The lock-service endpoint in effect: `lock_service` parsed, or {"kind":"etcd","endpoints":[etcd]}.
  /// Throws std::invalid_argument when `lock_service` is not a JSON object.
  [[nodiscard]] nlohmann::json lock_service_endpoint() const;
  /// The keepalive interval in effect: keepalive_interval, or ttl / 3 (at least 1 ms).
  [[nodiscard]] std::chrono::milliseconds effective_keepalive_interval() const;
};

/// Every problem with the options, one message each, naming the flag ("--chunks must be >= 1,
/// got 0"); empty when valid. Pure.
[[nodiscard]] std::vector<std::string> validate(const WorkerOptions& options);

/// Writes events as JSON lines (to_json_line), one per line, flushed per line, under a mutex:
/// safe to call from every worker thread. Stamps src_ns = monotonic_ns() and source = worker id.
class EventWriter {
 public:
  /// `out` must outlive the writer.
  EventWriter(std::ostream& out, std::string source);
  /// Stamps and writes `e`. Never throws (a failed stream write is dropped; stdout is the
  /// harness's pipe, and nothing better can be done when it is gone).
  void emit(Event e);

 private:
  std::mutex mu_;
  std::ostream& out_;
  std::string source_;
};

/// Measures the calling process's own stalls: fed steady_clock readings taken after each
/// tick-long sleep, it reports every gap between consecutive readings longer than the threshold.
/// A SIGSTOP of 6 s shows up as one gap of ~6 s. Not synchronised: one thread feeds it. Pure
/// logic (the clock is the caller's), so it is unit-testable.
class PauseDetector {
 public:
  explicit PauseDetector(std::chrono::nanoseconds threshold) : threshold_(threshold) {}
  /// The gap since the previous reading when it exceeds the threshold, else nullopt. The first
  /// reading only sets the baseline.
  std::optional<std::chrono::nanoseconds> observe(std::chrono::steady_clock::time_point now);

 private:
  std::chrono::nanoseconds threshold_;
  std::optional<std::chrono::steady_clock::time_point> last_;
};

/// Exit codes of run_worker() / fencecheck-worker.
enum WorkerExit : int {
  kWorkerOk = 0,           ///< job done and released
  kWorkerFatal = 1,        ///< gave up (a `job.gave_up` event says why, before it exits): lock service unreachable,
                           ///< max acquires, bad reply
  kWorkerBadArgs = 2,      ///< invalid options
  kWorkerTerminated = 143  ///< stopped by SIGTERM/SIGINT (stop requested) before the job was done; released
                           ///< (with --repeat a stop is the job's end: kWorkerOk)
};

/// Runs one worker to completion on the calling thread (plus its keepalive and ticker threads),
/// writing events to `events`. Returns a WorkerExit code. A stop request (the binary maps SIGTERM
/// and SIGINT to it) interrupts a blocking Lock, the waits between chunks and acquisition retries,
/// then releases what is held. Never throws: fatal errors become a `job.gave_up` event and kWorkerFatal.
/// Preconditions: validate(options) is empty (otherwise kWorkerBadArgs with a `log` event).
int run_worker(const WorkerOptions& options, EventWriter& events, std::stop_token stop = {});

/// Debian's libfaketime 0.9.10, the preload library that skews a worker's clock.
inline constexpr const char* kFaketimeLibrary = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// The environment that runs a program (the reference worker, or any worker built with a
/// sanitizer) under libfaketime with its CLOCK_REALTIME offset by `offset` (milliseconds, signed):
/// LD_PRELOAD, FAKETIME ("+1.5s", "-30s"), FAKETIME_DONT_FAKE_MONOTONIC=1 unless `fake_monotonic`
/// (the worker refuses a faked monotonic clock, see worker_main.cpp), and ASAN_OPTIONS:
/// `inherited_asan_options` (the caller's own, may be null or empty) followed by two settings a
/// sanitizer build needs under a preloaded clock, harmless otherwise:
///  - verify_asan_link_order=0: GCC's shared libasan refuses to start when libfaketime is loaded
///    ahead of it ("ASan runtime does not come first"); the two coexist.
///  - allocator_release_to_os_interval_ms=-1: clang's static ASan runtime reads CLOCK_MONOTONIC
///    inside its allocator the first time a size class is used (to schedule releasing memory to
///    the OS). Preloaded, that call lands in libfaketime's clock_gettime, whose lazy
///    initialisation calls dlsym, which allocates: the allocator waits on itself before main()
///    (seen in CI on 2026-12-02: every worker with a clock_offset hung; which size class comes
///    first depends on the environment's size, so it hung in one checkout and not in another).
///    With the release interval off, the allocator never reads the clock.
/// Pure; thread-safe. Does not check that the library exists (fault_plan.cpp does, before a run).
std::vector<std::pair<std::string, std::string>> faketime_environment(std::chrono::milliseconds offset,
                                                                      const char* inherited_asan_options,
                                                                      bool fake_monotonic = false);

}  // namespace fencecheck
