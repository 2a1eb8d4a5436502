#include "fencecheck/harness/history.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "fencecheck/process/write_all.h"

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

namespace {

bool is_zst(const std::filesystem::path& p) { return p.extension() == ".zst"; }

/// A plain history's path as it is on disk: itself, else its ".zst" sibling when only that
/// exists, else itself (the name a "missing" error should give).
std::filesystem::path existing_form(const std::filesystem::path& plain) {
  std::error_code ec;
  if (std::filesystem::exists(plain, ec)) return plain;
  auto zst = plain;
  zst += ".zst";
  return std::filesystem::exists(zst, ec) ? zst : plain;
}

/// An open file descriptor, closed at the end of its scope.
class Fd {
 public:
  Fd(const std::filesystem::path& p, int flags, mode_t mode = 0) : fd_(::open(p.c_str(), flags | O_CLOEXEC, mode)) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  [[nodiscard]] int get() const { return fd_; }
  [[nodiscard]] bool ok() const { return fd_ >= 0; }
  /// close(2) with its result (a delayed write error shows here).
  bool close() {
    const int fd = std::exchange(fd_, -1);
    return fd < 0 || ::close(fd) == 0;
  }

 private:
  int fd_;
};

/// read(2) until `n` bytes or the end; EINTR retried. -1 on error (errno set).
ssize_t read_some(int fd, char* buf, std::size_t n) {
  while (true) {
    const ssize_t r = ::read(fd, buf, n);
    if (r >= 0 || errno != EINTR) return r;
  }
}

constexpr std::size_t kBuffer = 128 * 1024;

/// Splits bytes into lines, handing each complete one to fn. Every line handed over is followed
/// by kLinePadding readable bytes (event_from_padded_line's need): the bytes fed must be, and a line
/// carried over from one piece to the next is padded with spaces in its own string.
class LineSplitter {
 public:
  explicit LineSplitter(const std::function<void(std::string_view, std::size_t)>& fn) : fn_(fn) {}
  void feed(std::string_view bytes) {
    while (!bytes.empty()) {
      const auto nl = bytes.find('\n');
      if (nl == std::string_view::npos) {
        pending_.append(bytes);
        return;
      }
      if (pending_.empty()) {
        emit(bytes.substr(0, nl));
      } else {
        pending_.append(bytes.substr(0, nl));
        emit(pending_);
        pending_.clear();
      }
      bytes.remove_prefix(nl + 1);
    }
  }
  /// The last line, when the file does not end with '\n'.
  void finish() {
    if (!pending_.empty()) emit(pending_);
    pending_.clear();
  }
  [[nodiscard]] std::size_t lines() const { return number_; }

 private:
  /// A carried-over line: padded with spaces in place (the caller clears it afterwards).
  void emit(std::string& line) {
    const std::size_t n = line.size();
    line.append(kLinePadding, ' ');
    emit(std::string_view(line.data(), n));
  }
  void emit(std::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    fn_(line, ++number_);
  }
  const std::function<void(std::string_view, std::size_t)>& fn_;
  std::string pending_;
  std::size_t number_ = 0;
};

struct DStreamFree {
  void operator()(ZSTD_DStream* d) const { ZSTD_freeDStream(d); }
};
struct CCtxFree {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};

}  // namespace

std::filesystem::path history_file(const std::filesystem::path& run_dir) { return existing_form(run_dir / kHistoryFile); }

