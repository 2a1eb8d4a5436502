// Integration tests: the real fencecheck-store binary (FENCECHECK_STORE_BIN), started as a child
// process. kill -9 while writers are mid-flight, restart on the same data directory, and every
// acknowledged write must be there. Also the CLI's contract: the one stdout line, exit codes.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "fencecheck/proto/chunk.h"
#include "fencecheck/resources/store.h"
#include "fencecheck/resources/store_client.h"
#include "temp_dir.h"

extern char** environ;

using namespace fencecheck;
using fencecheck::testing::TempDir;

namespace {

// One child process with its stdout and stderr on pipes. Kills (SIGKILL) and reaps on destruction.
class Child {
 public:
  explicit Child(std::vector<std::string> args) {
    args.insert(args.begin(), FENCECHECK_STORE_BIN);
    int out[2];
    int err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err[1], 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int rc = posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(out[1]);
    ::close(err[1]);
    out_ = out[0];
    err_ = err[0];
    if (rc != 0) throw std::runtime_error(std::string("posix_spawn ") + argv[0] + " failed");
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      (void)wait();
    }
    ::close(out_);
    ::close(err_);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  // The first stdout line; "" on EOF. Gives up after `limit` (a hang guard, not a timing check).
  std::string read_line(std::chrono::seconds limit = std::chrono::seconds(30)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (true) {
      if (auto nl = out_buf_.find('\n'); nl != std::string::npos) {
        std::string line = out_buf_.substr(0, nl);
        out_buf_.erase(0, nl + 1);
        return line;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) throw std::runtime_error("no line from fencecheck-store on stdout; stderr: " + drain_err());
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      ssize_t n = ::read(out_, buf, sizeof buf);
      if (n <= 0) return "";
      out_buf_.append(buf, static_cast<std::size_t>(n));
    }
  }
  // Everything left on stdout until the child closes it.
  std::string rest_of_stdout() {
    std::string all = out_buf_;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(out_, buf, sizeof buf)) > 0) all.append(buf, static_cast<std::size_t>(n));
    return all;
  }
  std::string drain_err() {
    std::string all;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(err_, buf, sizeof buf)) > 0) all.append(buf, static_cast<std::size_t>(n));
    return all;
  }
  void signal(int sig) { ::kill(pid_, sig); }
  // The raw wait status.
  int wait() {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    return status;
  }
  [[nodiscard]] pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  int err_ = -1;
  bool reaped_ = false;
  std::string out_buf_;
};

struct Running {
  std::unique_ptr<Child> child;
  std::string url;
  std::string line;  // the announcement, verbatim
  nlohmann::json hello;
};

Running start_store(const std::filesystem::path& dir, const std::string& fencing = "per-key",
                    std::vector<std::string> extra = {}) {
  Running r;
  std::vector<std::string> args{"--data-dir", dir.string(), "--fencing", fencing};
  args.insert(args.end(), extra.begin(), extra.end());
  r.child = std::make_unique<Child>(args);
  r.line = r.child->read_line();
  r.hello = nlohmann::json::parse(r.line, nullptr, false);
  if (!r.hello.is_object()) throw std::runtime_error("fencecheck-store said '" + r.line + "'; stderr: " + r.child->drain_err());
  r.url = "http://" + r.hello.at("listening").get<std::string>();
  return r;
}

struct Ack {
  std::string key;
  std::int64_t segment;
  std::int64_t chunk;
  std::int64_t token;
  std::string client;
  std::int64_t seq;
};

}  // namespace

