#include "fencecheck/resources/store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <utility>

#include <spdlog/spdlog.h>

#include "text.h"
#include "fencecheck/proto/chunk.h"

namespace fencecheck {
namespace {

using detail::shown;

namespace fs = std::filesystem;

constexpr std::string_view kMagic = "fcstlog1";
// The payload's first byte: the record type (type 1 was the "version" byte of the first format).
constexpr std::uint8_t kChunkRecord = 1;
constexpr std::uint8_t kCounterRecord = 2;
constexpr std::uint8_t kEffectRecord = 3;
constexpr std::uint8_t kGapRecord = 4;  // written only by a repair
constexpr std::size_t kRecordHeaderBytes = 8;  // u32 payload_len, u32 crc32
// type + seq + token + segment + chunk + key_len + client_len + data_len
constexpr std::size_t kPayloadFixedBytes = 1 + 8 * 4 + 2 + 2 + 4;
// type + seq + token + value + key_len + client_len
constexpr std::size_t kCounterFixedBytes = 1 + 8 * 3 + 2 + 2;
// type + seq + token + mode + applied + key_len + client_len + id_len
constexpr std::size_t kEffectFixedBytes = 1 + 8 * 2 + 1 + 1 + 2 + 2 + 2;
constexpr std::size_t kMaxPayloadBytes = kPayloadFixedBytes + kMaxKeyBytes + kMaxClientBytes + kMaxChunkBytes;
// type + seq + first
constexpr std::size_t kGapBytes = 1 + 8 * 2;

constexpr std::array<std::pair<FencingMode, std::string_view>, 4> kModeNames{{
    {FencingMode::kPerKey, "per-key"},
    {FencingMode::kNone, "none"},
    {FencingMode::kGlobal, "global"},
    {FencingMode::kCheckThenWrite, "check-then-write"},
}};

std::string errno_text(int err) { return std::string(std::strerror(err)); }

[[noreturn]] void throw_io(const std::string& what, const fs::path& path, int err) {
  throw std::runtime_error("fencecheck-store: " + what + " " + path.string() + ": " + errno_text(err));
}

// Little-endian fixed-width encoding.
template <typename U>
void put_le(std::string& out, U v) {
  for (std::size_t i = 0; i < sizeof(U); ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

template <typename U>
U get_le(std::string_view in, std::size_t at) {
  U v = 0;
  for (std::size_t i = 0; i < sizeof(U); ++i) v |= static_cast<U>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  return v;
}

void seal(std::string& out, const std::string& payload) {
  put_le(out, static_cast<std::uint32_t>(payload.size()));
  put_le(out, crc32(payload));
  out += payload;
}

void put_str16(std::string& payload, const std::string& s) {
  put_le(payload, static_cast<std::uint16_t>(s.size()));
  payload += s;
}

void append_record(std::string& out, std::int64_t seq, const WriteRequest& r) {
  std::string payload;
  payload.reserve(kPayloadFixedBytes + r.key.size() + r.client.size() + r.bytes.size());
  payload.push_back(static_cast<char>(kChunkRecord));
  put_le(payload, static_cast<std::uint64_t>(seq));
  put_le(payload, static_cast<std::uint64_t>(r.token.value()));
  put_le(payload, static_cast<std::uint64_t>(r.segment));
  put_le(payload, static_cast<std::uint64_t>(r.chunk));
  put_str16(payload, r.key);
  put_str16(payload, r.client);
  put_le(payload, static_cast<std::uint32_t>(r.bytes.size()));
  payload += r.bytes;
  seal(out, payload);
}

void append_counter_record(std::string& out, std::int64_t seq, const CounterWriteRequest& r) {
  std::string payload;
  payload.reserve(kCounterFixedBytes + r.key.size() + r.client.size());
  payload.push_back(static_cast<char>(kCounterRecord));
  put_le(payload, static_cast<std::uint64_t>(seq));
  put_le(payload, static_cast<std::uint64_t>(r.token.value()));
  put_le(payload, static_cast<std::uint64_t>(r.value));
  put_str16(payload, r.key);
  put_str16(payload, r.client);
  seal(out, payload);
}

std::uint8_t mode_byte(EffectMode m) {
  switch (m) {
    case EffectMode::kFenced: return 0;
    case EffectMode::kUnfenced: return 1;
    case EffectMode::kIdempotent: return 2;
  }
  return 0;
}

void append_effect_record(std::string& out, const StoreEffectEntry& e) {
  std::string payload;
  payload.reserve(kEffectFixedBytes + e.key.size() + e.client.size() + e.id.size());
  payload.push_back(static_cast<char>(kEffectRecord));
  put_le(payload, static_cast<std::uint64_t>(e.seq));
  put_le(payload, static_cast<std::uint64_t>(e.token));
  payload.push_back(static_cast<char>(mode_byte(e.mode)));
  payload.push_back(static_cast<char>(e.applied ? 1 : 0));
  put_str16(payload, e.key);
  put_str16(payload, e.client);
  put_str16(payload, e.id);
  seal(out, payload);
}

void append_gap_record(std::string& out, std::int64_t first, std::int64_t last) {
  std::string payload;
  payload.push_back(static_cast<char>(kGapRecord));
  put_le(payload, static_cast<std::uint64_t>(last));
  put_le(payload, static_cast<std::uint64_t>(first));
  seal(out, payload);
}

struct DecodedRecord {
  std::uint8_t type = 0;
  std::int64_t seq = 0;
  std::int64_t first_seq = 0;    // the seq this record must follow on from: seq, or a gap's first
  WriteRequest request;          // type 1
  CounterWriteRequest counter;   // type 2
  StoreEffectEntry effect;       // type 3
};

// Reads fields of one payload front to back; every read is bounds-checked.
class PayloadReader {
 public:
  explicit PayloadReader(std::string_view p) : p_(p) {}
  bool i64(std::int64_t& v) {
    if (p_.size() < at_ + 8) return false;
    v = static_cast<std::int64_t>(get_le<std::uint64_t>(p_, at_));
    at_ += 8;
    return true;
  }
  bool u8(std::uint8_t& v) {
    if (p_.size() < at_ + 1) return false;
    v = static_cast<std::uint8_t>(p_[at_]);
    at_ += 1;
    return true;
  }
  bool str(std::size_t len_bytes, std::string& s) {
    if (p_.size() < at_ + len_bytes) return false;
    std::size_t len = len_bytes == 2 ? get_le<std::uint16_t>(p_, at_) : get_le<std::uint32_t>(p_, at_);
    at_ += len_bytes;
    if (p_.size() < at_ + len) return false;
    s.assign(p_.substr(at_, len));
    at_ += len;
    return true;
  }
  [[nodiscard]] std::size_t left() const { return p_.size() - at_; }

 private:
  std::string_view p_;
  std::size_t at_ = 0;
};

// Decodes one payload whose CRC already matched. Returns "" or what is wrong.
std::string decode_payload(std::string_view p, DecodedRecord& out) {
  if (p.empty()) return "empty payload";
  out.type = static_cast<std::uint8_t>(p[0]);
  PayloadReader in(p.substr(1));
  const std::string short_payload = "a field runs past the end of the payload";
  std::int64_t token = 0;
  std::string key;
  std::string client;
  switch (out.type) {
    case kChunkRecord: {
      if (p.size() < kPayloadFixedBytes) return "payload of " + std::to_string(p.size()) + " bytes is too short";
      std::int64_t segment = 0;
      std::int64_t chunk = 0;
      if (!in.i64(out.seq) || !in.i64(token) || !in.i64(segment) || !in.i64(chunk)) return short_payload;
      out.request.token = FencingToken(token);
      out.request.segment = segment;
      out.request.chunk = chunk;
      if (!in.str(2, out.request.key) || !in.str(2, out.request.client) || !in.str(4, out.request.bytes))
        return "a length field runs past the end of the payload";
      if (segment < 0 || chunk < 0) return "negative segment or chunk";
      key = out.request.key;
      client = out.request.client;
      break;
    }
    case kCounterRecord: {
      std::int64_t value = 0;
      if (!in.i64(out.seq) || !in.i64(token) || !in.i64(value) || !in.str(2, out.counter.key) ||
          !in.str(2, out.counter.client))
        return short_payload;
      if (value < 0) return "negative counter value";
      out.counter.token = FencingToken(token);
      out.counter.value = value;
      key = out.counter.key;
      client = out.counter.client;
      break;
    }
    case kEffectRecord: {
      std::uint8_t mode = 0;
      std::uint8_t applied = 0;
      StoreEffectEntry& e = out.effect;
      if (!in.i64(out.seq) || !in.i64(token) || !in.u8(mode) || !in.u8(applied) || !in.str(2, e.key) ||
          !in.str(2, e.client) || !in.str(2, e.id))
        return short_payload;
      if (mode > 2) return "unknown effect mode " + std::to_string(mode);
      if (applied > 1) return "effect 'applied' byte is " + std::to_string(applied);
      e.mode = mode == 0 ? EffectMode::kFenced : mode == 1 ? EffectMode::kUnfenced : EffectMode::kIdempotent;
      e.applied = applied == 1;
      e.seq = out.seq;
      e.token = token;
      if (auto why = effect_id_problem(e.id); !why.empty()) return why;
      key = e.key;
      client = e.client;
      break;
    }
    case kGapRecord: {
      if (p.size() != kGapBytes) return "gap record of " + std::to_string(p.size()) + " bytes, expected 17";
      if (!in.i64(out.seq) || !in.i64(out.first_seq)) return short_payload;
      if (in.left() != 0) return std::to_string(in.left()) + " unexpected bytes after the last field";
      if (out.first_seq < 1 || out.seq < out.first_seq) return "gap record with seqs out of order";
      return "";
    }
    default:
      return "unknown record type " + std::to_string(static_cast<unsigned>(out.type));
  }
  out.first_seq = out.seq;
  if (in.left() != 0) return std::to_string(in.left()) + " unexpected bytes after the last field";
  if (out.seq < 1 || token < 0) return "negative seq or token";
  if (auto why = name_problem("key", key, kMaxKeyBytes); !why.empty()) return why;
  if (auto why = name_problem("client", client, kMaxClientBytes); !why.empty()) return why;
  return "";
}

void validate_names(const std::string& key, const std::string& client, FencingToken token) {
  if (auto why = name_problem("key", key, kMaxKeyBytes); !why.empty()) throw std::invalid_argument(why);
  if (auto why = name_problem("client", client, kMaxClientBytes); !why.empty()) throw std::invalid_argument(why);
  if (token.value() < 0) throw std::invalid_argument("token " + token.str() + " is negative");
}

void validate(const WriteRequest& r) {
  if (auto why = name_problem("key", r.key, kMaxKeyBytes); !why.empty()) throw std::invalid_argument(why);
  if (auto why = name_problem("client", r.client, kMaxClientBytes); !why.empty()) throw std::invalid_argument(why);
  if (r.segment < 0) throw std::invalid_argument("segment " + std::to_string(r.segment) + " is negative");
  if (r.chunk < 0) throw std::invalid_argument("chunk " + std::to_string(r.chunk) + " is negative");
  if (r.token.value() < 0) throw std::invalid_argument("token " + r.token.str() + " is negative");
  if (r.bytes.empty()) throw std::invalid_argument("chunk bytes are empty: a chunk must carry at least one byte");
  if (r.bytes.size() > kMaxChunkBytes)
    throw std::invalid_argument("chunk is " + std::to_string(r.bytes.size()) + " bytes, over the store's limit of " +
                                std::to_string(kMaxChunkBytes));
}

// ---- the real file layer -------------------------------------------------------------------

class PosixFile final : public StoreFile {
 public:
  PosixFile(int fd, std::uint64_t size) : fd_(fd), size_(size) {}
  ~PosixFile() override { ::close(fd_); }  // also releases the flock
  PosixFile(const PosixFile&) = delete;
  PosixFile& operator=(const PosixFile&) = delete;

  int read_all(std::string& out) override {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) return errno;
    out.resize(static_cast<std::size_t>(st.st_size));
    std::size_t got = 0;
    while (got < out.size()) {
      ssize_t n = ::pread(fd_, out.data() + got, out.size() - got, static_cast<off_t>(got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno;
      if (n == 0) break;
      got += static_cast<std::size_t>(n);
    }
    out.resize(got);
    return 0;
  }
  int append(std::string_view data) override {
    while (!data.empty()) {
      ssize_t n = ::pwrite(fd_, data.data(), data.size(), static_cast<off_t>(size_));
      if (n < 0) {
        if (errno == EINTR) continue;
        return errno;
      }
      data.remove_prefix(static_cast<std::size_t>(n));
      size_ += static_cast<std::uint64_t>(n);
    }
    return 0;
  }
  int sync() override { return ::fdatasync(fd_) == 0 ? 0 : errno; }
  int truncate(std::uint64_t size) override {
    if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) return errno;
    size_ = size;
    return 0;
  }

 private:
  int fd_;
  std::uint64_t size_;
};

class PosixFileSystem final : public StoreFileSystem {
 public:
  int create_directories(const fs::path& dir) override {
    std::error_code ec;
    fs::create_directories(dir, ec);
    return ec ? (ec.value() != 0 ? ec.value() : EIO) : 0;
  }
  int open(const fs::path& path, OpenMode mode, std::unique_ptr<StoreFile>& out, bool& created) override {
    created = false;
    int fd = -1;
    if (mode == OpenMode::kCreateNew) {
      fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0) return errno;
      created = true;
    } else {
      while (fd < 0) {
        fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
        if (fd >= 0 || errno != ENOENT) break;
        fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd >= 0) created = true;
        else if (errno != EEXIST) break;  // EEXIST: another process created it meanwhile; open that
      }
      if (fd < 0) return errno;
      if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int err = errno;
        ::close(fd);
        return err;
      }
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      return err;
    }
    out = std::make_unique<PosixFile>(fd, static_cast<std::uint64_t>(st.st_size));
    return 0;
  }
  int rename(const fs::path& from, const fs::path& to) override {
    return ::rename(from.c_str(), to.c_str()) == 0 ? 0 : errno;
  }
  int sync_dir(const fs::path& dir) override {
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return errno;
    int rc = ::fsync(dfd);
    int err = errno;
    ::close(dfd);
    return rc == 0 ? 0 : err;
  }
};

void check_io(int err, const std::string& what, const fs::path& path) {
  if (err != 0) throw_io(what, path, err);
}

// ---- reading records ------------------------------------------------------------------------

// One attempt to read the record at an offset.
struct Parsed {
  bool ok = false;
  DecodedRecord rec;
  std::size_t end = 0;       // offset after the record (ok, or crc_valid)
  bool crc_valid = false;    // a complete record (length >= 1) whose CRC matches, decodable or not
  std::string problem;       // when !ok
};

Parsed parse_record(std::string_view all, std::size_t off) {
  Parsed p;
  const std::size_t left = all.size() - off;
  if (left < kRecordHeaderBytes) {
    p.problem = "torn record header at offset " + std::to_string(off) + " (" + std::to_string(left) + " of 8 bytes)";
    return p;
  }
  const std::uint32_t len = get_le<std::uint32_t>(all, off);
  const std::uint32_t stored_crc = get_le<std::uint32_t>(all, off + 4);
  if (len > kMaxPayloadBytes) {
    p.problem = "record at offset " + std::to_string(off) + " claims " + std::to_string(len) +
                " bytes, over the limit of " + std::to_string(kMaxPayloadBytes);
    return p;
  }
  if (left - kRecordHeaderBytes < len) {
    p.problem = "torn record at offset " + std::to_string(off) + ": header says " + std::to_string(len) +
                " bytes, only " + std::to_string(left - kRecordHeaderBytes) + " present";
    return p;
  }
  const std::string_view payload = all.substr(off + kRecordHeaderBytes, len);
  if (const std::uint32_t crc = crc32(payload); crc != stored_crc) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "stored %08x, computed %08x", stored_crc, crc);
    p.problem = "checksum mismatch in record at offset " + std::to_string(off) + " (" + buf + ")";
    return p;
  }
  if (len == 0) {  // what a zero-filled tail reads as: crc32("") is 0
    p.problem = "empty record (zero bytes) at offset " + std::to_string(off);
    return p;
  }
  p.crc_valid = true;
  p.end = off + kRecordHeaderBytes + len;
  if (auto why = decode_payload(payload, p.rec); !why.empty()) {
    p.problem = "malformed record at offset " + std::to_string(off) + ": " + why;
    return p;
  }
  p.ok = true;
  return p;
}

