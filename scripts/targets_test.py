#!/usr/bin/env python3
"""Tests of scripts/targets on synthetic `cclab bench --json` files (CTest label
`unit`). Each test plants ratios whose verdict is known by construction and
requires the exit status and the line or cell that names it."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

TARGETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "targets")
MACHINE = {"cpu_model": "Test CPU", "cores": 2, "tcp_congestion_control": "cubic"}
K, M = 1 << 10, 1 << 20


def row(algo, size, median, peer=False, times=None, skipped=None):
    r = {"size_bytes": size, "count": size // 4, "type": "f32", "redop": "sum", "algo": algo,
         "time_us_median": median, "peer": peer, "wrong": 0}
    if times is not None:
        r["times_us"] = times
    if skipped is not None:
        r = dict(r, time_us_median=0, skipped=skipped)
    return r


def sweep(ratio_at, ranks=2, in_place=False, interleave=False):
    """A record whose best peer is ratio_at[size] times slower than our best row;
    each side has a slower second row that must not be the one compared."""
    rows = []
    for size, ratio in ratio_at.items():
        ours = 100.0
        rows += [row("ring", size, ours * 1.5), row("hd", size, ours),
                 row("gloo-ring", size, ours * ratio * 2, peer=True),
                 row("gloo-hd", size, ours * ratio, peer=True)]
    config = {"backend": "gloo", "ranks": ranks, "coll": "allreduce", "dtype": "f32", "op": "sum",
              "in_place": in_place, "interleave": interleave}
    return {"tool": "cclab bench", "machine": MACHINE, "config": config, "rows": rows}


class TargetsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.n = 0

    def tearDown(self):
        self.dir.cleanup()

    def write(self, record):
        self.n += 1
        path = os.path.join(self.dir.name, f"r{self.n}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(record, f)
        return path

    def run_targets(self, *args):
        p = subprocess.run([sys.executable, TARGETS, *args], capture_output=True, text=True,
                           timeout=60)
        return p.returncode, p.stdout, p.stderr

    def line(self, out, config, size):
        found = [l for l in out.splitlines() if l.startswith(config) and f" {size} " in l]
        self.assertEqual(len(found), 1, out)
        return found[0]

    def test_every_target_met_exits_zero(self):
        a = self.write(sweep({4 * K: 1.3, 16 * M: 1.6}))
        b = self.write(sweep({4 * K: 1.2, 16 * M: 1.7}))
        code, out, err = self.run_targets(a, b)
        self.assertEqual(code, 0, out + err)
        self.assertIn("# targets: 2 of 2 cells met", out)
        self.assertRegex(self.line(out, "2 ranks out of place", "4 KiB"),
                         r"\s2\s+1\.25 \[1\.20-1\.30\].*1\.00\s+met\s+-\s+hd/gloo-hd")

    def test_a_planted_miss_is_named(self):
        path = self.write(sweep({4 * K: 1.3, 256 * K: 0.9, 2 * M: 1.1}))
        code, out, _ = self.run_targets(path)
        self.assertEqual(code, 1, out)
        self.assertRegex(self.line(out, "2 ranks out of place", "256 KiB"),
                         r"0\.90\s+-\s+1\.00\s+missed")
        self.assertIn("2 of 3 cells met; 2 ranks out of place 256 KiB missed", out)

    def test_runs_that_disagree_are_mixed_and_report_only_exits_zero(self):
        a = self.write(sweep({2 * M: 0.95}))
        b = self.write(sweep({2 * M: 1.05}))
        code, out, _ = self.run_targets(a, b)
        self.assertEqual(code, 1, out)
        self.assertRegex(self.line(out, "2 ranks", "2 MiB"), r"1\.00 \[0\.95-1\.05\].*mixed")
        code, out, _ = self.run_targets(a, b, "--report-only")
        self.assertEqual(code, 0, out)

    def test_the_large_size_target_holds_at_two_ranks_only(self):
        two = self.write(sweep({16 * M: 1.2}, ranks=2))
        four = self.write(sweep({16 * M: 1.2}, ranks=4))
        code, out, _ = self.run_targets(two, four)
        self.assertEqual(code, 1, out)
        self.assertRegex(self.line(out, "2 ranks", "16 MiB"), r"1\.50\s+missed")
        self.assertRegex(self.line(out, "4 ranks", "16 MiB"), r"1\.00\s+met")

    def test_custom_targets_take_the_highest_that_holds(self):
        path = self.write(sweep({4 * K: 1.15, 1 * M: 1.15}, ranks=4))
        code, out, _ = self.run_targets(path, "--target", "4K=1.1", "--target", "4:1M=1.2",
                                        "--target", "2:4K=9")
        self.assertEqual(code, 1, out)
        self.assertRegex(self.line(out, "4 ranks", "4 KiB"), r"\s1\.15\s.*1\.10\s+met")
        self.assertRegex(self.line(out, "4 ranks", "1 MiB"), r"1\.20\s+missed")

    def test_configurations_are_kept_apart(self):
        out_of_place = self.write(sweep({2 * M: 1.2}))
        in_place = self.write(sweep({2 * M: 0.8}, in_place=True))
        code, out, _ = self.run_targets(out_of_place, in_place)
        self.assertEqual(code, 1, out)
        self.assertRegex(self.line(out, "2 ranks out of place", "2 MiB"), r"\s1\s+1\.20\s.*met")
        self.assertRegex(self.line(out, "2 ranks in place", "2 MiB"), r"\s1\s+0\.80\s.*missed")

    def test_runs_of_other_settings_are_another_configuration_named_by_its_flag(self):
        default, eager = sweep({256 * K: 0.9}), sweep({256 * K: 1.2})
        for record, value in ((default, None), (eager, 131072)):
            record["config"].update(eager_bytes=value, chunks=1, pin=True)
        code, out, _ = self.run_targets(self.write(default), self.write(eager))
        self.assertEqual(code, 1, out)
        # Only the setting that differs is named, each group on its own line.
        self.assertRegex(self.line(out, "2 ranks out of place (--eager default)", "256 KiB"),
                         r"\s1\s+0\.90\s.*missed")
        self.assertRegex(self.line(out, "2 ranks out of place (--eager 131072)", "256 KiB"),
                         r"\s1\s+1\.20\s.*met")
        self.assertNotIn("--chunks", out)
        self.assertIn("--eager 131072: 1 run(s)", out)

    def test_paired_ratio_is_the_median_of_per_iteration_ratios(self):
        record = sweep({2 * M: 1.0}, interleave=True)
        for r in record["rows"]:
            if r["algo"] == "hd":
                r["times_us"] = [100.0, 200.0, 300.0]
            if r["algo"] == "gloo-hd":
                r["times_us"] = [200.0, 200.0, 600.0]  # per iteration 2, 1, 2
        code, out, _ = self.run_targets(self.write(record))
        self.assertEqual(code, 0, out)
        self.assertRegex(self.line(out, "2 ranks", "2 MiB"), r"1\.00\s+2\.00\s+1\.00\s+met")

    def test_skipped_peers_do_not_count(self):
        record = sweep({2 * M: 1.1})
        record["rows"].append(row("gloo-bcube", 2 * M, 0, peer=True, skipped="needs even ranks"))
        code, out, _ = self.run_targets(self.write(record))
        self.assertEqual(code, 0, out)
        self.assertIn("hd/gloo-hd", self.line(out, "2 ranks", "2 MiB"))

    def test_the_stream_reference_row_is_not_a_peer(self):
        record = sweep({2 * M: 1.1})
        stream = dict(row("stream", 2 * M, 10.0, peer=True), stream=True)
        record["rows"].append(stream)  # faster than everything; a peer it would miss the target
        code, out, _ = self.run_targets(self.write(record))
        self.assertEqual(code, 0, out)
        # The best peer (gloo-hd, 110 us) over the stream (10 us).
        self.assertRegex(self.line(out, "2 ranks", "2 MiB"), r"met\s+11\.00\s+hd/gloo-hd")

    def test_a_short_cell_in_markdown_shows_the_peer_over_the_stream(self):
        runs = []
        for peer_over_stream in (1.08, 1.17):  # the peer 1.2x ours: 1.5x missed
            record = sweep({16 * M: 1.2})
            stream = 120.0 / peer_over_stream
            record["rows"].append(dict(row("stream", 16 * M, stream, peer=True), stream=True))
            runs.append(self.write(record))
        code, out, _ = self.run_targets(*runs, "--markdown")
        self.assertEqual(code, 1, out)
        self.assertIn("| 16 MiB | 1.20 / 1.20 **missed** (< 1.50); peer/stream 1.08 / 1.17 |", out)

    def test_a_ratio_just_short_of_the_target_does_not_read_as_reaching_it(self):
        path = self.write(sweep({2 * M: 0.999}))
        code, out, _ = self.run_targets(path)
        self.assertEqual(code, 1, out)
        self.assertRegex(self.line(out, "2 ranks", "2 MiB"), r"\s0\.99\s.*missed")

    def test_markdown_has_a_row_per_size_and_a_column_per_configuration(self):
        a = self.write(sweep({4 * K: 1.3, 16 * M: 1.2}))
        b = self.write(sweep({4 * K: 1.4, 16 * M: 1.1}, ranks=4, in_place=True))
        code, out, _ = self.run_targets(a, b, "--markdown")
        self.assertEqual(code, 1, out)
        lines = out.splitlines()
        self.assertEqual(lines[0],
                         "| size | 2 ranks out of place (1 runs) | 4 ranks in place (1 runs) |")
        self.assertEqual(lines[2], "| 4 KiB | 1.30 | 1.40 |")
        self.assertEqual(lines[3], "| 16 MiB | 1.20 **missed** (< 1.50) | 1.10 |")

    def test_bad_input_names_the_file_or_flag(self):
        no_peers = sweep({2 * M: 1.1})
        no_peers["rows"] = [r for r in no_peers["rows"] if not r["peer"]]
        path = self.write(no_peers)
        code, _, err = self.run_targets(path)
        self.assertEqual(code, 2)
        self.assertIn(f"{path}: no size has both one of our rows and a peer row", err)
        code, _, err = self.run_targets(self.write(sweep({2 * M: 1.1})), "--target", "16M")
        self.assertEqual(code, 2)
        self.assertIn("--target '16M': expected [RANKS:]SIZE=RATIO", err)
        code, _, err = self.run_targets(self.write(sweep({2 * M: 1.1})), "--target", "4X=1")
        self.assertEqual(code, 2)
        self.assertIn("size '4X' is not a byte count", err)
        bad = os.path.join(self.dir.name, "bad.json")
        with open(bad, "w", encoding="utf-8") as f:
            f.write("{")
        code, _, err = self.run_targets(bad)
        self.assertEqual(code, 2)
        self.assertIn(f"{bad}: not JSON", err)
        code, _, err = self.run_targets(os.path.join(self.dir.name, "absent.json"))
        self.assertEqual(code, 2)
        self.assertIn("absent.json: cannot read", err)


if __name__ == "__main__":
    unittest.main()
