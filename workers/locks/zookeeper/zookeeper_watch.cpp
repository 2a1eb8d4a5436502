// The zookeeper kind's IssuerWatch and ExpiryLog (zookeeper_watch.h).
#include "zookeeper_watch.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <fstream>
#include <map>
#include <optional>
#include <stop_token>
#include <thread>

#include <spdlog/spdlog.h>

#include "zk_handle.h"

namespace fencecheck::locks::zk {
namespace {

using namespace std::chrono_literals;

constexpr Millis kSessionTimeout = 30s;  // the watch's own session: longer than any outage it rides out
constexpr Millis kConnect = 5s;
constexpr Millis kCall = 2s;
constexpr Millis kProbe = 250ms;       // an ensemble's idle check of the server (probe())
constexpr Millis kProbeBound = 1000ms; // a sync slower than this: the server reaches no quorum
constexpr std::string_view kExpiring = "Expiring session 0x";
/// An ensemble member giving up its role (QuorumPeer logs "LOOKING" when it starts an election).
constexpr std::string_view kLooking = "QuorumPeer - LOOKING";

/// Children in the order the recipe ranks them: sequential ones by sequence number, then any
/// other by name (not lock contenders, but under the lock all the same).
std::vector<std::string> ranked(std::vector<std::string> names) {
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
    const auto sa = sequence_of(a), sb = sequence_of(b);
    if (sa.has_value() != sb.has_value()) return sa.has_value();
    if (sa && *sa != *sb) return *sa < *sb;
    return a < b;
  });
  return names;
}

class ZooKeeperWatch final : public IssuerWatch {
 public:
  ZooKeeperWatch(std::string hosts, const std::string& lock, std::function<void(Event)> sink,
                 std::shared_ptr<ExpiryLog> expiries)
      : hosts_(std::move(hosts)),
        what_("zookeeper " + hosts_ + " (issuer watch)"),
        lock_name_(lock),
        path_(znode_path(lock)),
        sink_(std::move(sink)),
        expiries_(std::move(expiries)) {
    while (lock_name_.size() > 1 && lock_name_.back() == '/') lock_name_.pop_back();
    for (std::size_t at = 0; at <= hosts_.size();) {
      const std::size_t comma = std::min(hosts_.find(',', at), hosts_.size());
      if (comma > at) servers_.push_back(hosts_.substr(at, comma - at));
      at = comma + 1;
    }
    handle_ = connect();
    const int rc = handle_->ensure_path(path_, kCall);
    if (rc != ZOK) throw std::runtime_error(handle_->error("create", path_, rc) + " (the lock znode)");
    // The children present now are the baseline: known (so that their deletes are reported with
    // their tokens), not emitted (a watch reports what happens from now on).
    if (!pass(false, /*emit_new=*/false))
      throw std::runtime_error(what_ + ": cannot list " + path_ + " (the server does not answer)");
    thread_ = std::jthread([this](std::stop_token stop) { loop(stop); });
  }

  ~ZooKeeperWatch() override { stop(); }

  void stop() override {
    if (!thread_.joinable()) return;
    {
      std::unique_lock lock(mu_);
      final_requested_ = true;
      cv_.notify_all();
      if (!cv_.wait_for(lock, 5s, [&] { return final_done_; }))
        spdlog::warn("{}: the last listing of {} did not complete within 5 s; the lock history may be short", what_,
                     path_);
    }
    thread_.request_stop();
    thread_.join();
    handle_.reset();
    retired_.clear();
  }

  void restarted_fresh() override {
    std::lock_guard lock(mu_);
    fresh_pending_ = true;
    // A new session at once: the fresh server refuses to resume the old one, without saying it
    // expired, until its own zxid passes the last one this session saw ("Refusing session
    // request ... as it has seen zxid": ZooKeeperServer.processConnectRequest), so the old
    // connection would retry unanswered for as long.
    renew_ = true;
    dirty_ = true;
    cv_.notify_all();
  }

 private:
  struct Known {
    std::int64_t czxid = 0;
    std::int64_t owner = 0;
  };

