"""Targets of several daemons: the list conversion (as client/targets.h), the service config,
and a balanced client in front of a draining daemon, whose refused jobs go to the next daemon
and run once."""
import json
import signal
import threading
import time

import grpc
import numpy as np
import pytest

import gpupipe
from gpupipe import client as gc
from conftest import Daemon


@pytest.mark.parametrize("given,uri", [
    ("gpu7", "gpu7:50051"),
    ("gpu7:6000", "gpu7:6000"),
    ("[::1]", "[::1]:50051"),
    ("unix:///run/gpupipe.sock", "unix:///run/gpupipe.sock"),
    ("ipv4:10.0.0.7:50051", "ipv4:10.0.0.7:50051"),
])
def test_one_daemon_is_as_before(given, uri):
    assert gpupipe.resolve_target(given) == gpupipe.ChannelTarget(uri, False, 1)


def test_a_dns_name_or_an_address_list_uri_is_balanced():
    assert gpupipe.resolve_target("dns:///gpupipe.svc:50051") == gpupipe.ChannelTarget(
        "dns:///gpupipe.svc:50051", True, 0)
    assert gpupipe.resolve_target("ipv4:10.0.0.7:1,10.0.0.8:2").addresses == 2


def test_a_list_becomes_one_address_list_uri():
    t = gpupipe.resolve_target("127.0.0.1:7001, 10.0.0.8 ,10.0.0.9:7003")
    assert t == gpupipe.ChannelTarget("ipv4:127.0.0.1:7001,10.0.0.8:50051,10.0.0.9:7003", True, 3)
    assert gpupipe.resolve_target("[::1]:7001,[fd00::9]").uri == "ipv6:[::1]:7001,[fd00::9]:50051"
    assert gpupipe.resolve_target("127.0.0.1:7001,127.0.0.1:7001").addresses == 1
    # Names are resolved once, to the list's family (localhost has an IPv4 address everywhere).
    named = gpupipe.resolve_target("localhost:7001,127.0.0.1:7002").uri
    assert named.startswith("ipv4:") and "127.0.0.1:7001" in named and "127.0.0.1:7002" in named


@pytest.mark.parametrize("target,message", [
    ("", "empty"),
    ("127.0.0.1:7001,[::1]:7002", "cannot mix IPv4 and IPv6"),
    ("a:1,,b:2", "an empty entry"),
    ("::1:7001,::2:7002", "takes brackets"),
    ("a:1,dns:///b:2", "a URI goes alone"),
    ("a:0,b:1", "1 to 65535"),
    ("[::1,[::2]:1", "no closing ']'"),
])
def test_refuses_what_one_channel_cannot_take(target, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        gpupipe.resolve_target(target)


def test_a_name_that_does_not_resolve_is_unavailable():
    with pytest.raises(gpupipe.JobError, match="cannot resolve 'gpu.invalid'") as e:
        gpupipe.resolve_target("gpu.invalid:7001,127.0.0.1:7002")
    assert e.value.code == grpc.StatusCode.UNAVAILABLE


def test_service_config_retries_only_what_changes_nothing():
    for health in (False, True):
        config = json.loads(gc.service_config(health))
        assert config["loadBalancingConfig"] == [{"round_robin": {}}]
        assert ("healthCheckConfig" in config) == health
        (method,) = config["methodConfig"]
        assert [n["method"] for n in method["name"]] == ["Describe", "GetStats"]
        assert method["retryPolicy"]["retryableStatusCodes"] == ["UNAVAILABLE"]
    assert not gpupipe.is_local_target("127.0.0.1:7001,127.0.0.1:7002")
    assert gc.submit_retry_delay(2) == 0.05 and gc.submit_retry_delay(30) == 1.0


def refused(client):
    return client.stats().rejected.get("unavailable", 0)


def test_jobs_refused_by_a_draining_daemon_run_once_on_another(monkeypatch):
    # The CPU backend whatever GPUPIPE_BACKEND says (a later --backend wins): the costly job
    # must still run while the daemon drains, and on a GPU it ends in a millisecond.
    draining = Daemon("--shutdown-grace-seconds", "60", "--backend", "cpu")
    serving = Daemon("--backend", "cpu")
    costly = threading.Thread(daemon=True, target=lambda: _run_costly(draining.target))
    try:
        costly.start()
        alone = gpupipe.Client(draining.target)
        deadline = time.monotonic() + 30
        while sum(p.running for p in alone.stats().priorities) == 0:
            assert time.monotonic() < deadline, "the costly job did not start"
            time.sleep(0.01)
        draining.proc.send_signal(signal.SIGTERM)
        x = np.arange(-2, 2, dtype=np.float32)
        deadline = time.monotonic() + 10
        while True:  # until the daemon has begun to drain
            try:
                alone.submit(x, "relu")
            except gpupipe.JobError as e:
                assert e.code == grpc.StatusCode.UNAVAILABLE and "shutting down" in e.message
                break
            assert time.monotonic() < deadline
        # With health checks, a balanced client sends the draining daemon nothing.
        before = refused(alone)
        both = f"{draining.target},{serving.target}"
        with gpupipe.Client(both) as balanced:
            for _ in range(4):
                np.testing.assert_array_equal(balanced.submit(x, "relu").output, [0, 0, 0, 1])
        assert refused(alone) == before
        # Without them, the draining daemon's refusals are sent to the other one, once each.
        monkeypatch.setattr(gc, "service_config", lambda health: json.dumps(
            {"loadBalancingConfig": [{"round_robin": {}}]}))
        with gpupipe.Client(serving.target) as to_serving:
            ok_before = _ok(to_serving)
        with gpupipe.Client(both) as balanced:
            for _ in range(8):
                np.testing.assert_array_equal(balanced.submit(x, "relu").output, [0, 0, 0, 1])
        assert refused(alone) > before
        with gpupipe.Client(serving.target) as to_serving:
            assert _ok(to_serving) - ok_before == 8
        alone.close()
    finally:
        draining.proc.kill()
        draining.proc.wait()
        serving.stop()


def _ok(client):
    return sum(p.jobs.by_status.get("OK", 0) for p in client.stats().priorities)


def _run_costly(target):
    op = gc.pb.Op(convolve=gc.pb.ConvolveOp(taps=[0.001] * 1024, mode=gc.pb.ConvolveOp.MODE_SAME))
    try:
        with gpupipe.Client(target, transport="grpc") as c:
            c.submit(np.zeros(1 << 20, np.float32), [op] * 16)
    except gpupipe.JobError:
        pass  # the daemon is killed under it
