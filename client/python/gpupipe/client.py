"""gpupipe's Python client: jobs on NumPy arrays, streamed for large ones, through shared
memory when the daemon runs on this host."""
import dataclasses
import json
import os
import re
import socket
import threading
import time

import grpc
import numpy as np

from . import cuda_ipc as _cuda
from . import ops as _ops
from .shm import SharedMemory

try:
    from .v1 import gpupipe_pb2 as pb
    from .v1 import gpupipe_pb2_grpc as pb_grpc
except ImportError as e:  # pragma: no cover - an install without its generated stubs
    raise ImportError("gpupipe's generated protobuf modules are missing: install the package "
                      "with pip (which generates them) or build the project with CMake") from e

DTYPES = {
    np.dtype(np.float32): pb.DTYPE_FLOAT32,
    np.dtype(np.float64): pb.DTYPE_FLOAT64,
    np.dtype(np.float16): pb.DTYPE_FLOAT16,
    np.dtype(np.int32): pb.DTYPE_INT32,
    np.dtype(np.int64): pb.DTYPE_INT64,
}
_NUMPY = {v: k for k, v in DTYPES.items()}
_PRIORITIES = {"low": pb.PRIORITY_LOW, "normal": pb.PRIORITY_NORMAL, "high": pb.PRIORITY_HIGH}

# Bytes per Run data message: under gRPC's default 4 MiB and the server's 1 MiB advice.
UPLOAD_CHUNK_BYTES = (1 << 20) - 4096
# transport="auto" uses shared memory from this size on (local targets only): below it, the
# extra registrations and the plan cost more than the bytes' trip.
SHM_AUTO_BYTES = 1 << 20
# Inputs above this go through Run (streamed) rather than one Submit message.
STREAM_AUTO_BYTES = 32 << 20
# Arrays of at most this many bytes go as one unary SubmitSmall call (Client.submit_small),
# which costs both ends less than Submit's stream.
SUBMIT_SMALL_BYTES = 64 << 10
# A streamed job is split over several calls (streams=0) from this size on, one call more per
# this many bytes, at most MAX_AUTO_STREAMS (and the daemon's Limits.max_run_streams): the
# rule of the C++ library (client/striped_run.cc), which says where it comes from.
SPLIT_AUTO_BYTES = 64 << 20
MAX_AUTO_STREAMS = 2

# The daemon's port when a target names only a host.
DEFAULT_PORT = 50051
# The trailing metadata of a Submit call the daemon refused before it accepted a job (value
# "0"; gpupipe.proto, JobService.Submit): the job did not run, and may be sent again.
ACCEPTED_METADATA_KEY = "gpupipe-accepted"
_URI_SCHEMES = ("dns:", "unix:", "unix-abstract:", "ipv4:", "ipv6:", "vsock:")


class JobError(Exception):
    """A call or a job that failed: `code` is a grpc.StatusCode, `message` the server's."""

    def __init__(self, code, message):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message
        # A Submit call that failed after events came: the daemon had decoded its request.
        self.after_events = False


@dataclasses.dataclass
class Result:
    output: np.ndarray       # the result (`out` when one was given)
    timing: "pb.Timing"      # where the time went (gpupipe.v1.Timing)
    job_id: str
    backend: str             # "cuda" or "cpu"
    transport: str           # "inline", "stream", "shm" or "cuda-ipc"
    plan: "pb.Plan" = None   # with explain=True


@dataclasses.dataclass
class ChannelTarget:
    uri: str                # what the channel is made for
    balanced: bool = False  # calls may reach several daemons: a list, or a dns: name
    addresses: int = 1      # the daemons a list names (a dns: name: 0, unknown)


def _is_uri(target):
    """Whether `target` is a URI gRPC resolves ("dns:", "unix:", ..., "scheme://...")."""
    return bool(re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", target)) or target.startswith(_URI_SCHEMES)


def target_with_port(target):
    """`target` with the default port added where it names a host without one ("gpu7" ->
    "gpu7:50051", "[::1]" -> "[::1]:50051"); URIs as they are."""
    if _is_uri(target):
        return target
    if target.startswith("["):
        return f"{target}:{DEFAULT_PORT}" if target.endswith("]") else target
    return f"{target}:{DEFAULT_PORT}" if ":" not in target else target


def _parse_entry(text):
    """(host, port) of one entry of a list."""
    if text.startswith("["):
        close = text.find("]")
        if close < 0:
            raise ValueError(f"target '{text}': no closing ']'")
        host, rest = text[1:close], text[close + 1:]
        if rest and not rest.startswith(":"):
            raise ValueError(f"target '{text}': expected [ADDRESS]:PORT")
        port = rest[1:]
    else:
        if text.count(":") > 1:
            raise ValueError(f"target '{text}': an IPv6 address in a list takes brackets "
                             "([::1]:50051)")
        host, _, port = text.partition(":")
    if not host:
        raise ValueError(f"target '{text}': no host")
    if not port:
        return host, DEFAULT_PORT
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"target '{text}': the port must be 1 to 65535, got '{port}'")
    return host, int(port)


