#!/usr/bin/env python3
"""scripts/check-kernel-comments.sh: the tree passes, and on synthetic sources it flags measured
figures and commit hashes in comments only (code, strings and characters pass). Standard library
only."""
import os
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
SCRIPT = os.path.join(REPO, "scripts", "check-kernel-comments.sh")

# Nothing here may be flagged: figures and hex words outside comments, and comments whose
# numbers are not measurements.
CLEAN = r'''// One row of 2^28 float32 values, sm_90, 16-byte vectors, 48 KiB of shared memory.
// Blocks of 256 threads; backoff up to 256 ns; 3 x 512 x 4 x 16 B in flight.
/* A block comment: tiles of 8192, 16 windows of 32, lag 2. */
#include <cstdio>
constexpr unsigned kMask = 0xffffffffu;  // every lane
constexpr long kBig = 1'000'000;         // digit separators are no character literals
constexpr char kPercent = '%';
void Print(int a, int b) {
  std::printf("%d%% of %d us at a73584a\n", a, b);  // the format is a string
  const char* raw = R"(90% // 12 us deadbeef1)";
  (void)raw;
  int x = a % b;  // the remainder
  (void)x;
}
'''

# Each line here must be flagged, with the kind named.
DIRTY = [
    ("// sum of one row: 245 us at a73584a", "measured figure"),
    ("// 1,022 us for the general kernel", "measured figure"),
    ("// 1.5 ms end to end", "measured figure"),
    ("// 4291 GB/s, 3.3 TB/s", "measured figure"),
    ("/* 3% behind CUB */", "percentage"),
    ("// at 80 % of cudaMemcpy", "percentage"),
    ("// measured on the H200 in us: 12", "measured time"),
    ("// In the run at c29b32d, 24 beat 4.", "commit hash"),
    ("int y = 0;  // fd00965 chose it", "commit hash"),
]


def run(*paths):
    return subprocess.run(["bash", SCRIPT, *paths], capture_output=True, text=True, timeout=120)


class CommentCheckTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, text):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_the_kernels_tree_passes(self):
        res = run()
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        self.assertIn("no measured figure or commit hash", res.stdout)

    def test_code_strings_and_plain_numbers_pass(self):
        res = run(self.write("clean.cu", CLEAN))
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)

    def test_figures_and_hashes_in_comments_fail(self):
        path = self.write("dirty.cuh", CLEAN + "\n".join(line for line, _ in DIRTY) + "\n")
        res = run(path)
        self.assertEqual(res.returncode, 1, res.stdout + res.stderr)
        first = CLEAN.count("\n") + 1
        for k, (line, what) in enumerate(DIRTY):
            self.assertIn(f"{path}:{first + k}: {what} ", res.stdout)
        self.assertEqual(res.stdout.count(f"{path}:"), len(DIRTY), res.stdout)

    def test_folders_are_searched_for_sources(self):
        os.makedirs(os.path.join(self.dir.name, "cuda", "detail"))
        self.write(os.path.join("cuda", "detail", "x.cuh"), "// 9.7 us\n")
        self.write(os.path.join("cuda", "notes.txt"), "// 9.7 us\n")  # not a source
        res = run(self.dir.name)
        self.assertEqual(res.returncode, 1, res.stdout)
        self.assertIn("x.cuh:1: measured figure", res.stdout)
        self.assertNotIn("notes.txt", res.stdout)


if __name__ == "__main__":
    unittest.main()
