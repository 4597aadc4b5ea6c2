#!/usr/bin/env python3
"""The files `cclab sim` writes.

--trace streams: a 43 MB trace (a 64-rank ring in 12 chunks on an 8x8
torus, 16 MiB) is written under a 256 MiB address-space limit, where
building it in memory first took 500 MB, and the file is a whole Chrome trace
of the row: every rank's slices lie within the row's predicted time and every
link's utilisation within [0, 1]. A write that fails is an error naming
--trace, and a device given as the trace stays.

--trace-ranks and --trace-window keep a part of the trace, named in its
process names.

--json says which candidates `--inner all` left out, and why, beside the
rows of those that ran, and with --links each row's link use.

    output_files_test.py CCLAB_BINARY
"""

import json
import os
import resource
import subprocess
import sys
import tempfile
import unittest

CCLAB = None
LIMIT = 256 << 20


def limit_address_space():
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


class TraceStreams(unittest.TestCase):
    def test_large_trace_under_a_memory_limit(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "trace.json")
            p = subprocess.run(
                [CCLAB, "sim", "--topology", "torus2d:x=8,y=8,bw=100Gbps,lat=1us", "--algo",
                 "ring", "--chunks", "12", "-b", "16M", "-e", "16M", "--trace", path],
                capture_output=True, text=True, timeout=120, preexec_fn=limit_address_space)
            self.assertEqual(p.returncode, 0, p.stderr)
            row = [l for l in p.stdout.splitlines() if l.strip() and not l.startswith("#")]
            self.assertEqual(len(row), 1, p.stdout)
            total_us = float(row[0].split()[5])
            self.assertGreater(os.path.getsize(path), 32 << 20)
            with open(path) as f:
                doc = json.load(f)
        slices = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] == 0]
        counters = [e for e in doc["traceEvents"] if e["ph"] == "C"]
        self.assertEqual({e["tid"] for e in slices}, set(range(64)))
        for e in slices:
            self.assertGreaterEqual(e["dur"], 0)
            self.assertLessEqual(e["ts"] + e["dur"], total_us * (1 + 1e-6) + 0.01)
        self.assertTrue(counters)
        for e in counters:
            self.assertGreaterEqual(e["args"]["utilisation"], 0)
            self.assertLessEqual(e["args"]["utilisation"], 1 + 1e-9)

    def test_filtered_trace_keeps_the_ranks_and_window_asked(self):
        # hier on 4 nodes of 4 GPUs, ranks 5 and 9 from 20 us to 40 us: the
        # slices are the whole trace's slices of those ranks that overlap
        # the window, and the link counters lie in it (which links, the unit
        # test Trace.FilterKeepsTheRanksAndWindowAsked checks).
        args = ["--topology", "nodes:nodes=4,gpus=4", "--algo", "hier", "-b", "4M", "-e", "4M"]
        whole, _ = sim_trace(args)
        part, names = sim_trace(args + ["--trace-ranks", "5,9", "--trace-window", "20us:40us"])
        self.assertEqual(names, {"ranks (--trace-ranks 5,9 --trace-window 20us:40us)",
                                 "links (--trace-ranks 5,9 --trace-window 20us:40us)",
                                 "hosts (--trace-ranks 5,9 --trace-window 20us:40us)"})

        def key(e):
            return (e["pid"], e["tid"], e["name"], round(e["ts"], 6), round(e["dur"], 6))
        expected = sorted(key(e) for e in whole if e["ph"] == "X" and e["tid"] in (5, 9)
                          and e["ts"] + e["dur"] >= 20 - 1e-9 and e["ts"] <= 40 + 1e-9)
        self.assertGreater(len(expected), 10)
        self.assertEqual(sorted(key(e) for e in part if e["ph"] == "X"), expected)
        counters = [e for e in part if e["ph"] == "C"]
        self.assertTrue(counters)
        for e in counters:
            self.assertGreaterEqual(e["ts"], 20 - 1e-9)
            self.assertLessEqual(e["ts"], 40 + 1e-9)
        self.assertLess(len(counters), len([e for e in whole if e["ph"] == "C"]) / 4)

    @unittest.skipUnless(os.path.exists("/dev/full"), "no /dev/full")
    def test_a_write_that_fails_is_an_error_and_leaves_devices_alone(self):
        # Every write to /dev/full fails (ENOSPC): the run must fail naming
        # --trace, and its clean-up of a partial trace must not remove the device.
        p = subprocess.run(
            [CCLAB, "sim", "--topology", "switch:n=4", "-b", "1K", "-e", "1K", "--trace",
             "/dev/full"], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(p.stderr, "cclab: --trace: cannot write '/dev/full'\n")
        self.assertTrue(os.path.exists("/dev/full"))
        self.assertFalse(os.path.isfile("/dev/full"))



def sim_file(args, flag):
    """The JSON file `cclab sim ARGS FLAG PATH` writes (the run must succeed)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "out.json")
        p = subprocess.run([CCLAB, "sim"] + args + [flag, path], capture_output=True,
                           text=True, timeout=60)
        if p.returncode != 0:
            raise AssertionError(f"cclab sim {' '.join(args)}: exit {p.returncode}\n{p.stderr}")
        with open(path) as f:
            return json.load(f)


def sim_trace(args):
    """The trace events of `cclab sim ARGS --trace` and its process names."""
    events = sim_file(args, "--trace")["traceEvents"]
    return events, {e["args"]["name"] for e in events if e["ph"] == "M"}


def sim_json(args):
    """The --json record of `cclab sim ARGS`."""
    return sim_file(args, "--json")


class JsonRecord(unittest.TestCase):
    def test_skipped_candidates_are_listed_and_have_no_rows(self):
        # 3 groups of 2: all-gather's hier cannot run hd between them.
        doc = sim_json(["--topology", "nodes:nodes=3,gpus=2", "--coll", "allgather", "--algo",
                        "hier", "--inner", "all", "-b", "1K", "-e", "4K"])
        skipped = doc["config"]["skipped"]
        self.assertEqual(len(skipped), 1, skipped)
        self.assertTrue(skipped[0].startswith("hier/hd skipped: hd between the groups"), skipped)
        self.assertEqual({r["algo"] for r in doc["rows"]}, {"hier"})
        self.assertEqual({r["inner"] for r in doc["rows"]}, {"ring", "biring"})
        self.assertEqual(len(doc["rows"]), 4)  # 1 KiB and 4 KiB, ring and biring

    def test_nothing_skipped_is_an_empty_list(self):
        doc = sim_json(["--topology", "nodes:nodes=4,gpus=2", "--coll", "allgather", "--algo",
                        "hier", "--inner", "all", "-b", "1K", "-e", "1K"])
        self.assertEqual(doc["config"]["skipped"], [])
        self.assertEqual(len(doc["rows"]), 3)  # hier, hier/hd and hier/biring

    def test_link_use_rows(self):
        # A ring of 4 on a switch at 4 MiB: every link carries 1.5 x 4 MiB
        # (2(n-1) pieces of S/n); without --links the rows have no link_use.
        args = ["--topology", "switch:n=4,bw=100Gbps", "--algo", "ring", "-b", "4M", "-e", "4M"]
        use = sim_json(args + ["--links", "3"])["rows"][0]["link_use"]
        self.assertEqual([t["tier"] for t in use["tiers"]],
                         ["host->switch 12.5 GB/s", "switch->host 12.5 GB/s"])
        for t in use["tiers"]:
            self.assertEqual((t["links"], t["used"], t["bytes"]), (4, 4, 4 * 1.5 * (4 << 20)))
        self.assertEqual([l["bytes"] for l in use["busiest"]], [1.5 * (4 << 20)] * 3)
        self.assertNotIn("link_use", sim_json(args)["rows"][0])


if __name__ == "__main__":
    CCLAB = sys.argv.pop(1)
    unittest.main()
