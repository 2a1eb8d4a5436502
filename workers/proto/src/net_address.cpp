#include "fencecheck/proto/net_address.h"

#include <charconv>
#include <stdexcept>

// Boost.URL is header-only when one translation unit includes its sources (Boost.URL's
// documentation, "Header-only"): this one.
#include <boost/url/src.hpp>
#include <boost/url.hpp>

namespace fencecheck {
namespace {

std::optional<std::uint16_t> port_number(std::string_view s) {
  unsigned v = 0;
  if (s.empty() || s.size() > 5) return std::nullopt;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v == 0 || v > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(v);
}

void set_host(boost::urls::url& u, const std::string& host) {
  if (auto v4 = boost::urls::parse_ipv4_address(host)) u.set_host_ipv4(*v4);
  else if (auto v6 = boost::urls::parse_ipv6_address(host)) u.set_host_ipv6(*v6);
  else u.set_host_name(host);
}

}  // namespace

std::string NetAddress::text() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::optional<NetAddress> url_address(std::string_view url, std::uint16_t default_port, std::string* why) {
  auto parsed = boost::urls::parse_uri(url);
  if (!parsed) {
    *why = std::string(url) + " is not a URL (" + parsed.error().message() + ")";
    return std::nullopt;
  }
  NetAddress a;
  a.host = parsed->host_address();
  if (a.host.empty()) {
    *why = std::string(url) + " names no host";
    return std::nullopt;
  }
  if (parsed->has_port()) {
    auto p = port_number(parsed->port());
    if (!p) {
      *why = std::string(url) + ": port " + std::string(parsed->port()) + " is not in 1..65535";
      return std::nullopt;
    }
    a.port = *p;
  } else if (default_port) {
    a.port = default_port;
  } else {
    *why = std::string(url) + " names no port";
    return std::nullopt;
  }
  return a;
}

std::string url_at(std::string_view url, const NetAddress& at) {
  std::string why;
  if (!url_address(url, 0, &why) && why.find("names no port") == std::string::npos) throw std::invalid_argument(why);
  boost::urls::url u(*boost::urls::parse_uri(url));
  set_host(u, at.host);
  u.set_port_number(at.port);
  return std::string(u.buffer());
}

std::optional<NetAddress> host_port_address(std::string_view text, std::string* why) {
  NetAddress a;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      *why = std::string(text) + " is not [address]:port";
      return std::nullopt;
    }
    a.host = std::string(text.substr(1, close - 1));
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos || colon == 0 || text.find(':') != colon) {
      *why = std::string(text) + " is not host:port";
      return std::nullopt;
    }
    a.host = std::string(text.substr(0, colon));
    port = text.substr(colon + 1);
  }
  auto p = port_number(port);
  if (!p || a.host.empty()) {
    *why = std::string(text) + ": expected host:port with a port in 1..65535";
    return std::nullopt;
  }
  a.port = *p;
  return a;
}

}  // namespace fencecheck