// The first offset >= from where an intact record starts (header, length, CRC and payload all
// check out; its seq is not looked at), or npos. Cheap checks first: a CRC is computed only where
// the length fits and the first payload byte is a record type.
std::size_t find_intact(std::string_view all, std::size_t from) {
  for (std::size_t p = from; p + kRecordHeaderBytes < all.size(); ++p) {
    const std::uint32_t len = get_le<std::uint32_t>(all, p);
    if (len == 0 || len > kMaxPayloadBytes || all.size() - p - kRecordHeaderBytes < len) continue;
    const auto type = static_cast<std::uint8_t>(all[p + kRecordHeaderBytes]);
    if (type < kChunkRecord || type > kGapRecord) continue;
    if (parse_record(all, p).ok) return p;
  }
  return std::string_view::npos;
}

std::string seq_range(std::int64_t first, std::int64_t last) {
  if (first > last) return "none";
  return first == last ? std::to_string(first) : std::to_string(first) + ".." + std::to_string(last);
}

}  // namespace

std::string_view fencing_mode_name(FencingMode mode) {
  for (const auto& [m, n] : kModeNames)
    if (m == mode) return n;
  return "per-key";
}

std::optional<FencingMode> fencing_mode_from_name(std::string_view name) {
  for (const auto& [m, n] : kModeNames)
    if (n == name) return m;
  return std::nullopt;
}

