#!/usr/bin/env python3
"""bench/kernels/report.py on a synthetic run: targets, ratios, winners, checks, resources.

Runs on any machine (standard library only); the benchmark itself needs a GPU.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT = os.path.join(HERE, "..", "..", "bench", "kernels", "report.py")
MAKE_TABLE = os.path.join(HERE, "..", "..", "bench", "kernels", "make_staging_table.py")
HEADER = os.path.join(HERE, "..", "..", "kernels", "cuda", "tuning", "staging_table.h")


def write_lines(path, objs):
    with open(path, "w") as f:
        f.write("\n".join(json.dumps(o) for o in objs) + "\n")


def ours(case, staging, stages, us, ok=True, dtype="float32"):
    return {"kind": "ours", "case": case, "dtype": dtype, "label": case, "staging": staging,
            "stages": stages,
            "kernels": 1, "check": {"ok": ok, "against": "cub", "bad": 0 if ok else 7,
                                    "max_abs_err": 0.0 if ok else 0.5},
            "median_us": us, "p10_us": us, "p90_us": us, "min_us": us, "reps": 40,
            "gb_per_s": 2**30 / (us * 1e3)}


def make_run(d):
    bench = [
        {"kind": "device", "name": "NVIDIA H200", "sms": 132, "l2_bytes": 60 << 20,
         "driver_api": 13000, "runtime": 13000, "cccl": "3.0.1", "seed": 7, "reps": 40,
         "warmup": 5},
        {"kind": "peer", "case": "copy", "peer": "cudaMemcpy D2D", "median_us": 500.0,
         "gb_per_s": 4000.0},
        {"kind": "peer", "case": "sum-row", "peer": "cub::DeviceReduce::Sum", "median_us": 250.0,
         "gb_per_s": 4300.0},
        ours("sum-row", "direct", 0, 260.0),
        ours("sum-row", "pipeline", 2, 240.0),
        ours("sum-row", "pipeline", 4, 100.0, ok=False),  # fastest but wrong: never the winner
        {"kind": "winner", "op": "sum-row", "dtype": "float32", "rows": 1, "cols": 1 << 28,
         "shape": "1 x 2^28", "size_class": "few-long-rows", "staging": "pipeline", "stages": 2,
         "median_us": 240.0},
        {"kind": "peer", "case": "affine", "peer": "cub::DeviceTransform::Transform",
         "median_us": 500.0, "gb_per_s": 4200.0},
        ours("affine", "direct", 0, 600.0),
        {"kind": "not_built", "case": "topk", "label": "topk"},
        ours("softmax", "direct", 0, 400.0),
        # The other-dtype sweep: its own table, never the float32 targets.
        ours("sum-row", "direct", 0, 30.0, dtype="float16"),
        ours("sum-row", "bulk", 4, 20.0, dtype="float16"),
        ours("sum-row", "pipeline", 8, 25.0, ok=False, dtype="int32"),
        {"kind": "winner", "op": "sum-row", "dtype": "float16", "rows": 1, "cols": 1 << 26,
         "shape": "1 x 2^26", "size_class": "few-long-rows", "staging": "bulk", "stages": 4,
         "median_us": 20.0, "runner_up": {"staging": "direct", "stages": 0, "median_us": 30.0},
         "direct_us": 30.0},
        {"kind": "done"},
    ]
    torch = [
        {"kind": "torch_device", "torch": "2.11", "cuda": "13.0", "cudnn": 91000,
         "cudnn_allow_tf32": True, "name": "NVIDIA H200", "seed": 7, "samples": True},
        {"kind": "torch_check", "case": "softmax", "ok": False, "bad": 3, "compared": 10,
         "max_abs_err": 1.0, "max_abs_ref": 1.0, "variant": "direct"},
        {"kind": "torch", "case": "softmax", "peer": "torch.softmax", "median_us": 600.0,
         "gb_per_s": 3000.0},
        {"kind": "torch", "case": "topk", "peer": "torch.topk", "median_us": 3000.0,
         "gb_per_s": 300.0},
    ]
    write_lines(os.path.join(d, "kernels_bench.jsonl"), bench)
    write_lines(os.path.join(d, "torch_peers.jsonl"), torch)
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump({"commit": "abc1234", "date": "2026-12-01 00:00 UTC",
                   "nvidia_smi": "name, driver: NVIDIA H200, 580.159.04"}, f)
    with open(os.path.join(d, "resource-usage.txt"), "w") as f:
        f.write("Resource usage:\n Common:\n  GLOBAL:0\n"
                " Function _ZN7gpupipe7kernels4cuda10RowsKernelEPKfPfll:\n"
                "  REG:40 STACK:0 SHARED:0 LOCAL:8 CONSTANT[0]:600 TEXTURE:0 SURFACE:0 SAMPLER:0\n"
                " Function _ZN7gpupipe5bench10FillKernelEPflj:\n"
                "  REG:16 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:548 TEXTURE:0 SURFACE:0 SAMPLER:0\n")


class KernelsReportTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        make_run(self.dir.name)
        res = subprocess.run([sys.executable, REPORT, self.dir.name], capture_output=True,
                             text=True, timeout=60)
        self.assertEqual(res.returncode, 0, res.stderr)
        self.stdout = res.stdout
        with open(os.path.join(self.dir.name, "kernels-h200.md")) as f:
            self.md = f.read()

    def tearDown(self):
        self.dir.cleanup()

    def row(self, label, peer):
        rows = [l for l in self.md.splitlines() if l.startswith(f"| {label} |") and peer in l]
        self.assertEqual(len(rows), 1, f"{label} / {peer}: {rows}")
        return rows[0]

    def test_targets_use_fastest_checked_strategy(self):
        r = self.row("sum, one row of 2^28", "DeviceReduce")
        self.assertIn("(pipeline2)", r)        # 240 us; the failed 100 us run is ignored
        self.assertIn("1.04x", r)              # 250 / 240
        self.assertIn("**met**", r)            # >= 0.97x

    def test_missed_not_built_and_failed_check(self):
        self.assertIn("**missed**", self.row("affine, 2^28", "DeviceTransform"))  # 0.83x
        self.assertIn("not built", self.row("topk(16), 16384 x 16384", "torch.topk"))
        self.assertIn("differs from PyTorch", self.row("softmax, 16384 x 16384", "torch.softmax"))

    def test_header_names_commit_machine_and_peers(self):
        self.assertIn("`abc1234`", self.md)
        self.assertIn("580.159.04", self.md)
        self.assertIn("CCCL 3.0.1", self.md)
        self.assertIn("PyTorch 2.11", self.md)
        self.assertIn("% of copy", self.md)

    def test_checks_and_resources(self):
        self.assertIn("FAILED sum-row pipeline4", self.md)
        self.assertIn("ours vs PyTorch, softmax (direct): **FAILED**", self.md)
        self.assertIn("RowsKernel", self.md)
        self.assertNotIn("FillKernel", self.md)  # the bench's own kernels are not ours

    def test_auto_staging_winners(self):
        with open(os.path.join(self.dir.name, "auto-staging.json")) as f:
            auto = json.load(f)
        self.assertEqual(auto["winners"][0]["op"], "sum-row")
        self.assertEqual(auto["winners"][0]["staging"], "pipeline")
        self.assertEqual(auto["winners"][0]["stages"], 2)
        # What make_staging_table.py needs for provenance.
        self.assertEqual(auto["commit"], "abc1234")
        self.assertEqual(auto["date"], "2026-12-01 00:00 UTC")
        self.assertIn("580.159.04", auto["machine"])
        w = auto["winners"][1]
        self.assertEqual((w["dtype"], w["staging"], w["direct_us"]), ("float16", "bulk", 30.0))
        self.assertEqual(w["runner_up"]["staging"], "direct")
        self.assertIn("| sum-row | float16 | 1 x 2^26 | few-long-rows | bulk | 4 | 20.00 | "
                      "direct 30.00 | 30.00 |", self.md)

    def test_auto_staging_feeds_the_table_generator(self):
        header = os.path.join(self.dir.name, "staging_table.h")
        shutil.copy(HEADER, header)
        res = subprocess.run([sys.executable, MAKE_TABLE,
                              os.path.join(self.dir.name, "auto-staging.json"), "--header",
                              header], capture_output=True, text=True, timeout=60)
        self.assertEqual(res.returncode, 0, res.stderr)
        with open(header) as f:
            text = f.read()
        self.assertIn("ElementType::kFloat32, SizeClass::kFewLongRows,\n     Staging::kPipeline, 2",
                      text)
        self.assertIn("ElementType::kFloat16, SizeClass::kFewLongRows,\n     Staging::kBulk, 4",
                      text)
        # Entries cite the report's section; the figures stay in the report.
        self.assertIn('"bench/results/kernels-h200.md, Winners for the `auto` staging table"',
                      text)
        measured = text[text.index("// BEGIN measured"):text.index("// END measured")]
        self.assertNotIn(" us", measured)

    def test_other_dtypes_have_their_own_table(self):
        self.assertIn("### Other dtypes", self.md)
        self.assertIn("| sum-row float16 |", self.md)
        self.assertIn("**20.00**", self.md)
        self.assertIn("FAILED sum-row int32 pipeline8", self.md)
        # The float32 target still uses only float32 runs (the float16 20 us is not ours there).
        self.assertIn("(pipeline2)", self.row("sum, one row of 2^28", "DeviceReduce"))

    def test_keep_notes_replaces_the_tables_and_keeps_the_hand_written_sections(self):
        earlier = os.path.join(self.dir.name, "earlier.md")
        with open(earlier, "w") as f:
            f.write("# Kernels benchmark on the H200\n\n- commit: `old0000`\n\n## Targets\n\n"
                    "| stale target row |\n\n## Checks\n\n- stale check\n\n"
                    "## What changed since the run at old0000\n\nhand text\n\n"
                    "## Tuning notes\n\n### elementwise\n\nwhy the tile is right\n")
        res = subprocess.run([sys.executable, REPORT, self.dir.name, "--keep-notes", earlier],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(res.returncode, 0, res.stderr)
        with open(os.path.join(self.dir.name, "kernels-h200.md")) as f:
            md = f.read()
        self.assertTrue(md.startswith(self.md.rstrip("\n")), "the fresh report comes first")
        self.assertIn("`abc1234`", md)
        for stale in ("old0000`", "stale target row", "stale check"):
            self.assertNotIn(stale, md)
        self.assertEqual(md.count("## Tuning notes"), 1)
        self.assertIn("## What changed since the run at old0000\n\nhand text\n", md)
        self.assertTrue(md.endswith("why the tile is right\n"))
        self.assertLess(md.index("## Checks"), md.index("## What changed since"))

    def test_keep_notes_without_hand_written_sections_changes_nothing(self):
        earlier = os.path.join(self.dir.name, "earlier.md")
        with open(earlier, "w") as f:
            f.write("## Targets\n\n## Checks\n\n- only generated sections\n")
        res = subprocess.run([sys.executable, REPORT, self.dir.name, "--keep-notes", earlier],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(res.returncode, 0, res.stderr)
        with open(os.path.join(self.dir.name, "kernels-h200.md")) as f:
            self.assertEqual(f.read(), self.md)

    def test_targets_table_ends_the_output(self):
        table = [l for l in self.stdout.splitlines() if l.startswith("|")]
        self.assertTrue(table[-1].startswith("| l2normalize"), table[-1])
        self.assertIn("note: 1 of our kernels use local memory", self.stdout)


if __name__ == "__main__":
    unittest.main()
