// fencecheck — the fencing token type shared by workers, the store, the harness and its checkers.
//
// A fencing token is a strictly increasing number handed out by one ordering authority (the
// issuer): for etcd, the lock key's create_revision (see etcd's concurrency/lock docs: the key
// with the lowest create_revision under the lock prefix holds the lock, and revisions never go
// backwards within one cluster's life). The resource keeps the highest token it accepted per
// key (its high-water mark) and rejects a lower one atomically with the write
// (Kleppmann, "How to do distributed locking", 2016).
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

namespace fencecheck {

/// A fencing token. Value type; a default-constructed token is 0, which no etcd lock ever gets
/// (revisions start at 1), so 0 means "no token yet". Thread-safe as any int64 is.
class FencingToken {
 public:
  constexpr FencingToken() = default;
  constexpr explicit FencingToken(std::int64_t value) : value_(value) {}
  [[nodiscard]] constexpr std::int64_t value() const { return value_; }
  [[nodiscard]] constexpr bool empty() const { return value_ == 0; }
  constexpr auto operator<=>(const FencingToken&) const = default;
  [[nodiscard]] std::string str() const { return std::to_string(value_); }

 private:
  std::int64_t value_ = 0;
};

/// The outcome of parsing a token from text (an HTTP header, a JSON string, a command line).
struct TokenParse {
  bool ok = false;
  FencingToken token;
  std::string error;  ///< when !ok: what was wrong, e.g. "token '-3' is negative"
};

/// Parses a decimal fencing token: digits only, no sign, no spaces, at most 2^63-1.
/// Never throws; a bad input gives ok=false and a message naming the input and the rule broken:
/// empty, negative, not a number, or past 2^63-1 (int64 is what etcd's revisions are).
[[nodiscard]] TokenParse parse_token(std::string_view text);

}  // namespace fencecheck
