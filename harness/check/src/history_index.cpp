#include "fencecheck/harness/history_index.h"

#include <limits>
#include <stdexcept>

namespace fencecheck::harness {

static_assert(static_cast<int>(EventKind::kLog) < std::numeric_limits<std::uint8_t>::max(),
              "HistoryIndex stores an EventKind in one byte");

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
