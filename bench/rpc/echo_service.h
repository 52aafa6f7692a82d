// The rpc bench's baseline service: echo.proto's Echo.Stream, a plain callback-API bidi stream.
#pragma once

#include "echo.grpc.pb.h"

namespace gpupipe::bench {

class EchoService final : public Echo::CallbackService {
 public:
  grpc::ServerBidiReactor<v1::RunRequest, v1::JobEvent>* Stream(
      grpc::CallbackServerContext* context) override;
};

}  // namespace gpupipe::bench
