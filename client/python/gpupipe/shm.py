"""POSIX shared memory for gpupipe regions, with the standard library only: on Linux a
shared-memory object is a file in /dev/shm, which is all shm_open does. Pages are reserved at
creation (os.posix_fallocate), so a full /dev/shm is an exception here instead of a SIGBUS at
the first write."""
import mmap
import os
import secrets

SHM_DIR = "/dev/shm"


class SharedMemory:
    """An object this process creates and maps; close() unmaps what it can and removes the
    name (a mapping NumPy arrays still use stays valid until they go). With memfd=True the
    object has no name at all (memfd_create): `fd` stays open to be passed to the daemon over
    its region socket, and nothing is left behind in /dev/shm should the process die."""

    def __init__(self, size, prefix="gpupipe-py", memfd=False):
        if size < 1:
            raise ValueError(f"shared memory of {size} bytes")
        self.size = size
        self.fd = None
        if memfd:
            self.name = None
            fd = os.memfd_create(prefix, os.MFD_CLOEXEC)
        else:
            self.name = f"/{prefix}-{os.getpid()}-{secrets.token_hex(8)}"
            fd = os.open(SHM_DIR + self.name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC,
                         0o600)
        self._linked = not memfd
        try:
            os.posix_fallocate(fd, 0, size)
            self.mmap = mmap.mmap(fd, size)
        except OSError as e:
            self.unlink()
            os.close(fd)
            raise MemoryError(f"cannot reserve {size} bytes of shared memory {self.name or ''}: "
                              f"{e} (is /dev/shm large enough?)") from e
        if memfd:
            self.fd = fd
        else:
            os.close(fd)

    def unlink(self):
        if self._linked:
            self._linked = False
            try:
                os.unlink(SHM_DIR + self.name)
            except FileNotFoundError:
                pass

    def close(self):
        self.unlink()
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        try:
            self.mmap.close()
        except BufferError:
            pass  # arrays still view it; the mapping goes with them

    def __del__(self):
        try:
            self.unlink()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
