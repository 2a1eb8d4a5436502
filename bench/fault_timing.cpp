// fencecheck bench — fault timing (issue 3): how long from the orchestrator's decision to inject a
// fault to the fault taking effect, and from the decision to heal it to the heal taking effect.
// The "decision" is the moment before the ledger record (written, as the orchestrator does before
// every injection) and the fault's inject(); the effect is observed from outside:
//   sigstop:      /proc/<pid>/stat state becomes T; heal: it leaves T (SIGCONT).
//   cpu-throttle: the busy-spinning target stops getting CPU: its on-CPU time (/proc/<pid>/schedstat)
//                 stops advancing for 30 ms; the effect is when that stall began (its 2 ms quota
//                 spent). Also reported: when the fault's cgroup cpu.stat first counts a throttled
//                 period (the kernel counts it at the period's end, so it trails by up to 100 ms).
//                 Heal: the process is back in its original cgroup (the throttling cgroup is gone).
//   partition:    a sender in a lab host namespace sends a numbered UDP packet to the resource
//                 address every 200 us, a receiver in the hub records arrivals; the effect is the
//                 send time of the first dropped packet; the heal, the send time of the first
//                 packet received after the last dropped one.
// Goals: under 10 ms for signals and partitions, within one CFS period (100 ms) for throttling.
// Needs root (cgroups, network namespaces); a kind that cannot run here is reported with why.
// Prints one JSON object: {"<kind>":{"effect_ms":{"p50","max","n"},"heal_ms":{...}}|{"error"}}.
// Usage: fault_timing [REPETITIONS]   (default 10). Leaves nothing behind (children killed,
// cgroups removed, namespaces deleted, the ledger's directory removed).
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "fencecheck/faults/command.h"
#include "fencecheck/faults/cpu_throttle.h"
#include "fencecheck/faults/ledger.h"
#include "fencecheck/faults/netns.h"
#include "fencecheck/faults/partition.h"
#include "fencecheck/faults/process.h"
#include "fencecheck/faults/sigstop.h"

namespace ff = fencecheck::faults;
using namespace std::chrono_literals;

namespace {

std::int64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

nlohmann::json summary(std::vector<double> ms) {
  if (ms.empty()) return {{"n", 0}};
  std::sort(ms.begin(), ms.end());
  return {{"p50", ms[(ms.size() - 1) / 2]}, {"max", ms.back()}, {"min", ms.front()}, {"n", ms.size()}};
}

/// Polls `done` until true; returns the monotonic ns when it first was, or -1 after `limit`.
std::int64_t wait_until(const std::function<bool()>& done, std::chrono::milliseconds limit = 2s) {
  const std::int64_t end = now_ns() + std::chrono::nanoseconds(limit).count();
  while (now_ns() < end) {
    if (done()) return now_ns();
  }
  return -1;
}

/// A child process of ours: sleeps in 1 ms steps (a worker's ticker) or busy-spins. Dies with us.
pid_t spawn_child(bool spin) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    for (;;) {
      if (!spin) ::usleep(1000);
    }
  }
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  return pid;
}