std::vector<std::string_view> fencing_mode_names() {
  std::vector<std::string_view> out;
  for (const auto& [m, n] : kModeNames) out.push_back(n);
  return out;
}

std::string effect_id_problem(std::string_view id) {
  if (id.empty()) return "effect id is empty";
  if (id.size() > kMaxEffectIdBytes)
    return "effect id '" + shown(id) + "' is " + std::to_string(id.size()) + " bytes, over the " +
           std::to_string(kMaxEffectIdBytes) + "-byte limit";
  for (std::size_t i = 0; i < id.size(); ++i) {
    const char c = id[i];
    if (c != ':' && !is_safe_name(id.substr(i, 1), 1))
      return "effect id '" + shown(id) + "' has a character outside [A-Za-z0-9_.:-] at offset " + std::to_string(i);
  }
  return "";
}

std::string name_problem(std::string_view what, std::string_view value, std::size_t max_len) {
  const std::string w(what);
  if (value.empty()) return w + " is empty";
  if (value.size() > max_len)
    return w + " '" + shown(value) + "' is " + std::to_string(value.size()) + " bytes, over the " +
           std::to_string(max_len) + "-byte limit";
  for (std::size_t i = 0; i < value.size(); ++i) {
    if (!is_safe_name(value.substr(i, 1), 1))
      return w + " '" + shown(value) + "' has a character outside [A-Za-z0-9_.-] at offset " + std::to_string(i);
  }
  return "";
}