  /// A new session on the connection string, without `avoid` (an ensemble's server that was
  /// stopped or cut off: move_away). The C client picks a server of it and moves the session by
  /// itself when that one refuses or drops it. Throws std::runtime_error when none connects.
  std::shared_ptr<Handle> connect(const std::string& avoid = "") {
    const std::uint64_t id = ++handles_made_;
    current_handle_ = id;
    std::string hosts;
    for (const auto& s : servers_)
      if (s != avoid) hosts += (hosts.empty() ? "" : ",") + s;
    if (hosts.empty()) hosts = hosts_;
    return std::make_shared<Handle>(hosts, kSessionTimeout, kConnect, what_,
                                    [this, id](int type, int state, const std::string&) {
                                      std::lock_guard lock(mu_);
                                      // Only the session watched now renews itself; a retired one
                                      // may expire unheeded.
                                      if (type == ZOO_SESSION_EVENT && state == ZOO_EXPIRED_SESSION_STATE &&
                                          id == current_handle_)
                                        renew_ = true;
                                      dirty_ = true;
                                      cv_.notify_all();
                                    });
  }

  void loop(const std::stop_token& stop) {
    for (;;) {
      bool final_pass = false;
      {
        std::unique_lock lock(mu_);
        if (servers_.size() > 1) {
          // An ensemble: while idle, ask every kProbe whether the server still reaches a quorum.
          if (!cv_.wait_for(lock, stop, kProbe, [&] { return dirty_ || final_requested_; })) {
            if (stop.stop_requested()) return;
            lock.unlock();
            probe();
            continue;
          }
        } else {
          cv_.wait(lock, stop, [&] { return dirty_ || final_requested_; });
        }
        if (stop.stop_requested()) return;
        final_pass = final_requested_;
        dirty_ = false;
      }
      bool ok = false;
      try {
        ok = pass(final_pass, true, stop);
      } catch (const std::exception& e) {
        spdlog::warn("{}: {}", what_, e.what());
      }
      // An ensemble's server that holds the connection but lets no sync or listing through (it is
      // stopped, or reaches no quorum) is left for another; without a connection the C client is
      // moving by itself.
      if (!ok && servers_.size() > 1 && handle_ && handle_->connected()) move_away("its sync or listing did not complete");
      std::unique_lock lock(mu_);
      if (ok && final_pass) {
        final_done_ = true;
        cv_.notify_all();
        return;
      }
      if (!ok) {
        dirty_ = true;  // try again, after a pause (the server is down or restarting)
        cv_.wait_for(lock, stop, 100ms, [] { return false; });
        if (stop.stop_requested()) return;
      }
    }
  }