TEST(StoreProcess, AnnouncesExactlyOneJsonLineAndStopsCleanlyOnSigterm) {
  TempDir dir;
  auto s = start_store(dir.path());
  const auto& hello = s.hello;
  ASSERT_EQ(hello.size(), 4u) << hello.dump();
  EXPECT_EQ(s.line, R"({"listening":")" + hello.at("listening").get<std::string>() +
                        R"(","fencing":"per-key","effect_mode":"fenced","pid":)" + std::to_string(s.child->pid()) + "}");
  EXPECT_EQ(hello.at("fencing"), "per-key");
  EXPECT_EQ(hello.at("pid").get<pid_t>(), s.child->pid());
  const std::string listening = hello.at("listening");
  EXPECT_EQ(listening.rfind("127.0.0.1:", 0), 0u) << listening;
  EXPECT_NE(listening, "127.0.0.1:0");

  StoreClient c(s.url);
  EXPECT_TRUE(c.healthy());
  ASSERT_EQ(c.write("a", 0, 0, FencingToken(3), "w1", "x").outcome, WriteOutcome::kAccepted);

  s.child->signal(SIGTERM);
  const int status = s.child->wait();
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(s.child->rest_of_stdout(), "") << "stdout must carry only the one line";
}

TEST(StoreProcess, KillNineLosesNoAcknowledgedWrite) {
  TempDir dir;
  std::vector<Ack> acked;
  std::int64_t next_seq = 1;

  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto s = start_store(dir.path());

    // Writers run flat out; once enough writes are acknowledged, the store is killed under them.
    constexpr int kWriters = 8;
    constexpr std::size_t kAcksBeforeKill = 150;
    std::mutex m;
    std::condition_variable cv;
    std::vector<Ack> round_acks;
    std::atomic<bool> stop{false};
    std::atomic<int> unknown{0};
    std::vector<std::thread> writers;
    for (int w = 0; w < kWriters; ++w) {
      writers.emplace_back([&, w] {
        StoreClient c(s.url, std::chrono::milliseconds(5000));
        const std::string client = "r" + std::to_string(round) + "w" + std::to_string(w);
        for (std::int64_t i = 0; !stop; ++i) {
          const std::string key = "k" + std::to_string(w % 3);
          // Tokens rise with the round and the write count, with some writers lagging (fenced).
          const std::int64_t token = round * 100000 + i * 10 + (w % 4);
          const std::int64_t segment = i % 5;
          const std::int64_t chunk = w;
          auto r = c.write(key, segment, chunk, FencingToken(token), client,
                           encode_chunk(ChunkHeader{client, token, key, segment, chunk}, 200));
          if (r.outcome == WriteOutcome::kUnknown) {
            ++unknown;
            return;  // the store is gone
          }
          ASSERT_NE(r.outcome, WriteOutcome::kInvalid) << r.error;
          if (r.outcome == WriteOutcome::kAccepted) {
            std::lock_guard l(m);
            round_acks.push_back({key, segment, chunk, token, client, r.seq});
            cv.notify_all();
          }
        }
      });
    }
    {
      std::unique_lock l(m);
      cv.wait(l, [&] { return round_acks.size() >= kAcksBeforeKill; });
    }
    s.child->signal(SIGKILL);
    const int status = s.child->wait();
    stop = true;
    for (auto& t : writers) t.join();
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
    EXPECT_GE(round_acks.size(), kAcksBeforeKill);
    acked.insert(acked.end(), round_acks.begin(), round_acks.end());

    // Restart on the same directory and read everything back.
    auto again = start_store(dir.path());
    StoreClient c(again.url);
    const ReadBack rb = c.readback();
    for (std::size_t i = 0; i < rb.log.size(); ++i) ASSERT_EQ(rb.log[i].seq, static_cast<std::int64_t>(i) + 1);
    ASSERT_GE(static_cast<std::int64_t>(rb.log.size()), next_seq - 1) << "the log lost records it had";

    // Every acknowledged write, from every round so far, is in the log with its token.
    std::map<std::tuple<std::string, std::int64_t, std::int64_t>, std::int64_t> last_acked_seq;
    for (const auto& a : acked) {
      ASSERT_LE(a.seq, static_cast<std::int64_t>(rb.log.size())) << "acknowledged seq " << a.seq << " is gone";
      const auto& w = rb.log[static_cast<std::size_t>(a.seq - 1)];
      ASSERT_EQ(w.key, a.key) << "seq " << a.seq;
      ASSERT_EQ(w.segment, a.segment) << "seq " << a.seq;
      ASSERT_EQ(w.chunk, a.chunk) << "seq " << a.seq;
      ASSERT_EQ(w.token, a.token) << "seq " << a.seq;
      ASSERT_EQ(w.client, a.client) << "seq " << a.seq;
      auto& last = last_acked_seq[{a.key, a.segment, a.chunk}];
      last = std::max(last, a.seq);
      ASSERT_GE(rb.high_water.at(a.key), a.token);
    }
    // Each slot holds its last acknowledged write or a later one, intact.
    for (const auto& ch : rb.chunks) {
      auto it = last_acked_seq.find({ch.key, ch.segment, ch.chunk});
      if (it != last_acked_seq.end()) {
        EXPECT_GE(ch.seq, it->second);
      }
      auto d = decode_chunk(ch.data);
      ASSERT_TRUE(d.ok) << d.error;
      EXPECT_EQ(d.header.token, ch.token);
      EXPECT_EQ(d.header.worker, ch.client);
      EXPECT_EQ(d.header.key, ch.key);
    }
    // Per key, the tokens in the log never went down, across the crash too.
    std::map<std::string, std::int64_t> seen;
    for (const auto& w : rb.log) {
      ASSERT_GE(w.token, seen[w.key]) << "key " << w.key << " regressed at seq " << w.seq;
      seen[w.key] = w.token;
    }
    // The restarted store still fences with the marks it had before the crash.
    const std::string key = "k0";
    const std::int64_t hw = rb.high_water.at(key);
    auto stale = c.write(key, 99, 0, FencingToken(hw - 1), "late", "late");
    EXPECT_EQ(stale.outcome, WriteOutcome::kRejected) << stale.error;
    EXPECT_EQ(stale.high_water, hw);
    auto fresh = c.write(key, 99, 0, FencingToken(hw), "late", encode_chunk(ChunkHeader{"late", hw, key, 99, 0}));
    ASSERT_EQ(fresh.outcome, WriteOutcome::kAccepted) << fresh.error;
    EXPECT_EQ(fresh.seq, static_cast<std::int64_t>(rb.log.size()) + 1);
    acked.push_back({key, 99, 0, hw, "late", fresh.seq});
    next_seq = fresh.seq + 1;

    again.child->signal(SIGTERM);
    EXPECT_EQ(again.child->wait(), 0);
  }
}

