// A two-step Chrome trace with the stub's stage ranges, shared by the trace reducer's tests
// (captures) and the run builder's (analyze).
#ifndef STAGEFRONTIER_TESTS_DAEMON_CAPTURES_STAGE_TRACE_FIXTURE_H_
#define STAGEFRONTIER_TESTS_DAEMON_CAPTURES_STAGE_TRACE_FIXTURE_H_

#include <string>

#include "shm/stage_schema.h"

namespace stagefrontier::testing {

inline StageSchema Schema() { return *StageSchema::Parse("data:io,forward:compute,sync:sync"); }

inline std::string Event(const std::string& name, double ts_us, double dur_us) {
  return "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"" + name +
         "\",\"pid\":1,\"tid\":1,\"ts\":" + std::to_string(ts_us) +
         ",\"dur\":" + std::to_string(dur_us) + "}";
}

// Two steps of 10 ms starting at 1000 us; data 2 ms, forward 5 ms (step 8 has no forward
// range), sync until 9 ms; an unknown stage and a range outside every step.
inline std::string Trace(int rank, double data_extra_us = 0) {
  std::string events =
      Event("ProfilerStep#7", 1000, 10000) + "," + Event("ProfilerStep#8", 11000, 10000) + "," +
      Event("stagefrontier:data", 1000, 2000 + data_extra_us) + "," +
      Event("stagefrontier:forward", 3000 + data_extra_us, 5000) + "," +
      Event("stagefrontier:sync", 8000 + data_extra_us, 1000) + "," +
      Event("stagefrontier:data", 11000, 2000) + "," + Event("stagefrontier:sync", 13000, 6000) +
      "," + Event("stagefrontier:eval", 12000, 10) + "," + Event("stagefrontier:data", 50000, 10) +
      "," + "{\"ph\":\"i\",\"name\":\"instant\",\"ts\":5}";
  return "{\"schemaVersion\":1,\"distributedInfo\":{\"backend\":\"gloo\",\"rank\":" +
         std::to_string(rank) + ",\"world_size\":2},\"traceEvents\":[" + events + "]}";
}

}  // namespace stagefrontier::testing

#endif  // STAGEFRONTIER_TESTS_DAEMON_CAPTURES_STAGE_TRACE_FIXTURE_H_
