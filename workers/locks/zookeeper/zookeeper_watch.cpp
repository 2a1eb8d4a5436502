// The zookeeper kind's IssuerWatch and ExpiryLog (zookeeper_watch.h).
#include "zookeeper_watch.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
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
constexpr Millis kConnect = 5s;          // the first connection (an ensemble: every server tried for this long)
constexpr Millis kCall = 2s;             // a standalone server's calls
constexpr Millis kProbe = 250ms;         // an ensemble's idle check of the server (probe())
// An ensemble's patience with its server (patience()): a sync, a call or a connection slower
// than this leaves the server. 8 times the slowest of the last kRoundTrips syncs, within these
// bounds: 1 s on a quiet machine (syncs take a few ms), more on a loaded one (a move is harmless
// but costs a session and a full listing).
constexpr Millis kPatienceLeast = 1000ms;
constexpr Millis kPatienceMost = 4000ms;
constexpr int kRoundTripFactor = 8;
constexpr std::size_t kRoundTrips = 8;
/// What a member that is not serving (electing, or without a quorum) answers to `srvr`
/// (ZooKeeper's FourLetterCommands: ZK_NOT_SERVING).
constexpr std::string_view kNotServing = "not currently serving";
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
    closer_ = std::jthread([this](std::stop_token stop) { close_retired(stop); });
    const auto deadline = Clock::now() + kConnect;
    for (;;) {
      try {
        handle_ = connect(0);
        break;
      } catch (const std::runtime_error&) {
        if (Clock::now() >= deadline) throw;
        std::this_thread::sleep_for(50ms);  // a pause between rounds (every member said "not serving")
      }
    }
    const int rc = handle_->ensure_path(path_, call_bound());
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
    retire(std::move(handle_));
    closer_.request_stop();
    closer_.join();
  }

  /// The server the watch's session is on now ("" while it has none) and its moves.
  WatchPlace place() const {
    std::lock_guard lock(mu_);
    return WatchPlace{place_, moves_};
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

  bool ensemble() const { return servers_.size() > 1; }

  /// A new session. A standalone server (or one endpoint): on it, and the C client reconnects
  /// to it by itself. An ensemble: on one server the watch picks, from servers_[first] on
  /// (open_in_ensemble). Throws std::runtime_error when none connects.
  std::shared_ptr<Handle> connect(std::size_t first) {
    if (!ensemble()) {
      auto h = open_handle(hosts_, kConnect);
      set_place(hosts_);
      return h;
    }
    return open_in_ensemble(first);
  }

  /// A session on `hosts`, connected within `bound`; its events wake the watch.
  std::shared_ptr<Handle> open_handle(const std::string& hosts, Millis bound) {
    const std::uint64_t id = ++handles_made_;
    current_handle_ = id;
    return std::make_shared<Handle>(hosts, kSessionTimeout, bound, "zookeeper " + hosts + " (issuer watch)",
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

  /// An ensemble: a new session on ONE server, chosen here, never by the C client. Given the
  /// whole connection string the C client picks a server at random and, when it picks a stopped
  /// one (SIGSTOP: the kernel still accepts the connection), waits two thirds of the requested
  /// session timeout for its answer (zookeeper.c, zookeeper_interest: recv_timeout * 2/3, 20 s
  /// here) before it tries another. So the servers are tried in turn from servers_[first]: each
  /// is asked `srvr` first (within patience()) and skipped when it does not answer (stopped,
  /// killed, cut off) or says it is not serving (electing, or without a quorum); the first other
  /// one gets patience() to connect. When no server answers `srvr` at all (four-letter words
  /// blocked on the way), each is tried directly. Sets server_. Throws std::runtime_error
  /// saying what each server did.
  std::shared_ptr<Handle> open_in_ensemble(std::size_t first) {
    const Millis bound = patience();
    std::string said;
    std::vector<std::size_t> silent;
    bool any_answer = false;
    auto attempt = [&](std::size_t i) -> std::shared_ptr<Handle> {
      try {
        auto h = open_handle(servers_[i], bound);
        server_ = i;
        set_place(servers_[i]);
        return h;
      } catch (const std::runtime_error& e) {
        said += std::string(e.what()) + "; ";
        return nullptr;
      }
    };
    for (std::size_t k = 0; k < servers_.size(); ++k) {
      const std::size_t i = (first + k) % servers_.size();
      const std::string& s = servers_[i];
      const std::optional<std::string> reply = four_letter_word(s, "srvr", bound);
      if (!reply || reply->empty()) {
        silent.push_back(i);
        said += s + ": no answer to srvr within " + std::to_string(bound.count()) + " ms; ";
        continue;
      }
      any_answer = true;
      if (reply->find(kNotServing) != std::string::npos) {
        said += s + ": not serving; ";
        continue;
      }
      if (auto h = attempt(i)) return h;
    }
    if (!any_answer)
      for (const std::size_t i : silent)
        if (auto h = attempt(i)) return h;
    throw std::runtime_error(what_ + ": no server of the ensemble took a session (" + said + ")");
  }

  /// How long an ensemble's server may take to answer before the watch leaves it.
  Millis patience() const {
    Millis slowest{0};
    for (const Millis r : round_trips_) slowest = std::max(slowest, r);
    return std::clamp(slowest * kRoundTripFactor, kPatienceLeast, kPatienceMost);
  }
  void note_round_trip(Clock::duration d) {
    round_trips_[next_round_trip_++ % kRoundTrips] = std::chrono::duration_cast<Millis>(d);
  }
  Millis call_bound() const { return ensemble() ? patience() : kCall; }

  void set_place(const std::string& server) {
    std::lock_guard lock(mu_);
    place_ = server;
  }

  /// A session no longer watched: closed on the closer's thread (zookeeper_close sends a close
  /// and joins the client's threads; the watch does not wait for it).
  void retire(std::shared_ptr<Handle> h) {
    if (!h) return;
    std::lock_guard lock(closing_mu_);
    closing_.push_back(std::move(h));
    closing_cv_.notify_all();
  }
  void close_retired(const std::stop_token& stop) {
    std::unique_lock lock(closing_mu_);
    for (;;) {
      // After stop, what is queued is still closed; then the thread ends.
      if (!closing_cv_.wait(lock, stop, [&] { return !closing_.empty(); })) return;
      std::shared_ptr<Handle> h = std::move(closing_.front());
      closing_.pop_front();
      lock.unlock();
      h.reset();
      lock.lock();
    }
  }

  void loop(const std::stop_token& stop) {
    for (;;) {
      bool final_pass = false;
      {
        std::unique_lock lock(mu_);
        if (ensemble()) {
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
      // An ensemble's server that lets no sync or listing through (it is stopped, killed, cut
      // off, or reaches no quorum) is left for another at once.
      bool moved = false;
      if (!ok && ensemble() && handle_) {
        move_away(handle_->connected() ? "its sync or listing did not complete" : "its connection was lost");
        moved = true;
      }
      std::unique_lock lock(mu_);
      if (ok && final_pass) {
        final_done_ = true;
        cv_.notify_all();
        return;
      }
      if (!ok && !moved) {
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
      retire(std::move(handle_));
      handle_ = connect(server_ + 1);  // throws while no server takes it: the loop tries again
      {
        std::lock_guard lock(mu_);
        renew_ = false;
      }
      full_ = true;  // a new session: names may be reused (a fresh data directory)
      if (had)
        spdlog::info("{}: new session {} (the old one expired, or the server restarted on empty data)", what_,
                     session_hex(handle_->session_id()));
    }
    const Millis bound = call_bound();
    // An ensemble's session knows one server: without a connection it is left at once (move_away).
    if (!handle_->connected() && (ensemble() || !handle_->wait_connected(Clock::now() + 1s, stop))) return false;
    // In an ensemble every listing follows a sync: the server the session has just moved to may
    // lag behind the one before (a child already reported deleted would be listed again).
    if (final_pass || ensemble()) {
      const auto t0 = Clock::now();
      if (handle_->sync(path_, bound) != ZOK) return false;
      if (ensemble()) note_round_trip(Clock::now() - t0);
    }
    ChildrenResult list = handle_->children(path_, true, bound);
    if (list.rc == ZNONODE) {  // the lock znode itself is gone (a fresh server): make it again
      if (handle_->ensure_path(path_, bound) != ZOK) return false;
      list = handle_->children(path_, true, bound);
    }
    if (list.rc != ZOK) return false;
    const std::vector<std::string> now = ranked(list.children);
    int emitted = 0;  // grants and deletes this pass delivers: changes to the children it saw

    // Read every child of a new session (full_) and every child not known.
    std::map<std::string, Known> read;
    std::vector<std::string> vanished_while_read;
    for (const auto& c : now) {
      if (!full_ && known_.count(c)) continue;
      const StatResult st = handle_->exists(path_ + "/" + c, false, bound);
      if (st.rc == ZOK) read[c] = Known{st.stat.czxid, st.stat.ephemeral_owner};
      else if (st.rc == ZNONODE) vanished_while_read.push_back(c);
      else return false;
    }

    // Deletes: known children that are gone, or replaced by a same-named child (another czxid).
    // A known child still in the listing that vanished while it was read again (a new session's
    // full read) stays known: its delete came after this listing (this listing's cversion does
    // not count it), and the child watch this listing set fires for it, so the next listing
    // reports it. Reported here, it would be counted against this listing's cversion and the next
    // listing would count it again as a change not seen.
    std::vector<std::string> deleted;
    for (const auto& [name, k] : known_) {
      const bool present = std::find(now.begin(), now.end(), name) != now.end();
      const auto r = read.find(name);
      const bool replaced = r != read.end() && r->second.czxid != k.czxid;
      if (!present || replaced) deleted.push_back(name);
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
  /// while (a cut-off follower answers reads and pings for syncLimit ticks; a stopped one keeps
  /// the connection open and says nothing) and tells it nothing: a sync, which goes through the
  /// leader, does not complete within patience(). Then the watch moves (move_away), and the next
  /// listing diffs against the children known. A session that lost its connection (its server
  /// was killed, or dropped its clients to elect) moves at once: its C client knows that one
  /// server only.
  void probe() {
    if (!handle_ || handle_->expired()) {
      std::lock_guard lock(mu_);
      dirty_ = true;  // pass() opens a new session
      return;
    }
    if (!handle_->connected()) {
      move_away("its connection was lost");
      return;
    }
    const Millis bound = patience();
    const auto t0 = Clock::now();
    if (handle_->sync(path_, bound) == ZOK) {
      note_round_trip(Clock::now() - t0);
      return;
    }
    move_away("a sync did not complete within " + std::to_string(bound.count()) + " ms");
  }

  /// Leaves the server watched now: a new session on the next server that serves
  /// (open_in_ensemble, from the one after it; the one left is tried last: it may have healed),
  /// whose first listing follows a sync and reads every child again (full_), diffing against the
  /// children known. The old session is closed on the closer's thread.
  void move_away(const std::string& why) {
    const auto t0 = Clock::now();
    const std::string from = servers_[server_];
    retire(std::move(handle_));
    full_ = true;
    {
      std::lock_guard lock(mu_);
      place_.clear();
      ++moves_;
    }
    spdlog::warn("{}: leaves server {} ({}) for another", what_, from, why);
    try {
      handle_ = open_in_ensemble(server_ + 1);
      spdlog::info("{}: on server {} ({} ms after leaving {})", what_, servers_[server_],
                   std::chrono::duration_cast<Millis>(Clock::now() - t0).count(), from);
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
  mutable std::mutex mu_;
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
  std::size_t server_ = 0;            // an ensemble: the index of the server handle_ is on
  std::string place_;                 // (mu_) that server, "" while none; a standalone: hosts_
  int moves_ = 0;                     // (mu_) move_away() calls
  std::array<Millis, kRoundTrips> round_trips_{};  // recent syncs that completed (patience())
  std::size_t next_round_trip_ = 0;
  std::uint64_t handles_made_ = 0;    // open_handle() calls
  std::atomic<std::uint64_t> current_handle_{0};  // the session whose expiry renews
  std::int64_t fresh_session_ = 0;
  // Sessions no longer watched, closed on closer_'s thread (close_retired).
  std::mutex closing_mu_;
  std::condition_variable_any closing_cv_;
  std::deque<std::shared_ptr<Handle>> closing_;
  std::jthread closer_;
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

WatchPlace watch_place(const IssuerWatch& watch) {
  const auto* w = dynamic_cast<const ZooKeeperWatch*>(&watch);
  if (!w) throw std::invalid_argument("watch_place: not a watch made by zk::make_watch");
  return w->place();
}

}  // namespace fencecheck::locks::zk
