# gpupiped, the gpupipe job daemon, for GPU hosts.
#
# Build:
#   docker build -t gpupipe .
#   docker build --build-arg CUDA_ARCHITECTURES="90-real;90-virtual" -t gpupipe .
#       (code for one GPU generation only: a faster build, a smaller image)
# Run (the NVIDIA Container Toolkit provides --gpus):
#   docker run --gpus all -p 50051:50051 -p 9464:9464 gpupipe
#   docker run --gpus device=1 --read-only --tmpfs /tmp --stop-timeout 15 -p 50051:50051 \
#       -v "$PWD/tokens:/run/secrets/gpupipe-tokens:ro" \
#       -e GPUPIPE_TOKEN_FILE=/run/secrets/gpupipe-tokens gpupipe
#   docker run --gpus all gpupipe --help            (the daemon's flags)
# The entrypoint (deploy/docker/entrypoint.sh) turns GPUPIPE_* variables into flags: TLS and
# tokens from mounted files or from the environment, the backend, the addresses. Arguments
# after the image name go to gpupiped last and win.
#
# Host requirements: an NVIDIA driver of branch R580 or newer (on Linux at least 580.65.06,
# the minimum of the CUDA 13.0 toolkit this image is built with) and the NVIDIA Container
# Toolkit. The CUDA runtime is linked statically, so the image carries no CUDA library: the
# toolkit mounts the host's driver into the container. On an older driver the toolkit refuses
# to start the container (NVIDIA_REQUIRE_CUDA below), and where it does not check, the daemon
# refuses to start with the CUDA error, since the backend is cuda.
#
# Backend: cuda by default, so that a host whose GPU or driver is broken fails at start rather
# than quietly serving on its CPU. For a fleet that mixes GPU and CPU-only hosts, run with
# -e GPUPIPE_BACKEND=auto (or --backend auto): the GPU where one is usable, else the CPU, and
# Describe, `gpupipe stats` and the gpupipe_info metric say which.

FROM nvidia/cuda:13.0.0-devel-ubuntu24.04 AS build
# SASS for every data-center and workstation generation CUDA 13 supports (Ampere sm_80 and
# sm_86, Ada sm_89, Hopper sm_90, Blackwell sm_100 and sm_120), plus PTX of the newest, which
# the driver compiles at start for a GPU newer than any of them.
ARG CUDA_ARCHITECTURES="80-real;86-real;89-real;90-real;100-real;120-real;120-virtual"
WORKDIR /src
# The dependencies first: their layer is reused until the script changes.
COPY scripts/install-deps.sh scripts/
RUN bash scripts/install-deps.sh
COPY . .
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DGPUPIPE_CUDA=ON -DGPUPIPE_BUILD_TESTS=OFF \
      "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES}" \
 && cmake --build build -j"$(nproc)" \
 && bash scripts/make-bundle.sh build /opt/gpupipe

# The runtime carries only the portable bundle: binaries plus the shared libraries glibc does
# not provide, found through their $ORIGIN/../lib RPATH.
FROM ubuntu:24.04
COPY --from=build /opt/gpupipe /opt/gpupipe
COPY deploy/docker/entrypoint.sh /usr/local/bin/gpupipe-entrypoint
RUN chmod 0755 /usr/local/bin/gpupipe-entrypoint
# No NVIDIA_VISIBLE_DEVICES: GPUs come from `--gpus` or the Kubernetes device plugin, never
# from the image, so a container that asked for no GPU gets none. The driver caches the code it
# JIT-compiles from PTX in CUDA_CACHE_PATH, on the writable /tmp (the root filesystem may be
# read-only), and keeps it within the tmpfs that compose and Kubernetes mount there.
ENV PATH=/opt/gpupipe/bin:$PATH \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    NVIDIA_REQUIRE_CUDA="cuda>=13.0" \
    CUDA_CACHE_PATH=/tmp/cuda-cache \
    CUDA_CACHE_MAXSIZE=134217728
# A numeric user that exists nowhere else: no home, no shell, no files of its own in the image.
USER 65532:65532
# Jobs (gRPC) and Prometheus metrics (http://HOST:9464/metrics, no authentication: publish it
# only where your monitoring reaches).
EXPOSE 50051 9464
# SIGTERM starts the daemon's drain: health says NOT_SERVING, new jobs are refused, accepted
# ones get --shutdown-grace-seconds (default 10) and the daemon exits within 2 s more. Docker
# waits 10 s before SIGKILL unless told more: `docker run --stop-timeout`, `docker stop
# --time`, compose's stop_grace_period.
STOPSIGNAL SIGTERM
# The standard gRPC health service, which needs no token; with TLS configured through the
# environment the check talks TLS too (see the entrypoint's health command). The start period
# covers creating the CUDA context, allocating the pools and, on a GPU newer than the SASS
# above, compiling the PTX.
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=3 \
    CMD ["/usr/local/bin/gpupipe-entrypoint", "health"]
ENTRYPOINT ["/usr/local/bin/gpupipe-entrypoint"]