void for_each_history_line(const std::filesystem::path& given,
                           const std::function<void(std::string_view line, std::size_t number)>& fn) {
  const std::filesystem::path path = is_zst(given) ? given : existing_form(given);
  const std::string file = path.string();
  Fd fd(path, O_RDONLY);
  if (!fd.ok()) throw HistoryError(file, 0, std::string("cannot open the history: ") + std::strerror(errno));
  LineSplitter lines(fn);
  // Both buffers have kLinePadding bytes past what is read into them (LineSplitter's promise).
  std::vector<char> in(kBuffer + kLinePadding, ' ');
  // Hands each piece read from the file to `consume`, to the end.
  const auto read_all = [&](const std::function<void(std::string_view)>& consume) {
    while (true) {
      const ssize_t n = read_some(fd.get(), in.data(), kBuffer);
      if (n < 0) throw HistoryError(file, lines.lines(), std::string("read error: ") + std::strerror(errno));
      if (n == 0) return;
      consume(std::string_view(in.data(), static_cast<std::size_t>(n)));
    }
  };
  if (!is_zst(path)) {
    read_all([&](std::string_view piece) { lines.feed(piece); });
    lines.finish();
    return;
  }
  std::unique_ptr<ZSTD_DStream, DStreamFree> ds(ZSTD_createDStream());
  if (!ds) throw HistoryError(file, 0, "zstd: out of memory");
  const std::size_t out_size = ZSTD_DStreamOutSize();
  std::vector<char> out(out_size + kLinePadding, ' ');
  std::size_t last = 0;  // ZSTD_decompressStream's last hint: 0 once a frame is complete
  bool any = false;
  read_all([&](std::string_view piece) {
    any = true;
    ZSTD_inBuffer ib{piece.data(), piece.size(), 0};
    while (ib.pos < ib.size) {
      ZSTD_outBuffer ob{out.data(), out_size, 0};
      last = ZSTD_decompressStream(ds.get(), &ob, &ib);
      if (ZSTD_isError(last))
        throw HistoryError(file, lines.lines(),
                           std::string("the compressed history is damaged: ") + ZSTD_getErrorName(last));
      lines.feed(std::string_view(out.data(), ob.pos));
    }
  });
  // The input is consumed; the decoder may still hold output of the last frame.
  while (any && last != 0) {
    ZSTD_inBuffer ib{nullptr, 0, 0};
    ZSTD_outBuffer ob{out.data(), out_size, 0};
    last = ZSTD_decompressStream(ds.get(), &ob, &ib);
    if (ZSTD_isError(last))
      throw HistoryError(file, lines.lines(), std::string("the compressed history is damaged: ") + ZSTD_getErrorName(last));
    lines.feed(std::string_view(out.data(), ob.pos));
    if (ob.pos == 0 && last != 0)
      throw HistoryError(file, lines.lines(), "the compressed history is truncated: it ends in the middle of a zstd frame");
  }
  lines.finish();
}

std::size_t for_each_history_event_if(const std::filesystem::path& path,
                                      const std::function<bool(std::size_t index, std::string_view line)>& wanted,
                                      const std::function<void(std::size_t index, Event&& event)>& fn) {
  const std::string file = path.string();
  std::size_t index = 0, not_plain = 0;
  Event e;  // one Event for every line: its strings keep their capacity
  for_each_history_line(path, [&](std::string_view line, std::size_t number) {
    // Blank: nothing but spaces and tabs (a writer's line starts with '{').
    if (line.empty() || ((line[0] == ' ' || line[0] == '\t') && line.find_first_not_of(" \t") == std::string_view::npos))
      return;
    const std::size_t at = index++;
    if (!wanted(at, line)) return;
    try {
      if (!event_from_padded_line(line, e)) ++not_plain;  // for_each_history_line's lines are padded (LineSplitter)
    } catch (const std::exception& err) {
      throw HistoryError(file, number, err.what());
    }
    fn(at, std::move(e));
  });
  return not_plain;
}

namespace {
bool json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/// The letters of history lines, most common first (a bench history's keys and values):
/// find_quoted looks for a name's least common letter, which in most lines occurs once or twice.
constexpr std::string_view kCommonLetters = "kensoctri_luwdhgyamvqjbfp";
/// Each byte's place in kCommonLetters (a letter not in it: kCommonLetters.size(), the rarest).
constexpr auto kLetterRank = [] {
  std::array<std::uint8_t, 256> rank{};
  rank.fill(static_cast<std::uint8_t>(kCommonLetters.size()));
  for (std::size_t i = 0; i < kCommonLetters.size(); ++i) rank[static_cast<unsigned char>(kCommonLetters[i])] = static_cast<std::uint8_t>(i);
  return rank;
}();

/// The position in `quoted` ('"', a name, '"') of the name's least common letter.
std::size_t rare_letter(std::string_view quoted) {
  std::size_t best = 1;
  for (std::size_t j = 2; j + 1 < quoted.size(); ++j)
    if (kLetterRank[static_cast<unsigned char>(quoted[j])] > kLetterRank[static_cast<unsigned char>(quoted[best])]) best = j;
  return best;
}

/// Where `quoted` starts in `line` at or after `from`; npos when it does not. memchr for the
/// name's least common letter (`letter_at`, from rare_letter), then a compare: once or twice a
/// line for "kind" (its 'd'), where memchr for its first letter stopped at every 'k' of "chunk",
/// "key" and "lock-k0", and glibc's memmem (not vectorised) was 6 % of a history read (perf,
/// bench_stream_check).
std::size_t find_quoted(std::string_view line, std::size_t from, std::string_view quoted, std::size_t letter_at) {
  const char letter = quoted[letter_at];
  std::size_t look = from + letter_at;  // where the letter would be if quoted started at `from`
  while (look + (quoted.size() - letter_at) <= line.size()) {
    const void* hit = std::memchr(line.data() + look, letter, line.size() - look);
    if (hit == nullptr) return std::string_view::npos;
    const auto at = static_cast<std::size_t>(static_cast<const char*>(hit) - line.data());
    const std::size_t p = at - letter_at;  // where '"' would be: at >= look >= letter_at
    if (line.compare(p, quoted.size(), quoted) == 0) return p;
    look = at + 1;
  }
  return std::string_view::npos;
}
}  // namespace

