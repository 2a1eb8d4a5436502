// report.html in a real browser. `fencecheck report` re-judges two stored real runs of the smoke
// suite (tests/report/fixtures/, copied from runs of scenarios/smoke: the fenced one and its
// unfenced control), then headless Chromium (Debian's `chromium`) opens each report.html; the DOM
// it dumps after layout must show the lanes and marks those runs must show, and a screenshot must
// be a real picture. Chromium runs with a fresh profile, no network services, no GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <boost/process.hpp>
#include <nlohmann/json.hpp>

#include "dom_util.h"

namespace bp = boost::process;
using namespace fctest;

namespace {

struct Outcome {
  int code = -1;
  std::string out, err;
};

/// Runs a program to completion (bounded: a hung browser fails the test instead of hanging it).
Outcome run(const fs::path& exe, const std::vector<std::string>& args, const fs::path& work) {
  const fs::path out = work / "stdout.txt", err = work / "stderr.txt";
  bp::child c(exe.string(), bp::args(args), bp::std_out > out.string(), bp::std_err > err.string(), bp::std_in < bp::null,
              bp::start_dir = work.string());
  if (!c.wait_for(std::chrono::seconds(120))) {
    c.terminate();
    return {-1, slurp(out), "timed out: " + slurp(err)};
  }
  return {c.exit_code(), slurp(out), slurp(err)};
}

fs::path find_chromium() {
  if (const char* env = std::getenv("FENCECHECK_CHROMIUM"); env && *env) return env;
  for (const char* name : {"chromium", "chromium-browser"}) {
    const auto p = bp::search_path(name);
    if (!p.empty()) return fs::path(p.string());
  }
  return {};
}

std::vector<std::string> chromium_flags(const fs::path& profile) {
  return {"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
          "--disable-sync", "--no-first-run", "--disable-dev-shm-usage", "--user-data-dir=" + profile.string()};
}

struct Rendered {
  fs::path dir;
  std::string dom;
};

class Browser : public ::testing::Test {
 protected:
  void SetUp() override {
    chromium_ = find_chromium();
    if (chromium_.empty()) GTEST_SKIP() << "chromium is not installed (scripts/install-deps.sh installs it)";
  }

  /// `fencecheck report` on a copy of the fixture, then Chromium's DOM of its report.html.
  Rendered render(const std::string& fixture) {
    Rendered r;
    r.dir = copy_fixture(fixture, "browser-" + fixture);
    const fs::path work = r.dir.parent_path();
    const Outcome rep = run(FENCECHECK_BIN, {"report", r.dir.string()}, work);
    EXPECT_EQ(rep.code, 0) << rep.out << rep.err;
    EXPECT_NE(rep.out.find(fixture), std::string::npos) << rep.out;
    auto args = chromium_flags(work / "profile-dom");
    args.push_back("--dump-dom");
    args.push_back("file://" + fs::absolute(r.dir / "report.html").string());
    const Outcome dom = run(chromium_, args, work);
    EXPECT_EQ(dom.code, 0) << dom.err;
    r.dom = dom.out;
    return r;
  }

