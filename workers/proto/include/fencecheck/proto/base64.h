// fencecheck — base64 (RFC 4648, standard alphabet, padded), as etcd's JSON gateway uses for
// keys and values and the store's read-back uses for chunk bytes. Backed by Boost.Beast's codec.
#pragma once

#include <string>
#include <string_view>

namespace fencecheck {

/// Encodes bytes. Pure; thread-safe.
[[nodiscard]] std::string base64_encode(std::string_view bytes);
/// Decodes; throws std::invalid_argument naming the first bad character's offset. Pure.
[[nodiscard]] std::string base64_decode(std::string_view text);

}  // namespace fencecheck
