// fencecheck — moving the calling thread into one of the run's network namespaces and back.
//
// setns(2) with CLONE_NEWNET changes the namespace of the calling *thread* only. Processes it
// forks afterwards and threads it creates inherit that namespace; sockets it opens live there.
// The orchestrator's main thread enters the hub namespace (where the lock service and the store
// run) for the length of a run with `network: namespaces`, so that the services it starts, the
// lock watch thread and the read-back all reach the hub's addresses, while the host itself gets
// no interface, route or address (docs/architecture.md, "Safety rules the harness keeps").
#pragma once

#include <string>

namespace fencecheck::harness {

class NetnsScope {
 public:
  /// Enters /var/run/netns/<name> (made by `ip netns add`). Throws std::runtime_error naming the
  /// namespace and errno's text (not root: EPERM; no such namespace: ENOENT).
  explicit NetnsScope(const std::string& name);
  /// Enters the namespace of `netns_fd` (an open fd of a .../ns/net; not taken over), named
  /// `label` in messages. Throws std::runtime_error as above.
  NetnsScope(int netns_fd, std::string label);
  /// Returns the thread to the namespace it was in. Never throws (a failure goes to stderr).
  ~NetnsScope();
  NetnsScope(const NetnsScope&) = delete;
  NetnsScope& operator=(const NetnsScope&) = delete;

  /// An fd of the namespace the thread was in before (valid while the scope lives): the network
  /// lab's relays connect from it, and the harness's calls to the user's services go back to it.
  [[nodiscard]] int original_fd() const { return saved_fd_; }

 private:
  void enter(int fd);
  int saved_fd_ = -1;
  std::string name_;
};

}  // namespace fencecheck::harness