  /// One listing and its diff against known_. False when the server did not answer (nothing
  /// learned is lost: what was emitted is known, the rest is seen on the next pass).
  bool pass(bool final_pass, bool emit_new, const std::stop_token& stop = {}) {
    bool renew = false;
    bool fresh = false;
    {
      std::lock_guard lock(mu_);
      renew = renew_;
      fresh = fresh_pending_;
    }
    if (!handle_ || renew || handle_->expired()) {
      const bool had = handle_ != nullptr;
      handle_.reset();
      handle_ = connect();  // throws while the server is down: the loop tries again
      {
        std::lock_guard lock(mu_);
        renew_ = false;
      }
      full_ = true;  // a new session: names may be reused (a fresh data directory)
      if (had)
        spdlog::info("{}: new session {} (the old one expired, or the server restarted on empty data)", what_,
                     session_hex(handle_->session_id()));
    }
    if (!handle_->connected() && !handle_->wait_connected(Clock::now() + 1s, stop)) return false;
    // In an ensemble every listing follows a sync: the server the session has just moved to may
    // lag behind the one before (a child already reported deleted would be listed again).
    if ((final_pass || servers_.size() > 1) && handle_->sync(path_, kCall) != ZOK) return false;
    ChildrenResult list = handle_->children(path_, true, kCall);
    if (list.rc == ZNONODE) {  // the lock znode itself is gone (a fresh server): make it again
      if (handle_->ensure_path(path_, kCall) != ZOK) return false;
      list = handle_->children(path_, true, kCall);
    }
    if (list.rc != ZOK) return false;
    const std::vector<std::string> now = ranked(list.children);
    int emitted = 0;  // grants and deletes this pass delivers: changes to the children it saw

    // Read every child of a new session (full_) and every child not known.
    std::map<std::string, Known> read;
    std::vector<std::string> vanished_while_read;
    for (const auto& c : now) {
      if (!full_ && known_.count(c)) continue;
      const StatResult st = handle_->exists(path_ + "/" + c, false, kCall);
      if (st.rc == ZOK) read[c] = Known{st.stat.czxid, st.stat.ephemeral_owner};
      else if (st.rc == ZNONODE) vanished_while_read.push_back(c);
      else return false;
    }

    // Deletes: known children that are gone, or replaced by a same-named child (another czxid).
    std::vector<std::string> deleted;
    for (const auto& [name, k] : known_) {
      const bool present = std::find(now.begin(), now.end(), name) != now.end();
      const auto r = read.find(name);
      const bool replaced = r != read.end() && r->second.czxid != k.czxid;
      const bool vanished =
          std::find(vanished_while_read.begin(), vanished_while_read.end(), name) != vanished_while_read.end();
      if (!present || replaced || vanished) deleted.push_back(name);
    }
    for (const auto& name : ranked(deleted)) {
      const Known k = known_[name];
      known_.erase(name);
      if (!emit_new) continue;
      Event e = make(EventKind::kLockDelete, name, k);
      if (fresh) {
        e.detail = "lost";
      } else if (expiries_) {
        const auto v = expiries_->verdict(k.owner);
        e.detail = v == ExpiryLog::Verdict::kExpired ? "expired" : v == ExpiryLog::Verdict::kNo ? "released" : "";
      }
      sink_(std::move(e));
      ++emitted;
    }
    // Grants: children not known before, in sequence order (creation order under one parent).
    for (const auto& name : now) {
      const auto r = read.find(name);
      if (r == read.end() || known_.count(name)) continue;
      known_[name] = r->second;
      if (!emit_new) continue;
      Event e = make(EventKind::kLockGrant, name, r->second);
      e.revision = r->second.czxid;
      sink_(std::move(e));
      ++emitted;
    }
    // The parent's cversion counts every create and delete of a child: what it moved by beyond
    // the grants and deletes delivered are changes this watch did not see (children created and
    // deleted between two listings: while its connection moved to another member, or within one
    // round trip). Said in the history, never silently dropped.
    // (A new session on the same data, after a move or an expiry, continues the count; a fresh
    // data directory starts it again.)
    if (emit_new && !fresh && have_cversion_ && list.stat.cversion >= cversion_) {
      const std::int64_t unseen = static_cast<std::int64_t>(list.stat.cversion) - cversion_ - emitted;
      if (unseen > 0) {
        unseen_ += unseen;
        Event e;
        e.t_ns = monotonic_ns();
        e.src_ns = e.t_ns;
        e.source = "lock";
        e.kind = EventKind::kLog;
        e.lock = lock_name_;
        e.detail = "the lock watch did not see " + std::to_string(unseen) + " change(s) to " + path_ +
                   "'s children (its cversion moved from " + std::to_string(cversion_) + " to " +
                   std::to_string(list.stat.cversion) + "): a lock znode created and deleted between two listings "
                   "has no lock.grant or lock.delete in this history";
        spdlog::warn("{}: {}", what_, e.detail);
        sink_(std::move(e));
      }
    }
    cversion_ = list.stat.cversion;
    have_cversion_ = true;
    for (const auto& name : vanished_while_read)
      if (!known_.count(name))
        spdlog::warn("{}: {}/{} was created and deleted before the watch could read it; its grant is not in the history",
                     what_, lock_name_, name);
    full_ = false;
    if (fresh && handle_->session_id() != fresh_session_) {
      // The first pass on the new server's session: the lost children are reported.
      std::lock_guard lock(mu_);
      fresh_pending_ = false;
    }
    fresh_session_ = handle_->session_id();
    return true;
  }

  /// An ensemble's server that is stopped or cut off from its quorum keeps the session for a
  /// while (a cut-off follower answers reads and pings for syncLimit ticks; the client waits two
  /// thirds of the 30 s session for a stopped server) and tells it nothing: a sync, which goes
  /// through the leader, does not complete within kProbeBound. Then the session moves to another
  /// server (move_away), and the next listing diffs against the children known.
  void probe() {
    if (!handle_ || handle_->expired()) return;
    if (!handle_->connected() || handle_->sync(path_, kProbeBound) == ZOK) return;
    move_away("a sync did not complete within " + std::to_string(kProbeBound.count()) + " ms");
  }

