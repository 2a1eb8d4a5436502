// fencecheck — the safety checkers (see checker.h for the contract).
//
// interleaved-segment: a segment's current content comes from more than one fencing token. Each
//   chunk's provenance is what its own bytes say (decode_chunk), falling back to the store's
//   metadata when the bytes do not decode; with job.payload opaque (CheckContext::payload), the
//   metadata alone (the writer and token columns: the bytes are never decoded). Evidence: the
//   write.ok events that wrote those chunks (matched by source, token, key, segment, chunk), and
//   the chunks' seqs.
// corrupt-chunk: a stored chunk that does not decode (bad magic, torn, checksum mismatch), or whose
//   self-description (worker, token, key, segment, chunk) disagrees with what the store recorded.
//   With job.payload opaque: unknown, kOpaquePayloadReason (the bytes are the system's own; never
//   valid, never invalid).
// stale-write-accepted: the resource accepted a token lower than one it had already accepted for
//   the key. Found three ways, merged per (key, client, token):
//   - the store's log, per key in seq order: a token below the maximum accepted before it;
//   - the history: a write.ok whose write.invoke came after another write.ok for the same key with
//     a higher token had completed (real-time order; a write accepted before a pause but reported
//     after it is not flagged);
//   - the history: a write.ok whose reply's high_water is above its own token.
//   One anomaly per (key, client, token): its lowest token is that stale token, the others the
//   higher tokens the resource had accepted before it; of the write.oks it cites, those with the
//   stale token on its key are the stale writes (report.html marks exactly these), the others the
//   higher writes.
//   Side-effect events (key "<job key>.effect") are not writes to the resource's state and are left
//   to duplicate-effect (an idempotent duplicate is acknowledged but not applied).
//
// The failure catalogue's checkers (docs/catalogue-plan.md, "Anomalies"; names as docs/architecture.md, "Checkers", lists them). Each
// anomaly cites history indices (evidence) and the read-back's seqs where the resource has them.
//
// cross-key-rejection: a fenced write.fail (or a resource rejection) for key X whose high_water H
//   was reached only by another key: no write accepted for X (or its side effects "X.effect") with
//   a token >= H before the rejection (history order; a logged write the history cannot order, and
//   a rejection known only from the resource, are judged against every accepted write), while some
//   other key accepted H (else a token >= H). One mark for several keys (catalogue item 3).
//   Evidence: the write.fail events and their invokes, the other key's write.ok with that token;
//   seqs of the other key's first accepted write with it.
// rejection-storm: a client had more than one fenced rejection with the SAME token (counted per
//   (client, token): fenced write.fail events, and the resource's rejections; the larger counts).
//   A correct holder is rejected at most once per token, then re-acquires (catalogue item 4).
//   Evidence: each write.fail and its write.invoke.
// foreign-release: a release.ok from worker A (with a revision: it deleted something) deleted a
//   lock key A never created — the release's own lock_key, and every lock.delete at the same
//   revision (a delete by prefix removes several keys in one revision). The key's owner is the
//   worker whose acquire.ok holds it, else the worker whose events carry the lease of its
//   lock.grant. Evidence: the release.ok, the owner's acquire.ok, the key's lock.grant and
//   lock.delete, and the third holder's acquire.ok: the first acquire.ok by another worker after
//   the release, while the owner was still mid-job (no job.done or release.invoke of that token
//   yet) (catalogue item 5).
//   Unknown, never valid, when workers held the lock and the history has no lock.grant at all.
// token-regression: the issuer's tokens were not strictly increasing (catalogue items 6, 7):
//   - an acquire.ok whose token is not above that of an acquire.ok of the same lock name that had
//     completed before this one's acquire.invoke (real-time order: a grant that raced is not
//     flagged; an equal token is the same token held twice), judged per lock name; the
//     description names the worker that presented the token and whether the lock service's own
//     history granted its key that token (the issuer's) or not (the worker's own);
//   - a lock.grant whose token is below an earlier lock.grant's, or equal to it for another key
//     (the watch's order; a replay of a key already seen is not a grant);
//   - the resource's high-water mark for a key above the token of the last acquire.ok (with
//     several lock names, above each name's last one): from then on every holder is below the mark.
//   Unknown, never valid, when workers held the lock and the history has no lock.grant at all.
//   An acquire.ok regression whose worker's token differs from the lock service's lock.grant of
//   the same lock key (found on a second pass) says the worker's token is not the issuer's, naming
//   both, instead of blaming the issuer (a kazoo worker sending 1 while its znode's czxid was 5).
// fenced-out: liveness. After the last fault.heal (or from the start when nothing was healed), a
//   worker's write with a token it acquired after that point (a fresh token, with healthy
//   services) was rejected by the fence (a write.fail with a mark, whether above the token or, a
//   broken fence, at or below it: a holder refused at a mark it was above is fenced out all the
//   same), and no write at all was accepted within lease TTL +
//   acquire allowance of that rejection (CheckContext). Evidence: the last heal, the rejected
//   writes of the streak and the acquire.ok events of their tokens. Also (self-fencing): a write
//   of the current holding rejected against a mark EQUAL to its own token that the same worker's
//   own accepted write with that token set — a strict "mark < token" rule rejects every holder's
//   second write, so no job of more than one write can finish however fast the holders are (the
//   PostgreSQL catalogue's strict-comparison design). One anomaly per worker; evidence: its
//   write.ok that set the mark and every such rejection.
// duplicate-effect: the same side effect applied more than once in the read-back, where a later
//   application's token was not above the highest token that had already applied it (in seq
//   order): a stale holder (or a retry) performed an effect a newer holder had performed. The
//   effect's identity is (key, id), with a leading "<client>:" of the id removed (the worker sends
//   the job's own id, "seg2"; "w1:seg2" and "w2:seg2" from a client that prefixes its name are
//   the same payout too). Applications with increasing tokens are the job being redone
//   by successive holders, not a duplicate. Unknown when the job kind is side-effect and the
//   read-back has no effects although effects were acknowledged (catalogue items 8, 11).
// counter-drift: a counter's final value (read-back "counters") differs from the number of
//   acknowledged increments (write.ok for the key without a chunk): below it, or above it by more
//   than the increments whose outcome is unknown (write.info). Evidence: the write.ok events that
//   wrote the same new value as another ("counter 4 -> 5" twice: a lost update), else every
//   increment; seqs of those log entries (catalogue item 9). Unknown when the job kind is counter
//   and the read-back has no counters although increments were acknowledged.
// lost-acknowledged-write: a write.ok of a chunk that the resource no longer shows and that was not
//   superseded: not in the read-back's log, or its slot empty, or the slot holding an earlier
//   (lower seq) write. Without a log, the slot must hold this write or one acknowledged after this
//   one was invoked. Evidence: the write.invoke and write.ok; seqs of the write and the slot.
// unaccounted-write: a write the resource accepted (its accept log; each chunk slot's latest write)
//   that no holding accounts for: its writer was never granted its token (no acquire.ok of that
//   writer with it), or was granted nothing at all (an admin tool, a migration script: no worker
//   of the run), or, where the history has the lock service's grants (lock.grant with tokens,
//   every one with a token), the token is one the lock service never granted (a worker's token
//   that is not the issuer's). A holder whose lease has since expired still accounts for its own
//   token (fencing judges that write: stale-write-accepted). A black-box worker's write is tied
//   only through the grants: a token some grant carries accounts for it, one none carries (the
//   grants complete) does not, else unknown, never valid. Unknown when the resource gives neither
//   an accept log nor chunks. One anomaly per (writer, key, token). Evidence: the writer's own
//   write.invoke/write.ok with the token, the acquire.oks and lock.grants of that token; the seqs
//   of every accepted write of it (issue 31, item 9).
// unjustified-rejection: the fence refused a write whose token was at or above the key's
//   high-water mark at the time (the rule: only a token below the mark is refused; docs/resource-
//   http.md), so the rejection proves nothing about fencing (the figures leave it out of
//   rejected_writes_total, expect.min_rejected_writes). The mark is the write.fail reply's
//   (high_water >= 1), else (the reply did not say it) an upper bound from the accept log (the
//   highest token it shows for the key), else the resource's record of the same rejection; each
//   of the read-back's recorded rejections is judged by its own mark. A rejection at a mark EQUAL to
//   its token that fenced-out's self-fencing names (the worker's own earlier accepted write with
//   that token set the mark) is left to fenced-out; one whose worker never had that token
//   accepted on the key is this rule's. Unknown when some rejection's mark no source gives.
//   Evidence: the write.fail events; seqs of the log entries that bound an unsaid mark.
// ungranted-holding: a worker's acquire.ok for a lock key the lock service never granted it, judged
//   by the lock service's own order (its revisions), not by the order events reached the harness:
//   the key's grant was deleted at a revision at or below the acquire's own revision, or deleted
//   while older keys of the lock still existed (a queued waiter whose lease expired, yet the
//   worker went on as holder: etcd#11456 through `etcdctl lock`), or never granted at all while
//   the watch covered the lock (the key itself and keys under "<lock>/") and every lock event
//   carried a revision (etcd). Unknown, naming the key, when the history cannot match a holding:
//   no lock-service event at all while workers held, an acquire.ok without a lock_key or with a
//   key outside the lock, a grant the acquire.ok cannot be tied to, a kind whose deletes carry no
//   revision where only a revision would settle it. Evidence: the acquire.ok, the key's
//   lock.grant and lock.delete; where the ungranted holder's token fenced a rightful holder (a
//   write rejected against a mark equal to that token, set by the holder's own accepted write,
//   no other worker writing with that token), that write.fail and the write.ok that set the mark.
//
// Black-box workers (black_box_workers(), checker.h: a scenario's worker that sent no
// worker-protocol event). What judges them is each checker's EvidenceUse::black_box_from
// (checker.cpp's table; docs/architecture.md, "Black-box workers and protocol errors"):
// interleaved-segment and corrupt-chunk from the chunks, stale-write-accepted from the accept log,
// cross-key-rejection from the rejections and the accept log, rejection-storm and
// unjustified-rejection from the rejections,
// token-regression from the lock service's grants, duplicate-effect from the effects,
// unaccounted-write from the grants (itself: unknown where they cannot tie a write). The others
// need the workers' own events: run_checkers() makes their valid verdict unknown, naming the
// silent workers. So that none of them reports what a silent worker's missing events merely hide:
//   - token-regression's mark rule compares with the lock service's latest grant too (a silent
//     holder's newer token is not in any acquire.ok);
//   - fenced-out leaves out its streak rule (a silent worker's accepted writes are invisible), and
//     keeps self-fencing (the speaking worker's own write.ok then its rejection);
//   - counter-drift reports only a counter below the acknowledged increments (a silent worker's
//     increments can only add);
//   - lost-acknowledged-write without a log does not judge a write whose slot a silent worker
//     holds (its write may have superseded it; nothing orders it).
#pragma once

