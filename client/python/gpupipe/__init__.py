"""gpupipe: a client for the gpupipe GPU job service (gpupiped).

    import numpy as np, gpupipe
    with gpupipe.Client("127.0.0.1:50051") as client:
        result = client.submit(np.random.rand(1024, 1024).astype(np.float32),
                               "affine(alpha=2,beta=1) | relu | softmax")
        print(result.output, result.timing.total_us)
"""
# The generated gpupipe.v1 modules may live in another directory of sys.path (a build tree).
__path__ = __import__("pkgutil").extend_path(__path__, __name__)

from .client import (  # noqa: E402
    DTYPES, ChannelTarget, Client, JobError, Result, SHM_AUTO_BYTES, STREAM_AUTO_BYTES,
    is_local_target, resolve_target)
from .ops import OpsError  # noqa: E402

__all__ = ["ChannelTarget", "Client", "JobError", "OpsError", "Result", "DTYPES",
           "SHM_AUTO_BYTES", "STREAM_AUTO_BYTES", "is_local_target", "resolve_target"]
__version__ = "0.1.0"
