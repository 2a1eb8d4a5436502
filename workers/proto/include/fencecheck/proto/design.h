// fencecheck — a worker's design choices that the scenario names and fencecheck-worker carries
// out: the job's kind, where its fencing token comes from, where its lease renewals run, and where
// it stops itself. One definition for both sides (the scenario's `job.kind`, `workers[].design`,
// and fencecheck-worker's --job, --token-source, --keepalive, --self-stop-at), as EffectMode
// (fencecheck/resources/effect_mode.h) is for side effects. Header-only, enums only: each side
// keeps its own spelling tables (the scenario's, with their error messages; the worker's flags).
#pragma once

namespace fencecheck {

/// What each worker does while holding the lock (scenario `job.kind`, worker --job).
enum class JobKind {
  kSegments,    ///< "segments": segments x chunks chunks to one key
  kCounter,     ///< "counter": read-modify-write increments of one counter
  kSideEffect,  ///< "side-effect": segments, plus one side effect after each completed segment
};

/// Where a worker's fencing token comes from (scenario `token_source`, worker --token-source).
enum class TokenSource {
  kIssuer,     ///< "issuer" (alias "etcd", its name before the lock-service axis): the lock
               ///< service's own token, e.g. etcd's lock key create_revision: the one ordering
               ///< authority, the correct source
  kTimestamp,  ///< "timestamp": CLOCK_REALTIME ns at acquire: not an ordering authority
               ///< (catalogue item 6, a mistake on purpose)
};

/// Where a worker renews its lease (scenario `keepalive`, worker --keepalive).
enum class KeepaliveMode {
  kThread,  ///< "thread": a keepalive thread of its own, every interval (etcd's clientv3 does this)
  kInline,  ///< "inline": on the job's own thread, before a mutation once the interval has passed
            ///< (a single-threaded event loop: Node.js, asyncio). Work on that thread delays
            ///< renewals (catalogue item 12, the throttle fault scenarios).
};

/// Where a worker SIGSTOPs itself, once (scenario `self_stop_at`, worker --self-stop-at).
enum class SelfStopAt {
  kNever,   ///< not at all (the field or flag absent)
  kCheck,   ///< "check": after its lease check, before the write it guards (needs
            ///< check_lease_before_write; catalogue item 10)
  kEffect,  ///< "effect": after its first completed segment, before that segment's side effect
            ///< (needs job kind side-effect; catalogue items 8 and 11)
};

}  // namespace fencecheck