#include "fencecheck/harness/checker.h"

namespace fencecheck::harness {

class InterleavedSegmentChecker final : public Checker {
 public:
  [[nodiscard]] std::string_view name() const override { return "interleaved-segment"; }
  [[nodiscard]] CheckerResult check(const History& history, const ReadBack& readback) const override;
  [[nodiscard]] CheckerResult check_with(const History& history, const ReadBack& readback,
                                         const CheckContext& context) const override;
};

class CorruptChunkChecker final : public Checker {
 public:
  [[nodiscard]] std::string_view name() const override { return "corrupt-chunk"; }
  [[nodiscard]] CheckerResult check(const History& history, const ReadBack& readback) const override;
  [[nodiscard]] CheckerResult check_with(const History& history, const ReadBack& readback,
                                         const CheckContext& context) const override;
};

class StaleWriteAcceptedChecker final : public Checker {
 public:
  [[nodiscard]] std::string_view name() const override { return "stale-write-accepted"; }
  [[nodiscard]] CheckerResult check(const History& history, const ReadBack& readback) const override;
  [[nodiscard]] CheckerResult check_with(const History& history, const ReadBack& readback,
                                         const CheckContext& context) const override;
};

class CrossKeyRejectionChecker final : public Checker {
 public:
  [[nodiscard]] std::string_view name() const override { return "cross-key-rejection"; }
  [[nodiscard]] CheckerResult check(const History& history, const ReadBack& readback) const override;
  [[nodiscard]] CheckerResult check_with(const History& history, const ReadBack& readback,
                                         const CheckContext& context) const override;
};

class RejectionStormChecker final : public Checker {
 public:
  [[nodiscard]] std::string_view name() const override { return "rejection-storm"; }
  [[nodiscard]] CheckerResult check(const History& history, const ReadBack& readback) const override;
  [[nodiscard]] CheckerResult check_with(const History& history, const ReadBack& readback,
                                         const CheckContext& context) const override;
};

class ForeignReleaseChecker final : public Checker {
 public:
  [[nodiscard]] std::string_view name() const override { return "foreign-release"; }
  [[nodiscard]] CheckerResult check(const History& history, const ReadBack& readback) const override;
  [[nodiscard]] CheckerResult check_with(const History& history, const ReadBack& readback,
                                         const CheckContext& context) const override;
};

/// Uses the context's lock name to pick the lock service's grants of the scenario's lock (all when
/// ""); acquire.oks are judged per the lock name each reports.
class TokenRegressionChecker final : public Checker {
 public:
  [[nodiscard]] std::string_view name() const override { return "token-regression"; }
  [[nodiscard]] CheckerResult check(const History& history, const ReadBack& readback) const override;
  [[nodiscard]] CheckerResult check_with(const History& history, const ReadBack& readback,
                                         const CheckContext& context) const override;
};

/// Uses the context's lease TTL and acquire allowance (without a TTL: the workers' ttl_ms; with
/// neither, unknown when there is a rejection to judge).
class FencedOutChecker final : public Checker {
 public:
  [[nodiscard]] std::string_view name() const override { return "fenced-out"; }
  [[nodiscard]] CheckerResult check(const History& history, const ReadBack& readback) const override;
  [[nodiscard]] CheckerResult check_with(const History& history, const ReadBack& readback,
                                         const CheckContext& context) const override;
};

/// Uses the context's job kind (unknown when a side-effect job's read-back has no effects).
class DuplicateEffectChecker final : public Checker {
 public:
  [[nodiscard]] std::string_view name() const override { return "duplicate-effect"; }
  [[nodiscard]] CheckerResult check(const History& history, const ReadBack& readback) const override;
  [[nodiscard]] CheckerResult check_with(const History& history, const ReadBack& readback,
                                         const CheckContext& context) const override;
};

/// Uses the context's job kind (unknown when a counter job's read-back has no counters).
class CounterDriftChecker final : public Checker {
 public:
  [[nodiscard]] std::string_view name() const override { return "counter-drift"; }
  [[nodiscard]] CheckerResult check(const History& history, const ReadBack& readback) const override;
  [[nodiscard]] CheckerResult check_with(const History& history, const ReadBack& readback,
                                         const CheckContext& context) const override;
};

class LostAcknowledgedWriteChecker final : public Checker {
 public:
  [[nodiscard]] std::string_view name() const override { return "lost-acknowledged-write"; }
  [[nodiscard]] CheckerResult check(const History& history, const ReadBack& readback) const override;
  [[nodiscard]] CheckerResult check_with(const History& history, const ReadBack& readback,
                                         const CheckContext& context) const override;
};

/// Uses the context's workers (a writer that is none of them and sent nothing was granted nothing)
/// and evidence (unknown when the resource gives neither an accept log nor chunks).
class UnaccountedWriteChecker final : public Checker {
 public:
  [[nodiscard]] std::string_view name() const override { return "unaccounted-write"; }
  [[nodiscard]] CheckerResult check(const History& history, const ReadBack& readback) const override;
  [[nodiscard]] CheckerResult check_with(const History& history, const ReadBack& readback,
                                         const CheckContext& context) const override;
};

class UnjustifiedRejectionChecker final : public Checker {
 public:
  [[nodiscard]] std::string_view name() const override { return "unjustified-rejection"; }
  [[nodiscard]] CheckerResult check(const History& history, const ReadBack& readback) const override;
  [[nodiscard]] CheckerResult check_with(const History& history, const ReadBack& readback,
                                         const CheckContext& context) const override;
};

/// Uses the context's lock name: the keys its issuer watch covered (the name itself and keys under
/// "<lock>/"; every key when "").
class UngrantedHoldingChecker final : public Checker {
 public:
  [[nodiscard]] std::string_view name() const override { return "ungranted-holding"; }
  [[nodiscard]] CheckerResult check(const History& history, const ReadBack& readback) const override;
  [[nodiscard]] CheckerResult check_with(const History& history, const ReadBack& readback,
                                         const CheckContext& context) const override;
};

/// interleaved-segment, corrupt-chunk, stale-write-accepted, cross-key-rejection, rejection-storm,
/// foreign-release, token-regression, fenced-out, duplicate-effect, counter-drift,
/// lost-acknowledged-write, unaccounted-write, unjustified-rejection, ungranted-holding, in that order.
[[nodiscard]] Checkers default_checkers();

}  // namespace fencecheck::harness
