// Tests of the zookeeper kind: its embedded server (members 1) or ensemble (members 3), started
// through the kind as the orchestrator starts it, in a temporary run directory; on a failed test
// the tail of every server log is printed. Not thread-safe (one test's main thread).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "fake_resource_fields.h"
#include "fencecheck/locks/lock_client.h"
#include "fencecheck/locks/lock_service_kind.h"
#include "fencecheck/process/server_support.h"
#include "temp_dir.h"

namespace fencecheck::testing {

/// The zookeeper kind, as the registry has it.
inline const locks::LockServiceKind& zookeeper_kind() { return *locks::find_lock_service_kind("zookeeper"); }

struct ZooKeeperServer {
  TempDir dir{"zk"};
  std::unique_ptr<locks::LockServiceInstance> inst;
  std::chrono::milliseconds start_time{0};  ///< open() to serving

  /// Starts `members` servers (1: standalone; 3 or 5: an ensemble), with the clock shim
  /// preloaded when `clock_faults` (LockServiceRunContext::member_clock_faults). Throws as the
  /// kind's open().
  explicit ZooKeeperServer(int members = 1, bool clock_faults = false) {
    namespace fs = std::filesystem;
    const locks::LockServiceKind& kind = zookeeper_kind();
    locks::LockServiceRunContext ctx;
    ctx.run_dir = dir.path();
    ctx.run_id = "test";
    ctx.members = members;
    ctx.member_clock_faults = clock_faults;
    ctx.log_path = [d = dir.path()](const std::string& name) {
      fs::create_directories(d / "logs");
      return d / "logs" / (name + ".log");
    };
    const auto config = members > 1 ? kind.parse(FakeFields{{"members", members}}) : kind.parse(FakeFields{});
    const auto t0 = std::chrono::steady_clock::now();
    inst = kind.open({}, config, ctx);
    start_time = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    std::cout << "[ zookeeper ] " << inst->describe() << " started in " << start_time.count() << " ms\n";
  }
  ~ZooKeeperServer() {
    if (!::testing::Test::HasFailure()) return;
    inst.reset();
    for (const auto& f : std::filesystem::directory_iterator(dir.path() / "logs")) {
      const std::string text = process::read_text(f.path());
      std::cout << "---- " << f.path().filename().string() << " (last 3000 bytes)\n"
                << (text.size() > 3000 ? text.substr(text.size() - 3000) : text) << "\n";
    }
  }
  ZooKeeperServer(const ZooKeeperServer&) = delete;
  ZooKeeperServer& operator=(const ZooKeeperServer&) = delete;
  [[nodiscard]] std::unique_ptr<locks::LockClient> client() const { return locks::make_lock_client(inst->endpoint()); }
};

}  // namespace fencecheck::testing
