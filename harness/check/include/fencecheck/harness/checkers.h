// fencecheck — the safety checkers (see checker.h for the contract).
//
// interleaved-segment: a segment's current content comes from more than one fencing token. Each
//   chunk's provenance is what its own bytes say (decode_chunk), falling back to the store's
//   metadata when the bytes do not decode. Evidence: the write.ok events that wrote those chunks
//   (matched by source, token, key, segment, chunk), and the chunks' seqs.
// corrupt-chunk: a stored chunk that does not decode (bad magic, torn, checksum mismatch), or whose
//   self-description (worker, token, key, segment, chunk) disagrees with what the store recorded.
// stale-write-accepted: the resource accepted a token lower than one it had already accepted for
//   the key. Found three ways, merged per (key, client, token):
//   - the store's log, per key in seq order: a token below the maximum accepted before it;
//   - the history: a write.ok whose write.invoke came after another write.ok for the same key with
//     a higher token had completed (real-time order; a write accepted before a pause but reported
//     after it is not flagged);
//   - the history: a write.ok whose reply's high_water is above its own token.
#pragma once

#include "fencecheck/harness/checker.h"

namespace fencecheck::harness {

class InterleavedSegmentChecker final : public Checker {
 public:
  [[nodiscard]] std::string_view name() const override { return "interleaved-segment"; }
  [[nodiscard]] CheckerResult check(const History& history, const ReadBack& readback) const override;
};

class CorruptChunkChecker final : public Checker {
 public:
  [[nodiscard]] std::string_view name() const override { return "corrupt-chunk"; }
  [[nodiscard]] CheckerResult check(const History& history, const ReadBack& readback) const override;
};

class StaleWriteAcceptedChecker final : public Checker {
 public:
  [[nodiscard]] std::string_view name() const override { return "stale-write-accepted"; }
  [[nodiscard]] CheckerResult check(const History& history, const ReadBack& readback) const override;
};

/// interleaved-segment, corrupt-chunk, stale-write-accepted, in that order.
[[nodiscard]] Checkers default_checkers();

}  // namespace fencecheck::harness
