// fc-example-go-etcd-mutex: a fencecheck worker written the way a Go service would be, with
// etcd's own client library: a concurrency.Session (a lease kept alive in the background) and a
// concurrency.Mutex on it. It writes a chunk job to PostgreSQL with its own SQL (pgx), and speaks
// fencecheck's worker protocol v1 (JSON event lines on fd 3).
//
//	--design broken   Lock, then write every chunk trusting the lock: the token is stored with
//	                  each chunk but the write compares it with nothing; a write whose outcome
//	                  is unknown is sent again (up to 3 times).
//	--design correct  the lock key's create revision is the fencing token; the write is
//	                  conditional on it (one statement: the key's fence row moves only upwards);
//	                  a rejected write, or one whose outcome is unknown, ends the holding:
//	                  unlock, close the session, take a new session and lock, and redo the
//	                  segment with the new token (never the old).
//
// Everything it needs comes from the environment fencecheck gives every worker (FENCECHECK_*,
// README.md beside this file).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"log"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v4"
	"go.etcd.io/etcd/clientv3"
	"go.etcd.io/etcd/clientv3/concurrency"
	pb "go.etcd.io/etcd/etcdserver/etcdserverpb"
	"golang.org/x/sys/unix"
)

// The program's own SQL, on the tables the scenario's schema declares (read back by the
// harness through the scenario's read_back, accept_log and high_water). Parameters: $1 key,
// $2 segment, $3 chunk, $4 token, $5 writer, $6 data. One statement each; the two designs differ
// in one line, the WHERE of the key's fence row. Each statement writes the fence row first, then
// the chunk and the log entry only when the fence row was written (they read fenced's
// RETURNING rows): 1 row inserted = accepted, 0 = rejected.
const (
	// broken: the token is recorded (with the chunk, in the log, as the key's latest token) but
	// never compared: whoever writes last wins.
	brokenSQL = `WITH fenced AS (
  INSERT INTO fencecheck_fence AS fence (key, token) VALUES ($1::text, $4::bigint)
  ON CONFLICT (key) DO UPDATE SET token = EXCLUDED.token
  RETURNING fence.key
` + storeAndLogSQL

	// correct: the fence row moves only when the token is not below it (equal: the holder's next
	// chunk). ON CONFLICT DO UPDATE locks the key's fence row and evaluates the WHERE on its
	// latest committed version, so two writers of one key queue on the row and the second
	// compares against the first's token.
	correctSQL = `WITH fenced AS (
  INSERT INTO fencecheck_fence AS fence (key, token) VALUES ($1::text, $4::bigint)
  ON CONFLICT (key) DO UPDATE SET token = EXCLUDED.token
  WHERE fence.token <= EXCLUDED.token
  RETURNING fence.key
` + storeAndLogSQL

	// The rest of both statements: the chunk slot and the accept log, for each row of fenced.
	storeAndLogSQL = `), stored AS (
  INSERT INTO fencecheck_chunks (key, segment, chunk, token, writer, data)
  SELECT $1::text, $2::bigint, $3::bigint, $4::bigint, $5::text, $6::bytea FROM fenced
  ON CONFLICT (key, segment, chunk) DO UPDATE
  SET token = EXCLUDED.token, writer = EXCLUDED.writer, data = EXCLUDED.data
)
INSERT INTO fencecheck_accept_log (key, segment, chunk, token, writer)
SELECT $1::text, $2::bigint, $3::bigint, $4::bigint, $5::text FROM fenced`

	markSQL = `SELECT token FROM fencecheck_fence WHERE key = $1::text`
)

// Exit statuses (worker protocol v1): 0 the job is done (after job.done), 1 gave up (after
// job.gave_up, which says why: an exit 1 alone is a crash, docs/worker-protocol.md); 2 a usage error.
const (
	exitDone   = 0
	exitGaveUp = 1
	exitUsage  = 2
)

// The worker's own log (stdout; the harness keeps it under the run's logs/). Its own logger, not
// the standard one, which etcd's client library redirects to its own.
var logger = log.New(os.Stdout, "", log.Ltime|log.Lmicroseconds)

// ---- events (fd 3) ---------------------------------------------------------------------------

type events struct {
	mu  sync.Mutex
	out *os.File
}

type fields map[string]interface{}

func monotonicNs() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}

