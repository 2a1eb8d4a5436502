// sweep_leftovers(): removes only what a dead harness's ledger names exactly.
#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>

#include "child.h"
#include "fake_cgroup.h"
#include <nlohmann/json.hpp>

#include "fencecheck/faults/sweep.h"

using namespace fencecheck::faults;
using Argv = std::vector<std::string>;
using Calls = std::vector<Argv>;

namespace {
nlohmann::json lab_entry(int id, const std::string& run, std::vector<std::string> namespaces, int harness_pid,
                         std::uint64_t ticks) {
  return {{"op", "inject"}, {"id", id}, {"kind", "netns-lab"}, {"run_id", run}, {"namespaces", namespaces},
          {"harness_pid", harness_pid}, {"harness_start_ticks", ticks}};
}
}  // namespace

TEST(SweepLeftovers, RemovesOnlyWhatADeadHarnessNamed) {
  fctest::FakeCgroupTree t("sweep");
  t.make_v1();
  fctest::SleepChild c;
  // Leftover cgroups: one named by the dead run's ledger, one by nobody, one by the live run.
  t.file("cgroup/cpu/fencecheck-r1-w1/tasks", std::to_string(c.pid()) + "\n");
  t.file("cgroup/cpu/fencecheck-r1-w1/cgroup.procs", std::to_string(c.pid()) + "\n");
  t.file("cgroup/freezer/fencecheck-r1-stray/tasks", "");
  t.file("cgroup/cpu/fencecheck-r2-w1/tasks", "");
  t.add_process(c.pid(), {c.pid()}, "1:cpu:/fencecheck-r1-w1\n");  // with its stat: the identity cleanup checks

  const auto dead = t.dir() / "dead.ledger", live = t.dir() / "live.ledger";
  {
    std::ofstream out(dead);
    out << lab_entry(1, "r1", {"fc-r1-hub", "fc-r1-w1"}, 999999999, 1).dump() << "\n";
    out << nlohmann::json{{"op", "inject"}, {"id", 2}, {"kind", "cpu-throttle"}, {"run_id", "r1"}, {"target", "w1"},
                          {"pid", c.pid()}, {"start_ticks", ProcessRef::of(c.pid())->start_ticks},
                          {"cgroup_version", 1}, {"mount", (t.root() / "cpu").string()},
                          {"cgroup_dir", (t.root() / "cpu/fencecheck-r1-w1").string()}, {"original", "/"},
                          {"harness_pid", 999999999}, {"harness_start_ticks", 1}}
               .dump()
        << "\n";
    out << R"({"op":"heal","id":2})" << "\n";  // its heal was recorded, but the cgroup stayed
  }
  auto self = ProcessRef::of(::getpid());
  std::ofstream(live) << lab_entry(1, "r2", {"fc-r2-hub"}, self->pid, self->start_ticks).dump() << "\n";

  RecordingCommandRunner r([](const Argv& a) -> std::string {
    if (a == Argv{"ip", "netns", "list"}) return "fc-r1-hub (id: 3)\nfc-r1-w1 (id: 4)\nfc-r2-hub (id: 5)\nfc-r9-hub\nprod\n";
    return "";
  });
  SweepOptions o;
  o.ledgers = {dead, live};
  o.fs = t.fs();
  o.runner = &r;

  o.dry_run = true;
  auto said = sweep_leftovers("", o);
  EXPECT_EQ(r.calls(), (Calls{{"ip", "netns", "list"}}));
  EXPECT_TRUE(t.exists("cgroup/cpu/fencecheck-r1-w1"));
  r.clear();

  o.dry_run = false;
  said = sweep_leftovers("", o);
  EXPECT_EQ(r.calls(), (Calls{{"ip", "netns", "list"}, {"ip", "netns", "del", "fc-r1-hub"}, {"ip", "netns", "del", "fc-r1-w1"}}));
  std::string all;
  for (const auto& s : said) all += s + "\n";
  EXPECT_NE(all.find("left netns fc-r2-hub alone: its harness is still running"), std::string::npos) << all;
  EXPECT_NE(all.find("left netns fc-r9-hub alone: no ledger names it"), std::string::npos) << all;
  EXPECT_EQ(all.find("prod"), std::string::npos) << all;  // not a fencecheck name: not even considered
  EXPECT_NE(all.find("left cgroup " + (t.root() / "freezer/fencecheck-r1-stray").string() + " alone: no ledger names it"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("left cgroup " + (t.root() / "cpu/fencecheck-r2-w1").string() + " alone: no ledger names it"),
            std::string::npos)
      << all;
  EXPECT_FALSE(t.exists("cgroup/cpu/fencecheck-r1-w1"));
  EXPECT_EQ(t.read("cgroup/cpu/cgroup.procs"), std::to_string(c.pid()));  // moved back to its original
  EXPECT_TRUE(t.exists("cgroup/freezer/fencecheck-r1-stray"));
  EXPECT_TRUE(t.exists("cgroup/cpu/fencecheck-r2-w1"));
}

TEST(SweepLeftovers, ThePrefixNarrowsTheSearch) {
  fctest::FakeCgroupTree t("sweep-prefix");
  t.make_v2();
  t.file("cgroup/fencecheck-a1-w1/cgroup.procs", "");
  t.file("cgroup/fencecheck-b1-w1/cgroup.procs", "");
  RecordingCommandRunner r([](const Argv& a) -> std::string {
    return a == Argv{"ip", "netns", "list"} ? "fc-a1-hub\nfc-b1-hub\n" : "";
  });
  SweepOptions o;
  o.fs = t.fs();
  o.runner = &r;
  auto said = sweep_leftovers("b", o);
  ASSERT_EQ(said.size(), 2u);
  EXPECT_EQ(said[0], "left netns fc-b1-hub alone: no ledger names it");
  EXPECT_EQ(said[1], "left cgroup " + (t.root() / "fencecheck-b1-w1").string() + " alone: no ledger names it");
}
