"""The Python client against a running gpupiped: submit, streaming, shared memory and
errors. Every result is checked against NumPy on fresh random data."""
import os
from concurrent import futures

import grpc
import numpy as np
import pytest

import gpupipe
from conftest import Daemon
from gpupipe.client import pb

SEED = int.from_bytes(os.urandom(4), "little")


@pytest.fixture
def rng():
    print(f"seed {SEED}")
    return np.random.default_rng(SEED)


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_submit_returns_the_result_and_timing(daemon, rng):
    x = rng.uniform(-4, 4, (4, 1024)).astype(np.float32)
    with gpupipe.Client(daemon.target) as client:
        r = client.submit(x, "affine(alpha=2, beta=1) | relu | softmax")
    assert r.transport == "inline"
    assert r.output.dtype == np.float32 and r.output.shape == (4, 1024)
    np.testing.assert_allclose(r.output, softmax(np.maximum(2 * x + 1, 0)), rtol=2e-5, atol=1e-7)
    assert r.timing.bytes_in == x.nbytes and r.timing.total_us > 0
    assert r.job_id and r.backend in ("cpu", "cuda")


class _Counting:
    """Wraps a stub method and counts its calls."""

    def __init__(self, method):
        self.method, self.calls = method, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.method(*args, **kwargs)


