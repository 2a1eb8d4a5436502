"""bench/bench.py's figures on a hand-made history: handover (pause -> expiry -> next holder's
first accepted write), the inherent wait of a run, and duration parsing."""
import importlib.util
import os
import unittest

spec = importlib.util.spec_from_file_location("bench", os.environ.get("FENCECHECK_BENCH_PY", "../../bench/bench.py"))
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

MS = 1_000_000


def ev(t_ms, source, kind, **fields):
    e = {"t_ns": int(t_ms * MS), "src_ns": int(t_ms * MS) - 1000, "source": source, "kind": kind}
    e.update(fields)
    return e


# w1 holds token 10, writes twice (100 ms apart), is SIGSTOPped for 6 s; its lease expires at
# 2400 ms (lock.delete of token 10 at revision 12, no release explains it); w2 (token 11) writes
# its first chunk at 2450 ms and 3 more; w1 resumes, is fenced once, re-acquires (token 13) and
# writes 4 chunks, then releases (revision 14).
HISTORY = [
    ev(0, "harness", "run.start"),
    ev(5, "w1", "acquire.invoke"),
    ev(10, "w1", "acquire.ok", token=10),
    ev(11, "w2", "acquire.invoke"),
    ev(20, "w1", "write.ok", token=10),
    ev(120, "w1", "write.ok", token=10),
    ev(121, "harness", "fault.inject", fault="sigstop", target="w1", duration_ns=6000 * MS),
    ev(2400, "lock", "lock.delete", token=10, revision=12),
    ev(2420, "w2", "acquire.ok", token=11),
    ev(2450, "w2", "write.ok", token=11),
    ev(2550, "w2", "write.ok", token=11),
    ev(2650, "w2", "write.ok", token=11),
    ev(2750, "w2", "write.ok", token=11),
    ev(2760, "w2", "release.ok", token=11, revision=13),
    ev(2761, "lock", "lock.delete", token=11, revision=13),
    ev(6121, "harness", "fault.heal", fault="sigstop", target="w1", duration_ns=6000 * MS),
    ev(6130, "w1", "write.fail", token=10),
    ev(6150, "w1", "acquire.ok", token=13),
    ev(6160, "w1", "write.ok", token=13),
    ev(6260, "w1", "write.ok", token=13),
    ev(6360, "w1", "write.ok", token=13),
    ev(6460, "w1", "write.ok", token=13),
    ev(6470, "w1", "release.ok", token=13, revision=14),
    ev(6500, "harness", "run.end"),
]
SCENARIO = {"lease_ttl": "2s", "job": {"chunk_interval": "100ms"}}


class Figures(unittest.TestCase):
    def test_handover_from_the_expiry_and_from_the_pause(self):
        figs = bench.figures_from_history(HISTORY, SCENARIO)
        self.assertEqual(len(figs["handovers"]), 1)
        h = figs["handovers"][0]
        self.assertAlmostEqual(h["expiry_to_write_ms"], 50.0)
        self.assertAlmostEqual(h["pause_to_write_ms"], 2329.0)
        self.assertAlmostEqual(h["pause_to_expiry_ms"], 2279.0)

    def test_a_release_is_not_an_expiry(self):
        # Without the fault, w1's key deleted at a released revision is no handover.
        history = [e for e in HISTORY if e["kind"] != "fault.inject"]
        self.assertEqual(bench.figures_from_history(history, SCENARIO)["handovers"], [])

    def test_inherent_wait_is_the_faulted_workers_own_timeline(self):
        figs = bench.figures_from_history(HISTORY, SCENARIO)
        # w1: 7 writes (2 + 1 fenced + 4) x 100 ms + 6 s stopped = 6.7 s; the lock's timeline is
        # 10 accepted writes x 100 ms = 1 s (the TTL wait lies inside the pause).
        self.assertAlmostEqual(figs["inherent_s"], 6.7)
        self.assertAlmostEqual(figs["inherent_parts"]["lock_timeline_s"], 1.0)
        self.assertEqual(figs["run_start_ns"], 0)
        self.assertEqual(figs["first_worker_event_ns"], 5 * MS - 1000)

    def test_durations(self):
        self.assertEqual(bench.parse_seconds("100ms"), 0.1)
        self.assertEqual(bench.parse_seconds("2s"), 2.0)
        self.assertEqual(bench.parse_seconds("1500us"), 0.0015)
        self.assertEqual(bench.parse_seconds("2m"), 120.0)


if __name__ == "__main__":
    unittest.main()
