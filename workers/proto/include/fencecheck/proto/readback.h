// fencecheck — what a fenced resource returns when the harness reads it back after a run.
// Produced by fencecheck-store's GET /v1/readback (and, later, other resource adapters);
// consumed by the checkers. JSON shape (docs/architecture.md):
//   {"resource":"store","fencing":"per-key",
//    "chunks":[{"key":"ledger","segment":1,"chunk":2,"token":34,"client":"w2","seq":17,"data_b64":"..."}],
//    "log":[{"seq":17,"key":"ledger","segment":1,"chunk":2,"token":34,"client":"w2"}],
//    "rejections":[{"key":"ledger","segment":1,"chunk":2,"token":33,"client":"w1","high_water":34}],
//    "high_water":{"ledger":34}}
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace fencecheck {

/// The current content of one chunk slot (the last accepted write to key/segment/chunk).
struct StoredChunk {
  std::string key;
  std::int64_t segment = 0;
  std::int64_t chunk = 0;
  std::int64_t token = 0;   ///< token the accepted write carried
  std::string client;       ///< writer id the request named
  std::int64_t seq = 0;     ///< store-wide acceptance order, 1-based
  std::string data;         ///< raw bytes as written (base64 on the wire)
};

/// One accepted write, in the order the resource accepted (and made durable) it.
struct AcceptedWrite {
  std::int64_t seq = 0;
  std::string key;
  std::int64_t segment = 0;
  std::int64_t chunk = 0;
  std::int64_t token = 0;
  std::string client;
};

/// One write the resource refused because of its fencing check.
struct RejectedWrite {
  std::string key;
  std::int64_t segment = 0;
  std::int64_t chunk = 0;
  std::int64_t token = 0;
  std::string client;
  std::int64_t high_water = 0;  ///< the high-water mark the token was compared against
};

/// Everything read back from a resource. Value type.
struct ReadBack {
  std::string resource;                          ///< "store", "postgres", ...
  std::string fencing;                           ///< the resource's fencing mode, e.g. "per-key", "none"
  std::vector<StoredChunk> chunks;               ///< sorted by key, segment, chunk
  std::vector<AcceptedWrite> log;                ///< sorted by seq
  std::vector<RejectedWrite> rejections;         ///< in rejection order
  std::map<std::string, std::int64_t> high_water;  ///< per key
};

/// JSON conversions; from_json throws std::invalid_argument naming the missing or mistyped field.
[[nodiscard]] nlohmann::json to_json(const ReadBack& rb);
[[nodiscard]] ReadBack readback_from_json(const nlohmann::json& j);

}  // namespace fencecheck