LineLook::LineLook(std::string_view line, bool first_only) : line_(line), first_only_(first_only) {
  unsure_ = line.find('\\') != std::string_view::npos;  // an escape could spell anything
  // A nested object or array could hold the key where the top level has none: unsure (a '{' or
  // '[' inside a string makes it unsure too, which is never wrong). A line the fast path parsed
  // has nothing nested (first_only's promise).
  if (!unsure_ && !first_only) {
    const std::size_t open = line.find('{');
    unsure_ = line.find('[') != std::string_view::npos ||
              (open != std::string_view::npos && line.find('{', open + 1) != std::string_view::npos);
  }
}

LineField LineLook::field(std::string_view name) const {
  LineField out;
  if (unsure_) return out;
  const std::string_view line = line_;
  // Without a backslash every '"' opens or closes a string, so "<name>" followed by ':' is the key
  // itself, wherever it is (a value "<name>" is followed by ',' or '}' or ']').
  char buffer[64];
  if (name.empty() || name.size() + 2 > sizeof buffer) return out;  // no field has such a name
  buffer[0] = '"';
  std::memcpy(buffer + 1, name.data(), name.size());
  buffer[name.size() + 1] = '"';
  const std::string_view key(buffer, name.size() + 2);
  const std::size_t letter_at = rare_letter(key);
  bool found = false;
  for (std::size_t at = 0;;) {
    const std::size_t hit = find_quoted(line, at, key, letter_at);
    if (hit == std::string_view::npos) break;
    std::size_t p = hit + key.size();
    at = p;
    while (p < line.size() && json_space(line[p])) ++p;
    if (p == line.size() || line[p] != ':') continue;  // a value, not the key
    if (found) return LineField{};                        // a repeated key (or a nested one): unsure
    found = true;
    ++p;
    while (p < line.size() && json_space(line[p])) ++p;
    if (p == line.size()) return LineField{};
    if (line[p] == '"') {
      const std::size_t end = line.find('"', p + 1);
      if (end == std::string_view::npos) return LineField{};
      out = LineField{LineField::kString, line.substr(p + 1, end - p - 1)};
      if (first_only_) return out;
      at = end + 1;
    } else if (line[p] == '-' || (line[p] >= '0' && line[p] <= '9')) {
      std::size_t end = p + 1;
      while (end < line.size() && line[end] >= '0' && line[end] <= '9') ++end;
      out = LineField{LineField::kInteger, line.substr(p, end - p)};
      if (first_only_) return out;
      at = end;
    } else {
      return LineField{};  // null, an object, an array, true, false: the parser says what it means
    }
  }
  return found ? out : LineField{LineField::kAbsent, {}};
}

LineField scan_line_field(std::string_view line, std::string_view name, bool first_only) {
  return LineLook(line, first_only).field(name);
}

bool line_may_be_kind(std::string_view line, std::span<const EventKind> kinds) {
  const LineField kind = scan_line_field(line, "kind");
  if (kind.what != LineField::kString) return true;  // unsure, or no kind: the parser must say
  for (const EventKind k : kinds)
    if (kind.text == kind_name(k)) return true;
  return false;
}

std::size_t for_each_history_event(const std::filesystem::path& path,
                                   const std::function<void(std::size_t index, Event&& event)>& fn) {
  return for_each_history_event_if(path, [](std::size_t, std::string_view) { return true; }, fn);
}

History load_history_jsonl(const std::filesystem::path& path) {
  History h;
  for_each_history_event(path, [&](std::size_t, Event&& e) { h.add(std::move(e)); });
  return h;
}

