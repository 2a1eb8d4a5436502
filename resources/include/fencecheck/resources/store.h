// fencecheck — FencedStore: the reference fenced resource's state machine and its durability,
// independent of HTTP (store_server.h puts it on the wire).
//
// The rule it enforces comes from Kleppmann, "How to do distributed locking" (2016): the lock
// service hands out strictly increasing fencing tokens; every write carries its holder's token;
// the *resource* remembers the highest token it has accepted per key (its high-water mark) and
// refuses a lower one. The comparison, the update of the high-water mark and the write itself are
// one atomic step here (one critical section), because a check done apart from the write is the
// very race fencing exists to close.
//
// Durability. Every accepted write is appended to `<data_dir>/store.log` and fdatasync'ed before
// write() returns, so an acknowledged write survives `kill -9` of the process. Appends are group
// committed: one flusher thread writes whatever records are pending and fdatasyncs once, and every
// writer waits for the flush that covers its own record, so N concurrent writes cost about one
// fdatasync rather than N (watch StoreStats::fsyncs). On open() the log is replayed to rebuild the
// state; a torn or corrupt record (a crash in the middle of an append) ends the log: it and
// everything after it is truncated away with a warning (see RecoveryReport), never a crash.
//
// Log file format (all integers little-endian):
//   file   := magic record*
//   magic  := "fcstlog1" (8 bytes)
//   record := u32 payload_len, u32 crc32(payload) (fencecheck::crc32, IEEE), payload
//   payload:= u8 version(=1), i64 seq, i64 token, i64 segment, i64 chunk,
//             u16 key_len, key, u16 client_len, client, u32 data_len, data
// Rejections are not logged: they are kept in memory for the read-back and are gone after a
// restart. The mode is not logged either: replay rebuilds the same state in every mode (the
// high-water mark is the largest token logged for the key; a chunk slot holds its last record).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "fencecheck/proto/readback.h"
#include "fencecheck/proto/token.h"

