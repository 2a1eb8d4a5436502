#!/usr/bin/python3
"""A small HTTP service speaking fencecheck's http resource contract (docs/resource-http.md),
deliberately broken by check-then-write: it reads the key's high-water mark, sleeps --window-ms
WITHOUT holding a lock, then writes and sets the mark to the writer's token. A lower token that
passed its check before a higher one was written lands after it (a stale write accepted, and the
mark goes backwards). --correct holds a per-key lock across the check and the write: the same
service, fixed. --text-compare (alias --compare-as-text; with --correct) keeps the lock but compares
the tokens as decimal text, as a service that keeps tokens in a text column does: "10" < "9", so it
rejects tokens above its mark (issue 31: unjustified-rejection) and, without --correct, accepts 9
after 10.

Usage: broken_service.py [--port N] [--window-ms MS] [--correct] [--text-compare] [--trace]
First stdout line: {"listening":"127.0.0.1:PORT","fencing":"check-then-write"|"per-key"|"per-key-text","pid":N}.
--trace: one more stdout line per write that passed its check, before the window:
{"checked":{"key":K,"token":T,"mark":M}} (tests synchronise on it). Stdlib only.
"""
import argparse, base64, json, os, re, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PUT_PATH = re.compile(r"^/v1/keys/([A-Za-z0-9_.~-]+)/segments/(\d+)/chunks/(\d+)$")


def say(obj):  # one compact JSON line on stdout, flushed (fencecheck-store's style)
    print(json.dumps(obj, separators=(",", ":")), flush=True)


class State:
    def __init__(self):
        self.mu = threading.Lock()  # guards the tables below (each access is short)
        self.key_locks = {}  # key -> Lock, used only with --correct
        self.mark, self.chunks, self.log, self.rejections = {}, {}, [], []

    def key_lock(self, key):
        with self.mu:
            return self.key_locks.setdefault(key, threading.Lock())


class Handler(BaseHTTPRequestHandler):
    def reply(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        s = self.server.state
        if self.path == "/healthz":
            return self.reply(200, {"ok": True})
        if self.path != "/v1/readback":
            return self.reply(404, {"error": "no such path"})
        with s.mu:  # one consistent snapshot
            rb = {"resource": "broken-service", "fencing": self.server.fencing,
                  "chunks": [dict(key=k, segment=g, chunk=c, **v) for (k, g, c), v in sorted(s.chunks.items())],
                  "log": list(s.log), "rejections": list(s.rejections), "high_water": dict(s.mark)}
        self.reply(200, rb)

    def do_PUT(self):
        s, m = self.server.state, PUT_PATH.match(self.path)
        data = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if not m:
            return self.reply(404, {"error": "no such path"})
        key, seg, chunk = m.group(1), int(m.group(2)), int(m.group(3))
        token, client = self.headers.get("Fencing-Token", ""), self.headers.get("Fencecheck-Client", "")
        if not re.fullmatch(r"\d{1,18}", token) or not client or not data:
            return self.reply(400, {"error": "need a decimal Fencing-Token, a Fencecheck-Client and a body"})
        token = int(token)
        lock = s.key_lock(key) if self.server.correct else None
        if lock:
            lock.acquire()
        try:
            mark = s.mark.get(key, 0)  # the check
            if (str(token) < str(mark)) if self.server.text_compare else (token < mark):
                with s.mu:
                    s.rejections.append(dict(key=key, segment=seg, chunk=chunk, token=token, client=client,
                                             high_water=mark))
                return self.reply(409, {"accepted": False, "high_water": mark,
                                        "error": "token %d below high-water %d" % (token, mark)})
            if self.server.trace:
                say({"checked": {"key": key, "token": token, "mark": mark}})
            time.sleep(self.server.window)  # broken: another writer may write the key meanwhile
            with s.mu:  # the write: stored, logged, and the mark set to THIS token
                seq = len(s.log) + 1
                s.chunks[(key, seg, chunk)] = dict(token=token, client=client, seq=seq,
                                                   data_b64=base64.b64encode(data).decode())
                s.log.append(dict(seq=seq, key=key, segment=seg, chunk=chunk, token=token, client=client))
                s.mark[key] = token
            return self.reply(200, {"accepted": True, "high_water": token, "seq": seq})
        finally:
            if lock:
                lock.release()

    def log_message(self, *args):  # no per-request lines on stderr
        pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--window-ms", type=float, default=50.0)
    ap.add_argument("--correct", action="store_true")
    ap.add_argument("--text-compare", "--compare-as-text", dest="text_compare", action="store_true")
    ap.add_argument("--trace", action="store_true")
    a = ap.parse_args()
    ThreadingHTTPServer.request_queue_size = 128
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    srv.daemon_threads = True
    srv.state, srv.window, srv.correct, srv.trace = State(), a.window_ms / 1000.0, a.correct, a.trace
    srv.text_compare = a.text_compare
    srv.fencing = ("per-key-text" if a.text_compare else "per-key") if a.correct else "check-then-write"
    say({"listening": "127.0.0.1:%d" % srv.server_address[1], "fencing": srv.fencing, "pid": os.getpid()})
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
