// tests/store: FaultFs, an in-memory StoreFileSystem that loses what a power cut loses.
//
// The shape is RocksDB's FaultInjectionTestFS (utilities/fault_injection_fs.h): it tracks, per
// file, what was made durable by the last sync and what is only "in the page cache", and per
// directory which entries were made durable by the last directory fsync. At a simulated crash
// (crash_now(), or the N-th mutating file operation after arm(N)) it keeps only the durable image:
//   * CrashMode::kDropUnsynced: every byte appended since the file's last sync() is gone, every
//     truncate since then undone; directory entries since the last sync_dir() are gone;
//   * CrashMode::kTearLastWrite: as kDropUnsynced, but the unsynced bytes appended after the last
//     sync survive up to a random byte (a torn write: the disk wrote a prefix of it).
// After a crash every operation fails with EIO (RocksDB's SetFilesystemActive(false)) until
// restart(), which puts the surviving image in place as if the machine came back up (locks gone).
// set_fail_sync(true) makes sync() fail with EIO without crashing (the fsync error of
// PostgreSQL's "fsyncgate"). Thread-safe: one mutex around everything.
#pragma once

#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <string_view>

#include "fencecheck/resources/store.h"

namespace fencecheck::testing {

enum class CrashMode { kDropUnsynced, kTearLastWrite };

class FaultFs final : public StoreFileSystem, public std::enable_shared_from_this<FaultFs> {
 public:
  FaultFs(CrashMode mode, std::uint64_t seed) : mode_(mode), rng_(seed) {}

  int create_directories(const std::filesystem::path&) override { return alive_or_eio(); }

  int open(const std::filesystem::path& path, OpenMode mode, std::unique_ptr<StoreFile>& out, bool& created) override {
    std::lock_guard l(mu_);
    created = false;
    if (dead_) return EIO;
    auto it = names_.find(path.string());
    if (it == names_.end()) {
      it = names_.emplace(path.string(), std::make_shared<Node>()).first;
      created = true;
    } else if (mode == OpenMode::kCreateNew) {
      return EEXIST;
    }
    const std::shared_ptr<Node> node = it->second;
    if (mode == OpenMode::kOpenOrCreateLocked) {
      if (node->locked) return EWOULDBLOCK;
      node->locked = true;
    }
    out = std::make_unique<File>(shared_from_this(), node, mode == OpenMode::kOpenOrCreateLocked);
    return 0;
  }
  int rename(const std::filesystem::path& from, const std::filesystem::path& to) override {
    std::lock_guard l(mu_);
    if (int e = op_locked(nullptr, {}); e != 0) return e;
    auto it = names_.find(from.string());
    if (it == names_.end()) return ENOENT;
    names_[to.string()] = it->second;
    names_.erase(it);
    return 0;
  }
  int sync_dir(const std::filesystem::path&) override {
    std::lock_guard l(mu_);
    if (int e = op_locked(nullptr, {}); e != 0) return e;
    durable_names_ = names_;
    return 0;
  }

  /// Crash at the n-th mutating operation from now (append, sync, truncate, rename, sync_dir;
  /// n >= 1): that operation does not happen (an append's bytes may be torn in, see CrashMode)
  /// and fails with EIO, as does everything after it.
  void arm(std::int64_t n) {
    std::lock_guard l(mu_);
    countdown_ = n;
  }
  void crash_now() {
    std::lock_guard l(mu_);
    crash_locked();
  }
  /// Blocks until a crash happened.
  void wait_crashed() {
    std::unique_lock l(mu_);
    cv_.wait(l, [&] { return dead_; });
  }
  /// The machine comes back: the surviving image is the file system; locks are gone.
  void restart() {
    std::lock_guard l(mu_);
    for (auto& [name, node] : names_) node->locked = false;
    dead_ = false;
    countdown_ = -1;
  }
  void set_fail_sync(bool fail) {
    std::lock_guard l(mu_);
    fail_sync_ = fail;
  }
  /// The current content of a file ("" when absent).
  std::string content(const std::filesystem::path& path) {
    std::lock_guard l(mu_);
    auto it = names_.find(path.string());
    return it == names_.end() ? std::string() : it->second->current;
  }
  /// Replaces a file's content, durably (a test's way to damage or seed a log).
  void put(const std::filesystem::path& path, const std::string& data) {
    std::lock_guard l(mu_);
    auto& node = names_[path.string()];
    if (!node) node = std::make_shared<Node>();
    node->current = node->durable = data;
    durable_names_ = names_;
  }
  [[nodiscard]] bool exists(const std::filesystem::path& path) {
    std::lock_guard l(mu_);
    return names_.contains(path.string());
  }
  /// Bytes of torn appends that survived crashes (kTearLastWrite), for the figures.
  std::int64_t torn_bytes_kept() {
    std::lock_guard l(mu_);
    return torn_bytes_kept_;
  }

