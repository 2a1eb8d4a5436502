// Shared by the worker process tests: runs the real fencecheck-worker binary (FENCECHECK_WORKER_BIN)
// against a real etcd (EmbeddedEtcd, one per test binary), reading its JSON-lines events as they
// come; a watch on the lock prefix; and the checks every run's events must pass against etcd's
// own history.
#pragma once

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <boost/process.hpp>

#include "fencecheck/proto/chunk.h"
#include "fencecheck/proto/event.h"
#include "fencecheck/locks/etcd/embedded_etcd.h"
#include "fencecheck/locks/etcd/etcd_client.h"
#include "test_support.h"

#ifndef FENCECHECK_WORKER_BIN
#error "FENCECHECK_WORKER_BIN must name the fencecheck-worker binary"
#endif

namespace fencecheck {
namespace {

namespace bp = boost::process;
using namespace std::chrono_literals;

/// One fencecheck-worker process; run() reads its stdout events to EOF, calling on_event for each.
struct WorkerRun {
  std::vector<Event> events;
  int exit_code = -1;
  std::string stderr_text;
};

inline WorkerRun run_worker_process(const std::vector<std::string>& args, const std::filesystem::path& stderr_file,
                             const std::function<void(const Event&, pid_t)>& on_event = {},
                             const std::map<std::string, std::string>& extra_env = {}) {
  WorkerRun run;
  bp::ipstream out;
  bp::environment env = boost::this_process::environment();
  for (const auto& [name, value] : extra_env) env[name] = value;
  bp::child child(bp::exe = FENCECHECK_WORKER_BIN, bp::args = args, bp::std_out > out,
                  bp::std_err > stderr_file.string(), bp::std_in < bp::null, env);
  std::string line;
  while (std::getline(out, line)) {
    Event e = event_from_json_line(line);
    run.events.push_back(e);
    if (on_event) on_event(e, child.id());
  }
  child.wait();
  run.exit_code = child.exit_code();
  std::ifstream err(stderr_file);
  std::ostringstream text;
  text << err.rdbuf();
  run.stderr_text = text.str();
  return run;
}

inline std::vector<Event> of_kind(const std::vector<Event>& events, EventKind kind) {
  std::vector<Event> out;
  std::copy_if(events.begin(), events.end(), std::back_inserter(out), [kind](const Event& e) { return e.kind == kind; });
  return out;
}

inline std::string dump(const std::vector<Event>& events) {
  std::string s;
  for (const auto& e : events) s += to_json_line(e) + "\n";
  return s;
}

class WorkerProcessTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir("worker-it");
    etcd_ = new EmbeddedEtcd();
    etcd_->start(dir_->path() / "data", dir_->path() / "etcd.log");
  }
  static void TearDownTestSuite() {
    delete etcd_;
    delete dir_;
  }

  static std::vector<std::string> args(const std::string& id, const std::string& lock, const std::string& store_url,
                                       const std::vector<std::string>& extra = {}) {
    std::vector<std::string> a{"--id", id, "--etcd", etcd_->client_url(), "--store", store_url, "--lock", lock,
                               "--key", "ledger", "--log-level", "debug"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  /// Watches the lock prefix from now on a thread; the test waits on `events`.
  class LockWatch {
   public:
    LockWatch(const std::string& url, const std::string& prefix) {
      EtcdClient etcd(url);
      const std::int64_t from = etcd.put("marker/" + prefix, "x") + 1;
      thread_ = std::thread([this, url, prefix, from] {
        try {
          EtcdClient(url).watch(prefix, from, [this](const WatchEvent& e) { events.push(e); }, stop_.get_token());
        } catch (const std::exception& e) {
          ADD_FAILURE() << "watch failed: " << e.what();
        }
      });
    }
    ~LockWatch() {
      stop_.request_stop();
      thread_.join();
    }
    test::Collected<WatchEvent> events;

   private:
    std::stop_source stop_;
    std::thread thread_;
  };

  static test::TempDir* dir_;
  static EmbeddedEtcd* etcd_;
};

inline test::TempDir* WorkerProcessTest::dir_ = nullptr;
inline EmbeddedEtcd* WorkerProcessTest::etcd_ = nullptr;

/// The event-sequence checks shared by the tests: every acquire.ok's token is its key's
/// create_revision in etcd's history, and every release.ok's revision is its key's delete.
inline void expect_matches_etcd_history(const std::vector<Event>& events, test::Collected<WatchEvent>& history) {
  auto acquired = of_kind(events, EventKind::kAcquireOk);
  auto released = of_kind(events, EventKind::kReleaseOk);
  ASSERT_TRUE(history.wait_until([&](const std::vector<WatchEvent>& h) {
    return std::all_of(released.begin(), released.end(), [&](const Event& r) {
      return std::any_of(h.begin(), h.end(), [&](const WatchEvent& w) {
        return w.type == WatchEvent::Type::kDelete && w.kv.key == r.lock_key;
      });
    });
  })) << "etcd never showed the releases' deletes";
  auto h = history.snapshot();
  for (const auto& a : acquired) {
    auto put = std::find_if(h.begin(), h.end(), [&](const WatchEvent& w) {
      return w.type == WatchEvent::Type::kPut && w.kv.key == a.lock_key;
    });
    ASSERT_NE(put, h.end()) << "no PUT of " << a.lock_key;
    EXPECT_EQ(a.token, put->kv.create_revision) << a.lock_key;
    EXPECT_EQ(a.lease_id, put->kv.lease) << a.lock_key;
  }
  for (const auto& r : released) {
    auto del = std::find_if(h.begin(), h.end(), [&](const WatchEvent& w) {
      return w.type == WatchEvent::Type::kDelete && w.kv.key == r.lock_key;
    });
    ASSERT_NE(del, h.end());
    EXPECT_EQ(r.revision, del->revision()) << "release.ok revision must be the delete's revision";
    ASSERT_TRUE(del->prev_kv);
    EXPECT_EQ(r.token, del->prev_kv->create_revision);
  }
}

}  // namespace
}  // namespace fencecheck
