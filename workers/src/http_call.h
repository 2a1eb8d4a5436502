// fencecheck — internal: one HTTP exchange on its own connection, cancellable from a std::stop_token.
// Not a public header.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>

#include <httplib.h>

namespace fencecheck::detail {

/// While alive, turns a stop request into httplib::Client::stop() on `client`: the only
/// cross-thread-safe way to abort httplib's blocking read (it shuts the socket down, so the reading
/// thread's recv fails). stop() is a no-op when called before the request has opened its socket,
/// so it is repeated every 10 ms until finish() says the request is over.
/// One instance per request; finish() (or the destructor) joins the helper thread. Declare it
/// after the client so that it is destroyed first.
class StopWatcher {
 public:
  StopWatcher(httplib::Client& client, std::stop_token stop) {
    if (!stop.stop_possible()) return;
    thread_ = std::thread([this, &client, stop] {
      std::unique_lock lock(mu_);
      if (cv_.wait(lock, stop, [this] { return done_; })) return;  // finished before any stop request
      while (!done_) {
        lock.unlock();
        client.stop();
        lock.lock();
        cv_.wait_for(lock, std::chrono::milliseconds(10), [this] { return done_; });
      }
    });
  }
  StopWatcher(const StopWatcher&) = delete;
  StopWatcher& operator=(const StopWatcher&) = delete;
  ~StopWatcher() { finish(); }

  void finish() {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable_any cv_;
  bool done_ = false;
  std::thread thread_;
};

/// Sets httplib's three timeouts from std::chrono durations.
inline void set_timeouts(httplib::Client& client, std::chrono::milliseconds connect, std::chrono::milliseconds read,
                         std::chrono::milliseconds write) {
  auto split = [](std::chrono::milliseconds d, auto&& setter) {
    if (d.count() < 1) d = std::chrono::milliseconds(1);
    setter(static_cast<time_t>(d.count() / 1000), static_cast<time_t>((d.count() % 1000) * 1000));
  };
  split(connect, [&](time_t s, time_t us) { client.set_connection_timeout(s, us); });
  split(read, [&](time_t s, time_t us) { client.set_read_timeout(s, us); });
  split(write, [&](time_t s, time_t us) { client.set_write_timeout(s, us); });
}

}  // namespace fencecheck::detail