std::shared_ptr<StoreFileSystem> posix_store_file_system() {
  static const auto fs = std::make_shared<PosixFileSystem>();
  return fs;
}

FencedStore::FencedStore(std::filesystem::path data_dir, FencingMode mode, StoreOptions options)
    : data_dir_(std::move(data_dir)), mode_(mode), options_(std::move(options)) {}

std::unique_ptr<FencedStore> FencedStore::open(const std::filesystem::path& data_dir, FencingMode mode,
                                               StoreOptions options) {
  std::unique_ptr<FencedStore> store(new FencedStore(data_dir, mode, std::move(options)));
  store->fs_ = store->options_.file_system ? store->options_.file_system : posix_store_file_system();
  StoreFileSystem& files = *store->fs_;
  if (int err = files.create_directories(data_dir); err != 0)
    throw std::runtime_error("fencecheck-store: cannot create data directory " + data_dir.string() + ": " +
                             errno_text(err));
  const fs::path path = store->log_path();
  bool created = false;
  // The file is closed by ~FencedStore from here on, even if open() throws below.
  if (int err = files.open(path, StoreFileSystem::OpenMode::kOpenOrCreateLocked, store->file_, created); err != 0) {
    if (err == EWOULDBLOCK)
      throw std::runtime_error("fencecheck-store: data directory " + data_dir.string() +
                               " is in use by another store (flock on " + path.string() + " is held)");
    throw_io("cannot open and lock log", path, err);
  }
  if (created) check_io(files.sync_dir(data_dir), "cannot fsync directory", data_dir);  // the new entry
  {
    std::lock_guard lock(store->mu_);
    store->replay_locked();
  }
  store->flusher_ = std::thread(&FencedStore::flusher_loop, store.get());
  return store;
}