void end_child(pid_t pid) {
  ::kill(pid, SIGKILL);
  ::kill(pid, SIGCONT);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

/// Spawns a child (spin or sleep), runs `measure(pid)` and ends the child on every path.
nlohmann::json with_child(bool spin, const std::function<nlohmann::json(pid_t)>& measure) {
  const pid_t pid = spawn_child(spin);
  try {
    nlohmann::json result = measure(pid);
    end_child(pid);
    return result;
  } catch (...) {
    end_child(pid);
    throw;
  }
}

/// Where the decision-to-effect time goes: the ledger record, and inject() until it returns.
struct InjectSteps {
  std::vector<double> ledger_ms, inject_ms;
  std::int64_t returned_ns = 0;  ///< when the last inject() returned
  /// Records the ledger entry and injects, timing both from `decision`; returns the ledger id.
  std::int64_t run(ff::FaultLedger& ledger, ff::Fault& fault, std::int64_t decision) {
    const auto id = ledger.record_inject(fault);
    const std::int64_t recorded = now_ns();
    fault.inject();
    returned_ns = now_ns();
    ledger_ms.push_back(static_cast<double>(recorded - decision) / 1e6);
    inject_ms.push_back(static_cast<double>(returned_ns - recorded) / 1e6);
    return id;
  }
  [[nodiscard]] nlohmann::json json() const;
};

/// Milliseconds between two monotonic stamps; throws `what` when the effect was not seen (-1).
double elapsed_ms(std::int64_t from, std::int64_t to, const char* what) {
  if (to < 0) throw std::runtime_error(what);
  return static_cast<double>(to - from) / 1e6;
}

nlohmann::json InjectSteps::json() const { return {{"ledger_ms", summary(ledger_ms)}, {"inject_call_ms", summary(inject_ms)}}; }

struct Ledger {
  std::filesystem::path dir;
  std::unique_ptr<ff::FaultLedger> ledger;
  Ledger() {
    dir = std::filesystem::temp_directory_path() / ("fc-fault-timing-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    ledger = std::make_unique<ff::FaultLedger>(dir / "faults.ledger", "bench" + std::to_string(::getpid()));
  }
  ~Ledger() {
    ledger.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

nlohmann::json time_sigstop(Ledger& ledger, int reps) {
  return with_child(false, [&](pid_t pid) -> nlohmann::json {
    std::vector<double> effect, heal;
    InjectSteps steps;
    const auto ref = ff::ProcessRef::of(pid).value();
    for (int i = 0; i < reps; ++i) {
      std::this_thread::sleep_for(20ms);  // let it run between faults (pacing, not synchronisation)
      ff::SigstopFault fault(ref, "bench-child");
      const std::int64_t t0 = now_ns();
      const auto id = steps.run(*ledger.ledger, fault, t0);
      effect.push_back(elapsed_ms(t0, wait_until([&] { return ff::process_state(pid) == 'T'; }), "stop not seen in 2 s"));
      std::this_thread::sleep_for(20ms);
      const std::int64_t t2 = now_ns();
      fault.heal();
      ledger.ledger->record_heal(id);
      heal.push_back(elapsed_ms(t2, wait_until([&] { return ff::process_state(pid) != 'T'; }), "continue not seen in 2 s"));
    }
    return {{"effect_ms", summary(effect)}, {"heal_ms", summary(heal)}, {"steps", steps.json()}};
  });
}

std::int64_t read_nr_throttled(const std::filesystem::path& cpu_stat) {
  std::ifstream in(cpu_stat);
  std::string name;
  std::int64_t value = 0;
  while (in >> name >> value)
    if (name == "nr_throttled") return value;
  return -1;
}

/// On-CPU time of pid, ns (/proc/<pid>/schedstat, first field: time spent running); -1 if gone.
std::int64_t cpu_time_ns(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/schedstat");
  std::int64_t ns = -1;
  in >> ns;
  return in ? ns : -1;
}

/// Waits until the busy-spinning pid stops getting CPU: its on-CPU time does not advance for
/// `stall` (longer than a runnable task's scheduling gaps on this machine, far shorter than the
/// ~98 ms a 2 ms / 100 ms quota keeps it off the CPU). Returns when the stall began (the last
/// time its CPU time was seen advancing), -1 if none within `limit`. Busy-polls.
std::int64_t wait_cpu_stall(pid_t pid, std::chrono::milliseconds stall, std::chrono::milliseconds limit) {
  const std::int64_t stall_ns = std::chrono::nanoseconds(stall).count();
  const std::int64_t end = now_ns() + std::chrono::nanoseconds(limit).count();
  std::int64_t last = cpu_time_ns(pid), last_advance = now_ns();
  while (now_ns() < end) {
    const std::int64_t v = cpu_time_ns(pid), t = now_ns();
    if (v != last) {
      last = v;
      last_advance = t;
    } else if (t - last_advance >= stall_ns) {
      return last_advance;
    }
  }
  return -1;
}

bool in_cgroup(pid_t pid, const std::string& fragment) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cgroup");
  std::string line;
  while (std::getline(in, line))
    if (line.find(fragment) != std::string::npos) return true;
  return false;
}

nlohmann::json time_throttle(Ledger& ledger, int reps) {
  return with_child(true, [&](pid_t pid) -> nlohmann::json {
    std::vector<double> effect, heal, after_move, counted;
    InjectSteps steps;
    const auto ref = ff::ProcessRef::of(pid).value();
    for (int i = 0; i < reps; ++i) {
      std::this_thread::sleep_for(20ms);
      ff::CpuThrottleFault fault(ref, "bench-child", "bench" + std::to_string(::getpid()) + "-" + std::to_string(i),
                                 ff::ThrottleSpec{});
      const std::int64_t t0 = now_ns();
      const auto id = steps.run(*ledger.ledger, fault, t0);
      const auto stat = fault.cgroup_dir() / "cpu.stat";
      // The effect: the target stops getting CPU (its quota spent, the cgroup throttled).
      const std::int64_t stalled = wait_cpu_stall(pid, 30ms, 1s);
      effect.push_back(elapsed_ms(t0, stalled, "the target never stopped getting CPU within 1 s"));
      // The kernel's own record of it: a throttled period counted in cpu.stat.
      const std::int64_t t1 = wait_until([&] { return read_nr_throttled(stat) > 0; }, 1s);
      counted.push_back(elapsed_ms(t0, t1, "no throttled period within 1 s"));
      // The kernel counts a throttled period when the period timer fires at its end, so the
      // first one shows in cpu.stat at most one period after the move if it is the first period.
      after_move.push_back(elapsed_ms(steps.returned_ns, t1, "no throttled period within 1 s"));
      const std::string name = fault.cgroup_dir().filename().string();
      const std::int64_t t2 = now_ns();
      fault.heal();
      ledger.ledger->record_heal(id);
      heal.push_back(elapsed_ms(t2, wait_until([&] { return !in_cgroup(pid, name); }), "still in the cgroup after 2 s"));
    }
    return {{"effect_ms", summary(effect)}, {"heal_ms", summary(heal)}, {"cfs_period_ms", 100},
            {"counted_ms", summary(counted)},
            {"counted_after_move_ms", summary(after_move)}, {"steps", steps.json()}};
  });
}

/// Shared between the parent and the two packet children (MAP_SHARED anonymous).
struct PacketLog {
  static constexpr std::size_t kSlots = 1 << 18;  // 52 s at one packet per 200 us
  std::atomic<std::int64_t> sent_ns[kSlots];
  std::atomic<std::int64_t> recv_ns[kSlots];
  std::atomic<std::int64_t> next_seq;
  std::atomic<int> receiver_ready;
  std::atomic<int> stop;
};

void enter_netns(const std::string& netns) {
  const int fd = ::open(("/run/netns/" + netns).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) ::_exit(3);
  ::close(fd);
}

nlohmann::json time_partition(Ledger& ledger, int reps) {
  ff::SystemCommandRunner runner;
  ff::NetworkLab lab({.run_id = "bt" + std::to_string(::getpid()), .hosts = {"h1"}}, runner, ledger.ledger.get());
  lab.setup();
  void* mem = ::mmap(nullptr, sizeof(PacketLog), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) throw std::runtime_error("mmap failed");
  auto* log = static_cast<PacketLog*>(mem);  // zero-filled by mmap
  const std::string address = lab.service("resource").address;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(39999);
  ::inet_pton(AF_INET, address.c_str(), &sa.sin_addr);

  const pid_t receiver = ::fork();
  if (receiver == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    enter_netns(lab.hub_netns());
    const int s = ::socket(AF_INET, SOCK_DGRAM, 0);
    if (::bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) ::_exit(4);
    log->receiver_ready = 1;
    std::int64_t seq = 0;
    while (::recv(s, &seq, sizeof seq, 0) == sizeof seq)
      if (seq >= 0 && static_cast<std::size_t>(seq) < PacketLog::kSlots) log->recv_ns[seq] = now_ns();
    ::_exit(0);
  }
  const pid_t sender = ::fork();
  if (sender == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    enter_netns(lab.host("h1").netns);
    while (log->receiver_ready == 0) ::usleep(100);
    const int s = ::socket(AF_INET, SOCK_DGRAM, 0);
    for (std::int64_t seq = 0; log->stop == 0 && static_cast<std::size_t>(seq) < PacketLog::kSlots; ++seq) {
      log->sent_ns[seq] = now_ns();
      log->next_seq = seq + 1;
      ::sendto(s, &seq, sizeof seq, 0, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
      ::usleep(200);
    }
    ::_exit(0);
  }
  std::vector<double> effect, heal;
  InjectSteps steps;
  std::string error;
  try {
    // Wait until packets flow end to end (ARP resolved): some packet received.
    if (wait_until([&] {
          for (std::int64_t i = 0; i < log->next_seq; ++i)
            if (log->recv_ns[i] != 0) return true;
          return false;
        }, 5s) < 0)
      throw std::runtime_error("no packet reached the resource address before the partition");
    std::this_thread::sleep_for(50ms);
    std::vector<std::pair<std::int64_t, std::int64_t>> windows;  // (inject decision, heal decision)
    for (int i = 0; i < reps; ++i) {
      ff::PartitionFault fault(lab, "h1", ff::PartitionSpec::from("resource"));
      const std::int64_t t0 = now_ns();
      const auto id = steps.run(*ledger.ledger, fault, t0);
      std::this_thread::sleep_for(60ms);
      const std::int64_t t2 = now_ns();
      fault.heal();
      ledger.ledger->record_heal(id);
      std::this_thread::sleep_for(60ms);
      windows.emplace_back(t0, t2);
    }
    std::this_thread::sleep_for(20ms);
    log->stop = 1;
    const std::int64_t n = log->next_seq;
    for (const auto& [t0, t2] : windows) {
      std::int64_t first_drop = -1, last_drop = -1;
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t sent = log->sent_ns[i];
        if (sent < t0) continue;
        if (sent > t2 + 50'000'000) break;
        if (log->recv_ns[i] == 0) {
          if (first_drop < 0) first_drop = i;
          last_drop = i;
        }
      }
      if (first_drop < 0) throw std::runtime_error("no packet was dropped during a partition");
      effect.push_back(static_cast<double>(log->sent_ns[first_drop] - t0) / 1e6);
      if (last_drop + 1 < n) heal.push_back(static_cast<double>(log->sent_ns[last_drop + 1] - t2) / 1e6);
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  log->stop = 1;
  end_child(sender);
  end_child(receiver);
  ::munmap(mem, sizeof(PacketLog));
  lab.teardown();
  if (!error.empty()) throw std::runtime_error(error);
  return {{"effect_ms", summary(effect)}, {"heal_ms", summary(heal)}, {"packet_interval_ms", 0.2}, {"steps", steps.json()}};
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 10;
  nlohmann::json out;
  Ledger ledger;
  const std::vector<std::pair<std::string, std::function<nlohmann::json(Ledger&, int)>>> kinds = {
      {"sigstop", time_sigstop}, {"cpu-throttle", time_throttle}, {"partition", time_partition}};
  for (const auto& [name, run] : kinds) {
    try {
      out[name] = run(ledger, reps);
    } catch (const std::exception& e) {
      out[name] = {{"error", e.what()}};
    }
  }
  std::cout << out.dump(2) << "\n";
  return 0;
}
