#include "fencecheck/harness/lock_watch.h"

#include <chrono>

#include <spdlog/spdlog.h>

#include "fencecheck/workers/etcd_client.h"

namespace fencecheck::harness {

LockWatch::LockWatch(std::string etcd_url, std::string prefix, std::function<void(Event)> sink)
    : url_(std::move(etcd_url)), prefix_(std::move(prefix)), sink_(std::move(sink)), end_marker_(prefix_ + "~fencecheck-end") {
  EtcdClient client(url_);
  // The cluster's current revision: a DeleteRange's header carries it (and removes a stale end
  // marker a crashed run may have left; deleting nothing changes no revision).
  start_revision_ = client.delete_key(end_marker_).revision + 1;
  seen_revision_ = start_revision_ - 1;
  thread_ = std::jthread([this](std::stop_token stop) {
    EtcdClient watcher(url_);
    std::int64_t from = start_revision_;
    while (!stop.stop_requested()) {
      try {
        watcher.watch(prefix_, from,
                      [this, &from](const WatchEvent& w) {
                        seen_revision_ = std::max(seen_revision_.load(), w.revision());
                        from = w.revision() + 1;
                        if (w.kv.key == end_marker_) return;  // our own marker, not a lock event
                        Event e;
                        e.t_ns = monotonic_ns();
                        e.src_ns = e.t_ns;
                        e.source = "lock";
                        e.revision = w.revision();
                        if (w.type == WatchEvent::Type::kPut) {
                          e.kind = EventKind::kLockGrant;
                          e.lock_key = w.kv.key;
                          e.token = w.kv.create_revision;
                          if (w.kv.lease) e.lease_id = w.kv.lease;
                        } else {
                          e.kind = EventKind::kLockDelete;
                          e.lock_key = w.kv.key;
                          if (w.prev_kv) {
                            e.token = w.prev_kv->create_revision;
                            if (w.prev_kv->lease) e.lease_id = w.prev_kv->lease;
                          }
                        }
                        sink_(std::move(e));
                      },
                      stop);
      } catch (const std::exception& err) {
        if (stop.stop_requested()) break;
        if (from_scratch_.exchange(false)) {
          from = 1;
          seen_revision_ = 0;
        }
        spdlog::warn("lock watch on {}: {}; re-watching from revision {}", prefix_, err.what(), from);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
  });
}

LockWatch::~LockWatch() { stop(); }

void LockWatch::restart_from_scratch() { from_scratch_ = true; }

void LockWatch::stop() {
  if (!thread_.joinable()) return;
  // A watch delivers changes in revision order, so once it has seen our own end marker it has
  // delivered every change before it. The marker sorts after every lock key ('~' > hex digits)
  // and, being the newest key, never blocks a Lock call (Lock waits only on older keys).
  try {
    EtcdClient client(url_);
    const std::int64_t target = client.put(end_marker_, "end");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (seen_revision_.load() < target && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (seen_revision_.load() < target)
      spdlog::warn("lock watch on {}: the end marker did not arrive within 5 s; the lock history may be short", prefix_);
    client.delete_key(end_marker_);
  } catch (const std::exception& err) {
    spdlog::warn("lock watch on {}: cannot place the end marker: {}", prefix_, err.what());
  }
  thread_.request_stop();
  thread_.join();
}

}  // namespace fencecheck::harness
