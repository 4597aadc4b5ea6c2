#!/usr/bin/env python3
"""Tests of scripts/compare on synthetic `cclab bench --json` files (CTest label
`unit`). Each test plants a change and requires the exit status and the line
that names it; the noise-only case must pass."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

COMPARE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compare")
SIZES = [1024, 4096, 16384, 65536]
MACHINE = {"cpu_model": "Test CPU @ 2.00GHz", "cores": 2, "hostname": "a"}


def row(algo, size, median, spread=0.05, busbw=None):
    """A row whose repetitions lie within median * (1 +- spread)."""
    return {"size_bytes": size, "count": size // 4, "type": "f32", "redop": "sum", "algo": algo,
            "time_us_min": median * (1 - spread), "time_us_median": median,
            "time_us_max": median * (1 + spread), "iters": 20, "algbw_gbps": 0,
            "busbw_gbps": size / (median * 1e3) if busbw is None else busbw, "wrong": 0}


def record(rows, machine=MACHINE, backend="threads", ranks=2, timing=None, **config_fields):
    config = {"backend": backend, "ranks": ranks, "coll": "allreduce", "dtype": "f32", "op": "sum"}
    if timing is not None:
        config["timing"] = timing
    config.update(config_fields)
    return {"tool": "cclab bench", "machine": machine, "rows": rows, "config": config}


def with_speed(start, end=None, version=1):
    """MACHINE plus machine.speed; start/end: (compute_ns, pingpong_ns, copy_gbps)."""
    probes = lambda v: dict(zip(("compute_ns", "pingpong_ns", "copy_gbps"), v))
    return dict(MACHINE, speed={"version": version, "start": probes(start),
                                "end": probes(end or start)})


def series(scale=None, **kwargs):
    """ring and hd at every size; time 10 us + 1 us per KiB, times scale[(algo, size)]."""
    scale = scale or {}
    return [row(a, s, (10 + s / 1024) * scale.get((a, s), 1.0), **kwargs)
            for a in ("ring", "hd") for s in SIZES]


class CompareTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, data):
        path = os.path.join(self.dir.name, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(data if isinstance(data, str) else json.dumps(data))
        return path

    def compare(self, new, base, *flags):
        p = subprocess.run([sys.executable, COMPARE, self.write("new.json", new),
                            base if isinstance(base, str) else self.write("base.json", base),
                            *flags], capture_output=True, text=True, timeout=60)
        return p.returncode, p.stdout + p.stderr

    def test_planted_regression_is_found_and_fails(self):
        # hd at 16 KiB: 26 us -> 52 us, far beyond 10% and the baseline's max of 27.3 us.
        status, out = self.compare(record(series({("hd", 16384): 2.0})), record(series()))
        self.assertEqual(status, 1, out)
        self.assertIn("REGRESSION", out)
        self.assertIn("+100.0%  threads allreduce hd r2 f32 sum 16384 B", out)
        self.assertIn("1 regression(s)", out)

    def test_a_change_names_the_cpu_per_call_when_both_records_have_it(self):
        base, new = series(), series({("hd", 16384): 2.0})
        for rows, cpu in ((base, 40.0), (new, 95.5)):
            for r in rows:
                r["cpu_us_median"] = cpu
        status, out = self.compare(record(new), record(base))
        self.assertEqual(status, 1, out)
        self.assertIn("16384 B: median 26.00 -> 52.00 us (baseline 24.70..27.30), "
                      "cpu 40.0 -> 95.5 us", out)
        # An older baseline without the field: the line says nothing about cpu.
        for r in base:
            del r["cpu_us_median"]
        status, out = self.compare(record(new), record(base))
        self.assertIn("(baseline 24.70..27.30)\n", out)

    def test_noise_within_the_baselines_spread_passes(self):
        # Every row moves by at most 4%, inside the baseline's +-5% spread.
        noise = {(a, s): 1 + (0.04 if i % 2 else -0.04)
                 for i, (a, s) in enumerate((a, s) for a in ("ring", "hd") for s in SIZES)}
        status, out = self.compare(record(series(noise)), record(series()))
        self.assertEqual(status, 0, out)
        self.assertIn("0 regression(s)", out)
        self.assertNotIn("REGRESSION", out)

    def test_a_change_inside_a_wide_baseline_spread_is_noise(self):
        # +30% is above the threshold, but the baseline itself spread +-40%.
        status, out = self.compare(record(series({("ring", 4096): 1.3})),
                                   record(series(spread=0.4)))
        self.assertEqual(status, 0, out)

    def test_a_change_beyond_the_spread_but_under_the_threshold_passes(self):
        # +8%: outside the +-5% spread, under the 10% threshold; --threshold 5 catches it.
        new, base = record(series({("ring", 4096): 1.08})), record(series())
        self.assertEqual(self.compare(new, base)[0], 0)
        status, out = self.compare(new, base, "--threshold", "5")
        self.assertEqual(status, 1, out)
        self.assertIn("+8.0%  threads allreduce ring r2 f32 sum 4096 B", out)

    def test_worst_regression_first_then_improvements(self):
        scale = {("ring", 1024): 1.5, ("hd", 65536): 3.0, ("ring", 16384): 0.5}
        status, out = self.compare(record(series(scale)), record(series()))
        self.assertEqual(status, 1, out)
        lines = [l for l in out.splitlines() if "REGRESSION" in l or "IMPROVEMENT" in l]
        self.assertEqual(len(lines), 3, out)
        self.assertIn("hd r2 f32 sum 65536 B", lines[0])
        self.assertIn("ring r2 f32 sum 1024 B", lines[1])
        self.assertIn("IMPROVEMENT", lines[2])

    def test_report_only_lists_but_does_not_fail(self):
        status, out = self.compare(record(series({("hd", 4096): 2.0})), record(series()),
                                   "--report-only")
        self.assertEqual(status, 0, out)
        self.assertIn("REGRESSION", out)
        self.assertIn("reported only: --report-only", out)

    def test_never_gates_across_machine_classes(self):
        other = dict(MACHINE, cores=64)
        status, out = self.compare(record(series({("hd", 4096): 2.0})),
                                   record(series(), machine=other))
        self.assertEqual(status, 0, out)
        self.assertIn("machines differ", out)
        self.assertIn("REGRESSION", out)

    def test_never_gates_across_timings(self):
        # A record without config.timing was timed per rank.
        for base_timing in (None, "rank"):
            status, out = self.compare(record(series({("hd", 4096): 2.0}), timing="span"),
                                       record(series(), timing=base_timing))
            self.assertEqual(status, 0, out)
            self.assertIn("timings differ (new: span; baseline: rank)", out)
            self.assertIn("1 regression(s) (reported only: different timing)", out)

    def test_never_gates_across_row_orders(self):
        # Interleaved records before interleave_order ran their rows in the listed order.
        cases = [({"interleave": True, "interleave_order": "williams"}, {"interleave": True},
                  "row orders differ (new: interleaved, williams; baseline: interleaved, listed)"),
                 ({"interleave": True, "interleave_order": "williams"}, {},
                  "row orders differ (new: interleaved, williams; baseline: sequential)")]
        for new_fields, base_fields, line in cases:
            status, out = self.compare(record(series({("hd", 4096): 2.0}), **new_fields),
                                       record(series(), **base_fields))
            self.assertEqual(status, 0, out)
            self.assertIn(line, out)
            self.assertIn("1 regression(s) (reported only: different row order)", out)

    def test_never_gates_gloo_records_across_tcp_congestion_controls(self):
        bbr, cubic = (dict(MACHINE, tcp_congestion_control=cc) for cc in ("bbr", "cubic"))
        status, out = self.compare(record(series({("hd", 4096): 2.0}), cubic, backend="gloo"),
                                   record(series(), bbr, backend="gloo"))
        self.assertEqual(status, 0, out)
        self.assertIn("TCP congestion controls differ (new: cubic; baseline: bbr)", out)
        self.assertIn("1 regression(s) (reported only: different TCP congestion control)", out)
        # The same control, another backend (no TCP), or a baseline that did not
        # record it: the gate stands.
        for new_machine, base_machine, backend in ((bbr, bbr, "gloo"), (cubic, bbr, "threads"),
                                                   (bbr, MACHINE, "gloo")):
            status, out = self.compare(
                record(series({("hd", 4096): 2.0}), new_machine, backend=backend),
                record(series(), base_machine, backend=backend))
            self.assertEqual(status, 1, out)
            self.assertNotIn("congestion", out)

    def test_never_gates_gloo_records_across_connection_layouts(self):
        # A gloo record without config.connections shared them (before the flag).
        for base_fields in ({"connections": "shared"}, {}):
            status, out = self.compare(
                record(series({("hd", 4096): 2.0}), backend="gloo", connections="row"),
                record(series(), backend="gloo", **base_fields))
            self.assertEqual(status, 0, out)
            self.assertIn("connections differ (new: row; baseline: shared)", out)
            self.assertIn("1 regression(s) (reported only: different connections)", out)
        # The same layout, stated or not: the gate stands.
        for new_fields, base_fields in (({"connections": "row"}, {"connections": "row"}),
                                        ({"connections": "shared"}, {})):
            status, out = self.compare(
                record(series({("hd", 4096): 2.0}), backend="gloo", **new_fields),
                record(series(), backend="gloo", **base_fields))
            self.assertEqual(status, 1, out)
            self.assertNotIn("connections differ", out)

    def test_never_gates_across_settings_that_change_what_a_row_measures(self):
        # In place against out of place, and two settings at once, named by flag.
        cases = [({"in_place": True}, {"in_place": False},
                  "settings differ (--inplace: new true, baseline false)", "--inplace"),
                 ({"batch": 4, "pin": False}, {"batch": 1, "pin": True},
                  "settings differ (--batch: new 4, baseline 1; --pin: new false, baseline true)",
                  "--batch, --pin")]
        for new_fields, base_fields, line, flags in cases:
            status, out = self.compare(record(series({("hd", 4096): 2.0}), **new_fields),
                                       record(series(), **base_fields))
            self.assertEqual(status, 0, out)
            self.assertIn(line, out)
            self.assertIn(f"1 regression(s) (reported only: different settings ({flags}))", out)
        # --rotate-levels against a baseline written before it (absent: false).
        status, out = self.compare(record(series({("hd", 4096): 2.0}), rotate_levels=True),
                                   record(series()))
        self.assertEqual(status, 0, out)
        self.assertIn("settings differ (--rotate-levels: new true, baseline false)", out)
        # The same settings, or a baseline written before a setting existed: the gate stands.
        for base_fields in ({"in_place": True, "batch": 4}, {}):
            status, out = self.compare(
                record(series({("hd", 4096): 2.0}), in_place=True, batch=4, rotate_levels=False),
                record(series(), **base_fields))
            self.assertEqual(status, 1, out)
            self.assertNotIn("settings differ", out)

    def test_rows_are_told_apart_by_their_chunks(self):
        # `--chunks 1,4` rows are 'hd' and 'hd:4' (each carrying its chunks);
        # a planted regression in one of them is found under its label.
        def chunked(scale=None):
            rows = series(scale)
            for r in rows:
                r["chunks"] = 1
            four = [dict(r, algo=r["algo"] + ":4", chunks=4) for r in series()]
            return rows + four
        slow = chunked()
        for r in slow:
            if r["algo"] == "hd:4" and r["size_bytes"] == 4096:
                for field in ("time_us_min", "time_us_median", "time_us_max"):
                    r[field] *= 2
        status, out = self.compare(record(slow, chunks=[1, 4]), record(chunked(), chunks=[1, 4]))
        self.assertEqual(status, 1, out)
        self.assertIn("hd:4", out)
        self.assertIn("1 regression(s)", out)
        # A record written when --chunks took one number (4: rows 'hd', no
        # chunks of their own) is read as rows 'hd:4'; the runs' sets of rows
        # differ, so it reports and does not gate.
        status, out = self.compare(record(slow, chunks=[1, 4]), record(series(), chunks=4))
        self.assertEqual(status, 0, out)
        self.assertIn("settings differ (--chunks: new [1, 4], baseline [4])", out)
        self.assertIn("1 regression(s) (reported only", out)
        self.assertIn("hd:4", out)

    def test_hier_rows_are_told_apart_by_their_inner_algorithm(self):
        # `--inner ring,tree` rows are 'hier' and 'hier/tree'; a record
        # written when --inner took one name (tree: rows 'hier') is read as
        # rows 'hier/tree', so its rows meet the new record's.
        def hier(inner, scale=None):
            rows = [dict(r, algo="hier" if inner == "ring" else f"hier/{inner}")
                    for r in series(scale) if r["algo"] == "ring"]
            for r in rows:
                r["chunks"] = 1
            return rows
        slow = hier("ring") + hier("tree", {("ring", 4096): 2.0})
        status, out = self.compare(record(slow, chunks=[1], inner="ring,tree"),
                                   record(hier("ring") + hier("tree"), chunks=[1],
                                          inner="ring,tree"))
        self.assertEqual(status, 1, out)
        self.assertIn("hier/tree", out)
        self.assertIn("1 regression(s)", out)
        old = [dict(r, algo="hier") for r in hier("tree")]
        status, out = self.compare(record(hier("tree", {("ring", 4096): 2.0}), chunks=[1],
                                          inner="tree"),
                                   record(old, chunks=[1], inner="tree"))
        self.assertEqual(status, 1, out)
        self.assertIn("hier/tree", out)
        self.assertIn("1 regression(s)", out)

    def test_alike_timings_gate(self):
        status, out = self.compare(record(series({("hd", 4096): 2.0}), timing="span"),
                                   record(series(), timing="span"))
        self.assertEqual(status, 1, out)
        self.assertNotIn("timings differ", out)

    def compare_on(self, new_machine, base_machine, *flags):
        """A planted regression (hd at 4 KiB, 2x), the records taken on these machines."""
        return self.compare(record(series({("hd", 4096): 2.0}), new_machine),
                            record(series(), base_machine), *flags)

    def test_alike_machine_speeds_are_shown_and_gate(self):
        # Ping-pong 1.5x slower is within the default tolerance (a factor of 3).
        status, out = self.compare_on(with_speed((2.5, 300, 8)), with_speed((2.5, 200, 8)))
        self.assertEqual(status, 1, out)
        self.assertIn("machine speed, new vs baseline (start and end): compute 2.5 vs 2.5 ns, "
                      "ping-pong 300 vs 200 ns, copy 8 vs 8 GB/s", out)
        self.assertIn("1 regression(s)\n", out)
        # A tighter tolerance makes the same pair of machines too different to gate.
        status, out = self.compare_on(with_speed((2.5, 300, 8)), with_speed((2.5, 200, 8)),
                                      "--speed-tolerance", "25")
        self.assertEqual(status, 0, out)
        self.assertIn("machine speeds differ by more than 25% (ping-pong)", out)

    def test_a_slower_machine_is_reported_not_gated(self):
        # The machine of the new record copies 4x slower: every row is slower, none gated.
        status, out = self.compare_on(with_speed((2.5, 200, 2)), with_speed((2.5, 200, 8)))
        self.assertEqual(status, 0, out)
        self.assertIn("machine speeds differ by more than 200% (copy): comparing for information "
                      "only, not gating", out)
        self.assertIn("REGRESSION", out)
        self.assertIn("1 regression(s) (reported only: machine speeds differ)", out)

    def test_a_machine_that_slowed_during_the_run_is_reported_not_gated(self):
        # Another job took the cores halfway: ping-pong 200 ns before the sweep, 41 us after.
        status, out = self.compare_on(with_speed((2.5, 200, 8), (2.6, 41000, 4)),
                                      with_speed((2.5, 200, 8)))
        self.assertEqual(status, 0, out)
        self.assertIn("new: the machine's speed changed during the run: ping-pong 200 ns at the "
                      "start, 4.1e+04 at the end", out)
        self.assertIn("(reported only: the machine's speed changed during a run)", out)

    def test_a_baseline_without_speed_gates_as_before(self):
        for base_machine in (MACHINE, with_speed((2.5, 200, 8), version=0)):
            status, out = self.compare_on(with_speed((2.5, 9000, 1)), base_machine)
            self.assertEqual(status, 1, out)
            self.assertIn("machine speed: only the new record has probes of version 1: "
                          "not compared", out)

    def test_speed_tolerance_must_not_be_negative(self):
        status, out = self.compare(record(series()), record(series()), "--speed-tolerance", "-5")
        self.assertEqual(status, 2, out)
        self.assertIn("--speed-tolerance: must be at least 0", out)

    def test_cliff_is_flagged(self):
        # busbw 1, 2, 0.5, 4 GB/s over the sizes of ring: 0.5 < 0.5 * min(2, 4) is not a cliff,
        # 0.4 is; hd rises smoothly.
        rows = [row("ring", s, 10, busbw=b) for s, b in zip(SIZES, (1, 2, 0.4, 4))]
        rows += [row("hd", s, 10, busbw=b) for s, b in zip(SIZES, (1, 2, 3, 4))]
        status, out = self.compare(record(rows), record(rows))
        self.assertEqual(status, 0, out)  # flagged, not gated
        self.assertIn("CLIFF       threads allreduce ring r2 f32 sum 16384 B: busbw 0.40", out)
        self.assertIn("(also in the baseline)", out)
        self.assertNotIn("hd r2 f32 sum 16384 B: busbw", out)

    def test_results_directory_picks_the_machine_file(self):
        base_dir = os.path.join(self.dir.name, "results")
        self.write("results/test-cpu-2-00ghz-2c/threads-2r.json", record(series()))
        status, out = self.compare(record(series({("hd", 4096): 2.0})), base_dir)
        self.assertEqual(status, 1, out)
        self.assertIn("results/test-cpu-2-00ghz-2c/threads-2r.json", out)

    def test_several_baseline_runs_span_the_spread_between_runs(self):
        # hd at 4 KiB: 14 us in two runs, 18.2 in the one between them (+-5% within
        # each); 17.5 is a regression against one run alone, noise against all three.
        self.write("results/test-cpu-2-00ghz-2c/threads-2r.json", record(series()))
        self.write("results/test-cpu-2-00ghz-2c/threads-2r.k.json",
                   record(series({("hd", 4096): 1.3})))
        self.write("results/test-cpu-2-00ghz-2c/threads-2r.z.json", record(series()))
        self.write("results/test-cpu-2-00ghz-2c/threads-20r.json", record(series()))  # not a run
        new = record(series({("hd", 4096): 1.25}))
        status, out = self.compare(new, os.path.join(self.dir.name, "results"))
        self.assertEqual(status, 0, out)
        self.assertIn("threads-2r.json, ", out)
        self.assertIn("threads-2r.z.json (test-cpu-2-00ghz-2c) (3 runs: the widest spread of "
                      "them)", out)
        self.assertNotIn("threads-20r.json", out)
        status, out = self.compare(
            new, os.path.join(self.dir.name, "results/test-cpu-2-00ghz-2c/threads-2r.json"))
        self.assertEqual(status, 1, out)
        self.assertIn("+25.0%  threads allreduce hd r2 f32 sum 4096 B", out)
        # Beyond every run it is still a regression, from the median of the medians (14).
        status, out = self.compare(record(series({("hd", 4096): 2.0})),
                                   os.path.join(self.dir.name, "results"))
        self.assertEqual(status, 1, out)
        self.assertIn("+100.0%  threads allreduce hd r2 f32 sum 4096 B: median 14.00 -> 28.00 us "
                      "(baseline 13.30..19.11)", out)

    def test_skipped_and_missing_rows(self):
        new = series()[1:] + [dict(row("gloo-bcube", 4096, 1), skipped="odd rank count")]
        status, out = self.compare(record(new), record(series()))
        self.assertEqual(status, 0, out)
        self.assertIn("MISSING     threads allreduce ring r2 f32 sum 1024 B", out)
        self.assertNotIn("gloo-bcube", out)
        # A row the baseline lacks is named, and not compared.
        status, out = self.compare(record(series() + [row("biring", 4096, 99)]),
                                   record(series()))
        self.assertEqual(status, 0, out)
        self.assertIn("NEW         threads allreduce biring r2 f32 sum 4096 B (not in the baseline: "
                      "not compared)", out)

    def test_a_rerun_clears_a_row_slow_in_one_run_only(self):
        base = self.write("base.json", record(series()))
        slow = record(series({("hd", 4096): 2.0}))
        rerun_fast = self.write("rerun-fast.json", record(series()))
        rerun_slow = self.write("rerun-slow.json", record(series({("hd", 4096): 1.8})))
        # Slow in one of two runs: the faster run's median counts, no regression.
        status, out = self.compare(slow, base, "--rerun", rerun_fast)
        self.assertEqual(status, 0, out)
        self.assertIn("rerun-fast.json (the fastest median per row)", out)
        self.assertIn("0 regression(s)", out)
        # Slow in both: the faster of the two (+80%) is the regression.
        status, out = self.compare(slow, base, "--rerun", rerun_slow)
        self.assertEqual(status, 1, out)
        self.assertIn("+80.0%  threads allreduce hd r2 f32 sum 4096 B", out)

    def test_a_rerun_of_another_sweep_is_an_error_naming_the_field(self):
        base = self.write("base.json", record(series()))
        other = self.write("other.json", record(series(), chunks=4))
        status, out = self.compare(record(series(), chunks=1), base, "--rerun", other)
        self.assertEqual(status, 2, out)
        self.assertIn("--rerun " + other + ": config.chunks is [4] where NEW has [1]", out)
        elsewhere = self.write("elsewhere.json",
                               record(series(), dict(MACHINE, cpu_model="Other CPU")))
        status, out = self.compare(record(series()), base, "--rerun", elsewhere)
        self.assertEqual(status, 2, out)
        self.assertIn("taken on other-cpu-2c, not on NEW's test-cpu-2-00ghz-2c", out)

    def test_malformed_input_names_the_file_and_field(self):
        bad = record(series())
        del bad["rows"][2]["time_us_max"]
        status, out = self.compare(record(series()), bad)
        self.assertEqual(status, 2, out)
        self.assertIn("base.json: rows[2]: missing field 'time_us_max'", out)
        status, out = self.compare("{not json", record(series()))
        self.assertEqual(status, 2, out)
        self.assertIn("new.json: not JSON", out)


if __name__ == "__main__":
    unittest.main()
