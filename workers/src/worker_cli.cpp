#include "fencecheck/workers/worker_cli.h"

#include <sstream>

#include <CLI/CLI.hpp>

namespace fencecheck {

WorkerCli parse_worker_cli(int argc, const char* const* argv) {
  WorkerCli out;
  WorkerOptions o;
  std::int64_t ttl_s = 0;
  std::int64_t ttl_ms = 0;
  std::int64_t chunk_interval_ms = o.chunk_interval.count();
  std::int64_t tick_ms = o.tick.count();
  std::int64_t pause_threshold_ms = o.pause_threshold.count();
  std::int64_t keepalive_interval_ms = 0;
  std::int64_t lock_timeout_ms = o.lock_timeout.count();
  std::int64_t store_timeout_ms = o.store_timeout.count();
  std::int64_t lock_service_timeout_ms = o.lock_service_timeout.count();
  std::int64_t abort_on_pause_ms = 0;
  std::string job = std::string(job_kind_name(o.job));
  std::string token_source = std::string(token_source_name(o.token_source));
  std::string self_stop_at;
  std::string keepalive = std::string(keepalive_mode_name(o.keepalive));
  std::int64_t cpu_per_write_ms = 0;

  CLI::App app{
      "fencecheck-worker: holds a lock from a lock service (etcd, ...) and writes a job of chunks, each carrying its fencing token, to a "
      "fenced store; reports every step as JSON-lines events on stdout (logs go to stderr).",
      "fencecheck-worker"};
  app.option_defaults()->always_capture_default();
  app.add_option("--id", o.id, "worker id, [A-Za-z0-9_.-]{1,64}; the source of its events")->required();
  // Exactly one of --etcd and --lock-service (validate() says so when neither is given).
  auto* etcd = app.add_option("--etcd", o.etcd,
                              "etcd endpoint, http://host:port (short for --lock-service '{\"kind\":\"etcd\",\"endpoints\":[...]}')");
  app.add_option("--lock-service", o.lock_service,
                 "the lock service as an endpoint JSON object {\"kind\": etcd|..., \"endpoints\": [...]} "
                 "(fencecheck/locks/lock_client.h)")
      ->excludes(etcd);
  auto* store = app.add_option("--store", o.store, "fenced store, http://host:port (short for --resource '{\"kind\":\"store\",\"url\":...}')");
  app.add_option("--resource", o.resource,
                 "the resource as an endpoint JSON object {\"kind\": store|postgres|http, ...} "
                 "(fencecheck/resources/writer.h)")
      ->excludes(store);
  app.add_option("--lock", o.lock, "lock name (etcd: the lock prefix)")->required();
  app.add_option("--key", o.key, "resource key to write")->required();
  auto* ttl_s_opt = app.add_option("--ttl-s", ttl_s, "lease TTL, seconds (default 2; etcd's minimum is 2 by default)");
  auto* ttl_ms_opt = app.add_option("--ttl-ms", ttl_ms, "lease / session TTL, milliseconds (etcd rounds up to whole seconds)")
      ->excludes(ttl_s_opt);
  app.add_option("--segments", o.segments, "segments in the job");
  app.add_option("--chunks", o.chunks, "chunks per segment");
  app.add_option("--chunk-bytes", o.chunk_bytes, "bytes per chunk");
  app.add_option("--chunk-interval-ms", chunk_interval_ms, "delay between chunks, ms");
  app.add_option("--tick-ms", tick_ms, "pause detector tick, ms");
  app.add_option("--pause-threshold-ms", pause_threshold_ms, "gaps longer than this are reported as pauses, ms");
  auto* ka = app.add_option("--keepalive-interval-ms", keepalive_interval_ms, "time between keepalives, ms (default ttl/3)");
  app.add_option("--max-acquires", o.max_acquires, "acquisition attempts in the whole run");
  app.add_option("--seed", o.seed, "random seed (recorded; reserved for randomised designs)");
  app.add_option("--lock-timeout-ms", lock_timeout_ms, "how long one acquire (etcd: Lock call) may block, ms");
  app.add_option("--store-timeout-ms", store_timeout_ms, "per-write timeout, ms");
  app.add_option("--lock-service-timeout-ms,--etcd-timeout-ms", lock_service_timeout_ms,
                 "per-call lock-service timeout (not acquire), ms");
  app.add_option("--job", job, "job kind: segments|counter|side-effect")
      ->check(CLI::IsMember({"segments", "counter", "side-effect"}));
  app.add_option("--increments", o.increments, "counter job: increments to make (read-modify-write under the token)");
  app.add_flag("--repeat", o.repeat,
               "repeat the job, one round per holding, until SIGTERM (then exit 0); each holding writes segment ids "
               "token x segments + i");
  app.add_flag("--retry-same-token", o.retry_same_token,
               "design: resend a rejected write with the same token (up to 5 times) before re-acquiring");
  app.add_flag("--release-by-name", o.release_by_name,
               "design: release by deleting every key under the lock name (no owner check)");
  app.add_flag("--check-lease-before-write", o.check_lease_before_write,
               "design: ask the lock service for the lease TTL before each write; TTL <= 0: release and re-acquire");
  auto* abort_opt = app.add_option("--abort-on-pause-ms", abort_on_pause_ms,
                                   "design: after a pause of at least this many ms, drop the holding before the next write");
  app.add_option("--token-source", token_source,
                 "design: where tokens come from: issuer (the lock service's token; alias etcd) | timestamp")
      ->check(CLI::IsMember({"issuer", "etcd", "timestamp"}));
  auto* self_stop_opt = app.add_option("--self-stop-at", self_stop_at,
                                       "design: SIGSTOP itself once at this point: check (after the lease check, before the "
                                       "write) | effect (after the first segment, before its side effect)")
                            ->check(CLI::IsMember({"check", "effect"}));
  app.add_option("--keepalive", keepalive,
                 "design: where lease renewals run: thread (its own thread) | inline (the job's thread, before a write)")
      ->check(CLI::IsMember({"thread", "inline"}));
  app.add_option("--cpu-per-write-ms", cpu_per_write_ms,
                 "CPU time (not wall time) the job spends before each write, ms; a CPU quota stretches it");
  app.add_option("--log-level", out.log_level, "stderr log level")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));

  std::ostringstream text;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e, text, text);
    out.exit_code = code == 0 ? 0 : kWorkerBadArgs;
    out.output = text.str();
    return out;
  }
  if (ttl_s_opt->count() > 0) o.ttl = std::chrono::seconds(ttl_s);
  else if (ttl_ms_opt->count() > 0) o.ttl = std::chrono::milliseconds(ttl_ms);
  o.chunk_interval = std::chrono::milliseconds(chunk_interval_ms);
  o.tick = std::chrono::milliseconds(tick_ms);
  o.pause_threshold = std::chrono::milliseconds(pause_threshold_ms);
  if (ka->count() > 0) o.keepalive_interval = std::chrono::milliseconds(keepalive_interval_ms);
  o.lock_timeout = std::chrono::milliseconds(lock_timeout_ms);
  o.store_timeout = std::chrono::milliseconds(store_timeout_ms);
  o.lock_service_timeout = std::chrono::milliseconds(lock_service_timeout_ms);
  if (abort_opt->count() > 0) o.abort_on_pause = std::chrono::milliseconds(abort_on_pause_ms);
  o.job = *job_kind_from_name(job);                       // IsMember checked the names
  o.token_source = *token_source_from_name(token_source);
  o.keepalive = *keepalive_mode_from_name(keepalive);
  o.cpu_per_write = std::chrono::milliseconds(cpu_per_write_ms);
  if (self_stop_opt->count() > 0) o.self_stop_at = *self_stop_at_from_name(self_stop_at);
  if (auto errors = validate(o); !errors.empty()) {
    for (const auto& e : errors) out.output += "fencecheck-worker: " + e + "\n";
    out.exit_code = kWorkerBadArgs;
    return out;
  }
  out.options = std::move(o);
  return out;
}

}  // namespace fencecheck
