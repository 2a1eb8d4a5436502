// fencecheck tests — the lock-service kinds' shared test support: a sink that collects an
// IssuerWatch's events and waits for them (on events, never on a sleep). Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <vector>

#include "fencecheck/proto/event.h"

namespace fencecheck::testing {

/// Collects events from a watch; wait() blocks until a predicate over them holds (bounded).
class Sink {
 public:
  std::function<void(Event)> fn() {
    return [this](Event e) {
      std::lock_guard lock(mu_);
      events_.push_back(std::move(e));
      cv_.notify_all();
    };
  }
  /// Waits until `done(events)` holds; false after `timeout`.
  bool wait(const std::function<bool(const std::vector<Event>&)>& done,
            std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return done(events_); });
  }
  /// Waits until `count` events have arrived.
  bool wait_count(std::size_t count, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    return wait([count](const std::vector<Event>& e) { return e.size() >= count; }, timeout);
  }
  std::vector<Event> events() {
    std::lock_guard lock(mu_);
    return events_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Event> events_;
};

}  // namespace fencecheck::testing
