// fencecheck — the run's history: every event (worker, harness, lock service) in the order the
// orchestrator received it. An event's index in the history is its id: anomalies and figures cite
// evidence by index. Saved in the run directory as JSON lines (history.jsonl), one
// fencecheck::Event per line (fencecheck/proto/event.h).
#pragma once

#include <cstddef>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "fencecheck/proto/event.h"

namespace fencecheck::harness {

/// Events in receive order; index = event id. A value type, not synchronised: the orchestrator
/// appends under its own lock and hands the finished history to the checkers by const reference.
struct History {
  std::vector<Event> events;

  /// Appends and returns the new event's index.
  std::size_t add(Event e) {
    events.push_back(std::move(e));
    return events.size() - 1;
  }
  void push_back(Event e) { events.push_back(std::move(e)); }
  [[nodiscard]] std::size_t size() const { return events.size(); }
  [[nodiscard]] bool empty() const { return events.empty(); }
  [[nodiscard]] const Event& operator[](std::size_t i) const { return events[i]; }
  [[nodiscard]] const Event& at(std::size_t i) const { return events.at(i); }
  [[nodiscard]] auto begin() const { return events.begin(); }
  [[nodiscard]] auto end() const { return events.end(); }
};

/// A history file that cannot be read or parsed. what() is "file:line: message" (or
/// "file: message" when line is 0, e.g. the file cannot be opened).
class HistoryError : public std::runtime_error {
 public:
  HistoryError(std::string file, std::size_t line, std::string message);
  [[nodiscard]] const std::string& file() const noexcept { return file_; }
  [[nodiscard]] std::size_t line() const noexcept { return line_; }
  [[nodiscard]] const std::string& message() const noexcept { return message_; }

 private:
  std::string file_;
  std::size_t line_ = 0;
  std::string message_;
};

/// Reads a JSON-lines history: one event per line, blank lines skipped (they do not shift the
/// indices of later events). Throws HistoryError naming the file and 1-based line of the first
/// bad line, and why (not JSON, unknown kind, a field of the wrong type).
[[nodiscard]] History load_history_jsonl(const std::filesystem::path& path);

/// Writes one compact JSON event per line ('\n'-terminated), replacing the file. Throws
/// HistoryError when the file cannot be written.
void save_history_jsonl(const std::filesystem::path& path, const History& history);

}  // namespace fencecheck::harness