def _addresses_of(text, host):
    """(numeric, IPv4 addresses, IPv6 addresses) of an entry's host; a name is resolved now."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            address = socket.inet_ntop(family, socket.inet_pton(family, host))
        except OSError:
            continue
        return (True, [address], []) if family == socket.AF_INET else (True, [], [address])
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError as e:
        raise JobError(grpc.StatusCode.UNAVAILABLE,
                       f"target '{text}': cannot resolve '{host}': {e}") from None
    v4 = [info[4][0] for info in infos if info[0] == socket.AF_INET]
    v6 = [info[4][0].split("%")[0] for info in infos if info[0] == socket.AF_INET6]
    return False, v4, v6


def resolve_target(target):
    """`target` as a channel takes it (the rule of client/targets.h): a single target as it is
    (a host alone gets port 50051); a comma-separated list of HOST:PORT entries as one static
    address list URI ("ipv4:a:p,b:p" or "ipv6:[a]:p,[b]:p"), its names resolved once, now,
    with getaddrinfo (a name to follow as DNS changes belongs in one dns:/// target). One
    channel cannot mix IPv4 and IPv6: numeric entries set the list's family (both: ValueError),
    names give their addresses of it (IPv4 where only names are listed and each has one).
    ValueError for a malformed target, JobError(UNAVAILABLE) for a name that does not resolve."""
    if not target:
        raise ValueError("target is empty (expected HOST:PORT)")
    if _is_uri(target):
        dns = target.startswith("dns:")
        listed = target.startswith(("ipv4:", "ipv6:"))
        commas = target.count(",")
        return ChannelTarget(target, dns or (listed and commas > 0),
                             0 if dns else commas + 1 if listed else 1)
    if "," not in target:
        return ChannelTarget(target_with_port(target))
    entries = []
    for piece in (p.strip() for p in target.split(",")):
        if not piece:
            raise ValueError(f"target '{target}': an empty entry (expected HOST:PORT,HOST:PORT)")
        if _is_uri(piece):
            raise ValueError(f"target '{piece}': a list takes HOST:PORT entries; a URI goes "
                             "alone (as dns:///NAME:PORT for every address of a name)")
        entries.append((piece, *_parse_entry(piece)))
    # Names are resolved once the whole list is known to be well formed.
    entries = [(host, port, *_addresses_of(piece, host)) for piece, host, port in entries]
    numeric_v4 = any(numeric and v4 for _, _, numeric, v4, _ in entries)
    numeric_v6 = any(numeric and v6 for _, _, numeric, _, v6 in entries)
    if numeric_v4 and numeric_v6:
        raise ValueError(f"target '{target}': one channel cannot mix IPv4 and IPv6 addresses; "
                         "list one family (or use a name with dns:///)")
    use_v6 = numeric_v6 or (not numeric_v4 and any(not v4 for _, _, _, v4, _ in entries))
    family = "IPv6" if use_v6 else "IPv4"
    items = []
    for host, port, _, v4, v6 in entries:
        of_family = v6 if use_v6 else v4
        if not of_family:
            raise ValueError(f"target '{target}': '{host}' has no {family} address, and one "
                             f"channel cannot mix IPv4 and IPv6 (the list's other entries are "
                             f"{family})")
        for address in of_family:
            item = f"[{address}]:{port}" if use_v6 else f"{address}:{port}"
            if item not in items:
                items.append(item)
    return ChannelTarget(("ipv6:" if use_v6 else "ipv4:") + ",".join(items), True, len(items))


def service_config(health_checks):
    """The channel's default service config, as the C++ client's (client/targets.h,
    ServiceConfigJson): round_robin; Describe and GetStats, which change nothing, retried on
    UNAVAILABLE; with `health_checks` (a balanced target), each daemon's health watched, so
    that one draining gets no new calls."""
    config = {
        "loadBalancingConfig": [{"round_robin": {}}],
        "methodConfig": [{
            "name": [{"service": "gpupipe.v1.JobService", "method": "Describe"},
                     {"service": "gpupipe.v1.JobService", "method": "GetStats"}],
            "retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.05s", "maxBackoff": "1s",
                            "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]},
        }],
    }
    if health_checks:
        config["healthCheckConfig"] = {"serviceName": "gpupipe.v1.JobService"}
    return json.dumps(config)


def _channel_options(channel_target):
    return [("grpc.service_config", service_config(channel_target.balanced)),
            ("grpc.enable_retries", 1)]


def submit_retry_delay(attempt):
    """The wait before call `attempt` (2, 3, ...) of a job, in seconds: 50 ms, doubling, at
    most 1 s (as the C++ client's SubmitRetryDelay)."""
    return min(0.05 * 2 ** min(max(attempt - 2, 0), 5), 1.0)


# _submit_small's answer for UNIMPLEMENTED.
_UNIMPLEMENTED = object()
# Statuses of a Submit call that only the daemon's own handling of a request gives, which gRPC
# runs only on a request it decoded.
_DAEMON_DECODED = frozenset({grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED,
                             grpc.StatusCode.FAILED_PRECONDITION,
                             grpc.StatusCode.PERMISSION_DENIED,
                             grpc.StatusCode.UNAUTHENTICATED})


def marked_as_accepting_none(err):
    """Whether the daemon marked a call that failed with `err` (a grpc.RpcError) as having
    accepted no job, whatever its status."""
    return any(k == ACCEPTED_METADATA_KEY and v == "0" for k, v in err.trailing_metadata() or ())


def refused_before_acceptance(err):
    """Whether a Submit call that failed with `err` (a grpc.RpcError) before any event may be
    sent again: UNAVAILABLE, marked by the daemon as having accepted no job."""
    return err.code() == grpc.StatusCode.UNAVAILABLE and marked_as_accepting_none(err)


def is_local_target(target):
    """Whether `target` names this host: a Unix socket, localhost or a loopback address (never
    a list of several daemons: a region belongs to one)."""
    t = target
    if "," in t:
        return False
    if t.startswith(("unix:", "unix-abstract:")):
        return True
    for scheme in ("dns:///", "dns:", "ipv4:", "ipv6:"):
        if t.startswith(scheme):
            t = t[len(scheme):]
            break
    if t.startswith("["):
        host = t[1:t.find("]")] if "]" in t else t
    elif t.count(":") == 1:
        host = t.split(":")[0]
    else:
        host = t
    return host in ("localhost", "::1") or host.startswith("127.")


def _code(number):
    for c in grpc.StatusCode:
        if c.value[0] == number:
            return c
    return grpc.StatusCode.UNKNOWN


def _complete_job_parts(event):
    """The Accepted, ResultChunk, Timing and Done events a CompleteJob event stands for (a
    small job's events in one, SubmitRequest.compact_events), in that order."""
    job = event.complete
    for kind in ("accepted", "chunk", "timing", "done"):
        if job.HasField(kind):
            part = pb.JobEvent(job_id=event.job_id)
            getattr(part, kind).CopyFrom(getattr(job, kind))
            yield part


def _result_type(accepted):
    """The result's shape and NumPy dtype from its Accepted event."""
    dtype = _NUMPY.get(accepted.output_dtype)
    if dtype is None:
        raise JobError(grpc.StatusCode.DATA_LOSS, "unknown output dtype")
    return tuple(accepted.output_shape), dtype


def _output_array(out, shape, dtype):
    """`out` where it fits the result (ValueError where it does not), else a new array."""
    if out is None:
        return np.empty(shape, dtype)
    if out.shape != shape or out.dtype != dtype or not out.flags.c_contiguous:
        raise ValueError(f"out: expected a C-contiguous {dtype} array of shape {shape}, got "
                         f"{out.dtype} {out.shape}")
    return out


def _regions_unavailable(err):
    """The daemon cannot use this process's shared memory at all (see client/shm_submit.h)."""
    if isinstance(err, MemoryError):
        return True
    if not isinstance(err, JobError):
        return False
    if err.code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.PERMISSION_DENIED):
        return "shm_name" in err.message or "regions are for clients" in err.message
    if err.code == grpc.StatusCode.UNAVAILABLE:
        return "regions are off" in err.message
    if err.code == grpc.StatusCode.RESOURCE_EXHAUSTED:  # the daemon's region limits
        return any(k in err.message for k in ("--max-region", "--max-client-region",
                                               "--max-regions", "page-lock"))
    return err.code == grpc.StatusCode.UNIMPLEMENTED


class _Region:
    def __init__(self, region_id, shm):
        self.id = region_id
        self.shm = shm
        self.base = np.frombuffer(shm.mmap, np.uint8).__array_interface__["data"][0]


class Client:
    """A connection to gpupiped. Thread-safe: calls may run from several threads.

    target: "host:port", a host alone (port 50051), any gRPC target ("unix:///path"), or
    several daemons: "host:port,host:port,..." (names resolved once, see resolve_target) or
    "dns:///name:port". Calls go round-robin over the target's addresses; with several daemons,
    a daemon that is not serving (draining) gets no new calls. Describe and stats are retried
    on UNAVAILABLE; a job is sent again (up to `submit_attempts` calls) only when a daemon
    refused it before accepting it, never once a daemon accepted it (at most once). Regions
    (shared and CUDA arrays) and split runs need a target that names one daemon.
    transport: "auto" (shared memory for large arrays when the target is this host, else the
    connection), "grpc" or "shm"; each submit may override it.
    priority_target: the daemon's priority listener (gpupiped --priority-listen), where a
    high-priority job that goes as one SubmitSmall call is sent, on a connection of its own.
    Without it, a high-priority job's SubmitSmall or Submit call goes to `target` on a
    connection of its own (opened by the first of them), so that it does not wait behind this
    client's other calls there.
    """

    def __init__(self, target="127.0.0.1:50051", *, transport="auto", client_id=None, token=None,
                 tls_ca=None, tls_cert=None, tls_key=None, deadline=300.0, submit_attempts=3,
                 submit_small=True, priority_target=None):
        if transport not in ("auto", "grpc", "shm"):
            raise ValueError(f"transport: expected auto, grpc or shm, got {transport!r}")
        if submit_attempts < 1:
            raise ValueError(f"submit_attempts: expected 1 or more, got {submit_attempts}")
        self._resolved = resolve_target(target)
        self.target = target_with_port(target) if "," not in target else target
        self.transport = transport
        self.deadline = deadline
        self.submit_attempts = submit_attempts
        # A job of at most SUBMIT_SMALL_BYTES without explain goes first as one SubmitSmall
        # call; one the daemon refuses as too large for one message goes as Submit. Turned off
        # for good by a daemon that does not know SubmitSmall (it answers UNIMPLEMENTED, and
        # then decodes the same request as a Submit: gRPC also answers UNIMPLEMENTED to a
        # request it cannot decode, which says nothing about the method).
        self.submit_small = submit_small
        self._creds = (grpc.ssl_channel_credentials(tls_ca, tls_key, tls_cert)
                        if tls_ca or tls_cert or tls_key else None)
        self._channel = self._open_channel(self._resolved.uri, _channel_options(self._resolved))
        self._stub = pb_grpc.JobServiceStub(self._channel)
        # The daemon's priority listener (gpupiped --priority-listen): a high-priority job that
        # goes as SubmitSmall goes there, on a connection of its own, so that its call does not
        # wait behind the daemon's other traffic; everything else goes to `target`.
        self._priority_channel = None
        self._priority_stub = None
        if priority_target:
            resolved = resolve_target(priority_target)
            self._priority_channel = self._open_channel(
                resolved.uri, _channel_options(resolved) + [("grpc.use_local_subchannel_pool", 1)])
            self._priority_stub = pb_grpc.JobServiceStub(self._priority_channel)
        # High-priority jobs' calls where there is no listener (_own_connection_stub).
        self._high_channel = None
        self._high_stub = None
        self._metadata = []
        if client_id:
            self._metadata.append(("client-id", client_id))
        if token:
            self._metadata.append(("authorization", f"Bearer {token}"))
        self._lock = threading.Lock()
        self._regions = []  # shared arrays of this client
        self._cuda_regions = {}  # IPC handle -> region id, for device arrays used so far
        self._lease = None  # the HoldRegions call every region of this client is tied to
        self._lease_id = ""
        self._call_stubs = []  # of calls 1, 2, ... of split runs, each on a connection of its own
        self._call_channels = []
        self._max_run_streams = 0  # the daemon's limit, once asked

    # ---- plumbing -------------------------------------------------------------------------

    def _open_channel(self, uri, options):
        """A channel to `uri`, over TLS where this client has TLS settings."""
        if self._creds is not None:
            return grpc.secure_channel(uri, self._creds, options=options)
        return grpc.insecure_channel(uri, options=options)

    def _high_priority_stub(self):
        """The stub of high-priority SubmitSmall calls: the priority listener's, or else the
        main target's on a connection of its own (_own_connection_stub)."""
        if self._priority_stub is not None:
            return self._priority_stub
        return self._own_connection_stub()

    def _submit_stub(self, request):
        """The stub of a Submit call of `request`: for a high-priority job where there is no
        priority listener (which takes no Submit), the main target's on a connection of its
        own, as its SubmitSmall call; else the client's."""
        if request.priority == pb.PRIORITY_HIGH and self._priority_stub is None:
            return self._own_connection_stub()
        return self._stub

    def _own_connection_stub(self):
        """A stub on a connection of its own to `target`, opened by the first high-priority
        call that needs it, since gRPC would queue such a call's frames behind every other
        call of this client's connection."""
        with self._lock:
            if self._high_stub is None:
                self._high_channel = self._open_channel(
                    self._resolved.uri,
                    _channel_options(self._resolved) + [("grpc.use_local_subchannel_pool", 1),
                                                        ("gpupipe.high_priority", 1)])
                self._high_stub = pb_grpc.JobServiceStub(self._high_channel)
            return self._high_stub

    def close(self):
        for region in list(self._regions):
            self._unregister(region.id)
            region.shm.close()
        self._regions.clear()
        for region_id in self._cuda_regions.values():
            self._unregister(region_id)
        self._cuda_regions.clear()
        if self._lease is not None:
            self._lease.cancel()
            self._lease = None
        for channel in self._call_channels:
            channel.close()
        if self._priority_channel is not None:
            self._priority_channel.close()
        if self._high_channel is not None:
            self._high_channel.close()
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, method, request):
        try:
            return method(request, timeout=self.deadline, metadata=self._metadata)
        except grpc.RpcError as e:
            raise JobError(e.code(), e.details()) from None

    def describe(self):
        """The daemon's DescribeResponse: backend, device, ops, limits."""
        return self._call(self._stub.Describe, pb.DescribeRequest())

    def stats(self):
        """The daemon's StatsResponse."""
        return self._call(self._stub.GetStats, pb.StatsRequest())

    def _lease_for_regions(self):
        """The id of this client's region lease (HoldRegions), opened on first use: should
        this process die, the daemon unregisters every region of it at once."""
        if self._resolved.addresses > 1:
            raise JobError(grpc.StatusCode.FAILED_PRECONDITION,
                           "regions belong to one daemon, and this client balances over "
                           "several: use a target that names one")
        with self._lock:
            if self._lease is None:
                call = self._stub.HoldRegions(pb.HoldRegionsRequest(), metadata=self._metadata)
                try:
                    self._lease_id = next(call).lease_id
                except grpc.RpcError as e:
                    raise JobError(e.code(), e.details()) from None
                self._lease = call
            return self._lease_id

    def _register(self, shm):
        request = pb.RegisterRegionRequest(size=shm.size, lease_id=self._lease_for_regions())
        if shm.fd is not None:
            request.fd_ticket = self._pass_descriptor(shm.fd)
        else:
            request.shm_name = shm.name
        return self._call(self._stub.RegisterRegion, request).region_id

    def _pass_descriptor(self, fd):
        """Passes `fd` over the daemon's region socket (gpupiped --region-fd-socket) and
        returns the ticket RegisterRegionRequest.fd_ticket names."""
        path = self.describe().region_fd_socket
        if not path:
            raise JobError(grpc.StatusCode.FAILED_PRECONDITION,
                           "the daemon has no region socket for descriptors "
                           "(gpupiped --region-fd-socket PATH)")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            try:
                s.connect(path)
                socket.send_fds(s, [b"f"], [fd])
                reply = b""
                while b"\n" not in reply:
                    data = s.recv(256)
                    if not data:
                        break
                    reply += data
            except OSError as e:
                raise JobError(grpc.StatusCode.UNAVAILABLE, f"region socket {path}: {e}") from None
        line = reply.split(b"\n", 1)[0].decode(errors="replace")
        if not line.startswith("ticket "):
            raise JobError(grpc.StatusCode.FAILED_PRECONDITION,
                           f"region socket: {line.removeprefix('error ') or 'no answer'}")
        return line[len("ticket "):]

    def _unregister(self, region_id):
        try:
            self._call(self._stub.UnregisterRegion, pb.UnregisterRegionRequest(region_id=region_id))
        except JobError:
            pass  # already gone (idle timeout, daemon restarted): nothing to undo

    # ---- shared arrays --------------------------------------------------------------------

    def shared_array(self, shape, dtype=np.float32, *, memfd=False):
        """A NumPy array in shared memory registered with the daemon (same host only): jobs
        read it as input and write results into it with no copy on either side. Release it
        with release(), or close() the client. memfd=True makes the memory a memfd with no name,
        passed to the daemon over its region socket (gpupiped --region-fd-socket)."""
        dtype = np.dtype(dtype)
        shape = tuple(int(d) for d in np.atleast_1d(shape)) if np.ndim(shape) else (int(shape),)
        nbytes = max(1, int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)
        shm = SharedMemory(nbytes, memfd=memfd)
        try:
            region = _Region(self._register(shm), shm)
        except BaseException:
            shm.close()
            raise
        with self._lock:
            self._regions.append(region)
        count = int(np.prod(shape, dtype=np.int64))
        return np.frombuffer(shm.mmap, dtype, count).reshape(shape)

    def release(self, array):
        """Unregisters the shared array `array` lives in (views included)."""
        region = self._region_of(array)
        if region is None:
            raise ValueError("release: not a shared array of this client")
        with self._lock:
            self._regions.remove(region)
        self._unregister(region.id)
        region.shm.close()

    def _region_of(self, array):
        if not isinstance(array, np.ndarray) or not array.flags.c_contiguous:
            return None
        ptr = array.__array_interface__["data"][0]
        with self._lock:
            for region in self._regions:
                if region.base <= ptr and ptr + array.nbytes <= region.base + region.shm.size:
                    return region
        return None

    def _slice(self, array):
        region = self._region_of(array)
        if region is None:
            return None
        ptr = array.__array_interface__["data"][0]
        return pb.RegionSlice(region_id=region.id, offset=ptr - region.base, length=array.nbytes)

    # ---- device arrays (CUDA IPC) ----------------------------------------------------------

    def _cuda_slice(self, obj):
        """The RegionSlice of a CUDA array: its allocation is registered once (by its IPC
        handle) and stays registered until close()."""
        ptr, _, _, nbytes = _cuda.describe(obj)
        handle, base, size = _cuda.driver().export(ptr)
        with self._lock:
            region_id = self._cuda_regions.get(handle)
        if region_id is None:
            r = self._call(self._stub.RegisterRegion,
                           pb.RegisterRegionRequest(cuda_ipc_handle=handle, size=size,
                                                    lease_id=self._lease_for_regions()))
            region_id = r.region_id
            with self._lock:
                self._cuda_regions[handle] = region_id
        return pb.RegionSlice(region_id=region_id, offset=ptr - base, length=nbytes)

    def _submit_cuda(self, array, ops, out, request):
        # The daemon reads and writes them from another process: whatever the producer's
        # stream still has queued for them must be done first.
        _cuda.synchronize(array)
        if out is not None and _cuda.is_cuda_array(out):
            _cuda.synchronize(out)
        try:
            return self._submit_cuda_once(array, out, request)
        except JobError as e:
            if e.code != grpc.StatusCode.NOT_FOUND or "region" not in e.message:
                raise
            # Dropped meanwhile (idle timeout, lease lost): register the memory again.
            with self._lock:
                self._cuda_regions.clear()
            request.ClearField("input_region")
            request.ClearField("output_region")
            del request.input.shape[:]
            return self._submit_cuda_once(array, out, request)

    def _submit_cuda_once(self, array, out, request):
        ptr, shape, dtype, nbytes = _cuda.describe(array)
        if dtype not in DTYPES:
            raise ValueError(f"dtype {dtype} is not one of {', '.join(map(str, DTYPES))}")
        request.input.dtype = DTYPES[dtype]
        request.input.shape.extend(shape)
        request.input_region.CopyFrom(self._cuda_slice(array))
        if out is not None and _cuda.is_cuda_array(out):
            request.output_region.CopyFrom(self._cuda_slice(out))
            result, shape, dtype = self._submit_call(request, None, "cuda-ipc", with_bytes=False)
            _, out_shape, out_dtype, _ = _cuda.describe(out)
            if out_shape != shape or out_dtype != dtype:
                raise ValueError(f"out: the result is {dtype} {shape}, out is {out_dtype} "
                                 f"{out_shape} (its bytes were written)")
            result.output = out
            return result
        # The result comes back over the connection, into `out` or a new NumPy array.
        return self._submit_call(request, out, "cuda-ipc")[0]

    # ---- jobs -----------------------------------------------------------------------------

    def submit(self, array, ops, *, out=None, priority="normal", transport=None, explain=False,
               chunk_bytes=0, profile=False, timeline=False, tag="", streams=0):
        """Runs `ops` (pipeline text such as "affine(alpha=2,beta=1) | relu | softmax", or a
        list of gpupipe.v1.Op) on `array` and returns a Result. With `out` (an array of the
        result's shape and dtype), the result is written there, straight from the device when
        `out` is a shared array. A CUDA array (anything with __cuda_array_interface__: a
        PyTorch or CuPy tensor on the daemon's GPU) is read in place through CUDA IPC, and a
        CUDA `out` written in place: no host copy at all. Raises JobError with the daemon's
        status on failure, and ValueError (ops.OpsError) for a pipeline that does not parse.
        `streams`: for an array streamed over the connection, the calls (each on a connection
        of its own) to split its upload and result over; 0 chooses from its size."""
        if _cuda.is_cuda_array(array):
            if priority not in _PRIORITIES:
                raise ValueError(f"priority: expected low, normal or high, got {priority!r}")
            request = pb.SubmitRequest(priority=_PRIORITIES[priority], explain=explain,
                                       client_tag=tag, compact_events=True)
            request.ops.extend(_ops.parse_ops(ops, pb.Op) if isinstance(ops, str) else ops)
            request.options.chunk_bytes = chunk_bytes
            request.options.profile = profile
            request.options.timeline = timeline
            return self._submit_cuda(array, ops, out, request)
        array = np.asarray(array)
        if array.dtype not in DTYPES:
            raise ValueError(f"dtype {array.dtype} is not one of {', '.join(map(str, DTYPES))}")
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        if priority not in _PRIORITIES:
            raise ValueError(f"priority: expected low, normal or high, got {priority!r}")
        transport = transport or self.transport
        if transport not in ("auto", "grpc", "shm"):
            raise ValueError(f"transport: expected auto, grpc or shm, got {transport!r}")
        request = pb.SubmitRequest(priority=_PRIORITIES[priority], explain=explain, client_tag=tag,
                                   compact_events=True)
        request.input.dtype = DTYPES[array.dtype]
        request.input.shape.extend(array.shape)
        request.ops.extend(_ops.parse_ops(ops, pb.Op) if isinstance(ops, str) else ops)
        request.options.chunk_bytes = chunk_bytes
        request.options.profile = profile
        request.options.timeline = timeline

        shared = self._region_of(array) is not None or (out is not None and
                                                        self._region_of(out) is not None)
        use_shm = transport == "shm" or shared or (
            transport == "auto" and array.nbytes >= SHM_AUTO_BYTES and is_local_target(self.target))
        if use_shm:
            try:
                return self._submit_shm(array, request, out)
            except (JobError, MemoryError) as e:
                if transport != "auto" or shared or not _regions_unavailable(e):
                    raise
        if streams < 0:
            raise ValueError(f"streams: expected 0 (auto) or a number of calls, got {streams}")
        if streams > 1 and self._resolved.balanced:
            raise JobError(grpc.StatusCode.FAILED_PRECONDITION,
                           "the calls of a split run must reach one daemon, and this client "
                           "balances over several: use one call, or a target that names one")
        if array.nbytes > STREAM_AUTO_BYTES or streams > 0:
            if streams == 0:
                streams = self._streams_for(array.nbytes)
            if streams > 1:
                return self._submit_striped(array, request, out, streams)
            return self._submit_streamed(array, request, out)
        request.input.data = array.tobytes()
        small = None
        if self.submit_small and not explain and array.nbytes <= SUBMIT_SMALL_BYTES:
            small = self._submit_small(request, out)
            if small is not None and small is not _UNIMPLEMENTED:
                return small
        try:
            result = self._submit_call(request, out, "inline")[0]
        except JobError as e:
            if small is _UNIMPLEMENTED and (e.after_events or e.code in _DAEMON_DECODED):
                self.submit_small = False
            raise
        if small is _UNIMPLEMENTED:
            self.submit_small = False
        return result

    def _submit_small(self, request, out):
        """The job as one unary SubmitSmall call: its Result, or None where it is to go as
        Submit (the daemon refused it before accepting it, as too large for one message or
        while draining), or _UNIMPLEMENTED (the daemon lacks SubmitSmall or could not decode
        the request; it goes as Submit, which tells which)."""
        stub = self._stub
        if request.priority == pb.PRIORITY_HIGH:
            stub = self._high_priority_stub()
        try:
            job = stub.SubmitSmall(request, timeout=self.deadline, metadata=self._metadata)
        except grpc.RpcError as e:
            if stub is self._priority_stub and marked_as_accepting_none(e):
                return None  # the priority listener refused it unaccepted: the main address
            if e.code() == grpc.StatusCode.UNIMPLEMENTED:
                return _UNIMPLEMENTED
            if e.code() in (grpc.StatusCode.INVALID_ARGUMENT,
                            grpc.StatusCode.UNAVAILABLE) and marked_as_accepting_none(e):
                return None
            raise JobError(e.code(), e.details()) from None
        event = pb.JobEvent(job_id=job.accepted.job_id, complete=job)
        return self._collect(_complete_job_parts(event), out, "inline")[0]

    def _submit_call(self, request, out, transport, *, with_bytes=True):
        """_collect of a Submit of `request`, sent again (a new call, which round_robin gives
        to the next daemon) only where a daemon refused it before accepting it and no event
        came: at most once, within the first call's deadline."""
        deadline = time.monotonic() + self.deadline
        for attempt in range(1, self.submit_attempts + 1):
            seen = {"events": 0, "refused": False}
            timeout = max(deadline - time.monotonic(), 0.0)
            try:
                return self._collect(
                    self._events(self._submit_stub(request).Submit, request, seen, timeout), out,
                    transport, with_bytes=with_bytes)
            except JobError as e:
                e.after_events = seen["events"] > 0
                delay = submit_retry_delay(attempt + 1)
                if (not seen["refused"] or seen["events"] or attempt == self.submit_attempts
                        or time.monotonic() + delay >= deadline):
                    raise
                time.sleep(delay)

    def _events(self, method, request, seen=None, timeout=None):
        """The events of a call, CompleteJob events taken apart. `seen` (a dict), when given,
        counts them ("events") and says whether the call was refused before acceptance."""
        try:
            for event in method(request, timeout=self.deadline if timeout is None else timeout,
                                metadata=self._metadata):
                if seen is not None:
                    seen["events"] += 1
                if event.WhichOneof("event") == "complete":
                    yield from _complete_job_parts(event)
                else:
                    yield event
        except grpc.RpcError as e:
            if seen is not None:
                seen["refused"] = refused_before_acceptance(e)
            raise JobError(e.code(), e.details()) from None

    def _submit_streamed(self, array, request, out):
        flat = memoryview(array.reshape(-1).view(np.uint8))

        def requests():
            yield pb.RunRequest(spec=request)
            for offset in range(0, len(flat), UPLOAD_CHUNK_BYTES):
                yield pb.RunRequest(data=bytes(flat[offset:offset + UPLOAD_CHUNK_BYTES]))

        return self._collect(self._events(self._stub.Run, requests()), out, "stream")[0]

    def _streams_for(self, nbytes):
        if nbytes < SPLIT_AUTO_BYTES or self._resolved.balanced:
            return 1
        with self._lock:
            limit = self._max_run_streams
        if limit == 0:
            try:
                limit = max(self.describe().limits.max_run_streams, 1)
            except JobError:
                return 1  # asked again next time
            with self._lock:
                self._max_run_streams = limit
        return min(1 + nbytes // SPLIT_AUTO_BYTES, MAX_AUTO_STREAMS, limit)

    def _stubs_for_calls(self, n):
        with self._lock:
            while len(self._call_stubs) < n - 1:
                # A subchannel pool of its own gives the channel a connection of its own.
                options = _channel_options(self._resolved) + [
                    ("grpc.use_local_subchannel_pool", 1),
                    ("gpupipe.run_call", len(self._call_stubs) + 1)]
                channel = self._open_channel(self._resolved.uri, options)
                self._call_channels.append(channel)
                self._call_stubs.append(pb_grpc.JobServiceStub(channel))
            return [self._stub] + self._call_stubs[:n - 1]

    def _submit_striped(self, array, request, out, n):
        """A Run split over `n` calls (RunRequest.stripes): upload message m on call m % n, and
        every call's result chunks written at their offsets, each call read by a thread of its
        own so that none holds the job back."""
        flat_in = memoryview(array.reshape(-1).view(np.uint8))
        messages = (len(flat_in) + UPLOAD_CHUNK_BYTES - 1) // UPLOAD_CHUNK_BYTES
        key = os.urandom(16)

        def requests(i):
            stripes = pb.RunStripes(key=key, index=i, count=n)
            yield (pb.RunRequest(spec=request, stripes=stripes) if i == 0 else
                   pb.RunRequest(join=stripes))
            for m in range(i, messages, n):
                at = m * UPLOAD_CHUNK_BYTES
                yield pb.RunRequest(data=bytes(flat_in[at:at + UPLOAD_CHUNK_BYTES]))

        calls = [stub.Run(requests(i), timeout=self.deadline, metadata=self._metadata)
                 for i, stub in enumerate(self._stubs_for_calls(n))]
        state = {"flat": None, "received": 0, "error": None, "done": [None] * n}
        ready = threading.Event()  # the output exists (call 0's Accepted) or the run failed
        lock = threading.Lock()

        def fail(err):
            with lock:
                if state["error"] is None:
                    state["error"] = err
            ready.set()
            for call in calls:
                call.cancel()

        def read(i):
            try:
                for event in calls[i]:
                    kind = event.WhichOneof("event")
                    if kind == "chunk":
                        ready.wait()
                        flat, data = state["flat"], event.chunk.data
                        if flat is None:
                            return
                        if event.chunk.offset + len(data) > len(flat):
                            raise JobError(grpc.StatusCode.DATA_LOSS, "result chunk out of place")
                        flat[event.chunk.offset:event.chunk.offset + len(data)] = np.frombuffer(
                            data, np.uint8)
                        with lock:
                            state["received"] += len(data)
                    elif kind == "done":
                        state["done"][i] = event.done
                        if event.done.code != 0:
                            raise JobError(_code(event.done.code), event.done.message)
                    elif i == 0:
                        on_first_call_event(event)
            except grpc.RpcError as e:
                fail(JobError(e.code(), e.details()))
            except BaseException as e:  # noqa: BLE001 - any failure must wake the other threads
                fail(e)

        # Call 0's other events: Accepted (which makes the output), Plan, Timing.
        meta = {"accepted": None, "plan": None, "timing": pb.Timing(), "shape": (), "dtype": None}

        def on_first_call_event(event):
            kind = event.WhichOneof("event")
            if kind == "accepted":
                accepted = event.accepted
                shape, dtype = _result_type(accepted)
                output = _output_array(out, shape, dtype)
                meta.update(accepted=accepted, shape=shape, dtype=dtype, output=output)
                state["flat"] = output.reshape(-1).view(np.uint8)
                ready.set()
            elif kind == "plan":
                meta["plan"] = event.plan
            elif kind == "timing":
                meta["timing"] = event.timing

        threads = [threading.Thread(target=read, args=(i,), daemon=True) for i in range(n)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        ready.set()
        if state["error"] is not None:
            raise state["error"]
        accepted = meta["accepted"]
        if accepted is None or any(d is None for d in state["done"]):
            raise JobError(grpc.StatusCode.DATA_LOSS, "a call of the run ended without its Done")
        if state["received"] != len(state["flat"]):
            raise JobError(grpc.StatusCode.DATA_LOSS,
                           f"the result's chunks held {state['received']} of "
                           f"{len(state['flat'])} bytes")
        return Result(output=meta["output"], timing=meta["timing"], job_id=accepted.job_id,
                      backend=accepted.backend, transport="stream", plan=meta["plan"])

    def _submit_shm(self, array, request, out):
        temps = []  # (region id, shm) made for this call
        try:
            in_slice = self._slice(array)
            if in_slice is None:
                shm = SharedMemory(max(array.nbytes, 1), "gpupipe-py-in")
                temps.append([None, shm])
                np.frombuffer(shm.mmap, np.uint8, array.nbytes)[:] = array.reshape(-1).view(np.uint8)
                temps[-1][0] = self._register(shm)
                in_slice = pb.RegionSlice(region_id=temps[-1][0], length=array.nbytes)
            request.input_region.CopyFrom(in_slice)

            out_slice = self._slice(out) if out is not None else None
            result_shm = None
            if out_slice is None:
                # The result's size comes from the daemon's plan.
                plan_only = pb.SubmitRequest()
                plan_only.CopyFrom(request)
                plan_only.dry_run = True
                _, shape, dtype = self._submit_call(plan_only, None, "shm", with_bytes=False)
                nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                result_shm = SharedMemory(max(nbytes, 1), "gpupipe-py-out")
                temps.append([None, result_shm])
                temps[-1][0] = self._register(result_shm)
                out_slice = pb.RegionSlice(region_id=temps[-1][0], length=nbytes)
            request.output_region.CopyFrom(out_slice)
            result, shape, dtype = self._submit_call(request, None, "shm", with_bytes=False)
            if result_shm is not None:
                # The array keeps the mapping alive; the name and the registration go below.
                count = int(np.prod(shape, dtype=np.int64))
                view = np.frombuffer(result_shm.mmap, dtype, count).reshape(shape)
                if out is not None:
                    np.copyto(out, view)
                    view = out
                result.output = view
            else:
                if out.shape != shape or out.dtype != dtype:
                    raise ValueError(f"out: the result is {dtype} {shape}, out is {out.dtype} "
                                     f"{out.shape} (its bytes were written)")
                result.output = out
            return result
        finally:
            for region_id, shm in temps:
                if region_id is not None:
                    self._unregister(region_id)
                shm.unlink()

    def _collect(self, events, out, transport, *, with_bytes=True):
        """The job's Result from its events, and its output's shape and dtype. With
        `with_bytes` False (a dry run, a result written into a region) no chunk may come and
        Result.output is left None."""
        output = flat = plan = accepted = None
        shape, dtype = (), None
        timing = pb.Timing()
        for event in events:
            kind = event.WhichOneof("event")
            if kind == "accepted":
                accepted = event.accepted
                shape, dtype = _result_type(accepted)
                if not with_bytes:
                    continue
                output = _output_array(out, shape, dtype)
                flat = output.reshape(-1).view(np.uint8)
            elif kind == "chunk":
                data = event.chunk.data
                if flat is None or event.chunk.offset + len(data) > len(flat):
                    raise JobError(grpc.StatusCode.DATA_LOSS, "result chunk out of place")
                flat[event.chunk.offset:event.chunk.offset + len(data)] = np.frombuffer(
                    data, np.uint8)
            elif kind == "timing":
                timing = event.timing
            elif kind == "plan":
                plan = event.plan
            elif kind == "done" and event.done.code != 0:
                raise JobError(_code(event.done.code), event.done.message)
        if accepted is None:
            raise JobError(grpc.StatusCode.DATA_LOSS, "the stream ended without a job")
        result = Result(output=output, timing=timing, job_id=accepted.job_id,
                        backend=accepted.backend, transport=transport, plan=plan)
        return result, shape, dtype