CompressedHistory compress_history(const std::filesystem::path& path, int level) {
  const std::string file = path.string();
  CompressedHistory result;
  result.path = path;
  result.path += ".zst";
  auto tmp = path;
  tmp += ".zst.tmp";
  const auto fail = [&](const std::string& why) -> HistoryError {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    return HistoryError(file, 0, why);
  };
  Fd in(path, O_RDONLY);
  if (!in.ok()) throw fail(std::string("cannot open the history to compress it: ") + std::strerror(errno));
  Fd out(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (!out.ok()) throw fail("cannot create " + tmp.string() + ": " + std::strerror(errno));
  std::unique_ptr<ZSTD_CCtx, CCtxFree> cctx(ZSTD_createCCtx());
  if (!cctx) throw fail("zstd: out of memory");
  const auto check = [&](std::size_t r) {
    if (ZSTD_isError(r)) throw fail(std::string("zstd: ") + ZSTD_getErrorName(r));
    return r;
  };
  check(ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, level));
  check(ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_checksumFlag, 1));
  std::vector<char> ibuf(kBuffer), obuf(ZSTD_CStreamOutSize());
  while (true) {
    const ssize_t n = read_some(in.get(), ibuf.data(), ibuf.size());
    if (n < 0) throw fail(std::string("read error: ") + std::strerror(errno));
    result.plain_bytes += static_cast<std::uintmax_t>(n);
    const ZSTD_EndDirective mode = n == 0 ? ZSTD_e_end : ZSTD_e_continue;
    ZSTD_inBuffer ib{ibuf.data(), static_cast<std::size_t>(n), 0};
    bool done = false;
    while (!done) {
      ZSTD_outBuffer ob{obuf.data(), obuf.size(), 0};
      const std::size_t remaining = check(ZSTD_compressStream2(cctx.get(), &ob, &ib, mode));
      if (!process::write_all(out.get(), std::string_view(obuf.data(), ob.pos)))
        throw fail("cannot write " + tmp.string() + ": " + std::strerror(errno));
      result.compressed_bytes += ob.pos;
      done = mode == ZSTD_e_end ? remaining == 0 : ib.pos == ib.size;
    }
    if (n == 0) break;
  }
  if (::fsync(out.get()) != 0) throw fail("cannot fsync " + tmp.string() + ": " + std::strerror(errno));
  if (!out.close()) throw fail("cannot close " + tmp.string() + ": " + std::strerror(errno));
  std::error_code ec;
  std::filesystem::rename(tmp, result.path, ec);
  if (ec) throw fail("cannot rename " + tmp.string() + " to " + result.path.string() + ": " + ec.message());
  const auto parent = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  if (Fd dir(parent, O_RDONLY | O_DIRECTORY); !dir.ok() || ::fsync(dir.get()) != 0) {
    const std::string why = std::strerror(errno);
    std::filesystem::remove(result.path, ec);  // the plain file is still the history
    throw HistoryError(file, 0, "cannot fsync the directory " + parent.string() + ": " + why);
  }
  std::filesystem::remove(path, ec);
  if (ec) throw HistoryError(file, 0, "compressed to " + result.path.string() + " but cannot remove the plain file: " + ec.message());
  return result;
}

void save_history_jsonl(const std::filesystem::path& path, const History& history) {
  const std::string file = path.string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw HistoryError(file, 0, std::string("cannot write the history: ") + std::strerror(errno));
  for (const Event& e : history) out << to_json_line(e) << '\n';
  out.flush();
  if (!out) throw HistoryError(file, 0, "write error");
}

