// fencecheck — internal helper of fencecheck_resources: quoting untrusted text in messages.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace fencecheck::detail {

/// Shows untrusted text inside '...' in an error message: at most 40 characters, then "...";
/// quotes, backslashes and bytes outside printable ASCII as \xNN, so the message stays one
/// readable line of valid UTF-8 whatever the client sent. Pure; thread-safe.
inline std::string shown(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 40)) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f || c == '\'' || c == '\\') {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  if (s.size() > 40) out += "...";
  return out;
}

}  // namespace fencecheck::detail
