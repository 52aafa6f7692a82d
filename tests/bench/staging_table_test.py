#!/usr/bin/env python3
"""bench/kernels/make_staging_table.py on a synthetic auto-staging.json.

Rewrites a copy of kernels/cuda/tuning/staging_table.h and parses the measured entries back:
which winners become entries, the 2% noise rule, provenance (the results section, no figures),
one entry per key, idempotence.
Where a C++ compiler and the CUDA headers exist, the rewritten header is compiled too.
Standard library only; the benchmark itself needs a GPU.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
SCRIPT = os.path.join(REPO, "bench", "kernels", "make_staging_table.py")
HEADER = os.path.join(REPO, "kernels", "cuda", "tuning", "staging_table.h")
PROVENANCE = "bench/results/kernels-h200.md, Winners for the `auto` staging table"

ENTRY = re.compile(
    r"\{StagingFamily::(\w+), ElementType::(\w+), SizeClass::(\w+),\s*"
    r"Staging::(\w+), (\d+),\s*\"((?:[^\"\\]|\\.)*)\"\},")


def winner(op, dtype, size_class, staging, stages, us, direct_us, runner_up=None):
    return {"op": op, "dtype": dtype, "rows": 1, "cols": 1 << 26, "shape": "1 x 2^26",
            "size_class": size_class, "staging": staging, "stages": stages, "median_us": us,
            "runner_up": runner_up, "direct_us": direct_us}


AUTO = {
    "commit": "abc1234",
    "date": "2026-12-01 00:00 UTC",
    "device": "NVIDIA H200",
    "machine": "name, driver: NVIDIA H200, 580.159.04",
    "winners": [
        # Clear win: bulk4 10% faster than direct.
        winner("affine", "float32", "elementwise", "bulk", 4, 90.0, 100.0,
               {"staging": "pipeline", "stages": 2, "median_us": 95.0}),
        # Within noise: 1% faster than direct keeps direct.
        winner("affine", "float16", "elementwise", "primitives", 8, 99.0, 100.0,
               {"staging": "direct", "stages": 0, "median_us": 100.0}),
        # Direct itself wins.
        winner("sum-row", "float64", "few-long-rows", "direct", 0, 50.0, 50.0,
               {"staging": "bulk", "stages": 2, "median_us": 51.0}),
        # Same key (rowreduce, int32, few-long-rows): sum decides over max and min, whatever
        # their order in the file.
        winner("min-row", "int32", "few-long-rows", "pipeline-thread", 1, 40.0, 60.0),
        winner("sum-row", "int32", "few-long-rows", "pipeline", 2, 45.0, 60.0),
        winner("max-row", "int32", "few-long-rows", "bulk", 8, 44.0, 60.0),
        winner("sum-long-rows", "float32", "many-long-rows", "pipeline", 4, 80.0, 90.0),
        # Not in the table: its kernels never read it.
        winner("softmax", "float32", "short-rows", "bulk", 2, 10.0, 20.0),
        winner("cumsum", "int32", "few-long-rows", "pipeline", 2, 10.0, 20.0),
    ],
}


def entries(text):
    begin = text.index("// BEGIN measured entries")
    end = text.index("// END measured entries")
    section = text[begin:end]
    return [m.groups() for m in ENTRY.finditer(section)], section


def comment_text(section):
    """The section's comments as one line of words (the generator wraps them)."""
    return " ".join(l.strip()[2:].strip() for l in section.splitlines()
                    if l.strip().startswith("//"))


class StagingTableTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        d = self.dir.name
        self.header = os.path.join(d, "kernels", "cuda", "tuning", "staging_table.h")
        os.makedirs(os.path.dirname(self.header))
        shutil.copy(HEADER, self.header)
        self.json = os.path.join(d, "auto-staging.json")
        with open(self.json, "w") as f:
            json.dump(AUTO, f)
        with open(HEADER) as f:
            self.original = f.read()
        self.stdout = self.generate()
        with open(self.header) as f:
            self.text = f.read()
        self.entries, self.section = entries(self.text)
        self.by_key = {(e[0], e[1], e[2]): e for e in self.entries}
        self.comments = comment_text(self.section)

    def tearDown(self):
        self.dir.cleanup()

    def generate(self):
        res = subprocess.run([sys.executable, SCRIPT, self.json, "--header", self.header],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(res.returncode, 0, res.stderr)
        return res.stdout

    def test_one_entry_per_family_dtype_size_class(self):
        self.assertEqual(len(self.entries), 5, self.section)
        self.assertEqual(len(self.by_key), 5)
        self.assertNotIn("softmax", self.section)
        self.assertNotIn("cumsum", self.section)
        self.assertIn("skipped softmax float32", self.stdout)

    def test_clear_winner(self):
        e = self.by_key[("kElementwise", "kFloat32", "kElementwise")]
        self.assertEqual((e[3], e[4]), ("kBulk", "4"))
        self.assertEqual(e[5], PROVENANCE)

    def test_within_noise_keeps_direct(self):
        e = self.by_key[("kElementwise", "kFloat16", "kElementwise")]
        self.assertEqual((e[3], e[4]), ("kDirect", "0"))
        self.assertIn("affine, float16, 1 x 2^26 (elementwise): primitives8 won, within the noise "
                      "bound: direct kept.", self.comments)
        e = self.by_key[("kRowReduce", "kFloat64", "kFewLongRows")]
        self.assertEqual((e[3], e[4]), ("kDirect", "0"))

    def test_sum_decides_a_shared_key(self):
        e = self.by_key[("kRowReduce", "kInt32", "kFewLongRows")]
        self.assertEqual((e[3], e[4]), ("kPipeline", "2"))
        self.assertIn("Also measured: min-row pipeline-thread1, max-row bulk8", self.comments)

    def test_entries_cite_the_results_section(self):
        self.assertEqual({e[5] for e in self.entries}, {PROVENANCE})
        self.assertIn("affine, float32, 1 x 2^26 (elementwise): bulk4 won.", self.comments)

    def test_no_figure_commit_or_date_in_the_header(self):
        # The figures stay in the report; the header says what won and where that is written.
        for needle in ("90.00", "95.00", "100.0", " us", "%", "abc1234", "2026-12-01",
                       "580.159.04", "runner-up"):
            self.assertNotIn(needle, self.section)
        # The run goes to the summary on stdout instead.
        self.assertIn("commit abc1234, 2026-12-01 00:00 UTC, NVIDIA H200, 580.159.04",
                      self.stdout)

    def test_rest_of_header_unchanged_and_idempotent(self):
        def outside(t):
            return t[:t.index("// BEGIN measured")], t[t.index("// END measured"):]
        self.assertEqual(outside(self.text), outside(self.original))
        self.generate()
        with open(self.header) as f:
            self.assertEqual(f.read(), self.text)

    def test_empty_run_restores_no_entries(self):
        with open(self.json, "w") as f:
            json.dump({"commit": "x", "winners": []}, f)
        self.generate()
        with open(self.header) as f:
            text = f.read()
        self.assertEqual(entries(text)[0], [])
        self.assertEqual(text.count("// BEGIN measured entries"), 1)

    def test_rewritten_header_compiles(self):
        cxx = shutil.which("c++") or shutil.which("g++")
        cuda_inc = "/usr/local/cuda/include"
        if not cxx or not os.path.exists(os.path.join(cuda_inc, "cuda_runtime_api.h")):
            self.skipTest("no C++ compiler or CUDA headers")
        src = os.path.join(self.dir.name, "tu.cc")
        with open(src, "w") as f:
            f.write('#include "kernels/cuda/tuning/staging_table.h"\n'
                    "namespace t = gpupipe::kernels::cuda::tuning;\n"
                    "static_assert(sizeof(t::kStagingTable) / sizeof(t::kStagingTable[0]) == "
                    "8 + 5, \"defaults plus measured entries\");\n"
                    "int main() { return 0; }\n")
        res = subprocess.run([cxx, "-std=c++17", "-fsyntax-only", "-I", self.dir.name, "-I", REPO,
                              "-isystem", cuda_inc, src], capture_output=True, text=True,
                             timeout=120)
        self.assertEqual(res.returncode, 0, res.stderr)


if __name__ == "__main__":
    unittest.main()
