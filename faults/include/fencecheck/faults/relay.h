// fencecheck — the network lab's relays: how workers in the run's network namespaces reach the
// scenario's own endpoints (docs/architecture.md, "Relays").
//
// A worker in `network: namespaces` sits in a namespace of its own (netns.h) and cannot reach a
// lock service at 127.0.0.1:23790 or a database on the LAN: the host's loopback and routes are not
// in its namespace, and the lab adds nothing to the host's. So, for every external endpoint the
// workers use, the harness listens on a lab address in the hub (the lock-service's address for
// lock-service endpoints, the resource's for the resource) and forwards each TCP connection to the
// real endpoint from the harness's own (original) network namespace. A socket belongs to the
// namespace of the thread that created it (socket(7), network_namespaces(7)): the listeners are
// made by the caller, in the hub; the relay's one thread enters the original namespace before it
// resolves or connects anything. Partitions and netem act on the workers' links in the lab and
// match the lab's service addresses (partition.h, netem.h), so they cut exactly this traffic.
//
// Built on Boost.Asio (the project's rule: a well-kept library rather than own poll code): one
// io_context, one thread, a 16 KiB buffer per direction per connection.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fencecheck/proto/net_address.h"

namespace fencecheck::faults {

/// What to relay: an endpoint the workers use (`target`, as the scenario names it) and the lab
/// address its relay listens on (a service address of the hub, netns.h).
struct RelayRequest {
  std::string name;         ///< for logs and errors: "lock service http://127.0.0.1:23790"
  std::string lab_address;  ///< "10.213.0.2"
  NetAddress target;        ///< the real endpoint: a name or an IP literal and a port
};

/// One relay: listen on `listen` in the hub, connect to `target` from the original namespace.
struct RelayRoute {
  std::string name;
  NetAddress listen;
  NetAddress target;
  friend bool operator==(const RelayRoute&, const RelayRoute&) = default;
};

/// The relays for `requests`, in order, one per distinct (lab address, target): each listens on
/// its lab address at the target's own port unless an earlier route on the same lab address took
/// it, then at the next port above that no route there has (wrapping from 65535 to 1024). A
/// target asked for twice is relayed once. Pure; throws std::invalid_argument for an empty lab
/// address or a port 0.
[[nodiscard]] std::vector<RelayRoute> plan_relays(const std::vector<RelayRequest>& requests);

/// The route of `plan` that relays `target` from `lab_address`; nullptr when none.
[[nodiscard]] const RelayRoute* find_relay(const std::vector<RelayRoute>& plan, const std::string& lab_address,
                                           const NetAddress& target);

/// The running relays of one run. Not copyable; stop() and the destructor are thread-safe with
/// the relay thread, not with each other.
class TcpRelay {
 public:
  /// Binds and listens on every route's `listen` address from the calling thread's network
  /// namespace (the hub), then starts the relay thread, which enters the namespace of
  /// `upstream_netns_fd` (an open fd of a /proc/<pid>/task/<tid>/ns/net; -1: stays in the
  /// caller's), resolves every target there and serves. Each accepted connection gets its own
  /// connection to the target (from that namespace); bytes are copied both ways; an end of
  /// stream from one side is passed on as a shutdown of sending to the other (half-close), and
  /// both sockets close once both directions ended or either failed. A target that refuses or
  /// cannot be reached closes the accepted connection. Throws std::runtime_error naming the route
  /// when a listen address cannot be bound (errno's text) or a target name does not resolve, and
  /// when setns(2) fails (EPERM: not root). The fd is not kept past the constructor.
  TcpRelay(std::vector<RelayRoute> routes, int upstream_netns_fd);
  /// stop().
  ~TcpRelay();
  TcpRelay(const TcpRelay&) = delete;
  TcpRelay& operator=(const TcpRelay&) = delete;

  /// Closes the listeners and every relayed connection (both sides), and joins the thread.
  /// Idempotent; never throws.
  void stop() noexcept;

  [[nodiscard]] const std::vector<RelayRoute>& routes() const { return routes_; }
  /// Connections accepted so far on route `index` (for logs and tests). Thread-safe.
  [[nodiscard]] std::uint64_t accepted(std::size_t index) const;
  /// Connections to route `index`'s target that were established. Thread-safe.
  [[nodiscard]] std::uint64_t connected(std::size_t index) const;

 private:
  struct Impl;
  std::vector<RelayRoute> routes_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fencecheck::faults