void FencedStore::replay_locked() {
  const fs::path path = log_path();
  std::string data;
  check_io(file_->read_all(data), "cannot read log", path);

  if (data.size() < kMagic.size()) {
    if (kMagic.substr(0, data.size()) != data)
      throw std::runtime_error("fencecheck-store: " + path.string() + " is not a fencecheck-store log (bad magic)");
    // A new file, or one whose creation was cut short: (re)write the magic.
    std::string problem;
    if (!data.empty()) problem = "torn file header (" + std::to_string(data.size()) + " bytes)";
    check_io(file_->truncate(0), "cannot truncate log", path);
    check_io(file_->append(kMagic), "cannot write log header", path);
    check_io(file_->sync(), "cannot fdatasync log", path);
    recovery_.kept_bytes = kMagic.size();
    recovery_.truncated_bytes = data.size();
    recovery_.problem = problem;
    if (!problem.empty()) spdlog::warn("fencecheck-store: {}: {}; rewrote it", path.string(), problem);
    return;
  }
  if (std::string_view(data).substr(0, kMagic.size()) != kMagic)
    throw std::runtime_error("fencecheck-store: " + path.string() + " is not a fencecheck-store log (bad magic)");

  const bool repair = options_.repair_log;
  std::string rewritten(kMagic);  // repair: the log as it will be (every readable record)
  std::string problem;            // a torn tail's
  const std::string_view all(data);
  std::size_t off = kMagic.size();
  while (off < all.size()) {
    Parsed p = parse_record(all, off);
    const std::int64_t expected = last_seq_ + 1;
    if (p.ok && p.rec.first_seq != expected && !repair) {
      p.ok = false;
      p.problem = "record at offset " + std::to_string(off) + " has seq " + std::to_string(p.rec.first_seq) +
                  ", expected " + std::to_string(expected) + " (a record is missing or out of place)";
    }
    if (!p.ok) {
      // The damage starts here. Is anything readable after it? (p.ok was cleared for a seq
      // mismatch only: that record is itself intact, and find_intact returns off.)
      const std::size_t next = find_intact(all, off);
      if (next == std::string_view::npos && !p.crc_valid) {
        problem = p.problem;  // an incomplete final record: a torn tail
        break;
      }
      const std::int64_t record = recovery_.records + 1;
      if (!repair) {
        std::string after = next == std::string_view::npos
                                ? "no intact record follows, but this one is complete (its checksum matches): it "
                                  "was not torn by a crash"
                                : "the next intact record starts at byte offset " + std::to_string(next);
        if (next != std::string_view::npos) {
          std::int64_t n = 0;
          for (std::size_t q = next; q < all.size();) {
            Parsed r = parse_record(all, q);
            if (!r.ok) break;
            ++n;
            q = r.end;
          }
          after += " (seq " + std::to_string(parse_record(all, next).rec.seq) + "; " + std::to_string(n) +
                   " readable record(s) from there)";
        }
        throw StoreLogDamaged("fencecheck-store: " + path.string() + " is damaged at byte offset " +
                                  std::to_string(off) + ", record #" + std::to_string(record) +
                                  " (1-based; seq " + std::to_string(expected) + " expected): " + p.problem +
                                  "; " + after + ". This is corruption, not a torn tail: the store refuses to start "
                                  "and has changed nothing on disk (truncating would delete acknowledged records and "
                                  "lower high-water marks). To start anyway, keeping every readable record, run "
                                  "fencecheck-store --repair-log.",
                              path, off, record, expected);
      }
      // Repair: skip to the next intact record (or, for a complete but unreadable final record,
      // to the end), and account for what the skipped bytes held.
      LogDamage d;
      d.offset = off;
      d.bytes = (next == std::string_view::npos ? all.size() : next) - off;
      d.record = record;
      d.problem = p.problem;
      d.first_lost_seq = expected;
      d.last_lost_seq = expected - 1;  // widened below by the gap the next record shows
      recovery_.damage.push_back(d);
      if (next == std::string_view::npos) {  // one unreadable record: its seq is lost with it
        recovery_.damage.back().last_lost_seq = expected;
        recovery_.lost_records += 1;
        append_gap_record(rewritten, expected, expected);
        last_seq_ = expected;
        ++recovery_.records;
        off = all.size();
        break;
      }
      off = next;
      continue;
    }
    DecodedRecord& rec = p.rec;
    std::string_view bytes = all.substr(off, p.end - off);
    std::string renumbered;
    if (repair && rec.first_seq != last_seq_ + 1) {
      if (rec.first_seq > last_seq_ + 1) {
        // Seqs missing between the last record and this one: say so in the log itself.
        if (recovery_.damage.empty() || recovery_.damage.back().offset + recovery_.damage.back().bytes != off) {
          LogDamage d;
          d.offset = off;
          d.record = recovery_.records + 1;
          d.problem = "seq gap: record at offset " + std::to_string(off) + " has seq " + std::to_string(rec.first_seq) +
                      ", expected " + std::to_string(last_seq_ + 1);
          recovery_.damage.push_back(d);
        }
        recovery_.damage.back().first_lost_seq = last_seq_ + 1;
        recovery_.damage.back().last_lost_seq = rec.first_seq - 1;
        recovery_.lost_records += rec.first_seq - 1 - last_seq_;
        append_gap_record(rewritten, last_seq_ + 1, rec.first_seq - 1);
        last_seq_ = rec.first_seq - 1;
        ++recovery_.records;
      } else if (rec.type == kGapRecord) {  // an old gap that says nothing new
        if (rec.seq <= last_seq_) {
          off = p.end;
          continue;
        }
        rec.first_seq = last_seq_ + 1;
        append_gap_record(renumbered, rec.first_seq, rec.seq);
      } else {  // seq not above the last: keep it under the next seq
        const std::int64_t seq = last_seq_ + 1;
        spdlog::warn("fencecheck-store: {}: record at offset {} has seq {}, not above {}: kept as seq {}",
                     path.string(), off, rec.seq, last_seq_, seq);
        rec.seq = rec.first_seq = rec.effect.seq = seq;
        if (rec.type == kChunkRecord) append_record(renumbered, seq, rec.request);
        if (rec.type == kCounterRecord) append_counter_record(renumbered, seq, rec.counter);
        if (rec.type == kEffectRecord) append_effect_record(renumbered, rec.effect);
        ++recovery_.renumbered;
      }
      if (!renumbered.empty()) bytes = renumbered;
    }
    switch (rec.type) {
      case kChunkRecord: apply_locked(rec.seq, rec.request); break;
      case kCounterRecord: apply_counter_locked(rec.seq, rec.counter); break;
      case kEffectRecord: apply_effect_locked(rec.effect); break;
      case kGapRecord:
        recovery_.lost_records += rec.seq - rec.first_seq + 1;
        last_seq_ = rec.seq;
        break;
    }
    if (repair) rewritten += bytes;
    ++recovery_.records;
    off = p.end;
  }
  const std::size_t keep = off;
  recovery_.truncated_bytes = problem.empty() ? 0 : all.size() - keep;
  recovery_.problem = problem;
  if (!problem.empty())
    spdlog::warn("fencecheck-store: {}: {}; a torn tail (nothing readable follows it): truncating the log from {} to "
                 "{} bytes (kept {} complete records)",
                 path.string(), problem, all.size(), keep, recovery_.records);
  if (repair && (!recovery_.damage.empty() || recovery_.renumbered > 0)) {
    rewrite_log_locked(data, rewritten);
    recovery_.kept_bytes = rewritten.size();
  } else {
    if (!problem.empty()) {
      check_io(file_->truncate(keep), "cannot truncate log", path);
      check_io(file_->sync(), "cannot fdatasync log", path);
    }
    recovery_.kept_bytes = keep;
  }
  durable_seq_ = last_seq_;
}