namespace fencecheck {

/// How the store decides whether a write's token is acceptable. Names on the wire and the command
/// line are fencing_mode_name(). New modes (planned: "global" — one high-water mark for every key;
/// "check-then-write" — read the high-water mark, wait a window, then write, as two separately
/// locked steps, to demonstrate the race) slot in next to these; see FencedStore::write().
enum class FencingMode {
  kPerKey,  ///< "per-key": accept iff token >= the key's high-water mark. The correct rule.
  kNone,    ///< "none": accept every write (the control that proves the checkers can fail); the
            ///< high-water mark is still tracked (the largest token seen per key) for the read-back.
};

/// The wire name of a mode: "per-key", "none". Total; pure; thread-safe.
[[nodiscard]] std::string_view fencing_mode_name(FencingMode mode);
/// The mode for a wire name; nullopt for an unknown name. Pure; thread-safe.
[[nodiscard]] std::optional<FencingMode> fencing_mode_from_name(std::string_view name);
/// Every mode's wire name, in declaration order (for --help text and error messages).
[[nodiscard]] std::vector<std::string_view> fencing_mode_names();

/// Largest chunk the store will hold (bytes). The HTTP server's body limit must not exceed it;
/// replay treats a record claiming more as corrupt.
inline constexpr std::size_t kMaxChunkBytes = 16u * 1024 * 1024;
/// Longest key (bytes), alphabet [A-Za-z0-9_.-] (fencecheck::is_safe_name).
inline constexpr std::size_t kMaxKeyBytes = 256;
/// Longest client (writer) id (bytes), alphabet [A-Za-z0-9_.-], as worker ids in chunk.h.
inline constexpr std::size_t kMaxClientBytes = 64;

/// Checks a name (key or client id) against is_safe_name's rule: 1..max_len bytes of
/// [A-Za-z0-9_.-]. Returns "" when it is fine, otherwise a message naming `what` and the exact
/// problem: "key is empty", "key is 300 bytes, over the 256-byte limit", "key 'a b' has a
/// character outside [A-Za-z0-9_.-] at offset 1". Long values are shown cut to 40 characters,
/// unprintable bytes as \xNN. Pure; thread-safe.
[[nodiscard]] std::string name_problem(std::string_view what, std::string_view value, std::size_t max_len);

/// One write: put `bytes` into the slot key/segment/chunk under fencing token `token`.
struct WriteRequest {
  std::string key;           ///< 1..kMaxKeyBytes of [A-Za-z0-9_.-]
  std::int64_t segment = 0;  ///< >= 0
  std::int64_t chunk = 0;    ///< >= 0
  FencingToken token;        ///< the holder's fencing token (>= 0)
  std::string client;        ///< writer id, 1..kMaxClientBytes of [A-Za-z0-9_.-]
  std::string bytes;         ///< the chunk, 1..kMaxChunkBytes bytes
};

/// What became of one write.
enum class WriteStatus {
  kAccepted,  ///< applied and durable (fdatasync'ed) before write() returned
  kRejected,  ///< fenced: token below the key's high-water mark; nothing changed
  kFailed,    ///< the store is closed or hit an I/O error (it then refuses every later write);
              ///< whether this write survives a restart is unknown (Jepsen's "info")
};

/// The reply to one write.
struct WriteResult {
  WriteStatus status = WriteStatus::kFailed;
  bool accepted = false;        ///< status == kAccepted
  std::int64_t high_water = 0;  ///< the key's high-water mark after this write (for a rejection:
                                ///< the mark the token was compared against); durable either way
  std::int64_t seq = 0;         ///< store-wide acceptance order, 1-based; 0 unless accepted
  std::string error;            ///< why, when not accepted
};

/// Counters for metrics and tests. A snapshot: values may move on right after.
struct StoreStats {
  std::int64_t accepted = 0;     ///< accepted writes since open (not counting replayed ones)
  std::int64_t rejected = 0;     ///< fenced writes since open
  std::int64_t fsyncs = 0;       ///< fdatasync calls made by the flusher since open
  std::int64_t last_seq = 0;     ///< highest seq assigned (including replayed records)
  std::int64_t durable_seq = 0;  ///< every record with seq <= this is on disk
  bool failed = false;           ///< an I/O error happened; every later write gets kFailed
  std::string failure;           ///< the I/O error, when failed
};

/// What open() found in the log.
struct RecoveryReport {
  std::int64_t records = 0;          ///< complete records replayed
  std::uint64_t kept_bytes = 0;      ///< log length after recovery
  std::uint64_t truncated_bytes = 0; ///< bytes cut off the tail (0 when the log was clean)
  std::string problem;               ///< why the tail was cut ("torn record header at offset N", ...)
};

/// Knobs for open(). The defaults are what the binary uses.
struct StoreOptions {
  /// Test seam: called by the flusher thread, without any store lock held, right before each
  /// fdatasync, with the number of records in the batch about to be synced. Tests use it to hold
  /// a flush until a known number of writers are waiting, which makes group commit observable
  /// without sleeping. Must not call back into the store's write().
  std::function<void(std::int64_t batch_records)> before_sync;
  /// Test seam: called by the writing thread after the fencing decision is made and applied (or
  /// the rejection recorded), with the store lock released, just before it waits for durability.
  /// accepted=false means fenced (seq 0). Lets a test know a writer is parked on a flush.
  std::function<void(const WriteRequest& request, bool accepted, std::int64_t seq)> after_decision;
};

/// A fenced key-value store of chunk slots, durable in an append-only log.
///
/// Thread-safety: every public member may be called from any number of threads at once, except
/// that the object must outlive all calls (destroy it only after they return).
class FencedStore {
 public:
  /// Opens (creating when missing) the store in data_dir: creates the directory and
  /// `store.log`, takes an exclusive flock on the log (a second store on the same directory is
  /// refused), replays it and truncates a torn or corrupt tail (see recovery()). Starts the
  /// flusher thread. Throws std::runtime_error naming the path and the errno text when the
  /// directory or file cannot be created, opened, locked, read or repaired, or when the file is
  /// not a fencecheck-store log.
  [[nodiscard]] static std::unique_ptr<FencedStore> open(const std::filesystem::path& data_dir, FencingMode mode,
                                                         StoreOptions options = {});

