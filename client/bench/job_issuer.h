// The Issuer that loads the job service: request n of a mix entry is that entry's input
// variant n % kInputVariants, sent with JobClient::SubmitAsync on client n % clients. Each
// result is checked against the first result of the same input (a mismatch is reported), and
// the job's Timing becomes the Outcome's server-side figures.
//
// Thread-safety: the Issuer may be called from any thread; the JobIssuer must outlive the load.
#ifndef GPUPIPE_CLIENT_BENCH_JOB_ISSUER_H_
#define GPUPIPE_CLIENT_BENCH_JOB_ISSUER_H_

#include <memory>
#include <vector>

#include "client/bench/load_driver.h"
#include "client/job_client.h"

namespace gpupipe {
namespace bench {

class JobIssuer {
 public:
  // `requests[e]`: entry e's requests (EntryRequests). `clients` must not be empty.
  JobIssuer(std::vector<client::JobClient*> clients,
            std::vector<std::vector<v1::SubmitRequest>> requests);
  ~JobIssuer();
  Issuer issuer();

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// The Outcome of one finished job (no reference check).
Outcome OutcomeOf(const absl::StatusOr<client::JobResult>& result);

}  // namespace bench
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_BENCH_JOB_ISSUER_H_