void FencedStore::rewrite_log_locked(const std::string& original, const std::string& rewritten) {
  const fs::path path = log_path();
  StoreFileSystem& files = *fs_;
  // 1. Keep the damaged file whole, beside the log (store.log.damaged.N, the first N free).
  std::unique_ptr<StoreFile> copy;
  bool created = false;
  fs::path copy_path;
  for (int n = 1;; ++n) {
    copy_path = data_dir_ / ("store.log.damaged." + std::to_string(n));
    const int err = files.open(copy_path, StoreFileSystem::OpenMode::kCreateNew, copy, created);
    if (err == 0) break;
    if (err != EEXIST || n >= 10000) throw_io("cannot create", copy_path, err);
  }
  check_io(copy->append(original), "cannot write", copy_path);
  check_io(copy->sync(), "cannot fdatasync", copy_path);
  copy.reset();
  // 2. The repaired log in a temp file, durable before it replaces anything; locked before the
  //    rename, so no other store can take the new store.log.
  const fs::path temp = data_dir_ / "store.log.repair";
  std::unique_ptr<StoreFile> fresh;
  check_io(files.open(temp, StoreFileSystem::OpenMode::kOpenOrCreateLocked, fresh, created), "cannot open", temp);
  check_io(fresh->truncate(0), "cannot truncate", temp);
  check_io(fresh->append(rewritten), "cannot write", temp);
  check_io(fresh->sync(), "cannot fdatasync", temp);
  // 3. Atomic replacement, then the directory entry made durable.
  check_io(files.rename(temp, path), "cannot rename " + temp.string() + " to", path);
  check_io(files.sync_dir(data_dir_), "cannot fsync directory", data_dir_);
  file_ = std::move(fresh);  // the old file (and its lock) goes
  recovery_.repaired = true;
  recovery_.damaged_copy = copy_path;
  spdlog::warn("fencecheck-store: {}: repaired: {}", path.string(), recovery_.summary());
}

std::string RecoveryReport::summary() const {
  std::string out = std::to_string(records) + " records replayed";
  if (truncated_bytes > 0) out += ", " + std::to_string(truncated_bytes) + " torn bytes truncated (" + problem + ")";
  if (!repaired) return out;
  std::uint64_t bytes = 0;
  for (const auto& d : damage) bytes += d.bytes;
  out += "; REPAIRED: " + std::to_string(damage.size()) + " damaged region(s), " + std::to_string(bytes) +
         " bytes skipped, " + std::to_string(lost_records) + " record(s) lost (seqs missing), " +
         std::to_string(renumbered) + " renumbered; the damaged file is kept as " + damaged_copy.string();
  for (const auto& d : damage)
    out += "; [offset " + std::to_string(d.offset) + ", " + std::to_string(d.bytes) + " bytes, record #" +
           std::to_string(d.record) + ", seqs lost: " + seq_range(d.first_lost_seq, d.last_lost_seq) + ": " +
           d.problem + "]";
  return out;
}

void FencedStore::raise_marks_locked(const std::string& key, std::int64_t token, std::int64_t seq) {
  auto& hw = high_water_[key];
  if (hw.seq == 0 || token > hw.token) hw = HighWater{token, seq};
  if (global_high_water_.seq == 0 || token > global_high_water_.token) {
    global_high_water_ = HighWater{token, seq};
    global_key_ = key;
  }
}

void FencedStore::apply_locked(std::int64_t seq, const WriteRequest& r) {
  raise_marks_locked(r.key, r.token.value(), seq);
  auto& slot = chunks_[SlotKey{r.key, r.segment, r.chunk}];
  slot = StoredChunk{r.key, r.segment, r.chunk, r.token.value(), r.client, seq, r.bytes};
  log_.push_back(AcceptedWrite{seq, r.key, r.segment, r.chunk, r.token.value(), r.client});
  last_seq_ = seq;
}

void FencedStore::apply_counter_locked(std::int64_t seq, const CounterWriteRequest& r) {
  raise_marks_locked(r.key, r.token.value(), seq);
  counters_[r.key] = Counter{r.value, seq};
  // The read-back's log shows a counter write with fields of its own (kind counter, value).
  log_.push_back(AcceptedWrite{seq, r.key, kNoSlot, kNoSlot, r.token.value(), r.client, WriteKind::kCounter, r.value});
  last_seq_ = seq;
}

void FencedStore::apply_effect_locked(const StoreEffectEntry& e) {
  effects_.push_back(e);
  if (e.applied) applied_effects_.emplace(e.key, e.id);
  last_seq_ = e.seq;
}

FencedStore::HighWater FencedStore::mark_for_locked(const std::string& key) const {
  if (mode_ == FencingMode::kGlobal) return global_high_water_;
  auto it = high_water_.find(key);
  return it == high_water_.end() ? HighWater{} : it->second;
}