// emit writes one event line in one write(2) (lines are < 4 KiB, so atomic on the pipe).
func (ev *events) emit(kind string, f fields) {
	if f == nil {
		f = fields{}
	}
	f["kind"] = kind
	ev.mu.Lock()
	defer ev.mu.Unlock()
	f["src_ns"] = monotonicNs() // under the lock: lines come out in src_ns order
	line, err := json.Marshal(f)
	if err != nil {
		logger.Printf("event %s not encodable: %v", kind, err)
		return
	}
	if _, err := ev.out.Write(append(line, '\n')); err != nil {
		logger.Printf("event %s not written: %v", kind, err)
	}
}

// ---- the chunk codec (workers/proto/src/chunk.cpp, byte for byte) ----------------------------

func safeName(s string, maxLen int) bool {
	if len(s) == 0 || len(s) > maxLen {
		return false
	}
	for _, c := range []byte(s) {
		ok := (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

// encodeChunk: "fc1 w=<worker> t=<token> k=<key> s=<segment> c=<chunk> f=" + 'x' filler so the
// whole is size bytes (when the header leaves room) + " crc=" + CRC-32 (IEEE, as zlib.crc32) of
// everything before " crc=", as 8 lower-case hex digits.
func encodeChunk(worker string, token int64, key string, segment, chunk int64, size int) []byte {
	const crcTag = " crc="
	var b strings.Builder
	fmt.Fprintf(&b, "fc1 w=%s t=%d k=%s s=%d c=%d f=", worker, token, key, segment, chunk)
	tail := len(crcTag) + 8
	if b.Len()+tail < size {
		b.WriteString(strings.Repeat("x", size-b.Len()-tail))
	}
	body := b.String()
	return []byte(fmt.Sprintf("%s%s%08x", body, crcTag, crc32.ChecksumIEEE([]byte(body))))
}

// ---- configuration ---------------------------------------------------------------------------

type config struct {
	design        string
	worker        string
	endpoints     []string
	lockName      string
	ttlS          int
	dsn           string
	key           string
	segments      int64
	chunks        int64
	chunkBytes    int
	chunkInterval time.Duration
	eventsFd      int
	lockTimeout   time.Duration
	writeTimeout  time.Duration
	maxAcquires   int
}

func envInt(name string, problems *[]string) int64 {
	v, err := strconv.ParseInt(os.Getenv(name), 10, 64)
	if err != nil {
		*problems = append(*problems, fmt.Sprintf("%s must be an integer, got %q", name, os.Getenv(name)))
	}
	return v
}

func loadConfig() (config, error) {
	var c config
	flag.StringVar(&c.design, "design", "", "broken (trust the lock) or correct (the lock key's create revision fences every write)")
	flag.DurationVar(&c.lockTimeout, "lock-timeout", 30*time.Second, "how long one Lock may wait")
	flag.DurationVar(&c.writeTimeout, "write-timeout", 5*time.Second, "bound of one write (connect, statement)")
	flag.IntVar(&c.maxAcquires, "max-acquires", 10, "give up (exit 1) after this many acquisition attempts")
	flag.Parse()
	var problems []string
	if c.design != "broken" && c.design != "correct" {
		problems = append(problems, fmt.Sprintf("--design must be broken or correct, got %q", c.design))
	}
	if flag.NArg() > 0 {
		problems = append(problems, fmt.Sprintf("unexpected arguments %q", flag.Args()))
	}
	if p := os.Getenv("FENCECHECK_PROTOCOL"); p != "1" {
		problems = append(problems, fmt.Sprintf("FENCECHECK_PROTOCOL is %q; this worker speaks protocol 1 (run it under fencecheck)", p))
	}
	if k := os.Getenv("FENCECHECK_RESOURCE_KIND"); k != "postgres" {
		problems = append(problems, fmt.Sprintf("FENCECHECK_RESOURCE_KIND is %q; this worker writes to PostgreSQL (resource kind postgres)", k))
	}
	if k := os.Getenv("FENCECHECK_JOB_KIND"); k != "segments" {
		problems = append(problems, fmt.Sprintf("FENCECHECK_JOB_KIND is %q; this worker does chunk jobs (job kind segments)", k))
	}
	c.worker = os.Getenv("FENCECHECK_WORKER_ID")
	if !safeName(c.worker, 64) {
		problems = append(problems, fmt.Sprintf("FENCECHECK_WORKER_ID must be 1-64 of [A-Za-z0-9_.-], got %q", c.worker))
	}
	c.key = os.Getenv("FENCECHECK_KEY")
	if !safeName(c.key, 256) {
		problems = append(problems, fmt.Sprintf("FENCECHECK_KEY must be 1-256 of [A-Za-z0-9_.-], got %q", c.key))
	}
	for _, e := range strings.Split(os.Getenv("FENCECHECK_LOCK_ENDPOINTS"), ",") {
		if e = strings.TrimSpace(e); e != "" {
			c.endpoints = append(c.endpoints, e)
		}
	}
	if len(c.endpoints) == 0 {
		problems = append(problems, "FENCECHECK_LOCK_ENDPOINTS is empty")
	}
	if c.lockName = os.Getenv("FENCECHECK_LOCK_NAME"); c.lockName == "" {
		problems = append(problems, "FENCECHECK_LOCK_NAME is empty")
	}
	if c.dsn = os.Getenv("FENCECHECK_RESOURCE_DSN"); c.dsn == "" {
		problems = append(problems, "FENCECHECK_RESOURCE_DSN is empty")
	}
	c.ttlS = int(envInt("FENCECHECK_LEASE_TTL_S", &problems))
	c.segments = envInt("FENCECHECK_JOB_SEGMENTS", &problems)
	c.chunks = envInt("FENCECHECK_JOB_CHUNKS", &problems)
	c.chunkBytes = int(envInt("FENCECHECK_CHUNK_BYTES", &problems))
	c.chunkInterval = time.Duration(envInt("FENCECHECK_CHUNK_INTERVAL_MS", &problems)) * time.Millisecond
	c.eventsFd = int(envInt("FENCECHECK_EVENTS_FD", &problems))
	if c.ttlS < 1 || c.segments < 1 || c.chunks < 1 || c.chunkBytes < 1 || c.chunkInterval < 0 {
		problems = append(problems, "FENCECHECK_LEASE_TTL_S, _JOB_SEGMENTS, _JOB_CHUNKS and _CHUNK_BYTES must be >= 1, _CHUNK_INTERVAL_MS >= 0")
	}
	if len(problems) > 0 {
		return c, errors.New(strings.Join(problems, "\n  "))
	}
	return c, nil
}

// ---- the worker ------------------------------------------------------------------------------

// holding: one session (its lease) and the mutex locked on it.
type holding struct {
	session *concurrency.Session
	mutex   *concurrency.Mutex
	token   int64
	ended   chan struct{} // closed when we end the holding ourselves
}

type worker struct {
	c      config
	ev     *events
	cli    *clientv3.Client
	db     *pgx.Conn
	held   *holding
	tries  int
	writeQ string
}

// createRevision is the lock key's create revision: the number etcd's Mutex itself identifies
// its ownership by (IsOwner() is the comparison CreateRevision(Key()) == myRev; Lock sets myRev
// to the revision of its own put, or to the existing key's CreateRevision). Header().Revision
// is not it: after a wait it is the store's revision at the last check of the waiters before us.
func createRevision(m *concurrency.Mutex) int64 {
	cmp := m.IsOwner()
	return (*pb.Compare)(&cmp).GetCreateRevision()
}

var errGaveUp = errors.New("gave up")

func (w *worker) acquire(ctx context.Context) error {
	for {
		if w.tries >= w.c.maxAcquires {
			w.ev.emit("job.gave_up", fields{"detail": fmt.Sprintf("gave up after %d acquisition attempts (--max-acquires)", w.tries)})
			return errGaveUp
		}
		w.tries++
		w.ev.emit("acquire.invoke", fields{"lock": w.c.lockName, "ttl_ms": w.c.ttlS * 1000})
		s, err := concurrency.NewSession(w.cli, concurrency.WithTTL(w.c.ttlS))
		if err != nil {
			w.acquireFailed(0, "NewSession: "+err.Error())
			time.Sleep(200 * time.Millisecond)
			continue
		}
		m := concurrency.NewMutex(s, w.c.lockName)
		lctx, cancel := context.WithTimeout(ctx, w.c.lockTimeout)
		err = m.Lock(lctx)
		cancel()
		if err != nil {
			w.acquireFailed(int64(s.Lease()), "Lock: "+err.Error())
			if cerr := s.Close(); cerr != nil {
				logger.Printf("closing the session after a failed Lock: %v", cerr)
			}
			time.Sleep(200 * time.Millisecond)
			continue
		}
		h := &holding{session: s, mutex: m, token: createRevision(m), ended: make(chan struct{})}
		w.held = h
		w.ev.emit("acquire.ok", fields{"lock": w.c.lockName, "lock_key": m.Key(), "token": h.token,
			"lease_id": int64(s.Lease()), "revision": m.Header().Revision, "ttl_ms": w.c.ttlS * 1000})
		logger.Printf("locked %s as %s: token (create revision) %d, lease %x, Header().Revision %d", w.c.lockName, m.Key(),
			h.token, int64(s.Lease()), m.Header().Revision)
		// Session.Done closes when the keepalive stops: the lease expired or could not be renewed.
		// Noted for the record; neither design acts on it (the broken one trusts the lock, the
		// correct one relies on the fence).
		go func(lease int64, token int64) {
			select {
			case <-s.Done():
				select {
				case <-h.ended:
				default:
					w.ev.emit("log", fields{"lease_id": lease, "token": token,
						"detail": "session done: its keepalive stopped (lease expired or not renewable)"})
					logger.Printf("session of lease %x is done while holding token %d", lease, token)
				}
			case <-h.ended:
			}
		}(int64(s.Lease()), h.token)
		return nil
	}
}

func (w *worker) acquireFailed(lease int64, detail string) {
	f := fields{"lock": w.c.lockName, "detail": detail}
	if lease != 0 {
		f["lease_id"] = lease
	}
	w.ev.emit("acquire.fail", f)
	logger.Printf("acquire failed: %s", detail)
}

// release: Unlock (deletes our own key), then Close (revokes the session's lease).
func (w *worker) release() {
	h := w.held
	if h == nil {
		return
	}
	w.held = nil
	close(h.ended)
	key := h.mutex.Key()
	lease := int64(h.session.Lease())
	w.ev.emit("release.invoke", fields{"lock_key": key, "token": h.token, "lease_id": lease})
	ctx, cancel := context.WithTimeout(context.Background(), w.c.writeTimeout)
	err := h.mutex.Unlock(ctx)
	cancel()
	if err != nil {
		w.ev.emit("release.fail", fields{"lock_key": key, "token": h.token, "detail": err.Error()})
	} else {
		w.ev.emit("release.ok", fields{"lock_key": key, "token": h.token})
	}
	if err := h.session.Close(); err != nil {
		logger.Printf("session close (lease revoke) of %x: %v (an expired lease is gone already)", lease, err)
	}
}

type outcome int

const (
	accepted outcome = iota
	rejected
	unknown
)

func (w *worker) connect(ctx context.Context) error {
	cfg, err := pgx.ParseConfig(w.c.dsn)
	if err != nil {
		return err
	}
	// gssencmode is a libpq option (pgx never negotiates GSS encryption): not a server setting.
	delete(cfg.RuntimeParams, "gssencmode")
	cfg.RuntimeParams["statement_timeout"] = strconv.FormatInt(w.c.writeTimeout.Milliseconds(), 10)
	cfg.ConnectTimeout = w.c.writeTimeout
	w.db, err = pgx.ConnectConfig(ctx, cfg)
	return err
}

func (w *worker) dropConnection() {
	if w.db != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = w.db.Close(ctx)
		cancel()
		w.db = nil
	}
}

func (w *worker) write(segment, chunk int64) outcome {
	token := w.held.token
	f := func() fields {
		return fields{"key": w.c.key, "segment": segment, "chunk": chunk, "token": token}
	}
	w.ev.emit("write.invoke", f())
	data := encodeChunk(w.c.worker, token, w.c.key, segment, chunk, w.c.chunkBytes)
	ctx, cancel := context.WithTimeout(context.Background(), w.c.writeTimeout)
	defer cancel()
	if w.db == nil {
		if err := w.connect(ctx); err != nil {
			// Nothing was sent: but a write that never reached the database is still reported as
			// unknown, never as rejected, so the holding ends all the same.
			e := f()
			e["detail"] = "connect: " + err.Error()
			w.ev.emit("write.info", e)
			w.dropConnection()
			return unknown
		}
	}
	tag, err := w.db.Exec(ctx, w.writeQ, w.c.key, segment, chunk, token, w.c.worker, data)
	if err != nil {
		e := f()
		e["detail"] = err.Error()
		w.ev.emit("write.info", e)
		logger.Printf("write s=%d c=%d token %d: outcome unknown: %v", segment, chunk, token, err)
		w.dropConnection() // its state is unknown: the next write connects again
		return unknown
	}
	if tag.RowsAffected() >= 1 {
		w.ev.emit("write.ok", f())
		return accepted
	}
	e := f()
	var mark int64
	if err := w.db.QueryRow(ctx, markSQL, w.c.key).Scan(&mark); err == nil {
		e["high_water"] = mark
		e["detail"] = fmt.Sprintf("fenced: token %d is below the key's mark %d", token, mark)
	} else {
		e["high_water"] = 0 // a rejection by the fence whose mark is not known (docs/worker-protocol.md)
		e["detail"] = "fenced (the mark could not be read: " + err.Error() + ")"
	}
	w.ev.emit("write.fail", e)
	logger.Printf("write s=%d c=%d token %d rejected: %v", segment, chunk, token, e["detail"])
	return rejected
}

func (w *worker) run(ctx context.Context) int {
	if err := w.acquire(ctx); err != nil {
		return exitGaveUp
	}
	first := true
	for segment := int64(0); segment < w.c.segments; {
		done := true
		for chunk := int64(0); chunk < w.c.chunks; chunk++ {
			if !first {
				time.Sleep(w.c.chunkInterval)
			}
			first = false
			result := w.write(segment, chunk)
			// broken: it trusts the lock, so a write whose outcome is unknown (a timeout, a broken
			// connection) is only a failed request: it sends the chunk again, same token.
			for retry := 1; result == unknown && w.c.design == "broken" && retry <= 3; retry++ {
				logger.Printf("broken design: sending s=%d c=%d again with token %d (retry %d/3)", segment, chunk, w.held.token, retry)
				time.Sleep(w.c.chunkInterval)
				result = w.write(segment, chunk)
			}
			if result != accepted {
				done = false
				break
			}
		}
		if done {
			segment++
			continue
		}
		// This holding is over: its token is never sent again. Unlock, close the session, take a
		// new session and lock, and redo the segment from its first chunk.
		previous := w.held.token
		logger.Printf("holding with token %d is over; re-acquiring to redo segment %d", previous, segment)
		w.release()
		if err := w.acquire(ctx); err != nil {
			return exitGaveUp
		}
		if w.held.token <= previous {
			w.ev.emit("job.gave_up", fields{"token": w.held.token, "detail": fmt.Sprintf(
				"the new token %d is not greater than the previous token %d: refusing to write with it", w.held.token, previous)})
			w.release()
			return exitGaveUp
		}
	}
	w.ev.emit("job.done", fields{"token": w.held.token, "key": w.c.key})
	w.release()
	return exitDone
}

func main() {
	c, err := loadConfig()
	if err != nil {
		fmt.Fprintf(os.Stderr, "fc-example-go-etcd-mutex: %v\n", err)
		os.Exit(exitUsage)
	}
	logger.SetPrefix(c.worker + " ")
	if _, err := unix.FcntlInt(uintptr(c.eventsFd), unix.F_GETFD, 0); err != nil {
		fmt.Fprintf(os.Stderr, "fc-example-go-etcd-mutex: the events descriptor %d is not open (run it under fencecheck, or `exec %d>events.jsonl` first)\n", c.eventsFd, c.eventsFd)
		os.Exit(exitUsage)
	}
	ev := &events{out: os.NewFile(uintptr(c.eventsFd), "events")}
	ev.emit("hello", fields{"protocol": 1})
	ev.emit("log", fields{"detail": "design " + c.design + ": etcd clientv3/concurrency Session + Mutex, PostgreSQL via pgx"})

	cli, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		ev.emit("job.gave_up", fields{"detail": "etcd client: " + err.Error()})
		logger.Printf("etcd client: %v", err)
		os.Exit(exitGaveUp)
	}
	defer cli.Close()
	w := &worker{c: c, ev: ev, cli: cli, writeQ: brokenSQL}
	if c.design == "correct" {
		w.writeQ = correctSQL
	}
	rc := w.run(context.Background())
	w.dropConnection()
	logger.Printf("exit %d", rc)
	cli.Close()
	os.Exit(rc)
}
