// A ControlRequestSender for tests of those who send control requests (the capture trigger):
// keeps every request that reached a rank it serves, and reaches nobody else, like the
// coordinator's SidecarSessions without streams.
//
//   testing::FakeControlRequestSender sender;
//   sender.Serve("run", {0, 1, 2, 3});
//   trigger.Flush(&sender);
//   for (const v1::ControlRequest& r : sender.Sent()) ...
#ifndef STAGEFRONTIER_TESTS_DAEMON_EVENTS_FAKE_CONTROL_REQUEST_SENDER_H_
#define STAGEFRONTIER_TESTS_DAEMON_EVENTS_FAKE_CONTROL_REQUEST_SENDER_H_

#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "daemon/events/control_request_sender.h"

namespace stagefrontier::testing {

class FakeControlRequestSender : public ControlRequestSender {
 public:
  void Serve(const std::string& job, std::initializer_list<int32_t> ranks) {
    std::lock_guard<std::mutex> lock(mu_);
    for (int32_t r : ranks) served_.emplace(job, r);
  }

  // One per served rank the request names (all of the job's for rank -1).
  int Send(const v1::ControlRequest& request) override {
    std::lock_guard<std::mutex> lock(mu_);
    int reached = 0;
    for (const auto& [job, rank] : served_) {
      if (job == request.job() && (request.rank() == -1 || rank == request.rank())) ++reached;
    }
    if (reached > 0) sent_.push_back(request);
    return reached;
  }

  std::vector<v1::ControlRequest> Sent() const {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_;
  }
  // The requests sent to `rank`s in `ranks`, in order.
  std::vector<v1::ControlRequest> SentTo(std::initializer_list<int32_t> ranks) const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<v1::ControlRequest> out;
    for (const v1::ControlRequest& r : sent_) {
      for (int32_t rank : ranks) {
        if (r.rank() == rank) out.push_back(r);
      }
    }
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::set<std::pair<std::string, int32_t>> served_;
  std::vector<v1::ControlRequest> sent_;
};

}  // namespace stagefrontier::testing

#endif  // STAGEFRONTIER_TESTS_DAEMON_EVENTS_FAKE_CONTROL_REQUEST_SENDER_H_
