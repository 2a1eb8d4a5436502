#include "fencecheck/proto/base64.h"

#include <stdexcept>

#include <boost/beast/core/detail/base64.hpp>

namespace fencecheck {

namespace b64 = boost::beast::detail::base64;

std::string base64_encode(std::string_view bytes) {
  std::string out(b64::encoded_size(bytes.size()), '\0');
  out.resize(b64::encode(out.data(), bytes.data(), bytes.size()));
  return out;
}

std::string base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) throw std::invalid_argument("base64 text length " + std::to_string(text.size()) + " is not a multiple of 4");
  std::string out(b64::decoded_size(text.size()), '\0');
  auto [written, read] = b64::decode(out.data(), text.data(), text.size());
  if (read != text.size()) {
    // Beast stops at the first character outside the alphabet (or at padding).
    std::size_t pad = 0;
    while (pad < text.size() && text[text.size() - 1 - pad] == '=') ++pad;
    if (read + pad != text.size() || pad > 2)
      throw std::invalid_argument("bad base64 character at offset " + std::to_string(read));
  }
  out.resize(written);
  return out;
}

}  // namespace fencecheck