FencedStore::Fence FencedStore::check_locked(const std::string& key, std::int64_t token) const {
  Fence f;
  f.cited = mark_for_locked(key);
  switch (mode_) {
    case FencingMode::kPerKey:
    case FencingMode::kCheckThenWrite:
      f.fenced = token < f.cited.token;
      if (f.fenced)
        f.why = "token " + std::to_string(token) + " is below the high-water mark " + std::to_string(f.cited.token) +
                " of key '" + key + "': a holder with a newer token has written (fenced)";
      break;
    case FencingMode::kGlobal:
      f.fenced = token < f.cited.token;
      if (f.fenced)
        f.why = "token " + std::to_string(token) + " is below the global high-water mark " +
                std::to_string(f.cited.token) + " (set by a write to key '" + global_key_ + "'): one mark for every key (fenced)";
      break;
    case FencingMode::kNone:
      f.fenced = false;
      break;
  }
  return f;
}

bool FencedStore::check_window_locked(std::unique_lock<std::mutex>& lock, std::string_view key, FencingToken token,
                                      std::string_view client) {
  // The mistake on purpose: the decision above is acted on after the lock was let go.
  lock.unlock();
  if (options_.in_check_window) options_.in_check_window(key, token, client);
  if (options_.check_window.count() > 0) std::this_thread::sleep_for(options_.check_window);
  lock.lock();
  return !failed_ && !closing_;
}

WriteResult FencedStore::closed_result_locked() const {
  WriteResult out;
  out.error = failed_ ? "store failed: " + failure_ : "store is closed";
  return out;
}

template <typename Append, typename AfterDecision>
WriteResult FencedStore::fenced_mutation_locked(std::unique_lock<std::mutex>& lock, const std::string& key,
                                                FencingToken token, const std::string& client, RejectedWrite rejected,
                                                Append&& append_and_apply, AfterDecision&& after_decision) {
  WriteResult out;
  // The fencing decision, the high-water update and the append are one critical section —
  // except in check-then-write mode, which lets the lock go in between (the race it shows).
  const Fence fence = check_locked(key, token.value());
  if (!fence.fenced && mode_ == FencingMode::kCheckThenWrite && !check_window_locked(lock, key, token, client))
    return closed_result_locked();
  if (fence.fenced) {
    const HighWater current = fence.cited;
    rejected.high_water = current.token;
    rejections_.push_back(std::move(rejected));
    ++rejected_;
    if (options_.after_decision) {
      lock.unlock();
      after_decision(false, std::int64_t{0});
      lock.lock();
    }
    // Never cite a high-water mark that a crash could still take back.
    if (!wait_durable(lock, current.seq)) {
      out.error = "store failed before the high-water mark it would cite was durable: " + failure_;
      return out;
    }
    out.status = WriteStatus::kRejected;
    out.high_water = current.token;
    out.error = fence.why;
    return out;
  }
  const std::int64_t seq = last_seq_ + 1;
  append_and_apply(seq);
  ++pending_records_;
  ++accepted_;
  const std::int64_t high_water = mark_for_locked(key).token;
  work_cv_.notify_one();
  if (options_.after_decision) {
    lock.unlock();
    after_decision(true, seq);
    lock.lock();
  }
  if (!wait_durable(lock, seq)) {
    out.error = "store failed before the write was durable: " + failure_;
    return out;
  }
  out.status = WriteStatus::kAccepted;
  out.accepted = true;
  out.high_water = high_water;
  out.seq = seq;
  return out;
}

WriteResult FencedStore::write(const WriteRequest& r) {
  validate(r);
  std::unique_lock lock(mu_);
  if (failed_ || closing_) return closed_result_locked();
  return fenced_mutation_locked(
      lock, r.key, r.token, r.client, RejectedWrite{r.key, r.segment, r.chunk, r.token.value(), r.client, 0},
      [&](std::int64_t seq) {
        append_record(pending_, seq, r);
        apply_locked(seq, r);
      },
      [&](bool accepted, std::int64_t seq) {
        if (options_.after_decision) options_.after_decision(r, accepted, seq);
      });
}

WriteResult FencedStore::write_counter(const CounterWriteRequest& r) {
  validate_names(r.key, r.client, r.token);
  if (r.value < 0) throw std::invalid_argument("counter value " + std::to_string(r.value) + " is negative");
  std::unique_lock lock(mu_);
  if (failed_ || closing_) return closed_result_locked();
  return fenced_mutation_locked(
      lock, r.key, r.token, r.client,
      RejectedWrite{r.key, kNoSlot, kNoSlot, r.token.value(), r.client, 0, WriteKind::kCounter, r.value},
      [&](std::int64_t seq) {
        append_counter_record(pending_, seq, r);
        apply_counter_locked(seq, r);
      },
      [](bool, std::int64_t) {});
}

CounterReading FencedStore::read_counter(const std::string& key) const {
  if (auto why = name_problem("key", key, kMaxKeyBytes); !why.empty()) throw std::invalid_argument(why);
  std::unique_lock lock(mu_);
  CounterReading out;
  std::int64_t seq = 0;
  if (auto it = counters_.find(key); it != counters_.end()) {
    out.value = it->second.value;
    seq = it->second.seq;
  }
  const HighWater mark = mark_for_locked(key);
  out.high_water = mark.token;
  if (!wait_durable(lock, std::max(seq, mark.seq)) || failed_)
    throw StoreFailed("store failed before counter '" + key + "' was durable: " + failure_);
  return out;
}