  fs::path chromium_;
};

std::vector<std::string> lanes_of(const std::string& dom) {
  std::vector<std::string> lanes;
  for (auto& t : start_tags(dom, "g"))
    if (has_class(t, "lane"))
      lanes.push_back(t["data-lane"] + (t.count("data-worker") ? ":" + t["data-worker"] : "") +
                      (t.count("data-key") ? ":" + t["data-key"] : ""));
  return lanes;
}

/// The browser laid the picture out (the page's script ran after layout) and no two labels overlap.
void expect_laid_out(const std::string& dom) {
  auto svgs = start_tags(dom, "svg");
  ASSERT_FALSE(svgs.empty());
  auto& svg = svgs.front();
  EXPECT_EQ(svg["id"], "timeline");
  EXPECT_EQ(svg["data-rendered-width"], "1200");
  EXPECT_GT(std::stoi(svg["data-rendered-height"]), 500);
  EXPECT_EQ(svg["data-label-overlaps"], "0");
}

/// A smoke run's picture: laid out, and a lane per worker, one for the lock service, one for
/// faults, the key's high-water mark.
void expect_smoke_picture(const std::string& dom) {
  ASSERT_FALSE(dom.empty());
  expect_laid_out(dom);
  EXPECT_EQ(lanes_of(dom), (std::vector<std::string>{"faults", "lock", "worker:w1", "worker:w2", "high-water:ledger"}));
}

TEST_F(Browser, TheFencedRunShowsPauseExpiryTakeoverAndTheBouncedWrite) {
  const Rendered r = render("sigstop-past-lease");
  const std::string& dom = r.dom;
  ASSERT_NO_FATAL_FAILURE(expect_smoke_picture(dom));

  // The fault: w1 SIGSTOPped for 6 s.
  auto fault = marks(dom, "mark fault", {{"data-fault", "sigstop"}, {"data-target", "w1"}});
  ASSERT_EQ(fault.size(), 1u);
  EXPECT_EQ(fault[0]["data-duration-s"], "6.00");

  // w1 held token 2; the lock service deleted its key (lease expired) while it still believed it
  // held the lock; w2 (queued with token 3) took over; w1 came back with token 6 later.
  auto w1_token2 = marks(dom, "mark holding", {{"data-worker", "w1"}, {"data-token", "2"}});
  ASSERT_EQ(w1_token2.size(), 2u);
  EXPECT_TRUE(has_class(w1_token2[1], "stale"));
  EXPECT_EQ(marks(dom, "mark holding", {{"data-worker", "w2"}, {"data-token", "3"}}).size(), 1u);
  EXPECT_EQ(marks(dom, "mark holding", {{"data-worker", "w1"}, {"data-token", "6"}}).size(), 1u);
  EXPECT_EQ(marks(dom, "mark grant queued", {{"data-worker", "w2"}, {"data-token", "3"}}).size(), 1u);
  auto expiry = marks(dom, "mark delete expiry");
  ASSERT_EQ(expiry.size(), 1u);
  EXPECT_EQ(expiry[0]["data-worker"], "w1");
  EXPECT_EQ(expiry[0]["data-token"], "2");

  // The pause w1 measured itself, shaded with its length.
  auto pause = marks(dom, "mark pause", {{"data-worker", "w1"}});
  ASSERT_EQ(pause.size(), 1u);
  EXPECT_EQ(pause[0]["data-duration-s"], "6.00");
  EXPECT_EQ(pause[0]["data-token"], "2");
  EXPECT_NE(element_text(dom, pause[0]["id"]).find("paused 6.00 s"), std::string::npos);

  // w1's write with token 2 bounced off high-water 3, in its lane and under the high-water line.
  auto rejected = marks(dom, "mark write rejected");
  ASSERT_EQ(rejected.size(), 1u);
  EXPECT_EQ(rejected[0]["data-worker"], "w1");
  EXPECT_EQ(rejected[0]["data-token"], "2");
  EXPECT_EQ(rejected[0]["data-high-water"], "3");
  const std::string label = element_text(dom, rejected[0]["id"]);
  EXPECT_NE(label.find("token 2 rejected (high-water 3)"), std::string::npos) << label;
  // The label was drawn with a real font: the browser measured its width.
  const auto rendered = start_tags(label, "text");
  ASSERT_FALSE(rendered.empty());
  EXPECT_GT(std::stoi(rendered.back().at("data-rendered-width")), 100);
  EXPECT_EQ(marks(dom, "mark hw-point rejected", {{"data-token", "2"}, {"data-high-water", "3"}}).size(), 1u);
  std::vector<std::string> steps;
  for (auto& t : marks(dom, "mark hw-step", {{"data-key", "ledger"}})) steps.push_back(t["data-token"]);
  EXPECT_EQ(steps, (std::vector<std::string>{"2", "3", "6"}));

  // The headline says it at a glance: w1 paused 6 s holding token 2, w2 took token 3, w1's
  // write with token 2 bounced off high-water 3.
  auto head = headline_items(dom);
  ASSERT_EQ(head.size(), 1u);
  EXPECT_EQ(headline_facts(head[0]), "w1 token 2 paused 6.00 s; w2 took token 3; old token's write rejected");
  EXPECT_NE(dom.find("w1's write with token 2 bounced off high-water 3</a>"), std::string::npos);
  // ... and in the picture: a cue line across the lanes at the expiry and at the bounce, labelled
  // above the time axis (the labels are among those the page checked for overlaps).
  std::vector<std::string> cues;
  for (auto& t : marks(dom, "cue")) cues.push_back(t["class"] + " " + t["data-worker"] + " " + t["data-token"]);
  EXPECT_EQ(cues, (std::vector<std::string>{"cue expiry w1 2", "cue rejected w1 2"}));
  EXPECT_NE(dom.find(">w1's lease expired (token 2)</text>"), std::string::npos);

  // The story, in words, and the verdict: no anomaly, expectation met.
  EXPECT_NE(dom.find("w1 measured a pause of 6.00 s while holding token 2"), std::string::npos);
  EXPECT_NE(dom.find("w2 acquired the lock: token 3"), std::string::npos);
  EXPECT_NE(dom.find("data-verdict=\"valid\""), std::string::npos);
  EXPECT_NE(dom.find("data-met=\"true\""), std::string::npos);
  EXPECT_TRUE(marks(dom, "anomaly").empty());
}

TEST_F(Browser, TheUnfencedRunLinksEachAnomalyToItsEvidence) {
  const Rendered r = render("sigstop-past-lease-unfenced");
  const std::string& dom = r.dom;
  ASSERT_NO_FATAL_FAILURE(expect_smoke_picture(dom));

  const auto verdict = nlohmann::json::parse(slurp(r.dir / "verdict.json"));
  std::vector<nlohmann::json> anomalies;
  for (const auto& c : verdict["checkers"])
    for (const auto& a : c["anomalies"]) anomalies.push_back(a);
  ASSERT_EQ(anomalies.size(), 2u);  // interleaved-segment and stale-write-accepted

  std::vector<Attrs> sections;
  for (auto& t : start_tags(dom, "section"))
    if (has_class(t, "anomaly")) sections.push_back(t);
  ASSERT_EQ(sections.size(), anomalies.size());
  std::size_t linked = 0;
  for (std::size_t k = 0; k < sections.size(); ++k) {
    EXPECT_EQ(sections[k]["id"], "anomaly-" + std::to_string(k + 1));
    EXPECT_EQ(sections[k]["data-anomaly"], anomalies[k]["name"].get<std::string>());
    const auto from = dom.find("id=\"anomaly-" + std::to_string(k + 1) + "\"");
    const std::string section = dom.substr(from, dom.find("</section>", from) - from);
    for (const auto& idx : anomalies[k]["evidence"]) {
      const std::string ev = "ev-" + std::to_string(idx.get<std::size_t>());
      // The link, its target row, and (for a write) the highlighted mark in the picture.
      EXPECT_NE(section.find("href=\"#" + ev + "\""), std::string::npos) << ev;
      EXPECT_NE(dom.find("id=\"" + ev + "\""), std::string::npos) << ev;
      const std::string mark = "mark-" + std::to_string(idx.get<std::size_t>());
      auto drawn = marks(dom, "mark write", {{"id", mark}});
      if (!drawn.empty()) {
        EXPECT_TRUE(has_class(drawn[0], "evidence")) << mark;
        ++linked;
      }
    }
  }
  EXPECT_GE(linked, 4u);  // at least the interleaved segment's writes, from both tokens

  // Every write w1 made with its stale token after resuming was accepted below the high-water
  // mark 3: as many as the stale-write-accepted anomaly cites from the store's log with token 2
  // (it also cites the higher-token write they went under).
  const auto rb = nlohmann::json::parse(slurp(r.dir / "readback.json"));
  std::size_t stale_seqs = 0;
  for (const auto& a : anomalies)
    if (a["name"] == "stale-write-accepted")
      for (const auto& seq : a["readback_seqs"])
        for (const auto& w : rb["log"])
          if (w["seq"] == seq && w["token"] == 2 && w["client"] == "w1") ++stale_seqs;
  EXPECT_EQ(stale_seqs, 10u);
  EXPECT_EQ(marks(dom, "mark write accepted-stale", {{"data-worker", "w1"}, {"data-token", "2"}}).size(), stale_seqs);
  EXPECT_TRUE(marks(dom, "mark write rejected").empty());
  auto head = headline_items(dom);
  ASSERT_EQ(head.size(), 1u);
  EXPECT_EQ(headline_facts(head[0]), "w1 token 2 paused 6.00 s; w2 took token 3; old token's write accepted");
  EXPECT_NE(dom.find("w1's write with token 2 was ACCEPTED below high-water 3</a>"), std::string::npos);
  EXPECT_NE(dom.find("data-verdict=\"invalid\""), std::string::npos);
  EXPECT_NE(dom.find("data-met=\"true\""), std::string::npos);  // the control group showed the damage
}

TEST_F(Browser, TheScreenshotIsARealPicture) {
  const fs::path dir = copy_fixture("sigstop-past-lease", "browser-screenshot");
  const fs::path work = dir.parent_path();
  ASSERT_EQ(run(FENCECHECK_BIN, {"report", dir.string()}, work).code, 0);
  const fs::path png = work / "report.png";
  auto args = chromium_flags(work / "profile-shot");
  for (const std::string& a : std::vector<std::string>{"--hide-scrollbars", "--window-size=1280,2200",
                                                      "--screenshot=" + png.string(),
                                                      "file://" + fs::absolute(dir / "report.html").string()})
    args.push_back(a);
  const Outcome shot = run(chromium_, args, work);
  ASSERT_EQ(shot.code, 0) << shot.err;
  const std::string bytes = slurp(png);
  ASSERT_GT(bytes.size(), 24u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  auto be32 = [&](std::size_t at) {
    return (static_cast<unsigned>(static_cast<unsigned char>(bytes[at])) << 24) |
           (static_cast<unsigned>(static_cast<unsigned char>(bytes[at + 1])) << 16) |
           (static_cast<unsigned>(static_cast<unsigned char>(bytes[at + 2])) << 8) |
           static_cast<unsigned>(static_cast<unsigned char>(bytes[at + 3]));
  };
  EXPECT_EQ(be32(16), 1280u);  // IHDR width
  EXPECT_EQ(be32(20), 2200u);  // IHDR height
  // Text, bars and colour compress far worse than a blank page (~10 KB at this size).
  EXPECT_GT(bytes.size(), 100'000u);
}

}  // namespace
