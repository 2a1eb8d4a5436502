// fencecheck — one pass over a finished history that every checker shares: the kind of each event
// in a compact column (one byte per event).
//
// Why: an Event is about 400 bytes (eight strings, eight optionals), so on a long history every
// full scan a checker makes streams the whole history from memory (~400 MB per 10^6 events), and
// the checkers and figures made some thirty such scans. With the kind column, a checker that
// looks for a few kinds scans one byte per event and touches only the events it wants
// (docs/performance.md, "Checkers"). analyze() builds one HistoryIndex and hands it to every
// checker and to the figures through CheckContext::index; a checker called without one builds its
// own (one scan), so results never depend on whether an index was passed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "fencecheck/harness/history.h"

namespace fencecheck::harness {

/// Immutable after construction; share it freely between threads (const member functions only).
/// It describes the history it was built from at that moment: build it once the history is
/// complete and do not modify the history while the index is in use (matches() catches appends
/// and a different history, not in-place edits of an event's kind).
class HistoryIndex {
 public:
  /// One scan of `history`. O(n) time, n bytes.
  explicit HistoryIndex(const History& history);

  /// True when this index was built from `history` (same storage, same size).
  [[nodiscard]] bool matches(const History& history) const noexcept {
    return history.size() == kinds_.size() && (history.empty() || &history[0] == first_);
  }
  /// The indices of the events whose kind is one of `kinds`, ascending. O(n) over the column.
  [[nodiscard]] std::vector<std::size_t> of(std::initializer_list<EventKind> kinds) const;
  /// The kind of event i (i < size()).
  [[nodiscard]] EventKind kind(std::size_t i) const noexcept { return static_cast<EventKind>(kinds_[i]); }
  [[nodiscard]] std::size_t size() const noexcept { return kinds_.size(); }

 private:
  const Event* first_ = nullptr;
  std::vector<std::uint8_t> kinds_;
};

}  // namespace fencecheck::harness
