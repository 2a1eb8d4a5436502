// The renewal a run's claim shares across lock-service kinds (renewed_claim.h).
#include "fencecheck/locks/renewed_claim.h"

#include <condition_variable>

#include <spdlog/spdlog.h>

namespace fencecheck::locks {

void RenewedClaim::start() {
  thread_ = std::jthread([this](const std::stop_token& stop) { renew(stop); });
}

void RenewedClaim::release() noexcept {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
  if (released_.exchange(true)) return;
  try {
    release_once();
  } catch (const std::exception& err) {
    spdlog::warn("{}: cannot release this run's claim: {}; it lapses by itself within {} s", service_, err.what(),
                 ttl_.count());
  }
}

std::string RenewedClaim::lost() const {
  std::lock_guard lock(mu_);
  return lost_;
}

void RenewedClaim::renew(const std::stop_token& stop) {
  auto last_ok = std::chrono::steady_clock::now();
  std::mutex wait_mu;
  std::condition_variable_any cv;
  while (!stop.stop_requested()) {
    {
      std::unique_lock lock(wait_mu);
      cv.wait_for(lock, stop, std::chrono::duration_cast<std::chrono::milliseconds>(ttl_) / 3, [] { return false; });
    }
    if (stop.stop_requested()) return;
    std::string why;
    try {
      const auto gone = renew_once();
      if (!gone) {
        last_ok = std::chrono::steady_clock::now();
        continue;
      }
      why = *gone;
    } catch (const std::exception& err) {
      if (std::chrono::steady_clock::now() - last_ok < ttl_) {
        spdlog::warn("{}: renewing this run's claim failed: {}; retrying", service_, err.what());
        continue;
      }
      why = "no renewal reached it for " + std::to_string(ttl_.count()) + " s (" + err.what() + ")";
    }
    spdlog::error("{}: this run's claim lapsed during the run: {}; another run may have started on the same lock or keys",
                  service_, why);
    std::lock_guard lock(mu_);
    lost_ = why;
    return;
  }
}

}  // namespace fencecheck::locks