TEST(StoreProcess, ASecondStoreOnTheSameDirectoryExitsOne) {
  TempDir dir;
  auto first = start_store(dir.path());
  Child second({"--data-dir", dir.path().string()});
  EXPECT_EQ(second.read_line(), "");  // nothing on stdout: it never listened
  const int status = second.wait();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_NE(second.drain_err().find("in use by another store"), std::string::npos);
}

// Issue 14, failing input 1, through the real binary: 40 records with tokens 100..139 for one key,
// one byte flipped inside record 20 (0-based; seq 21). Refused with exit 3 and a message naming
// the file, the byte offset and the record; the file is untouched. --repair-log starts it, the
// mark stays 139 and token 125 is answered 409.
TEST(StoreProcess, ADamagedLogIsRefusedWithExitThreeAndRepairKeepsTheMark) {
  TempDir dir;
  const auto path = dir.path() / "store.log";
  std::size_t record20 = 0;
  {
    auto store = FencedStore::open(dir.path(), FencingMode::kPerKey);
    for (int i = 0; i < 40; ++i) {
      if (i == 20) record20 = static_cast<std::size_t>(std::filesystem::file_size(path));
      ASSERT_TRUE(store->write(WriteRequest{"ledger", 0, i, FencingToken(100 + i), "w1",
                                            encode_chunk(ChunkHeader{"w1", 100 + i, "ledger", 0, i}, 64)})
                      .accepted);
    }
  }
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  bytes[record20 + 8 + 20] = static_cast<char>(bytes[record20 + 8 + 20] ^ 0x01);
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
  }

  Child refused({"--data-dir", dir.path().string()});
  EXPECT_EQ(refused.read_line(), "");  // never listened
  const std::string err = refused.drain_err();
  const int status = refused.wait();
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 3) << err;
  EXPECT_NE(err.find(path.string()), std::string::npos) << err;
  EXPECT_NE(err.find("byte offset " + std::to_string(record20)), std::string::npos) << err;
  EXPECT_NE(err.find("record #21"), std::string::npos) << err;
  EXPECT_NE(err.find("--repair-log"), std::string::npos) << err;
  EXPECT_EQ(std::filesystem::file_size(path), bytes.size());

  Child help({"--help"});
  EXPECT_NE(help.rest_of_stdout().find("--repair-log"), std::string::npos);
  (void)help.wait();

  auto s = start_store(dir.path(), "per-key", {"--repair-log"});
  StoreClient c(s.url);
  auto stale = c.write("ledger", 0, 99, FencingToken(125), "stale",
                       encode_chunk(ChunkHeader{"stale", 125, "ledger", 0, 99}, 64));
  EXPECT_EQ(stale.outcome, WriteOutcome::kRejected) << stale.error;
  EXPECT_EQ(stale.http_status, 409);
  EXPECT_EQ(stale.high_water, 139);
  EXPECT_EQ(c.readback().log.size(), 39u);
  s.child->signal(SIGTERM);
  EXPECT_EQ(s.child->wait(), 0);
  const std::string log = s.child->drain_err();
  EXPECT_NE(log.find("REPAIRED"), std::string::npos) << log;
  EXPECT_NE(log.find("1 record(s) lost"), std::string::npos) << log;
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "store.log.damaged.1"));
}

