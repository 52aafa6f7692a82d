"""A gpupiped per test session: GPUPIPED names the binary (the build's, or a bundle's), and
GPUPIPE_BACKEND the backend (default cpu). The generated gpupipe.v1 modules come from
PYTHONPATH (the build's python/ directory) or an installed package."""
import os
import re
import subprocess
import time

import pytest


class Daemon:
    def __init__(self, *args):
        binary = os.environ.get("GPUPIPED")
        if not binary:
            pytest.skip("GPUPIPED is not set (the path of a gpupiped binary)")
        backend = os.environ.get("GPUPIPE_BACKEND", "cpu")
        self.proc = subprocess.Popen(
            [binary, "--backend", backend, "--listen", "127.0.0.1:0", "--metrics-listen", "",
             "--quiet", *args], stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log = ""
        self.target = self.priority_target = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log += line
            m = re.search(r"listening on [^ ]*:(\d+)", line)
            if m:
                self.target = f"127.0.0.1:{m.group(1)}"
            m = re.search(r"priority listener on [^ ]*:(\d+)", line)
            if m:
                self.priority_target = f"127.0.0.1:{m.group(1)}"
            if self.target and (self.priority_target or "--priority-listen" not in args):
                return
        self.proc.kill()
        raise RuntimeError("gpupiped did not start:\n" + self.log)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture(scope="session")
def daemon(tmp_path_factory):
    socket_path = str(tmp_path_factory.mktemp("gpupiped") / "regions.sock")
    d = Daemon("--max-input-mib", "1", "--region-fd-socket", socket_path)
    yield d
    d.stop()


@pytest.fixture(scope="session")
def daemon_without_regions():
    d = Daemon("--max-region-gib", "0")
    yield d
    d.stop()
