#!/usr/bin/env python3
"""`cclab sim --tune` end to end: the table it writes, read back through
CCLAB_TUNING by `cclab sim --algo auto` and `cclab bench --algo auto`, must
choose at every size what a naive argmin over the sweep's own JSON rows
chooses (the fastest row at the largest swept size at or below it; the first
row listed on a tie), and CCLAB_ALGO must override it.

    tune_cli_test.py CCLAB_BINARY
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

CCLAB = None


def run(args, env=None, check=True):
    full_env = dict(os.environ)
    full_env.pop("CCLAB_ALGO", None)
    full_env.pop("CCLAB_TUNING", None)
    full_env.update(env or {})
    p = subprocess.run([CCLAB] + args, env=full_env, capture_output=True, text=True, timeout=120)
    if check and p.returncode != 0:
        raise AssertionError(f"cclab {' '.join(args)}: exit {p.returncode}\n{p.stderr}")
    return p


def label(row):
    return row["chosen"]


def naive_choice(rows, size):
    """The fastest candidate at the largest swept size <= size (else the smallest)."""
    sizes = sorted({r["size_bytes"] for r in rows})
    at = max([s for s in sizes if s <= size], default=sizes[0])
    best = None
    for r in rows:  # row order: the first of equals wins
        if r["size_bytes"] == at and (best is None or r["time_us"] < best["time_us"]):
            best = r
    return label(best)


class Tune(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.tmp = self.dir.name

    def tearDown(self):
        self.dir.cleanup()

    def tune(self, topology, extra=()):
        rows, table = f"{self.tmp}/rows.json", f"{self.tmp}/table.json"
        out = run(["sim", "--topology", topology, "--algo", "all", "--chunks", "1,4",
                   "-b", "1K", "-e", "64M", "-f", "8", "--json", rows, "--tune", table]
                  + list(extra)).stdout
        self.assertIn(f"# tuning table for", out)
        with open(rows) as f:
            return json.load(f)["rows"], table

    def bench_auto_rows(self, table, sizes):
        """The JSON rows of `cclab bench --ranks 4 --algo auto` at SIZES (-b, -e,
        -f flags) with CCLAB_TUNING=TABLE."""
        out_json = f"{self.tmp}/bench.json"
        run(["bench", "--ranks", "4", "--algo", "auto", *sizes, "-n", "2", "-w", "1",
             "--json", out_json], env={"CCLAB_TUNING": table})
        with open(out_json) as f:
            return json.load(f)["rows"]

    def check_auto_follows_the_sweep(self, topology, extra=()):
        rows, table = self.tune(topology, extra)
        with open(table) as f:
            bands = json.load(f)["bands"]
        self.assertEqual(bands[0]["min_bytes"], 0)
        # Sizes between and beyond the swept ones (-f 2 from 512 B).
        auto_json = f"{self.tmp}/auto.json"
        run(["sim", "--topology", topology, "--algo", "auto", "-b", "512", "-e", "128M", "-f", "2",
             "--json", auto_json] + list(extra), env={"CCLAB_TUNING": table})
        with open(auto_json) as f:
            auto_rows = json.load(f)["rows"]
        self.assertEqual(len(auto_rows), 19)
        swept = {(r["size_bytes"], label(r)): r["time_us"] for r in rows}
        for r in auto_rows:
            want = naive_choice(rows, r["size_bytes"])
            self.assertEqual(r["chosen"], want, f"{topology} at {r['size_bytes']} B")
            self.assertTrue(r["reason"].startswith(f"tuning table '{table}'"), r["reason"])
            if (r["size_bytes"], want) in swept:  # the same schedule, the same prediction
                self.assertAlmostEqual(r["time_us"], swept[(r["size_bytes"], want)], places=6)
        return {label(r) for r in auto_rows}

    def test_auto_follows_the_sweep_on_an_oversubscribed_fat_tree(self):
        chosen = self.check_auto_follows_the_sweep("fat-tree:hosts=32,leaves=4,spines=2")
        self.assertGreater(len(chosen), 1, "one algorithm at every size: nothing was chosen")

    def test_auto_follows_the_sweep_on_nodes(self):
        self.check_auto_follows_the_sweep("nodes:nodes=4,gpus=4")

    def test_auto_follows_the_sweep_with_hiers_inner_algorithms(self):
        # --inner ring,tree,hd: hier with each is a candidate, and the table
        # records which one won (hier/hd from 512 KiB on 8 nodes of 4).
        chosen = self.check_auto_follows_the_sweep("nodes:nodes=8,gpus=4",
                                                   ["--inner", "ring,tree,hd"])
        self.assertTrue(any(c.startswith("hier/") for c in chosen), chosen)
        with open(f"{self.tmp}/table.json") as f:
            bands = json.load(f)["bands"]
        for b in bands:
            self.assertEqual("inner" in b, b["algo"] == "hier", b)

    def test_auto_follows_a_sweep_in_rotated_levels(self):
        # A 4x4x2 torus in levels 4x4 (x, y, then z across), rotated: the table
        # keeps the levels, and auto runs them where it chooses hier (the
        # same schedule: the same prediction as the swept row).
        extra = ["--group-size", "4x4", "--rotate-levels", "--inner", "ring,biring"]
        chosen = self.check_auto_follows_the_sweep("torus3d:x=4,y=4,z=2,bw=50GBps", extra)
        self.assertTrue(any(c.startswith("hier/biring") for c in chosen), chosen)
        with open(f"{self.tmp}/table.json") as f:
            doc = json.load(f)
        self.assertEqual((doc["group_size"], doc["upper_groups"], doc["rotate_levels"]),
                         (4, [4], True))
        with open(f"{self.tmp}/auto.json") as f:
            for r in json.load(f)["rows"]:
                hier = r["chosen"].startswith("hier")
                self.assertEqual(", hier in levels 4x4, rotated)" in r["reason"], hier, r)
                self.assertEqual("g=4x4,rotated" in r["schedule"], hier, r)

    def test_auto_follows_a_reduce_scatter_sweep_in_a_torus_levels(self):
        # Reduce-scatter on a 4x4x2 torus runs hier in its levels by default
        # (4x4, rotated); the table keeps them, and auto's hier bands run the
        # swept schedules (the same predictions).
        extra = ["--coll", "reducescatter"]
        chosen = self.check_auto_follows_the_sweep("torus3d:x=4,y=4,z=2,bw=50GBps", extra)
        self.assertTrue(any(c.startswith("hier") for c in chosen), chosen)
        with open(f"{self.tmp}/table.json") as f:
            doc = json.load(f)
        self.assertEqual((doc["collective"], doc["upper_groups"], doc["rotate_levels"]),
                         ("reducescatter", [4], True))

    def test_bench_auto_runs_the_inner_algorithm_of_a_simulated_table(self):
        # 4 ranks in groups of 2: between groups direct (one step) beats the
        # ring (two) at small sizes, so the table says hier/direct there.
        table = f"{self.tmp}/inner.json"
        out = run(["sim", "--topology", "switch:n=4,bw=100Gbps,lat=1us", "--algo", "hier",
                   "--group-size", "2", "--inner", "ring,direct", "-b", "4K", "-e", "4K",
                   "--tune", table]).stdout
        self.assertIn("from           0 B: hier/direct", out)
        rows = self.bench_auto_rows(table, ["-b", "4K", "-e", "64K", "-f", "16"])
        self.assertEqual(len(rows), 2)
        for r in rows:
            self.assertEqual(r["chosen"], "hier/direct", r["reason"])
            self.assertEqual(r["wrong"], 0)
        forced = run(["bench", "--ranks", "4", "--algo", "auto", "-b", "4K", "-e", "4K",
                      "-n", "2", "-w", "1"], env={"CCLAB_ALGO": "hier/tree:2"})
        self.assertIn("#   auto: hier/tree:2 (CCLAB_ALGO=hier/tree:2)", forced.stdout)

    def test_auto_follows_the_sweep_for_every_collective(self):
        # 6 ranks: not a power of two, and reduce-scatter/all-gather sizes
        # round down to whole blocks, so the table is keyed by what ran.
        topology = "fat-tree:hosts=8,leaves=2,spines=1,uplink=50Gbps"
        for extra in (["--coll", "broadcast", "--root", "3"], ["--coll", "allgather"],
                      ["--coll", "reducescatter"]):
            with self.subTest(extra=extra):
                chosen = self.check_auto_follows_the_sweep(topology, ["--ranks", "6"] + extra)
                self.assertGreater(len(chosen), 1, f"{extra}: one algorithm at every size")
        with open(f"{self.tmp}/table.json") as f:
            self.assertEqual(json.load(f)["collective"], "reducescatter")
        # A table for one collective leaves the others to the built-in rule.
        out = run(["sim", "--topology", topology, "--ranks", "6", "--algo", "auto", "-b", "1K",
                   "-e", "1K"], env={"CCLAB_TUNING": f"{self.tmp}/table.json"}).stdout
        self.assertIn("no tuning table for allreduce at 6 ranks (tables: reducescatter at 6 ranks",
                      out)

    def test_bench_auto_runs_the_tables_choice_and_ccclab_algo_overrides_it(self):
        rows, table = self.tune("switch:n=4,bw=100Gbps,lat=1us")
        bench_rows = self.bench_auto_rows(table, ["-b", "1K", "-e", "16M", "-f", "16"])
        self.assertEqual(len(bench_rows), 4)
        for r in bench_rows:
            self.assertEqual(r["algo"], "auto")
            self.assertEqual(r["chosen"], naive_choice(rows, r["size_bytes"]))
            self.assertEqual(r["wrong"], 0)
        forced = run(["bench", "--ranks", "4", "--algo", "auto", "-b", "64K", "-e", "64K",
                      "-n", "2", "-w", "1"], env={"CCLAB_TUNING": table, "CCLAB_ALGO": "tree:2"})
        self.assertIn("#   auto: tree:2 (CCLAB_ALGO=tree:2)", forced.stdout)

    def test_bench_tunes_from_its_own_measurements(self):
        rows_json, table = f"{self.tmp}/measured.json", f"{self.tmp}/measured-table.json"
        out = run(["bench", "--ranks", "2", "--algo", "all", "-b", "1K", "-e", "1M", "-f", "8",
                   "-n", "5", "-w", "1", "--json", rows_json, "--tune", table]).stdout
        self.assertIn(f"# tuning table for allreduce at 2 ranks written to {table}", out)
        with open(rows_json) as f:
            rows = json.load(f)["rows"]
        with open(table) as f:
            doc = json.load(f)
        self.assertEqual(doc["ranks"], 2)
        bands = doc["bands"]
        # The rule for measured rows: the fastest median at the smallest size;
        # then a size changes the choice only when the choice's 25th
        # percentile is not below the fastest's 75th.
        def quartile(r, q):
            t = sorted(r["times_us"])
            return t[int(q * (len(t) - 1) + 0.5)]
        want, choice = {}, None
        for size in sorted({r["size_bytes"] for r in rows}):
            here = {r["algo"]: r for r in rows if r["size_bytes"] == size}
            best = min(here.values(), key=lambda r: r["time_us_median"])
            if choice is None or quartile(here[choice], 0.25) >= quartile(best, 0.75):
                choice = best["algo"]
            want[size] = choice
        for size in sorted(want) + [3000, 1 << 30]:
            band = [b for b in bands if b["min_bytes"] <= size][-1]
            at = max([s for s in want if s <= size], default=min(want))
            self.assertEqual(band["algo"], want[at], f"at {size} B")

    def test_bench_tunes_all_gather_and_auto_runs_its_choice(self):
        table = f"{self.tmp}/ag.json"
        out = run(["bench", "--ranks", "3", "--coll", "allgather", "--algo", "all", "-b", "1K",
                   "-e", "1M", "-f", "32", "-n", "5", "-w", "1", "--tune", table]).stdout
        self.assertIn(f"# tuning table for allgather at 3 ranks written to {table}", out)
        with open(table) as f:
            doc = json.load(f)
        self.assertEqual((doc["collective"], doc["ranks"]), ("allgather", 3))
        out_json = f"{self.tmp}/auto.json"
        run(["bench", "--ranks", "3", "--coll", "allgather", "--algo", "auto", "-b", "1K", "-e",
             "1M", "-f", "32", "-n", "2", "-w", "1", "--json", out_json],
            env={"CCLAB_TUNING": table})
        with open(out_json) as f:
            rows = json.load(f)["rows"]
        self.assertEqual(len(rows), 3)
        for r in rows:
            band = [b for b in doc["bands"] if b["min_bytes"] <= r["size_bytes"]][-1]
            self.assertEqual(r["chosen"], band["algo"], f"at {r['size_bytes']} B")
            self.assertEqual(r["wrong"], 0)

    def test_one_table_per_rank_count(self):
        tables = []
        for ranks in (4, 8):
            path = f"{self.tmp}/t{ranks}.json"
            run(["sim", "--topology", "fat-tree:hosts=8,leaves=2,spines=1", "--ranks", str(ranks),
                 "--algo", "all", "-b", "1K", "-e", "4M", "-f", "8", "--tune", path])
            tables.append(path)
        both = ":".join(tables)
        for ranks, path in zip((4, 8), tables):
            out = run(["sim", "--topology", "fat-tree:hosts=8,leaves=2,spines=1", "--ranks",
                       str(ranks), "--algo", "auto", "-b", "64K", "-e", "64K"],
                      env={"CCLAB_TUNING": both}).stdout
            self.assertIn(f"(tuning table '{path}' ({ranks} ranks", out)
        out = run(["sim", "--topology", "fat-tree:hosts=8,leaves=2,spines=1", "--ranks", "2",
                   "--algo", "auto", "-b", "64K", "-e", "64K"], env={"CCLAB_TUNING": both}).stdout
        self.assertIn(f"no tuning table for allreduce at 2 ranks (tables: allreduce at 4 ranks "
                      f"('{tables[0]}'), allreduce at 8 ranks ('{tables[1]}'))", out)
        p = run(["sim", "--topology", "switch:n=4", "--algo", "auto", "-b", "1K", "-e", "1K"],
                env={"CCLAB_TUNING": f"{tables[0]}:{tables[0]}"}, check=False)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn(f"CCLAB_TUNING: '{tables[0]}' and '{tables[0]}' are both for allreduce at 4 "
                      "ranks", p.stderr)

    def test_bad_environment_is_refused_by_name(self):
        p = run(["sim", "--topology", "switch:n=4", "--algo", "auto", "-b", "1K", "-e", "1K"],
                env={"CCLAB_ALGO": "fast"}, check=False)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("CCLAB_ALGO: unknown algorithm 'fast'", p.stderr)
        p = run(["bench", "--ranks", "2", "--algo", "auto", "-b", "1K", "-e", "1K", "-n", "1"],
                env={"CCLAB_TUNING": f"{self.tmp}/missing.json"}, check=False)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn(f"CCLAB_TUNING: tuning table '{self.tmp}/missing.json': cannot open it",
                      p.stderr)
        bad = f"{self.tmp}/bad.json"
        with open(bad, "w") as f:
            f.write('{"collective": "allreduce", "topology": "x", "ranks": 2, "group_size": 0, '
                    '"bands": [{"min_bytes": 0, "algo": "ring", "chunks": 0}]}')
        p = run(["sim", "--topology", "switch:n=2", "--algo", "auto", "-b", "1K", "-e", "1K"],
                env={"CCLAB_TUNING": bad}, check=False)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("bands[0].chunks: must be at least 1", p.stderr)

    def test_tune_refuses_a_sweep_with_nothing_to_choose(self):
        p = run(["sim", "--topology", "switch:n=2", "--algo", "auto", "-b", "1K", "-e", "1K",
                 "--tune", f"{self.tmp}/t.json"], check=False)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--tune: no algorithm to choose from", p.stderr)
        p = run(["bench", "--ranks", "2", "--algo", "auto", "-b", "1K", "-e", "1K",
                 "--tune", f"{self.tmp}/t.json"], check=False)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--tune: no algorithm of ours to choose from", p.stderr)


if __name__ == "__main__":
    CCLAB = sys.argv.pop(1)
    unittest.main()