TEST(StoreProcess, BadArgumentsExitTwoWithAMessage) {
  TempDir dir;
  const std::string d = dir.path().string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{}, "--data-dir"},
      {{"--data-dir", d, "--fencing", "sometimes"},
       "--fencing 'sometimes' is not one of per-key|none|global|check-then-write"},
      {{"--data-dir", d, "--check-window-ms", "50"}, "--check-window-ms applies only to --fencing check-then-write"},
      {{"--data-dir", d, "--fencing", "check-then-write", "--check-window-ms", "-1"}, "--check-window-ms"},
      {{"--data-dir", d, "--listen", "127.0.0.1"}, "has no port"},
      {{"--data-dir", d, "--listen", "127.0.0.1:70000"}, "is not 0..65535"},
      {{"--data-dir", d, "--max-body-bytes", "0"}, "--max-body-bytes"},
      {{"--data-dir", d, "--max-body-bytes", "lots"}, "--max-body-bytes"},
      {{"--data-dir", d, "--no-such-flag"}, "--no-such-flag"},
      {{"--data-dir", d, "--effect-mode", "Fenced"}, "--effect-mode 'Fenced' is not one of fenced|unfenced|idempotent"},
  };
  for (const auto& [args, want] : cases) {
    Child c(args);
    EXPECT_EQ(c.read_line(), "");
    const std::string err = c.drain_err();
    const int status = c.wait();
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 2) << err;
    EXPECT_NE(err.find(want), std::string::npos) << "stderr: " << err;
  }
}

TEST(StoreProcess, EveryModeStartsAndAnnouncesItself) {
  for (const std::string mode : {"per-key", "none", "global", "check-then-write"}) {
    SCOPED_TRACE(mode);
    TempDir dir;
    auto s = mode == "check-then-write" ? start_store(dir.path(), mode, {"--check-window-ms", "0"})
                                        : start_store(dir.path(), mode);
    EXPECT_EQ(s.hello.at("fencing"), mode);
    StoreClient c(s.url);
    ASSERT_EQ(c.write("a", 0, 0, FencingToken(3), "w1", "x").outcome, WriteOutcome::kAccepted);
    EXPECT_EQ(c.readback().fencing, mode);
    s.child->signal(SIGTERM);
    EXPECT_EQ(s.child->wait(), 0);
  }
}

namespace {

nlohmann::json raw_readback(const std::string& url) {
  const auto hostport = url.substr(std::string("http://").size());
  const auto colon = hostport.rfind(':');
  httplib::Client cli(hostport.substr(0, colon), std::stoi(hostport.substr(colon + 1)));
  auto res = cli.Get("/v1/readback");
  if (!res || res->status != 200) throw std::runtime_error("GET " + url + "/v1/readback failed");
  return nlohmann::json::parse(res->body);
}

}  // namespace

