// fencecheck — the chunk codec: the bytes a worker writes prove their own provenance.
//
// A job writes `segments` segments of `chunks` chunks each to one resource key. Every chunk's
// bytes encode who wrote it (worker id), under which fencing token, for which key, segment and
// chunk index, followed by filler to the requested size and a CRC-32 of all of it:
//
//   fc1 w=w1 t=34 k=ledger s=1 c=2 f=xxxxxxxx... crc=1a2b3c4d
//
// So the checker can tell from the resource's contents alone which holder wrote which chunk,
// without trusting the resource's own metadata, and can tell a torn or corrupted chunk.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace fencecheck {

/// What a chunk says about itself.
struct ChunkHeader {
  std::string worker;     ///< worker id, [A-Za-z0-9_.-]{1,64}
  std::int64_t token = 0; ///< fencing token the writer held
  std::string key;        ///< resource key, [A-Za-z0-9_.-]{1,256}
  std::int64_t segment = 0;
  std::int64_t chunk = 0;
  bool operator==(const ChunkHeader&) const = default;
};

/// Encodes a chunk of at least `size_bytes` bytes (larger only when the header alone is longer).
/// Throws std::invalid_argument when worker or key hold characters outside [A-Za-z0-9_.-] or are
/// empty, or segment/chunk/token are negative. Pure; thread-safe.
[[nodiscard]] std::string encode_chunk(const ChunkHeader& header, std::size_t size_bytes = 0);

/// The outcome of decoding; ok=false with `error` saying what is wrong (bad magic, missing field,
/// checksum mismatch with both values).
struct ChunkDecode {
  bool ok = false;
  ChunkHeader header;
  std::string error;
};

/// Decodes and verifies a chunk. Never throws. Pure; thread-safe.
[[nodiscard]] ChunkDecode decode_chunk(std::string_view bytes);

/// CRC-32 (IEEE 802.3, as zlib's crc32) of bytes, computed with boost::crc_32_type.
[[nodiscard]] std::uint32_t crc32(std::string_view bytes);

/// True when s is 1..max_len characters of [A-Za-z0-9_.-]: the alphabet of worker ids and keys.
[[nodiscard]] bool is_safe_name(std::string_view s, std::size_t max_len);

}  // namespace fencecheck
