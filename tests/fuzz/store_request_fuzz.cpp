// Fuzz target: the reference store's request handling (resources/store/store_server.cpp): routing
// by method and path, the Fencing-Token / Fencecheck-Client / Fencecheck-Effect headers, bodies
// (chunks, counter values, effect ids), driven in process through StoreServer::handle() — the
// same routes and handlers a connection reaches once httplib has parsed the request — against a
// fresh FencedStore (per-key fencing) for every input, on an in-memory file system
// (tests/store/fault_fs.h, with no crash simulated: it never fails), which makes an input about
// ten times cheaper than a log on tmpfs (the flusher's fdatasync and the directory's creation).
//
// Input: up to 16 requests, separated by lines "%%". Each is "METHOD PATH" on its first line
// (PATH percent-decoded, as httplib hands it over), then header lines "Name: value" up to an empty
// line, then the body. Oracle, per request:
//   - no 500 (a handler threw or the store failed: its in-memory log cannot fail) and no 503;
//   - the status is one the contract lists (store_server.h), and every 4xx says why in JSON
//     {"error": "<non-empty>"}; every 200 except /healthz and /metrics is a JSON object;
//   - no key's high-water mark ever goes down, and a key never loses its mark;
//   - a write answered 200 accepted left its key's mark equal to the "high_water" it replied.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "fencecheck/resources/store.h"
#include "fencecheck/resources/store_server.h"
#include "../store/fault_fs.h"
#include "fuzz_support.h"

using fencecheck::fuzz::fuzz_fail;

namespace {

constexpr std::size_t kMaxRequests = 16;

std::vector<std::string_view> split_requests(std::string_view input) {
  std::vector<std::string_view> out;
  while (out.size() < kMaxRequests) {
    const auto cut = input.find("\n%%\n");
    out.push_back(input.substr(0, cut));
    if (cut == std::string_view::npos) break;
    input.remove_prefix(cut + 4);
  }
  return out;
}

fencecheck::StoreHttpRequest parse_request(std::string_view text) {
  fencecheck::StoreHttpRequest r;
  auto line_end = text.find('\n');
  std::string_view first = text.substr(0, line_end);
  text = line_end == std::string_view::npos ? std::string_view() : text.substr(line_end + 1);
  const auto space = first.find(' ');
  r.method = std::string(first.substr(0, space));
  r.path = space == std::string_view::npos ? std::string() : std::string(first.substr(space + 1));
  while (!text.empty()) {
    line_end = text.find('\n');
    const std::string_view line = text.substr(0, line_end);
    text = line_end == std::string_view::npos ? std::string_view() : text.substr(line_end + 1);
    if (line.empty()) break;
    const auto colon = line.find(':');
    std::string_view value = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);  // as httplib strips it
    r.headers.emplace_back(std::string(line.substr(0, colon)), std::string(value));
  }
  r.body = std::string(text);
  return r;
}

void check_response(const fencecheck::StoreHttpRequest& req, const fencecheck::StoreHttpResponse& res,
                    const std::map<std::string, std::int64_t>& before, const std::map<std::string, std::int64_t>& after) {
  const std::string what = req.method + " " + req.path + " -> " + std::to_string(res.status) + " " + res.body;
  static const std::set<int> kKnown{200, 400, 404, 405, 409, 413};
  if (!kKnown.count(res.status)) fuzz_fail("status outside the contract: " + what);
  const bool plain = res.status == 200 && (req.path == "/healthz" || req.path == "/metrics");
  if (!plain && req.method != "HEAD") {
    const nlohmann::json j = nlohmann::json::parse(res.body, nullptr, false);
    if (!j.is_object()) fuzz_fail("a reply that is not a JSON object: " + what);
    if (res.status >= 400 && res.status != 409 &&
        (!j.contains("error") || !j["error"].is_string() || j["error"].get<std::string>().empty()))
      fuzz_fail("a refusal that does not say why: " + what);
    if (res.status == 200 && j.value("accepted", false)) {
      // The mark the reply cites is the key's mark now: find the key whose mark it is.
      const std::int64_t cited = j.value("high_water", std::int64_t{-1});
      bool found = false;
      for (const auto& [key, mark] : after) found = found || mark == cited;
      if (!found) fuzz_fail("an accepted write cites a mark no key has: " + what);
    }
  }
  for (const auto& [key, mark] : before) {
    const auto it = after.find(key);
    if (it == after.end()) fuzz_fail("key '" + key + "' lost its high-water mark " + std::to_string(mark) + " after " + what);
    if (it->second < mark)
      fuzz_fail("key '" + key + "''s high-water mark went down from " + std::to_string(mark) + " to " +
                std::to_string(it->second) + " after " + what);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);  // the store's own log lines are not findings
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  fencecheck::StoreOptions store_options;
  store_options.file_system =
      std::make_shared<fencecheck::testing::FaultFs>(fencecheck::testing::CrashMode::kDropUnsynced, 1);
  auto store = fencecheck::FencedStore::open("/fuzz-store", fencecheck::FencingMode::kPerKey, store_options);
  fencecheck::StoreServerOptions options;
  options.listen = false;
  options.max_body_bytes = 4096;  // small, so that the fuzzer reaches 413 too
  fencecheck::StoreServer server(*store, options);

  std::map<std::string, std::int64_t> marks = store->high_water();
  for (std::string_view text : split_requests(input)) {
    const fencecheck::StoreHttpRequest req = parse_request(text);
    const fencecheck::StoreHttpResponse res = server.handle(req);
    auto now = store->high_water();
    check_response(req, res, marks, now);
    marks = std::move(now);
  }
  return 0;
}