  /// close()s.
  ~FencedStore();
  FencedStore(const FencedStore&) = delete;
  FencedStore& operator=(const FencedStore&) = delete;

  /// Applies one write. In one critical section: compare the token with the key's high-water
  /// mark (per the mode), and when acceptable, raise the mark, assign the next seq, update the
  /// chunk slot and append the log record. Then, outside it, wait until the flusher has made
  /// that record durable, and only then return kAccepted. A rejection is recorded (in memory) and
  /// returned only once the high-water mark it cites is durable, so a reply never cites a mark a
  /// crash could take back. Per-key rule: accept iff token >= high-water (equal is accepted: one
  /// holder writes many chunks under one token). Blocks for about one fdatasync.
  /// Throws std::invalid_argument naming the field when the request breaks WriteRequest's rules
  /// (nothing changes then). I/O errors and writes after close() give kFailed, never a throw.
  [[nodiscard]] WriteResult write(const WriteRequest& request);

  /// Everything, as the checkers read it: chunks (each slot's last accepted write, sorted by key,
  /// segment, chunk), log (every accepted write in seq order), rejections (since open, in order),
  /// high_water per key; resource "store", fencing = the mode's name. Waits until everything it
  /// returns is durable (or the store failed), so a read-back never shows a write a crash could
  /// take back. Copies the data: O(size of the store).
  [[nodiscard]] ReadBack readback() const;

  /// The high-water mark of every key that has one (no waiting for durability: for metrics).
  [[nodiscard]] std::map<std::string, std::int64_t> high_water() const;

  /// Current counters.
  [[nodiscard]] StoreStats stats() const;

  /// What open() found and repaired. Immutable after open.
  [[nodiscard]] const RecoveryReport& recovery() const { return recovery_; }

  [[nodiscard]] FencingMode mode() const { return mode_; }
  [[nodiscard]] const std::filesystem::path& data_dir() const { return data_dir_; }
  /// The log file's path: data_dir / "store.log".
  [[nodiscard]] std::filesystem::path log_path() const { return data_dir_ / "store.log"; }

  /// Makes every pending record durable, stops the flusher, releases the lock and closes the
  /// log. Writes that were waiting complete normally; later writes get kFailed ("store is
  /// closed"). Idempotent; never throws.
  void close() noexcept;

 private:
  using SlotKey = std::tuple<std::string, std::int64_t, std::int64_t>;
  struct HighWater {
    std::int64_t token = 0;
    std::int64_t seq = 0;  ///< the write that set this mark: it is durable once durable_seq_ >= seq
  };

  FencedStore(std::filesystem::path data_dir, FencingMode mode, StoreOptions options);
  void replay_locked();
  void apply_locked(std::int64_t seq, const WriteRequest& request);
  void flusher_loop();
  /// Waits (releasing lock) until seq is durable or the store failed/closed; true when durable.
  bool wait_durable(std::unique_lock<std::mutex>& lock, std::int64_t seq) const;

  const std::filesystem::path data_dir_;
  const FencingMode mode_;
  const StoreOptions options_;
  RecoveryReport recovery_;
  int fd_ = -1;

  mutable std::mutex mu_;  ///< guards everything below
  mutable std::condition_variable work_cv_;     ///< flusher: records pending or closing
  mutable std::condition_variable durable_cv_;  ///< writers: durable_seq_ advanced or failure
  std::map<std::string, HighWater> high_water_;
  std::map<SlotKey, StoredChunk> chunks_;
  std::vector<AcceptedWrite> log_;
  std::vector<RejectedWrite> rejections_;
  std::string pending_;                 ///< encoded records not yet handed to the flusher
  std::int64_t pending_records_ = 0;
  std::int64_t last_seq_ = 0;
  std::int64_t durable_seq_ = 0;
  std::int64_t accepted_ = 0;
  std::int64_t rejected_ = 0;
  std::int64_t fsyncs_ = 0;
  bool closing_ = false;
  bool failed_ = false;
  std::string failure_;
  std::thread flusher_;
  std::mutex close_mu_;  ///< serialises close()
};

}  // namespace fencecheck
