// Resource kind "store": fencecheck-store, the reference fenced store (store_server.h), started by
// the harness on loopback (or the network lab's resource address) with the scenario's fencing
// mode. Fields: fencing (per-key | none | global | check-then-write; default per-key) and
// check_window (check-then-write only: how long the store waits between reading the key's mark and
// writing; whole milliseconds; default 200ms). Catalogue items 1-3 (docs/catalogue-plan.md).
// The side-effect guard (catalogue items 8, 11) comes from the run context (the scenario's
// job.effect) and is passed as --effect-mode: the store's design, fixed at start.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "fencecheck/process/child_process.h"
#include "fencecheck/resources/store_client.h"
#include "../kinds.h"

namespace fencecheck::resources::detail {
namespace {

using process::ChildProcess;
using process::ChildSpec;

constexpr std::chrono::milliseconds kDefaultCheckWindow{200};
const std::vector<std::string_view> kModes{"per-key", "none", "global", "check-then-write"};

/// The store as one run's resource. The child is forked by the calling (main) thread.
class StoreInstance final : public ResourceInstance {
 public:
  StoreInstance(nlohmann::json config, ResourceRunContext ctx) : config_(std::move(config)), ctx_(std::move(ctx)) {
    listen_ = ctx_.host + ":" + std::to_string(ctx_.port);
    start();
    listen_ = address_;  // a restart binds the same address (clients keep the URL they were given)
  }
  ~StoreInstance() override { stop(); }

  nlohmann::json endpoint() const override { return {{"kind", "store"}, {"url", url_}}; }
  std::string describe() const override {
    const std::string effects = ctx_.effect_mode == EffectMode::kFenced
                                    ? ""
                                    : ", effects " + std::string(effect_mode_name(ctx_.effect_mode));
    return "fencecheck-store (" + config_.value("fencing", "per-key") + effects + ") at " + url_;
  }
  bool healthy() override { return StoreClient(url_, std::chrono::milliseconds(2000)).healthy(); }
  ReadBack readback() override { return StoreClient(url_).readback(); }
  ReadBack readback_into(const ReadBackLogSink& log) override { return StoreClient(url_).readback_into(log); }
  void stop() override {
    if (!proc_) return;
    proc_->terminate();
    proc_.reset();
  }
  bool restart() override {
    stop();
    start();
    return true;
  }

 private:
  void start() {
    ChildSpec spec;
    spec.name = "store";
    spec.exe = ctx_.bin_dir / "fencecheck-store";
    spec.stderr_log = ctx_.log_path ? ctx_.log_path("store") : std::filesystem::path("/dev/null");
    spec.args = {"--listen", listen_, "--data-dir", (ctx_.run_dir / "store-data").string(), "--fencing",
                 config_.value("fencing", "per-key"), "--effect-mode", std::string(effect_mode_name(ctx_.effect_mode))};
    if (config_.contains("check_window")) {
      const std::string w = config_["check_window"].get<std::string>();  // "<n>ms"
      spec.args.insert(spec.args.end(), {"--check-window-ms", w.substr(0, w.size() - 2)});
    }
    std::mutex mu;
    std::condition_variable cv;
    std::string address;
    bool closed = false;
    proc_ = std::make_unique<ChildProcess>(spec, [&, first = true](std::string_view line, std::int64_t, bool eof) mutable {
      if (!first) return;  // after the first line the store says nothing on stdout that we need
      std::lock_guard lock(mu);
      if (eof) {
        closed = true;
      } else {
        first = false;
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_object() && j.contains("listening") && j["listening"].is_string())
          address = j["listening"].get<std::string>();
        else
          closed = true;
      }
      cv.notify_all();
    });
    std::unique_lock lock(mu);
    if (!cv.wait_for(lock, std::chrono::seconds(15), [&] { return !address.empty() || closed; }) || address.empty()) {
      lock.unlock();
      proc_.reset();  // joins the reader before the locals its callback uses go away
      throw std::runtime_error("fencecheck-store did not report its address; see " + spec.stderr_log.string());
    }
    lock.unlock();
    address_ = address;
    url_ = "http://" + address;
  }

  nlohmann::json config_;
  ResourceRunContext ctx_;
  std::string listen_;
  std::string address_;
  std::string url_;
  std::unique_ptr<ChildProcess> proc_;
};

class StoreKind final : public ResourceKind {
 public:
  std::string_view name() const override { return "store"; }
  std::vector<std::string_view> fields() const override { return {"fencing", "check_window"}; }

  nlohmann::json parse(const KindFields& f) const override {
    nlohmann::json out = nlohmann::json::object();
    const std::string mode = f.has("fencing") ? std::string(kModes[f.choice("fencing", kModes, "fencing mode")]) : "per-key";
    out["fencing"] = mode;
    if (mode == "check-then-write") {
      auto window = std::chrono::duration_cast<std::chrono::nanoseconds>(kDefaultCheckWindow);
      if (f.has("check_window")) {
        window = f.duration("check_window");
        if (window.count() % 1'000'000 != 0)
          f.fail("check_window", "\"" + f.string("check_window") +
                                     "\" is not a whole number of milliseconds (the store's check window has "
                                     "millisecond resolution)");
      }
      out["check_window"] = std::to_string(window.count() / 1'000'000) + "ms";
    } else if (f.has("check_window")) {
      f.fail("check_window", "check_window is only for fencing check-then-write (fencing is " + mode + ")");
    }
    return out;
  }
  bool embedded(const nlohmann::json&) const override { return true; }
  Evidence evidence(const nlohmann::json&) const override { return {}; }  // everything: the store logs it all
  std::string design(const nlohmann::json& config) const override { return config.value("fencing", "per-key"); }
  std::unique_ptr<ResourceInstance> open(const nlohmann::json& config, const ResourceRunContext& ctx) const override {
    if (!std::filesystem::exists(ctx.bin_dir / "fencecheck-store"))
      throw ResourceUnavailable("fencecheck-store not found in " + ctx.bin_dir.string() +
                                " (it is built beside fencecheck; FENCECHECK_BIN_DIR or --bin-dir point elsewhere)");
    return std::make_unique<StoreInstance>(config, ctx);
  }
  std::vector<std::string> programs(const nlohmann::json&) const override { return {"fencecheck-store"}; }
  std::vector<std::pair<std::string, std::string>> worker_env(const nlohmann::json& endpoint) const override {
    return {{"FENCECHECK_RESOURCE_URL", endpoint.value("url", "")}};
  }
  std::unique_ptr<ResourceWriter> make_writer(const nlohmann::json& endpoint, std::chrono::milliseconds timeout) const override {
    return fencecheck::detail::make_store_writer(endpoint, timeout);
  }
};

}  // namespace

const ResourceKind& store_kind() {
  static const StoreKind kind;
  return kind;
}

}  // namespace fencecheck::resources::detail
