// fencecheck — the renewal a run's claim shares across lock-service kinds (lock_service_kind.h,
// HeldClaim; issue 34 item 3): a thread of its own renews the claim every third of its TTL, keeps
// retrying a renewal that fails for a reason of the moment (a timeout, a refused connection) until
// a whole TTL has passed since the last that succeeded, and then, or when a renewal finds the claim
// gone, records why it lapsed (lost()). Release stops the thread first, then deletes the claim once.
//
// A kind whose client library keeps the claim alive by itself (ZooKeeper: the C client's session
// heartbeats) implements HeldClaim directly instead.
#pragma once
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>

#include "fencecheck/locks/lock_service_kind.h"

namespace fencecheck::locks {

/// A HeldClaim renewed by a thread of its own every ttl / 3.
///
/// A derived class implements renew_once(), release_once() and describe(), and calls start() as
/// the LAST statement of its constructor: the thread calls renew_once(), which must not run
/// before the derived object is whole. Its destructor must call finish() (so the thread has
/// stopped before the derived members it reads are destroyed).
///
/// Thread-safety: lost() and describe() from any thread; release() from the owner's thread (it is
/// idempotent; the destructor calls it too).
class RenewedClaim : public HeldClaim {
 public:
  /// `service`: how logs name the service ("etcd http://10.0.0.5:2379"); `ttl`: the claim's TTL
  /// (RunClaim::ttl), > 0.
  RenewedClaim(std::string service, std::chrono::seconds ttl) : service_(std::move(service)), ttl_(ttl) {}
  RenewedClaim(const RenewedClaim&) = delete;
  RenewedClaim& operator=(const RenewedClaim&) = delete;
  ~RenewedClaim() override = default;

  /// Stops renewing, then release_once() once (a failure is logged: the claim then lapses within
  /// its TTL). Idempotent; never throws.
  void release() noexcept final;
  /// "" while held; otherwise why it lapsed. Thread-safe.
  [[nodiscard]] std::string lost() const final;

  [[nodiscard]] std::chrono::seconds ttl() const { return ttl_; }
  [[nodiscard]] const std::string& service() const { return service_; }

 protected:
  /// Renews the claim once. Returns nullopt when it is renewed; the reason when the claim is gone
  /// ("its lease 1f was gone at a renewal"), which ends the renewals. Throws (any std::exception)
  /// for a failure of the moment, retried at the next third of the TTL. Called on the thread.
  [[nodiscard]] virtual std::optional<std::string> renew_once() = 0;
  /// Deletes the claim's names (only while they are still this claim's). Throws on failure.
  virtual void release_once() = 0;

  /// Starts the renewal thread: the last statement of the derived constructor.
  void start();
  /// release(): the first statement of the derived destructor.
  void finish() noexcept { release(); }

 private:
  void renew(const std::stop_token& stop);

  std::string service_;
  std::chrono::seconds ttl_;
  std::atomic<bool> released_{false};
  mutable std::mutex mu_;
  std::string lost_;
  std::jthread thread_;
};

}  // namespace fencecheck::locks