EffectResult FencedStore::post_effect(const EffectRequest& r) {
  validate_names(r.key, r.client, r.token);
  if (auto why = effect_id_problem(r.id); !why.empty()) throw std::invalid_argument(why);
  EffectResult out;
  std::unique_lock lock(mu_);
  if (failed_ || closing_) {
    out.error = failed_ ? "store failed: " + failure_ : "store is closed";
    return out;
  }
  bool applied = true;
  bool duplicate = false;
  std::string why;
  HighWater cited = mark_for_locked(r.key);
  switch (r.mode) {
    case EffectMode::kFenced: {
      const Fence fence = check_locked(r.key, r.token.value());
      if (!fence.fenced && mode_ == FencingMode::kCheckThenWrite &&
          !check_window_locked(lock, r.key, r.token, r.client)) {
        out.error = failed_ ? "store failed: " + failure_ : "store is closed";
        return out;
      }
      applied = !fence.fenced;
      cited = fence.cited;
      why = fence.why;
      break;
    }
    case EffectMode::kUnfenced:
      applied = true;
      break;
    case EffectMode::kIdempotent:
      duplicate = applied_effects_.contains({r.key, r.id});
      applied = !duplicate;
      if (duplicate) why = "effect '" + r.id + "' of key '" + r.key + "' was already applied: ignored (idempotent)";
      break;
  }
  StoreEffectEntry entry{r.key, r.id, r.token.value(), r.client, last_seq_ + 1, applied, r.mode};
  append_effect_record(pending_, entry);
  ++pending_records_;
  apply_effect_locked(entry);
  ++(applied ? effects_applied_ : effects_skipped_);
  work_cv_.notify_one();
  // The record's seq is after the cited mark's, so this also makes the mark durable.
  if (!wait_durable(lock, entry.seq)) {
    out.error = "store failed before the effect was durable: " + failure_;
    return out;
  }
  out.status = applied ? EffectStatus::kApplied : duplicate ? EffectStatus::kDuplicate : EffectStatus::kRejected;
  out.applied = applied;
  out.high_water = cited.token;
  out.seq = entry.seq;
  out.error = why;
  return out;
}

bool FencedStore::wait_durable(std::unique_lock<std::mutex>& lock, std::int64_t seq) const {
  durable_cv_.wait(lock, [&] { return durable_seq_ >= seq || failed_; });
  return durable_seq_ >= seq;
}

void FencedStore::flusher_loop() {
  std::string batch;
  std::unique_lock lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return !pending_.empty() || closing_; });
    if (pending_.empty()) break;  // closing, and everything is flushed
    batch.clear();
    batch.swap(pending_);
    const std::int64_t upto = last_seq_;  // every seq <= upto is in batch or already on disk
    const std::int64_t records = pending_records_;
    pending_records_ = 0;
    if (options_.test_only_ack_before_sync) {  // the broken store the crash test must catch
      durable_seq_ = upto;
      durable_cv_.notify_all();
    }
    lock.unlock();

    if (options_.before_sync) options_.before_sync(records);
    std::string err;
    bool synced = false;
    if (int e = file_->append(batch); e != 0) {
      err = "write: " + errno_text(e);
    } else {
      synced = true;
      if (int se = file_->sync(); se != 0) err = "fdatasync: " + errno_text(se);
    }

    lock.lock();
    if (synced) ++fsyncs_;
    if (!err.empty()) {
      // After a failed fsync the page cache's state is unknowable (PostgreSQL's "fsyncgate"):
      // refuse everything from now on rather than acknowledge on top of it.
      failed_ = true;
      failure_ = err + " on " + log_path().string();
      pending_.clear();
      pending_records_ = 0;
      spdlog::error("fencecheck-store: {}; refusing every further write", failure_);
      durable_cv_.notify_all();
      break;
    }
    durable_seq_ = upto;
    durable_cv_.notify_all();
  }
}

ReadBack FencedStore::readback() const { return snapshot().readback; }

StoreSnapshot FencedStore::snapshot() const {
  StoreSnapshot snap;
  ReadBack& rb = snap.readback;
  rb.resource = "store";
  rb.fencing = std::string(fencing_mode_name(mode_));
  std::unique_lock lock(mu_);
  rb.chunks.reserve(chunks_.size());
  for (const auto& [slot, c] : chunks_) rb.chunks.push_back(c);
  rb.log = log_;
  rb.rejections = rejections_;
  for (const auto& [key, hw] : high_water_) rb.high_water[key] = hw.token;
  snap.effects = effects_;
  for (const auto& [key, c] : counters_) snap.counters[key] = c.value;
  if (!wait_durable(lock, last_seq_) || failed_)
    throw StoreFailed("store failed before its state was durable, nothing is answered from it: " + failure_);
  return snap;
}

std::map<std::string, std::int64_t> FencedStore::high_water() const {
  std::map<std::string, std::int64_t> out;
  std::lock_guard lock(mu_);
  for (const auto& [key, hw] : high_water_) out[key] = hw.token;
  return out;
}

StoreStats FencedStore::stats() const {
  std::lock_guard lock(mu_);
  return StoreStats{accepted_,   rejected_, fsyncs_,          last_seq_,       durable_seq_,
                    failed_,     failure_,  effects_applied_, effects_skipped_};
}

void FencedStore::close() noexcept {
  std::lock_guard close_lock(close_mu_);
  {
    std::lock_guard lock(mu_);
    closing_ = true;
    work_cv_.notify_all();
  }
  if (flusher_.joinable()) flusher_.join();
  file_.reset();  // closes the log, which releases the flock
  std::lock_guard lock(mu_);
  durable_cv_.notify_all();
}

FencedStore::~FencedStore() { close(); }

}  // namespace fencecheck
