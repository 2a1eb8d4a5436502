// fencecheck — the lock service's own history: a watch on the lock prefix.
//
// Every put under "<lock>/" becomes a `lock.grant` event (lock_key, lease_id, token = the key's
// create_revision, revision) and every delete a `lock.delete` event (lock_key, token = the
// deleted key's create_revision from prev_kv, lease_id, revision = the delete's revision). The
// checkers tell an expiry from a release by matching a delete's revision with a worker's
// release.ok revision (see analysis.h). Events reach `sink` on the watch thread, in revision order.
#pragma once

#include <cstdint>
#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include "fencecheck/proto/event.h"

namespace fencecheck::harness {

class LockWatch {
 public:
  /// Starts watching `prefix` from the revision after the cluster's current one, and returns once
  /// that start revision is fixed (so nothing that happens after the constructor is missed).
  /// Throws std::runtime_error (an EtcdError) when etcd does not answer.
  LockWatch(std::string etcd_url, std::string prefix, std::function<void(Event)> sink);
  ~LockWatch();
  LockWatch(const LockWatch&) = delete;
  LockWatch& operator=(const LockWatch&) = delete;

  /// Puts an end marker key under the prefix, waits until the watch has delivered it (so every
  /// earlier change has been delivered; bounded: 5 s), deletes it and stops the thread. Idempotent.
  void stop();

  /// The lock service was restarted on empty data (its revisions start over at 1): watch the new
  /// cluster from its first revision once the current stream breaks. Thread-safe.
  void restart_from_scratch();

 private:
  std::string url_;
  std::string prefix_;
  std::function<void(Event)> sink_;
  std::string end_marker_;
  std::int64_t start_revision_ = 0;
  std::atomic<std::int64_t> seen_revision_{0};
  std::atomic<bool> from_scratch_{false};
  std::jthread thread_;
};

}  // namespace fencecheck::harness
