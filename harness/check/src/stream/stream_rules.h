// fencecheck — the streamed rules' factories (stream_check.cpp's registry) and what they share.
// Private to the library.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "../write_map.h"
#include "fencecheck/harness/stream_check.h"

namespace fencecheck::harness::detail {

[[nodiscard]] std::unique_ptr<StreamRule> make_interleaved_segment_rule();
[[nodiscard]] std::unique_ptr<StreamRule> make_corrupt_chunk_rule();
[[nodiscard]] std::unique_ptr<StreamRule> make_rejection_storm_rule();
[[nodiscard]] std::unique_ptr<StreamRule> make_token_regression_rule();
[[nodiscard]] std::unique_ptr<StreamRule> make_duplicate_effect_rule();
[[nodiscard]] std::unique_ptr<StreamRule> make_counter_drift_rule();

/// The write.ok events an anomaly cites as evidence, wanted by write id before the history is
/// read (an anomaly the read-back alone proves) and collected as the history goes by: each
/// write.ok (with a token) about a wanted write adds its index to the anomalies that want it.
/// Memory: the wanted ids (as many as the anomalies cite). Not thread-safe.
class WriteCitations {
 public:
  /// Anomaly number `anomaly` (a position in the rule's anomaly list) cites every write.ok of `id`.
  void want(const WriteId& id, std::size_t anomaly);
  /// Adds `index` to the evidence of each anomaly that wants e's write, when e is a write.ok.
  void observe(std::size_t index, const Event& e, std::vector<Anomaly>& anomalies) const;
  [[nodiscard]] std::size_t state_bytes() const;

 private:
  std::deque<std::string> strings_;  // the wanted ids' strings (stable addresses for WriteMap's views)
  WriteMap<std::vector<std::size_t>> wanted_;
  std::size_t wants_ = 0;
};

}  // namespace fencecheck::harness::detail
