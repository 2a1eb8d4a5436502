#include "fencecheck/proto/token.h"

#include <charconv>
#include <limits>

namespace fencecheck {

TokenParse parse_token(std::string_view text) {
  TokenParse out;
  const std::string shown = text.size() > 40 ? std::string(text.substr(0, 40)) + "..." : std::string(text);
  if (text.empty()) {
    out.error = "token is empty: expected a decimal number from 0 to 9223372036854775807";
    return out;
  }
  if (text.front() == '-') {
    out.error = "token '" + shown + "' is negative: fencing tokens are non-negative";
    return out;
  }
  for (char c : text) {
    if (c < '0' || c > '9') {
      out.error = "token '" + shown + "' is not a number: expected decimal digits only";
      return out;
    }
  }
  std::int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range) {
    out.error = "token '" + shown + "' is past 2^63-1, the largest token an int64 issuer can give";
    return out;
  }
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    out.error = "token '" + shown + "' is not a number";
    return out;
  }
  out.ok = true;
  out.token = FencingToken(v);
  return out;
}

}  // namespace fencecheck