  /// Leaves the server watched now: a new session on the other servers (the old one is kept
  /// open, unwatched, until stop(): closing it could wait on a stopped server), whose first
  /// listing follows a sync and reads every child again (full_), diffing against the children
  /// known. The server left may be chosen again after the next move (it may have healed).
  void move_away(const std::string& why) {
    const std::string from = handle_ ? handle_->current_server() : std::string();
    if (from.empty()) return;  // not connected anywhere: the C client is moving by itself
    retired_.push_back(std::move(handle_));
    full_ = true;
    ++moves_;
    spdlog::warn("{}: leaves server {} ({}) for another", what_, from, why);
    try {
      handle_ = connect(from);
    } catch (const std::runtime_error& e) {
      spdlog::warn("{}", e.what());  // pass() tries again
    }
    std::lock_guard lock(mu_);
    dirty_ = true;
  }

  Event make(EventKind kind, const std::string& child, const Known& k) const {
    Event e;
    e.t_ns = monotonic_ns();
    e.src_ns = e.t_ns;
    e.source = "lock";
    e.kind = kind;
    e.lock = lock_name_;
    e.lock_key = lock_name_ + "/" + child;
    e.token = k.czxid;
    if (k.owner != 0) e.lease_id = k.owner;
    return e;
  }

  // Declared first, destroyed last: the session's callbacks use them until zookeeper_close returns.
  std::mutex mu_;
  std::condition_variable_any cv_;
  bool dirty_ = false;
  bool renew_ = false;
  bool fresh_pending_ = false;
  bool final_requested_ = false;
  bool final_done_ = false;

  std::string hosts_;
  std::string what_;
  std::string lock_name_;
  std::string path_;
  std::function<void(Event)> sink_;
  std::shared_ptr<ExpiryLog> expiries_;
  std::shared_ptr<Handle> handle_;  // the watch thread's (and the constructor's, before it)
  std::map<std::string, Known> known_;
  bool full_ = false;
  std::int32_t cversion_ = 0;  // the lock znode's cversion at the last listing
  bool have_cversion_ = false;
  std::int64_t unseen_ = 0;    // changes to the children not seen, in all
  std::vector<std::string> servers_;  // hosts_ split: more than one is an ensemble
  std::uint64_t handles_made_ = 0;    // connect() calls
  std::atomic<std::uint64_t> current_handle_{0};  // the session whose expiry renews
  std::vector<std::shared_ptr<Handle>> retired_;  // sessions on servers left behind, closed by stop()
  int moves_ = 0;                     // move_away() calls
  std::int64_t fresh_session_ = 0;
  std::jthread thread_;
};

}  // namespace

void ExpiryLog::add(const std::filesystem::path& file) {
  std::lock_guard lock(mu_);
  if (std::find(files_.begin(), files_.end(), file) == files_.end()) files_.push_back(file);
}

ExpiryLog::Verdict ExpiryLog::verdict(std::int64_t session) {
  std::lock_guard lock(mu_);
  bool doubtful = false;
  for (const auto& file : files_) {
    File& f = read_[file.string()];
    std::ifstream in(file, std::ios::binary);
    if (in) {
      in.seekg(static_cast<std::streamoff>(f.offset));
      std::string line;
      // Whole lines only: a line still being written is read again next time.
      while (std::getline(in, line) && !in.eof()) {
        f.offset += line.size() + 1;
        ++f.lines;
        if (line.find(kLooking) != std::string::npos) f.last_looking = f.lines;
        const auto at = line.find(kExpiring);
        if (at == std::string::npos) continue;
        try {
          f.expiries.emplace_back(static_cast<std::int64_t>(std::stoull(line.substr(at + kExpiring.size()), nullptr, 16)), f.lines);
        } catch (const std::logic_error&) {
        }
      }
    }
    for (const auto& [s, at] : f.expiries) {
      if (s != session) continue;
      if (f.last_looking < at) return Verdict::kExpired;
      doubtful = true;
    }
  }
  return doubtful ? Verdict::kUnknown : Verdict::kNo;
}

std::unique_ptr<IssuerWatch> make_watch(const std::string& hosts, const std::string& lock,
                                        std::function<void(Event)> sink, std::shared_ptr<ExpiryLog> expiries) {
  return std::make_unique<ZooKeeperWatch>(hosts, lock, std::move(sink), std::move(expiries));
}

}  // namespace fencecheck::locks::zk