// Issue 14, failing input 2, through the real binary: the guard on side effects is the store's
// --effect-mode; a Fencecheck-Effect header can neither loosen it (fenced store, header unfenced
// or idempotent: 409 with the mark) nor tighten it (unfenced store, header fenced: applied).
TEST(StoreProcess, TheEffectModeIsTheStoresFlagAndNoHeaderChangesIt) {
  auto post = [](const std::string& url, const std::string& token, const std::string& header) {
    const auto hostport = url.substr(std::string("http://").size());
    const auto colon = hostport.rfind(':');
    httplib::Client cli(hostport.substr(0, colon), std::stoi(hostport.substr(colon + 1)));
    auto res = cli.Post("/v1/effects/ledger",
                        {{"Fencing-Token", token}, {"Fencecheck-Client", "w1"}, {"Fencecheck-Effect", header}}, "seg0",
                        "text/plain");
    if (!res) throw std::runtime_error("POST " + url + " failed");
    return std::make_pair(res->status, nlohmann::json::parse(res->body));
  };
  for (const std::string configured : {"fenced", "unfenced"}) {
    SCOPED_TRACE(configured);
    TempDir dir;
    auto s = configured == "fenced" ? start_store(dir.path()) : start_store(dir.path(), "per-key", {"--effect-mode", configured});
    EXPECT_EQ(s.hello.at("effect_mode"), configured);
    StoreClient c(s.url);
    ASSERT_EQ(c.write("ledger", 0, 0, FencingToken(9), "w2", "x").outcome, WriteOutcome::kAccepted);
    for (const std::string header : {"fenced", "unfenced", "idempotent"}) {
      SCOPED_TRACE(header);
      auto [status, body] = post(s.url, "0", header);
      EXPECT_EQ(body.at("mode"), configured);
      EXPECT_EQ(body.at("high_water"), 9);
      if (configured == "fenced") {
        EXPECT_EQ(status, 409) << body.dump();
        EXPECT_EQ(body.at("applied"), false);
      } else {
        EXPECT_EQ(status, 200) << body.dump();
        EXPECT_EQ(body.at("applied"), true);
      }
    }
    const nlohmann::json rb = raw_readback(s.url);
    ASSERT_EQ(rb.at("effects").size(), 3u);
    for (const auto& e : rb.at("effects")) EXPECT_EQ(e.at("applied"), configured == "unfenced") << e.dump();
    s.child->signal(SIGTERM);
    EXPECT_EQ(s.child->wait(), 0);
  }
}