 private:
  struct Node {
    std::string durable;  // as of the last sync()
    std::string current;  // what reads see
    bool locked = false;
  };

  class File final : public StoreFile {
   public:
    File(std::shared_ptr<FaultFs> fs, std::shared_ptr<Node> node, bool locked)
        : fs_(std::move(fs)), node_(std::move(node)), locked_(locked) {}
    ~File() override {
      std::lock_guard l(fs_->mu_);
      if (locked_) node_->locked = false;
    }
    File(const File&) = delete;
    File& operator=(const File&) = delete;
    int read_all(std::string& out) override {
      std::lock_guard l(fs_->mu_);
      if (fs_->dead_) return EIO;
      out = node_->current;
      return 0;
    }
    int append(std::string_view data) override {
      std::lock_guard l(fs_->mu_);
      if (int e = fs_->op_locked(node_.get(), data); e != 0) return e;
      node_->current.append(data);
      return 0;
    }
    int sync() override {
      std::lock_guard l(fs_->mu_);
      if (int e = fs_->op_locked(nullptr, {}); e != 0) return e;
      if (fs_->fail_sync_) return EIO;
      node_->durable = node_->current;
      return 0;
    }
    int truncate(std::uint64_t size) override {
      std::lock_guard l(fs_->mu_);
      if (int e = fs_->op_locked(nullptr, {}); e != 0) return e;
      node_->current.resize(static_cast<std::size_t>(size));
      return 0;
    }

   private:
    std::shared_ptr<FaultFs> fs_;
    std::shared_ptr<Node> node_;
    bool locked_;
  };

  int alive_or_eio() {
    std::lock_guard l(mu_);
    return dead_ ? EIO : 0;
  }

  // Counts one mutating operation; crashes when the armed count runs out. `appending` and `data`:
  // an append being made, whose bytes a torn crash may keep a prefix of.
  int op_locked(Node* appending, std::string_view data) {
    if (dead_) return EIO;
    if (countdown_ > 0 && --countdown_ == 0) {
      if (appending != nullptr) appending->current.append(data);  // in the page cache when the power goes
      crash_locked();
      return EIO;
    }
    return 0;
  }

  void crash_locked() {
    names_ = durable_names_;
    for (auto& [name, node] : names_) {
      const bool appended_only = node->current.size() > node->durable.size() &&
                                 node->current.compare(0, node->durable.size(), node->durable) == 0;
      std::size_t keep = 0;
      if (mode_ == CrashMode::kTearLastWrite && appended_only) {
        const std::size_t tail = node->current.size() - node->durable.size();
        keep = std::uniform_int_distribution<std::size_t>(0, tail)(rng_);
        torn_bytes_kept_ += static_cast<std::int64_t>(keep);
      }
      node->current = node->durable + (keep > 0 ? node->current.substr(node->durable.size(), keep) : "");
      node->durable = node->current;  // what survived is on the disk now
    }
    dead_ = true;
    countdown_ = -1;
    cv_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  const CrashMode mode_;
  std::mt19937_64 rng_;
  std::map<std::string, std::shared_ptr<Node>> names_;
  std::map<std::string, std::shared_ptr<Node>> durable_names_;
  bool dead_ = false;
  bool fail_sync_ = false;
  std::int64_t countdown_ = -1;
  std::int64_t torn_bytes_kept_ = 0;
};

}  // namespace fencecheck::testing
