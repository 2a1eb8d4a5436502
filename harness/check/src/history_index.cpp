#include "fencecheck/harness/history_index.h"

namespace fencecheck::harness {

// of() selects kinds with a 64-bit mask, one bit per kind (which also fits a kind in a byte).
static_assert(static_cast<int>(EventKind::kProtocolError) < 64, "HistoryIndex::of needs every EventKind below 64");

HistoryIndex::HistoryIndex(const History& history) : first_(history.empty() ? nullptr : &history[0]) {
  kinds_.reserve(history.size());
  for (const Event& e : history) kinds_.push_back(static_cast<std::uint8_t>(e.kind));
}

std::vector<std::size_t> HistoryIndex::of(std::initializer_list<EventKind> kinds) const {
  // One bit per kind: the column scan is a table lookup per byte.
  std::uint64_t wanted = 0;
  for (EventKind k : kinds) wanted |= std::uint64_t{1} << static_cast<unsigned>(k);
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < kinds_.size(); ++i)
    if ((wanted >> kinds_[i]) & 1U) out.push_back(i);
  return out;
}

}  // namespace fencecheck::harness