TEST(StoreProcess, KillNineKeepsEveryAcknowledgedEffectAndCounterWrite) {
  TempDir dir;
  struct AckedEffect {
    std::string key, id, client;
    std::int64_t token, seq;
    bool applied;
  };
  std::vector<AckedEffect> effects;
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> last_counter;  // key -> (value, seq)
  {
    // Idempotent effects: ids repeat, so both outcomes (applied, duplicate) are logged. (A store
    // has one effect mode; replay of every mode's records is store_modes_test's.)
    auto s = start_store(dir.path(), "per-key", {"--effect-mode", "idempotent"});
    // Writers run flat out — counters read-modify-written under rising tokens, effects applied
    // and duplicate — and the store is killed under them once enough answers came back.
    constexpr int kWriters = 6;
    constexpr std::size_t kAcksBeforeKill = 120;
    std::mutex m;
    std::condition_variable cv;
    std::size_t acks = 0;
    std::atomic<bool> stop{false};
    std::vector<std::thread> writers;
    for (int w = 0; w < kWriters; ++w) {
      writers.emplace_back([&, w] {
        StoreClient c(s.url);
        const std::string client = "w" + std::to_string(w);
        const std::string key = "c" + std::to_string(w % 2);
        for (std::int64_t i = 0; !stop; ++i) {
          const std::int64_t token = 10 + i;
          if (w % 2 == 0) {
            auto read = c.read_counter(key);
            if (!read.ok) return;  // the store is gone
            auto r = c.write_counter(key, read.value + 1, FencingToken(token), client);
            if (r.outcome == WriteOutcome::kUnknown) return;
            ASSERT_NE(r.outcome, WriteOutcome::kInvalid) << r.error;
            if (r.outcome == WriteOutcome::kAccepted) {
              std::lock_guard l(m);
              auto& last = last_counter[key];
              if (r.seq > last.second) last = {read.value + 1, r.seq};
              ++acks;
              cv.notify_all();
            }
          } else {
            const std::string id = client + ":seg" + std::to_string(i % 4);
            auto r = c.post_effect("ledger", id, FencingToken(token), client);
            if (r.outcome == EffectOutcome::kUnknown) return;
            ASSERT_NE(r.outcome, EffectOutcome::kInvalid) << r.error;
            std::lock_guard l(m);
            effects.push_back({"ledger", id, client, token, r.seq, r.outcome == EffectOutcome::kApplied});
            ++acks;
            cv.notify_all();
          }
        }
      });
    }
    {
      std::unique_lock l(m);
      cv.wait(l, [&] { return acks >= kAcksBeforeKill; });
    }
    s.child->signal(SIGKILL);
    const int status = s.child->wait();
    stop = true;
    for (auto& t : writers) t.join();
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  }
  ASSERT_FALSE(effects.empty());
  ASSERT_FALSE(last_counter.empty());

  auto again = start_store(dir.path(), "per-key", {"--effect-mode", "idempotent"});
  const nlohmann::json rb = raw_readback(again.url);
  // Every answered effect is there under its seq, with the outcome it was answered with.
  std::map<std::int64_t, nlohmann::json> by_seq;
  for (const auto& e : rb.at("effects")) by_seq[e.at("seq").get<std::int64_t>()] = e;
  for (const auto& a : effects) {
    SCOPED_TRACE("effect seq " + std::to_string(a.seq));
    ASSERT_TRUE(by_seq.contains(a.seq)) << "an answered effect is gone";
    const auto& e = by_seq.at(a.seq);
    EXPECT_EQ(e.at("key"), a.key);
    EXPECT_EQ(e.at("id"), a.id);
    EXPECT_EQ(e.at("client"), a.client);
    EXPECT_EQ(e.at("token"), a.token);
    EXPECT_EQ(e.at("applied"), a.applied);
  }
  // The last acknowledged counter write is in the log with its value, and the counter holds the
  // value of the last counter write the log has (that one, or a later one that became durable).
  for (const auto& [key, last] : last_counter) {
    SCOPED_TRACE(key);
    bool found = false;
    std::int64_t last_logged_value = -1;
    for (const auto& w : rb.at("log")) {
      if (w.at("key") != key) continue;
      EXPECT_EQ(w.at("kind"), "counter");
      EXPECT_FALSE(w.contains("chunk")) << w.dump();
      last_logged_value = w.at("value").get<std::int64_t>();
      if (w.at("seq") == last.second) found = w.at("value") == last.first;
    }
    EXPECT_TRUE(found) << "acknowledged counter write at seq " << last.second << " is gone";
    EXPECT_EQ(rb.at("counters").at(key).get<std::int64_t>(), last_logged_value);
  }
  // Store-wide seqs: chunks/counters (log) and effects together are 1..N without a gap.
  std::set<std::int64_t> seqs;
  for (const auto& w : rb.at("log")) seqs.insert(w.at("seq").get<std::int64_t>());
  for (const auto& [seq, e] : by_seq) seqs.insert(seq);
  ASSERT_FALSE(seqs.empty());
  EXPECT_EQ(*seqs.begin(), 1);
  EXPECT_EQ(*seqs.rbegin(), static_cast<std::int64_t>(seqs.size()));
  // Behaviour after the restart: idempotent ids already applied stay applied once.
  StoreClient c(again.url);
  for (const auto& a : effects) {
    if (!a.applied) continue;
    auto r = c.post_effect("ledger", a.id, FencingToken(1), "late");
    EXPECT_EQ(r.outcome, EffectOutcome::kDuplicate) << a.id;
    break;
  }
  again.child->signal(SIGTERM);
  EXPECT_EQ(again.child->wait(), 0);
}
