# gpupiped for GPU nodes. Build: docker build -t gpupipe .
# Run:   docker run --gpus all -p 50051:50051 gpupipe
#
# Stage 1 builds with the CUDA toolkit and the distribution's gRPC; stage 2 carries only the
# portable bundle (binaries plus their shared libraries, RPATH $ORIGIN/../lib). The CUDA
# runtime is linked statically, so the runtime image needs nothing from CUDA but the driver,
# which the NVIDIA container toolkit mounts.
FROM nvidia/cuda:13.0.0-devel-ubuntu24.04 AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/
RUN bash scripts/install-deps.sh
COPY . .
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUPIPE_CUDA=ON \
      -DGPUPIPE_BUILD_TESTS=OFF \
 && cmake --build build -j"$(nproc)" \
 && bash scripts/make-bundle.sh build /opt/gpupipe

FROM ubuntu:24.04
COPY --from=build /opt/gpupipe /opt/gpupipe
ENV PATH=/opt/gpupipe/bin:$PATH \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
EXPOSE 50051 9464
USER 65534:65534
# Jobs on 50051; Prometheus metrics on 9464 (http://HOST:9464/metrics).
ENTRYPOINT ["gpupiped", "--listen", "0.0.0.0:50051", "--metrics-listen", "0.0.0.0:9464"]
# Plaintext without tokens, as a first run expects (gpupiped warns). Give the container TLS or
# tokens instead by replacing these arguments, e.g. `--backend cuda --token-file
# /run/secrets/gpupipe-tokens` with the file mounted there.
CMD ["--backend", "auto", "--insecure"]
