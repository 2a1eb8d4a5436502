// fencecheck — the TCP address an endpoint connects to, and the same endpoint spelled at another
// address: what the network lab's relays need (faults/relay.h; docs/architecture.md, "Relays").
//
// With `network: namespaces` the workers run in namespaces of their own and cannot reach the
// scenario's endpoints (a lock service at 127.0.0.1:23790, a database on the LAN). The harness
// relays each endpoint from an address in the lab; the kinds use these functions to find an
// endpoint's host and port and to spell the endpoint at the relay's address, in their own form
// (etcd "http://h:p", zookeeper "h:p", redis "redis://h:p", an HTTP resource's base URL).
// URLs are parsed by Boost.URL (RFC 3986); everything else in a URL (scheme, user, path, query)
// is kept as written. Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fencecheck {

/// A TCP address: a host name or an IP literal (IPv6 without brackets) and a port (1..65535).
struct NetAddress {
  std::string host;
  std::uint16_t port = 0;
  /// "h:p", an IPv6 literal in brackets ("[::1]:2379").
  [[nodiscard]] std::string text() const;
  friend bool operator==(const NetAddress&, const NetAddress&) = default;
};

/// The host and port of a URL ("http://h:p/...", "redis://user@h:p/0"); a URL without a port
/// takes default_port (0: none, then a port is required). nullopt with *why set for a URL that
/// does not parse, names no host, or a port outside 1..65535.
[[nodiscard]] std::optional<NetAddress> url_address(std::string_view url, std::uint16_t default_port, std::string* why);
/// url with its host and port replaced by at's (an IPv4 or IPv6 literal or a name); every other
/// part kept as written. Throws std::invalid_argument for a URL url_address() refuses.
[[nodiscard]] std::string url_at(std::string_view url, const NetAddress& at);

/// "h:p" or "[v6]:p" (a ZooKeeper connect-string member). nullopt with *why set otherwise.
[[nodiscard]] std::optional<NetAddress> host_port_address(std::string_view text, std::string* why);

}  // namespace fencecheck