namespace {

// pack_event's fields, in their order. Adding a field to Event means adding it here (the
// static_assert on Event's size below says so at compile time; the round trip test in
// history_file_test.cpp fills the fields listed here).
constexpr std::optional<std::int64_t> Event::*kPackedNumbers[] = {
    &Event::token,    &Event::high_water, &Event::lease_id, &Event::revision, &Event::segment,
    &Event::chunk,    &Event::duration_ns, &Event::ttl_ms,  &Event::protocol, &Event::line_no};
constexpr std::string Event::*kPackedStrings[] = {&Event::source, &Event::lock,   &Event::lock_key, &Event::key,
                                                  &Event::fault,  &Event::target, &Event::detail,   &Event::line};
static_assert(std::size(kPackedNumbers) <= 16 && std::size(kPackedStrings) <= 16);
// Event's size with its 2 + 10 numbers, its kind and its 8 strings (libstdc++, 64-bit): a field
// added to Event changes it, and must then be added above too, or pack_event would drop it.
static_assert(sizeof(void*) != 8 || sizeof(std::string) != 32 || sizeof(Event) == 440,
              "Event changed: add its new field to kPackedNumbers or kPackedStrings, then update this size");
constexpr EventKind kLastKind = EventKind::kProtocolError;  // event.h's last enumerator

// The writers below put bytes at `at` and return where they stopped (pack_event sizes the
// buffer for the most they can write first: 10 bytes a varint).
char* put_varint(std::uint64_t v, char* at) {
  while (v >= 0x80) {
    *at++ = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  *at++ = static_cast<char>(v);
  return at;
}
char* put_signed(std::int64_t v, char* at) {  // zigzag: small magnitudes, few bytes
  return put_varint((static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63), at);
}
char* put_bits(std::uint16_t bits, char* at) {
  *at++ = static_cast<char>(bits & 0xff);
  *at++ = static_cast<char>(bits >> 8);
  return at;
}
constexpr std::size_t kMaxVarint = 10;

/// Reads unpack_event's input in order; every read checks the bytes left.
struct PackedReader {
  std::string_view in;
  std::size_t at = 0;
  [[noreturn]] static void cut() { throw std::invalid_argument("unpack_event: a packed event cut short"); }
  std::uint8_t byte() {
    if (at >= in.size()) cut();
    return static_cast<std::uint8_t>(in[at++]);
  }
  std::uint16_t bits() {
    const std::uint16_t lo = byte();
    return static_cast<std::uint16_t>(lo | (std::uint16_t{byte()} << 8));
  }
  std::uint64_t varint() {
    std::uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
      const std::uint8_t b = byte();
      v |= std::uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0) return v;
    }
    throw std::invalid_argument("unpack_event: a varint longer than 64 bits");
  }
  std::int64_t signed_number() {
    const std::uint64_t z = varint();
    return static_cast<std::int64_t>((z >> 1) ^ (~(z & 1) + 1));
  }
  std::string_view bytes(std::uint64_t n) {
    if (n > in.size() - at) cut();
    const std::string_view s = in.substr(at, n);
    at += n;
    return s;
  }
};

}  // namespace

std::size_t pack_event(const Event& e, std::string& out) {
  const std::size_t before = out.size();
  std::uint16_t numbers = 0, strings = 0;
  std::size_t most = 1 + 4 + 2 * kMaxVarint;  // kind, presence bits, t_ns, src_ns
  for (std::size_t f = 0; f < std::size(kPackedNumbers); ++f)
    if ((e.*kPackedNumbers[f]).has_value()) {
      numbers = static_cast<std::uint16_t>(numbers | (1u << f));
      most += kMaxVarint;
    }
  for (std::size_t f = 0; f < std::size(kPackedStrings); ++f)
    if (!(e.*kPackedStrings[f]).empty()) {
      strings = static_cast<std::uint16_t>(strings | (1u << f));
      most += kMaxVarint + (e.*kPackedStrings[f]).size();
    }
  out.resize(before + most);  // then cut to what was written: one growth of `out`, not one a byte
  char* const start = out.data() + before;
  char* at = start;
  *at++ = static_cast<char>(e.kind);
  at = put_bits(numbers, at);
  at = put_bits(strings, at);
  at = put_signed(e.t_ns, at);
  at = put_signed(e.src_ns, at);
  for (std::size_t f = 0; f < std::size(kPackedNumbers); ++f)
    if ((numbers >> f) & 1u) at = put_signed(*(e.*kPackedNumbers[f]), at);
  for (std::size_t f = 0; f < std::size(kPackedStrings); ++f) {
    if (((strings >> f) & 1u) == 0) continue;
    const std::string& text = e.*kPackedStrings[f];
    at = put_varint(text.size(), at);
    std::memcpy(at, text.data(), text.size());
    at += text.size();
  }
  const auto written = static_cast<std::size_t>(at - start);
  out.resize(before + written);
  return written;
}

Event unpack_event(std::string_view bytes) {
  PackedReader r{bytes};
  Event e;
  const std::uint8_t kind = r.byte();
  if (kind > static_cast<std::uint8_t>(kLastKind)) throw std::invalid_argument("unpack_event: no event kind " + std::to_string(kind));
  e.kind = static_cast<EventKind>(kind);
  const std::uint16_t numbers = r.bits(), strings = r.bits();
  e.t_ns = r.signed_number();
  e.src_ns = r.signed_number();
  for (std::size_t f = 0; f < std::size(kPackedNumbers); ++f)
    if ((numbers >> f) & 1u) e.*kPackedNumbers[f] = r.signed_number();
  for (std::size_t f = 0; f < std::size(kPackedStrings); ++f)
    if ((strings >> f) & 1u) e.*kPackedStrings[f] = std::string(r.bytes(r.varint()));
  return e;
}

}  // namespace fencecheck::harness
