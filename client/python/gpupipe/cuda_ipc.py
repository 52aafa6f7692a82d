"""Device arrays for CUDA IPC regions: any object with __cuda_array_interface__ (a PyTorch or
CuPy tensor, a Numba array) on the daemon's GPU is exported with the CUDA driver's IPC calls
(through ctypes, so no CUDA Python package is needed), and named to the daemon by its
allocation's handle and the array's offset in that allocation."""
import ctypes

import numpy as np

_CU_POINTER_ATTRIBUTE_CONTEXT = 1


class _Driver:
    def __init__(self):
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise RuntimeError(f"CUDA arrays need the CUDA driver (libcuda.so.1): {e}") from None
        self.lib.cuMemGetAddressRange_v2.argtypes = [
            ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t), ctypes.c_uint64]
        self.lib.cuIpcGetMemHandle.argtypes = [ctypes.c_char_p, ctypes.c_uint64]
        self.lib.cuPointerGetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64]
        self.lib.cuCtxPushCurrent_v2.argtypes = [ctypes.c_void_p]
        self.lib.cuCtxPopCurrent_v2.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        self.lib.cuStreamSynchronize.argtypes = [ctypes.c_void_p]

    def _with_context(self, ptr, call):
        """Runs `call`, in the pointer's own context when the thread has none current."""
        rc = call()
        if rc != 201:  # CUDA_ERROR_INVALID_CONTEXT
            return rc
        ctx = ctypes.c_void_p()
        if self.lib.cuPointerGetAttribute(ctypes.byref(ctx), _CU_POINTER_ATTRIBUTE_CONTEXT, ptr):
            return rc
        self.lib.cuCtxPushCurrent_v2(ctx)
        try:
            return call()
        finally:
            self.lib.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))

    def export(self, ptr):
        """(handle bytes, allocation base, allocation size) of the allocation holding `ptr`."""
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        rc = self._with_context(ptr, lambda: self.lib.cuMemGetAddressRange_v2(
            ctypes.byref(base), ctypes.byref(size), ptr))
        if rc:
            raise RuntimeError(f"cuMemGetAddressRange failed ({rc}): not device memory?")
        handle = ctypes.create_string_buffer(64)
        rc = self._with_context(ptr, lambda: self.lib.cuIpcGetMemHandle(handle, base.value))
        if rc:
            raise RuntimeError(f"cuIpcGetMemHandle failed ({rc}); memory from cudaMallocAsync "
                               "pools or VMM allocations cannot be exported this way")
        return handle.raw, base.value, size.value


_driver = None


def driver():
    global _driver
    if _driver is None:
        _driver = _Driver()
    return _driver


def synchronize(obj):
    """Waits for the work queued on the stream the array names (__cuda_array_interface__ v3:
    none, 1 the legacy default stream, 2 the per-thread one, else a CUstream)."""
    stream = obj.__cuda_array_interface__.get("stream")
    if stream is None:
        return
    lib = driver()
    ptr = obj.__cuda_array_interface__["data"][0]
    rc = lib._with_context(ptr, lambda: lib.lib.cuStreamSynchronize(ctypes.c_void_p(stream)))
    if rc:
        raise RuntimeError(f"cuStreamSynchronize failed ({rc})")


def is_cuda_array(obj):
    return hasattr(obj, "__cuda_array_interface__")


def describe(obj):
    """(pointer, shape, numpy dtype, nbytes) of a C-contiguous CUDA array."""
    cai = obj.__cuda_array_interface__
    shape = tuple(cai["shape"])
    dtype = np.dtype(cai["typestr"])
    strides = cai.get("strides")
    if strides is not None:
        expected, step = [], dtype.itemsize
        for d in reversed(shape):
            expected.insert(0, step)
            step *= d
        if tuple(strides) != tuple(expected) and int(np.prod(shape)) > 1:
            raise ValueError("CUDA arrays must be C-contiguous")
    ptr = cai["data"][0]
    return ptr, shape, dtype, int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
