"""`gpupipe bench` and the drawn timelines against a CPU daemon: the JSON and CSV reports carry
every point with its echo floor and non-zero throughput, the daemon batches under load, and
both SVG timelines parse as XML with their bars."""
import csv
import io
import json
import os
import socket
import subprocess
import time
import xml.etree.ElementTree as ET

import numpy as np
import pytest

GPUPIPED = os.environ["GPUPIPED"]
GPUPIPE = os.environ["GPUPIPE_CLI"]
SVG = "{http://www.w3.org/2000/svg}"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def target():
    port = free_port()
    daemon = subprocess.Popen([GPUPIPED, "--backend", "cpu", "--listen", f"127.0.0.1:{port}",
                               "--metrics-listen", "", "--quiet"])
    target = f"127.0.0.1:{port}"
    for _ in range(200):
        if subprocess.run([GPUPIPE, "--target", target, "health"],
                          capture_output=True).returncode == 0:
            break
        time.sleep(0.05)
    yield target
    daemon.terminate()
    daemon.wait(timeout=30)


def gpupipe(target, *args):
    result = subprocess.run([GPUPIPE, "--target", target, *args], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_bench_json_has_every_point_and_its_echo_floor(target, tmp_path):
    mix = tmp_path / "mix"
    mix.write_text("# two priorities\n"
                   "weight=3; shape=1x1024; priority=low;  ops=affine(alpha=2) | relu | softmax\n"
                   "weight=1; shape=2x256;  priority=high; ops=sum\n")
    svg = tmp_path / "lanes.svg"
    report = json.loads(gpupipe(target, "bench", "--mix", str(mix), "--concurrency", "1,16",
                                "--duration", "0.6", "--warmup", "0.2", "--timeline", str(svg),
                                "--json"))
    assert report["backend"] == "cpu"
    assert len(report["mix"]) == 2
    assert [p["concurrency"] for p in report["points"]] == [1, 16]
    for point in report["points"]:
        for service in ("gpupipe", "echo"):
            s = point[service]
            assert s["throughput"] > 0, service
            assert s["errors"] == 0 and s["mismatches"] == 0, s
            for q in ("p50", "p90", "p99", "max"):
                assert s["latency_us"][q] > 0
            assert s["latency_us"]["p50"] <= s["latency_us"]["p99"] <= s["latency_us"]["max"]
            # Each end's CPU a request: the bench's own, and the daemon's (its stats) or the
            # floor process's (/proc); some, and less than a request's whole latency on every
            # core this machine has.
            for end in ("client", "server"):
                cpu = s["cpu_us_per_request"][end]
                assert cpu is not None and 0 < cpu < s["latency_us"]["max"] * os.cpu_count(), \
                    (service, end, cpu)
        job = point["gpupipe"]
        assert set(job["breakdown_us"]) == {"accept", "queue", "device", "server", "transport"}
        assert job["breakdown_us"]["accept"] > 0
        assert len(job["entries"]) == 2 and all(e["requests"] > 0 for e in job["entries"])
        assert point["vs_echo"]["throughput"] > 0
    root = ET.parse(svg).getroot()
    assert root.tag == SVG + "svg"
    bars = [r for r in root.iter(SVG + "rect") if "bar" in r.get("class", "").split()]
    assert bars and all(r.get("class").split()[1] in ("job", "batch") for r in bars)
    assert all(float(r.get("width")) > 0 for r in bars)


def test_bench_csv_and_the_batches_it_caused(target):
    before = json.loads(gpupipe(target, "stats", "--json"))["batching"].get("batched_jobs", 0)
    out = gpupipe(target, "bench", "--ops", "relu", "--shape", "1x256", "--concurrency", "32",
                  "--duration", "1", "--warmup", "0.2", "--csv", "--echo-stream")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["service"] for r in rows] == ["gpupipe", "echo", "echo-stream"]
    assert all(float(r["throughput"]) > 0 and r["errors"] == "0" for r in rows)
    stats = json.loads(gpupipe(target, "stats", "--json"))
    # 32 jobs in flight over a few lanes: lanes find several waiting and take them at once.
    assert int(stats["batching"]["batched_jobs"]) > int(before)
    assert int(stats["batching"]["largest"]) >= 2


def test_submit_draws_its_timeline(target, tmp_path):
    x = tmp_path / "x.npy"
    np.save(x, np.random.default_rng().standard_normal((64, 512)).astype(np.float32))
    svg = tmp_path / "job.svg"
    gpupipe(target, "submit", "--input", str(x), "--ops", "relu | softmax", "--timeline",
            str(svg))
    root = ET.parse(svg).getroot()
    kinds = [r.get("class").split()[1] for r in root.iter(SVG + "rect")
             if "bar" in r.get("class", "").split()]
    assert "compute" in kinds  # the cpu backend times its compute stage per chunk
    texts = [t.text for t in root.iter(SVG + "text")]
    assert any(t and "relu | softmax" in t for t in texts)
