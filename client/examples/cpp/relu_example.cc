// Runs `affine(alpha=2,beta=1) | relu` on a small tensor through a gpupiped and prints the
// result: the C++ client library from its installed package.
//
// usage: relu_example [TARGET]   (default 127.0.0.1:50051)
#include <cstdio>
#include <cstring>
#include <vector>

#include "client/job_client.h"
#include "client/ops_grammar.h"

int main(int argc, char** argv) {
  const std::string target = argc > 1 ? argv[1] : "127.0.0.1:50051";
  absl::StatusOr<std::unique_ptr<gpupipe::client::JobClient>> client =
      gpupipe::client::JobClient::Create(target);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 1;
  }
  const std::vector<float> x = {-2, -1, 0, 1, 2, 3};
  gpupipe::v1::SubmitRequest request;
  request.mutable_input()->set_dtype(gpupipe::v1::DTYPE_FLOAT32);
  request.mutable_input()->add_shape(2);
  request.mutable_input()->add_shape(3);
  request.mutable_input()->set_data(x.data(), x.size() * sizeof(float));
  absl::StatusOr<std::vector<gpupipe::v1::Op>> ops =
      gpupipe::client::ParseOps("affine(alpha=2, beta=1) | relu");
  if (!ops.ok()) return 1;
  for (const gpupipe::v1::Op& op : *ops) *request.add_ops() = op;
  absl::StatusOr<gpupipe::client::JobResult> result = (*client)->Submit(request);
  if (!result.ok()) {
    std::fprintf(stderr, "%s\n", result.status().ToString().c_str());
    return 1;
  }
  std::vector<float> y(x.size());
  std::memcpy(y.data(), result->output.data().data(), y.size() * sizeof(float));
  for (float v : y) std::printf("%g ", v);
  std::printf("(%s, %.0f us)\n", result->accepted.backend().c_str(), result->timing.total_us());
  return 0;
}