def test_small_jobs_go_as_one_unary_call_and_others_as_submit(daemon, rng):
    with gpupipe.Client(daemon.target) as client:
        small_calls = client._stub.SubmitSmall = _Counting(client._stub.SubmitSmall)
        submits = client._stub.Submit = _Counting(client._stub.Submit)
        x = rng.uniform(-4, 4, (2, 1024)).astype(np.float32)
        r = client.submit(x, "affine(alpha=2, beta=1) | relu | softmax")
        np.testing.assert_allclose(r.output, softmax(np.maximum(2 * x + 1, 0)), rtol=2e-5,
                                   atol=1e-7)
        assert r.timing.total_us > 0 and r.job_id
        assert (small_calls.calls, submits.calls) == (1, 0)
        # 64 bytes in, 1 MiB of counts out (more than one message carries): refused by
        # SubmitSmall, then run by Submit.
        y = rng.uniform(-1, 1, (2, 8)).astype(np.float32)
        r = client.submit(y, "histogram(bins=65536, lo=-1, hi=1)")
        assert r.output.shape == (2, 65536) and r.output.dtype == np.int64
        np.testing.assert_array_equal(r.output[1],
                                      np.histogram(y[1].astype(np.float64), 65536, (-1, 1))[0])
        assert (small_calls.calls, submits.calls) == (2, 1)
        # A plan, or more than SUBMIT_SMALL_BYTES, never tries SubmitSmall.
        client.submit(x, "relu", explain=True)
        z = rng.standard_normal(gpupipe.client.SUBMIT_SMALL_BYTES // 4 + 1).astype(np.float32)
        np.testing.assert_array_equal(client.submit(z, "relu", transport="grpc").output,
                                      np.maximum(z, 0))
        assert (small_calls.calls, submits.calls) == (2, 3)
    with gpupipe.Client(daemon.target, submit_small=False) as client:
        small_calls = client._stub.SubmitSmall = _Counting(client._stub.SubmitSmall)
        np.testing.assert_array_equal(client.submit(x, "relu").output, np.maximum(x, 0))
        assert small_calls.calls == 0


class _PeerRecorder:
    """A JobService that answers SubmitSmall with the input as the result, noting each call's
    client address (its connection's port)."""

    def __init__(self):
        self.peers = []

    def handler(self):
        return grpc.method_handlers_generic_handler("gpupipe.v1.JobService", {
            "SubmitSmall": grpc.unary_unary_rpc_method_handler(
                self.submit_small, request_deserializer=pb.SubmitRequest.FromString,
                response_serializer=pb.CompleteJob.SerializeToString)})

    def submit_small(self, request, context):
        self.peers.append(context.peer())
        job = pb.CompleteJob()
        job.accepted.job_id = f"j{len(self.peers)}"
        job.accepted.output_dtype = request.input.dtype
        job.accepted.output_shape.extend(request.input.shape)
        job.accepted.backend = "cpu"
        job.chunk.data = request.input.data
        return job


def test_high_priority_small_jobs_go_on_a_connection_of_their_own(daemon, rng):
    recorder = _PeerRecorder()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((recorder.handler(),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with gpupipe.Client(f"127.0.0.1:{port}") as client:
            x = rng.standard_normal(16).astype(np.float32)
            for priority in ("low", "high", "normal", "high"):
                r = client.submit(x, "relu", priority=priority)
                np.testing.assert_array_equal(r.output, x)
    finally:
        server.stop(None)
    # A connection is a client port: the high jobs share one, the others another.
    low, high, normal, high_again = recorder.peers
    assert low == normal and high == high_again and low != high
    # And against a daemon, the results are the job's.
    with gpupipe.Client(daemon.target) as client:
        main_calls = client._stub.SubmitSmall = _Counting(client._stub.SubmitSmall)
        x = rng.uniform(-4, 4, (2, 1024)).astype(np.float32)
        np.testing.assert_allclose(client.submit(x, "softmax", priority="high").output,
                                   softmax(x), rtol=2e-5, atol=1e-7)
        assert main_calls.calls == 0
        assert client._high_stub is not None and client._high_channel is not client._channel
        high_calls = client._high_stub.SubmitSmall = _Counting(client._high_stub.SubmitSmall)
        for priority in ("low", "high", "normal"):
            r = client.submit(x, "softmax", priority=priority)
            np.testing.assert_allclose(r.output, softmax(x), rtol=2e-5, atol=1e-7)
        assert (high_calls.calls, main_calls.calls) == (1, 2)
        # A job that goes as Submit (here: one that asks for its plan) takes the same way.
        high_submits = client._high_stub.Submit = _Counting(client._high_stub.Submit)
        main_submits = client._stub.Submit = _Counting(client._stub.Submit)
        for priority in ("high", "low"):
            r = client.submit(x, "relu", priority=priority, explain=True)
            np.testing.assert_array_equal(r.output, np.maximum(x, 0))
        assert (high_submits.calls, main_submits.calls) == (1, 1)


def test_high_priority_small_jobs_go_to_the_priority_listener(rng):
    d = Daemon("--priority-listen", "127.0.0.1:0")
    try:
        with gpupipe.Client(d.target, priority_target=d.priority_target) as client:
            main_calls = client._stub.SubmitSmall = _Counting(client._stub.SubmitSmall)
            listener_calls = client._priority_stub.SubmitSmall = _Counting(
                client._priority_stub.SubmitSmall)
            x = rng.uniform(-4, 4, (2, 1024)).astype(np.float32)
            for priority in ("high", "low", "high"):
                r = client.submit(x, "softmax", priority=priority)
                np.testing.assert_allclose(r.output, softmax(x), rtol=2e-5, atol=1e-7)
            assert (listener_calls.calls, main_calls.calls) == (2, 1)
        # A job the listener refuses before accepting it (here: as full) goes to the main
        # address instead.
        with gpupipe.Client(d.target, priority_target=d.priority_target) as client:
            refusals = client._priority_stub.SubmitSmall = _Counting(_refuse_as_full)
            submits = client._stub.Submit = _Counting(client._stub.Submit)
            x = rng.uniform(-4, 4, (1, 64)).astype(np.float32)
            r = client.submit(x, "relu", priority="high")
            np.testing.assert_array_equal(r.output, np.maximum(x, 0))
            assert (refusals.calls, submits.calls) == (1, 1)
        # The listener itself refuses lower priorities, marked as not accepted.
        with gpupipe.Client(d.priority_target) as direct:
            request = pb.SubmitRequest(priority=pb.PRIORITY_LOW)
            request.input.dtype = pb.DTYPE_FLOAT32
            request.input.shape.append(2)
            request.input.data = np.ones(2, np.float32).tobytes()
            request.ops.add().relu.SetInParent()
            with pytest.raises(grpc.RpcError) as refused:
                direct._stub.SubmitSmall(request)
            assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
            assert gpupipe.client.marked_as_accepting_none(refused.value)
    finally:
        d.stop()


class _Full(grpc.RpcError):
    """The priority listener's answer when it has --priority-max-calls calls in progress."""

    def code(self):
        return grpc.StatusCode.RESOURCE_EXHAUSTED

    def details(self):
        return "the priority listener has 64 calls in progress"

    def trailing_metadata(self):
        return (("gpupipe-accepted", "0"),)


def _refuse_as_full(*args, **kwargs):
    raise _Full()


class _Unimplemented(grpc.RpcError):
    """What gRPC answers both for a method the daemon lacks and for a request it cannot
    decode (bad UTF-8 in a string field): UNIMPLEMENTED, with no message."""

    def code(self):
        return grpc.StatusCode.UNIMPLEMENTED

    def details(self):
        return ""

    def trailing_metadata(self):
        return ()


def test_an_undecodable_request_does_not_turn_submit_small_off(daemon, rng):
    def unimplemented(*args, **kwargs):
        raise _Unimplemented()

    x = rng.uniform(-4, 4, (2, 64)).astype(np.float32)
    with gpupipe.Client(daemon.target) as client:
        client._stub.SubmitSmall = _Counting(unimplemented)
        submit = client._stub.Submit
        client._stub.Submit = unimplemented  # the same request fails to decode as a Submit
        with pytest.raises(gpupipe.JobError) as err:
            client.submit(x, "relu")
        assert err.value.code == grpc.StatusCode.UNIMPLEMENTED
        assert client.submit_small  # nothing said the daemon lacks SubmitSmall
        client._stub.Submit = submit  # the daemon decodes it as a Submit: it lacks SubmitSmall
        np.testing.assert_array_equal(client.submit(x, "relu").output, np.maximum(x, 0))
        assert not client.submit_small and client._stub.SubmitSmall.calls == 2
        client.submit(x, "relu")
        assert client._stub.SubmitSmall.calls == 2


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.int64])
def test_every_dtype(daemon, rng, dtype):
    x = rng.integers(-5, 6, (3, 257)).astype(dtype)
    with gpupipe.Client(daemon.target) as client:
        if dtype == np.int64:  # an output dtype only: no op takes it
            with pytest.raises(gpupipe.JobError, match="int64 is not supported"):
                client.submit(x, "abs")
            return
        r = client.submit(x, "abs")
        assert r.output.dtype == dtype
        np.testing.assert_array_equal(r.output, np.abs(x))
        s = client.submit(x, "max")
        np.testing.assert_array_equal(s.output, x.max(axis=-1))


def test_large_arrays_are_streamed(daemon, rng):
    # 3 MiB: over this daemon's 1 MiB Submit limit.
    x = rng.standard_normal((3, 1 << 18)).astype(np.float32)
    with gpupipe.Client(daemon.target, transport="grpc") as client:
        gpupipe.client.STREAM_AUTO_BYTES, old = 1 << 20, gpupipe.client.STREAM_AUTO_BYTES
        try:
            r = client.submit(x, "relu")
        finally:
            gpupipe.client.STREAM_AUTO_BYTES = old
    assert r.transport == "stream"
    np.testing.assert_array_equal(r.output, np.maximum(x, 0))


@pytest.mark.parametrize("streams", [2, 3])
def test_a_run_split_over_calls_gives_the_bytes_of_one_call(daemon, rng, streams):
    # 5 MiB in 64 KiB chunks: several upload messages per call and many result chunks.
    x = rng.standard_normal((5, 1 << 18)).astype(np.float32)
    with gpupipe.Client(daemon.target, transport="grpc") as client:
        one = client.submit(x, "affine(alpha=2, beta=1) | softmax", streams=1, chunk_bytes=1 << 16)
        split = client.submit(x, "affine(alpha=2, beta=1) | softmax", streams=streams,
                              chunk_bytes=1 << 16)
        # An output buffer given by the caller is filled in place.
        out = np.empty_like(x)
        again = client.submit(x, "relu", streams=streams, out=out, chunk_bytes=1 << 16)
    assert split.transport == "stream" and split.output.shape == x.shape
    np.testing.assert_array_equal(split.output, one.output)
    np.testing.assert_allclose(split.output, softmax(2 * x + 1), rtol=2e-5, atol=1e-7)
    assert split.timing.bytes_in == x.nbytes
    assert again.output is out
    np.testing.assert_array_equal(out, np.maximum(x, 0))


def test_a_failing_split_run_raises_the_jobs_error(daemon, rng):
    x = rng.standard_normal((2, 1 << 18)).astype(np.float32)
    with gpupipe.Client(daemon.target, transport="grpc") as client:
        with pytest.raises(gpupipe.JobError) as err:
            client.submit(x, "pow", streams=2)  # pow needs p: refused on every call
        assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert "p" in err.value.message
        with pytest.raises(gpupipe.JobError) as err:
            client.submit(x, "relu", streams=1000)  # over the daemon's --max-run-streams
        assert err.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "max-run-streams" in err.value.message


def test_shared_memory_gives_the_same_bytes_as_the_connection(daemon, rng):
    x = rng.standard_normal((64, 4096)).astype(np.float32)
    with gpupipe.Client(daemon.target) as client:
        for ops in ("affine(alpha=2,beta=1) | relu | softmax", "sum", "cumsum", "topk(k=3)",
                    "histogram(bins=8, lo=-3, hi=3)"):
            shm = client.submit(x, ops, transport="shm")
            assert shm.transport == "shm"
            inline = client.submit(x[:16], ops, transport="grpc")
            whole = client.submit(x, ops, transport="grpc") if x.nbytes <= (1 << 20) else None
            np.testing.assert_array_equal(shm.output[:16], inline.output)
            if whole is not None:
                np.testing.assert_array_equal(shm.output, whole.output)
        assert client.stats().regions == 0  # every temporary region went again


def test_shared_arrays_are_read_and_written_in_place(daemon, rng):
    with gpupipe.Client(daemon.target) as client:
        x = client.shared_array((256, 1024), np.float32)
        y = client.shared_array((256, 1024), np.float32)
        x[:] = rng.standard_normal(x.shape, dtype=np.float32)
        r = client.submit(x, "affine(alpha=-1) | relu", out=y)
        assert r.transport == "shm"
        assert r.output is y
        np.testing.assert_array_equal(y, np.maximum(-x, 0))
        # A slice of a shared array is a region slice too.
        half = client.submit(x[128:], "relu", out=y[:128])
        assert half.output is not None
        np.testing.assert_array_equal(y[:128], np.maximum(x[128:], 0))
        assert client.stats().regions == 2
        client.release(x)
        client.release(y)
        assert client.stats().regions == 0


def test_memfd_arrays_are_passed_by_descriptor_and_leave_no_name(daemon, daemon_without_regions,
                                                                 rng):
    before = set(os.listdir("/dev/shm"))
    with gpupipe.Client(daemon.target) as client:
        x = client.shared_array((8, 4096), np.float32, memfd=True)
        y = client.shared_array((8, 4096), np.float32, memfd=True)
        x[:] = rng.standard_normal(x.shape).astype(np.float32)
        r = client.submit(x, "affine(alpha=-1) | relu", out=y)
        assert r.transport == "shm" and r.output is y
        np.testing.assert_array_equal(y, np.maximum(-x, 0))
        assert set(os.listdir("/dev/shm")) == before  # no named object at any point
        client.release(x)
    with gpupipe.Client(daemon_without_regions.target) as client:  # no --region-fd-socket
        with pytest.raises(gpupipe.JobError) as err:
            client.shared_array(16, memfd=True)
        assert err.value.code == grpc.StatusCode.FAILED_PRECONDITION
        assert "--region-fd-socket" in err.value.message


def test_auto_uses_shared_memory_for_large_local_arrays_only(daemon, daemon_without_regions, rng):
    big = rng.standard_normal((64, 8192)).astype(np.float32)  # 2 MiB
    small = rng.standard_normal((4, 8)).astype(np.float32)
    with gpupipe.Client(daemon.target) as client:
        assert client.submit(big, "relu").transport == "shm"
        assert client.submit(small, "relu").transport == "inline"
    # Regions off: auto falls back to the connection; shm says why.
    with gpupipe.Client(daemon_without_regions.target) as client:
        r = client.submit(big, "relu")
        assert r.transport == "stream" or r.transport == "inline"
        np.testing.assert_array_equal(r.output, np.maximum(big, 0))
        with pytest.raises(gpupipe.JobError) as e:
            client.submit(big, "relu", transport="shm")
        assert e.value.code == grpc.StatusCode.UNAVAILABLE
        assert "regions are off" in e.value.message


def test_errors_are_clear(daemon, rng):
    x = rng.standard_normal((4, 8)).astype(np.float32)
    with gpupipe.Client(daemon.target) as client:
        with pytest.raises(gpupipe.OpsError, match="unknown op 'sofmax'"):
            client.submit(x, "relu | sofmax")
        with pytest.raises(gpupipe.JobError) as e:
            client.submit(x, "topk(k=0)")
        assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(ValueError, match="dtype"):
            client.submit(x.astype(np.uint8), "relu")
        with pytest.raises(ValueError, match="out"):
            client.submit(x, "relu", out=np.empty((3, 3), np.float32))
        # Still serving.
        np.testing.assert_array_equal(client.submit(x, "relu").output, np.maximum(x, 0))


def test_another_client_cannot_use_a_shared_array(daemon, rng):
    with gpupipe.Client(daemon.target, client_id="alice") as alice, \
            gpupipe.Client(daemon.target, client_id="mallory") as mallory:
        x = alice.shared_array((4, 8))
        x[:] = 1
        # mallory learns alice's region id and names it in a request of its own.
        region = alice._region_of(x)
        request = gpupipe.client.pb.SubmitRequest()
        request.input.dtype = gpupipe.client.pb.DTYPE_FLOAT32
        request.input.shape.extend([4, 8])
        request.ops.add().relu.SetInParent()
        request.input_region.region_id = region.id
        with pytest.raises(gpupipe.JobError) as e:
            list(mallory._events(mallory._stub.Submit, request))
        assert e.value.code == grpc.StatusCode.PERMISSION_DENIED


def test_cuda_tensors_are_read_and_written_in_place(daemon, rng):
    """CUDA IPC from a PyTorch tensor (GPUPIPE_BACKEND=cuda with PyTorch on a GPU host)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or os.environ.get("GPUPIPE_BACKEND") != "cuda":
        pytest.skip("needs PyTorch with a GPU and a cuda daemon")
    x_host = rng.standard_normal((256, 4096)).astype(np.float32)
    x = torch.from_numpy(x_host).cuda()
    y = torch.empty_like(x)
    with gpupipe.Client(daemon.target) as client:
        r = client.submit(x, "affine(alpha=2, beta=1) | relu", out=y)
        assert r.transport == "cuda-ipc" and r.output is y
        torch.cuda.synchronize()
        np.testing.assert_array_equal(y.cpu().numpy(), np.maximum(2 * x_host + 1, 0))
        # A slice of a larger allocation, the result back as NumPy.
        s = client.submit(x[128:], "softmax")
        np.testing.assert_allclose(s.output, softmax(x_host[128:]), rtol=2e-5, atol=1e-7)
        assert client.stats().regions >= 1
    with gpupipe.Client(daemon.target) as client:
        assert client.stats().regions == 0  # close() unregistered them


def test_a_client_that_dies_leaves_no_region_behind(daemon):
    """The client's lease ends with its connection: its regions go at once, not after the
    idle timeout."""
    import subprocess
    import sys
    import time
    script = ("import os, numpy as np, gpupipe\n"
              f"c = gpupipe.Client('{daemon.target}', client_id='doomed')\n"
              "x = c.shared_array((64, 1024)); y = c.shared_array((64, 1024))\n"
              "c.submit(x, 'relu', out=y)\n"
              "print(c.stats().regions, flush=True)\n"
              "os._exit(9)\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=os.environ, timeout=60)
    assert proc.returncode == 9, proc.stderr
    assert int(proc.stdout.split()[-1]) >= 2
    with gpupipe.Client(daemon.target) as client:
        deadline = time.monotonic() + 10
        while client.stats().regions != 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.stats().regions == 0
