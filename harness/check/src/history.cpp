#include "fencecheck/harness/history.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

namespace fencecheck::harness {

namespace {
std::string located(const std::string& file, std::size_t line, const std::string& message) {
  return line == 0 ? file + ": " + message : file + ":" + std::to_string(line) + ": " + message;
}
}  // namespace

HistoryError::HistoryError(std::string file, std::size_t line, std::string message)
    : std::runtime_error(located(file, line, message)),
      file_(std::move(file)),
      line_(line),
      message_(std::move(message)) {}

History load_history_jsonl(const std::filesystem::path& path) {
  const std::string file = path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) throw HistoryError(file, 0, std::string("cannot open the history: ") + std::strerror(errno));
  History h;
  std::string line;
  std::size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    try {
      h.add(event_from_json_line(line));
    } catch (const std::exception& e) {
      throw HistoryError(file, number, e.what());
    }
  }
  if (in.bad()) throw HistoryError(file, number, "read error");
  return h;
}

void save_history_jsonl(const std::filesystem::path& path, const History& history) {
  const std::string file = path.string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw HistoryError(file, 0, std::string("cannot write the history: ") + std::strerror(errno));
  for (const Event& e : history) out << to_json_line(e) << '\n';
  out.flush();
  if (!out) throw HistoryError(file, 0, "write error");
}

}  // namespace fencecheck::harness
