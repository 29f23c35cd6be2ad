// A deterministic simulator of synchronized data-parallel training (the scenarios of
// docs/accounting.md, "Scenarios the engine must get right"): R ranks run a stage schema with
// noisy durations; a `sync` stage ends for everyone in its group at the last arrival plus the
// collective time, a `mixed` stage likewise after its local work. Each rank reports
// boundaries on its own clock (optional offsets of hours and 100 ppm drift), exactly as real
// stubs would, and the injected faults are the ground truth. A pipeline x data-parallel job
// (SimConfig::Pipeline) adds point-to-point activations and gradients between pipeline stages.
//
//   SimConfig config = SimConfig::DataParallel(/*world_size=*/16);
//   config.faults.push_back(*ParseFault("slow:data:rank=3:magnitude=40ms"));
//   absl::StatusOr<TrainingSimulator> sim = TrainingSimulator::Create(config);
//   StepInput step;
//   while (sim->Next(&step)) engine->AddStep(step);
#ifndef STAGEFRONTIER_DAEMON_SIM_TRAINING_SIMULATOR_H_
#define STAGEFRONTIER_DAEMON_SIM_TRAINING_SIMULATOR_H_

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/accounting/step_input.h"
#include "shm/stage_schema.h"

namespace stagefrontier {

struct SimStage {
  std::string name;
  StageKind kind = StageKind::kCompute;
  int64_t base_ns = 0;        // local work (io/compute/mixed); the collective for `sync`
  double noise_cv = 0.02;     // normal noise, as a fraction of base_ns
  int64_t collective_ns = 0;  // `mixed` only: the collective after the local work
  // A wait over every rank of the job (a loss all-reduce, a barrier), not per group.
  bool job_scope = false;
};

enum class FaultType : uint8_t {
  kSlowStage,       // named ranks take longer in a non-sync stage
  kSlowCollective,  // a wait stage's collective is slower for the whole group
  kStopReporting,   // named ranks keep training but stop reporting
  kLateExit,        // named ranks leave a wait stage's collective late (after it ended)
};
enum class FaultPattern : uint8_t { kPersistent, kIntermittent, kRamp };

struct Fault {
  FaultType type = FaultType::kSlowStage;
  std::string stage;           // stage name (unused for kStopReporting)
  std::vector<int32_t> ranks;  // empty for kSlowCollective means every group
  int64_t magnitude_ns = 0;
  FaultPattern pattern = FaultPattern::kPersistent;
  int64_t every = 10;        // kIntermittent: once every `every` steps
  int64_t ramp_steps = 100;  // kRamp: steps to reach full magnitude
  int64_t start_step = 0;
  int64_t end_step = std::numeric_limits<int64_t>::max();  // exclusive

  // The extra nanoseconds at `step` (0 outside [start_step, end_step)).
  int64_t MagnitudeAt(int64_t step) const;
};

// Parses "slow:STAGE:rank=R[+R...]:magnitude=40ms[:every=10|:ramp=100][:start=N][:end=N]",
// "collective:STAGE:magnitude=5ms[...]", "exit:STAGE:rank=R[+R...]:magnitude=2ms[...]" or
// "stop:rank=R[:start=N]". Magnitudes take ns, us,
// ms or s. Fails with InvalidArgument naming the bad part.
[[nodiscard]] absl::StatusOr<Fault> ParseFault(absl::string_view text);

struct SimConfig {
  int32_t world_size = 16;
  std::vector<SimStage> stages;
  int64_t steps = 300;
  int64_t first_step = 0;
  uint64_t seed = 1;
  std::vector<std::vector<int32_t>> groups;  // empty: one group of every rank
  std::vector<Fault> faults;
  bool clock_skew = false;          // per-rank offsets up to 6 h and drift up to +-100 ppm
  bool probe = false;               // report probe spans for collectives in mixed stages
  int64_t exit_jitter_ns = 20'000;  // ranks leave a collective up to ~this apart
  int64_t step_gap_ns = 50'000;     // between one step's end and the next start
  // Pipeline x data parallel: the number of pipeline stages P (0: not a pipeline). Rank
  // r = s * D + d (D = world_size / P replicas) is replica d of pipeline stage s; its pipeline
  // neighbours are (s - 1) * D + d and (s + 1) * D + d. One micro-batch per step: the schema's
  // stages before recv_grad run as the forward pass, pipeline stage 0 to P - 1 (recv_act ends
  // when the upstream neighbour's send_act ended plus a transfer; send_act takes a transfer),
  // then recv_grad..send_grad as the backward pass, P - 1 to 0 (recv_grad waits likewise for
  // the downstream neighbour's send_grad), then the remaining stages (dp_sync: a sync stage in
  // each group) as usual. A transfer with no neighbour is empty (kEmptyP2pNs, noise-free).
  // The schema must have recv_act, fwd, send_act, recv_grad, bwd, send_grad in this order (the
  // four transfers of kind p2p) and no wait stage before send_grad.
  int32_t pipeline_stages = 0;
  // Per pipeline stage: multiplies that stage's fwd and bwd work (a structurally unbalanced
  // pipeline); empty means 1.0 everywhere, else exactly pipeline_stages entries.
  std::vector<double> stage_work_scale;

  // data:io, forward:compute, backward:compute, grad_sync:sync, optimizer:compute.
  static SimConfig DataParallel(int32_t world_size);
  // data:io, forward:compute, backward:mixed (overlapped all-reduce), optimizer:compute.
  static SimConfig MixedBackward(int32_t world_size);
  // A pipeline of `pipeline_stages` stages, each `replicas` data-parallel ranks (world size
  // P * D): data:io, recv_act:p2p, fwd:compute, send_act:p2p, recv_grad:p2p, bwd:compute,
  // send_grad:p2p, dp_sync:sync, optimizer:compute; one sync group per pipeline stage (ranks
  // s * D .. s * D + D - 1, named "pp<s>" by the coordinator).
  static SimConfig Pipeline(int32_t pipeline_stages, int32_t replicas);

  // A pipeline transfer with no neighbour (recv_act on stage 0, send_act on the last, ...).
  static constexpr int64_t kEmptyP2pNs = 3'000;
};

// Splits ranks 0..world_size-1 into `count` contiguous groups of equal size.
std::vector<std::vector<int32_t>> ContiguousGroups(int32_t world_size, int32_t count);

class TrainingSimulator {
 public:
  // Fails with InvalidArgument for an empty or invalid schema, a fault naming an unknown
  // stage or out-of-range rank, a slow-stage fault on a sync stage, or bad groups; for a
  // pipeline, also a stage count that does not divide the world size, a stage_work_scale of
  // the wrong size, or a schema without the pipeline's stages (see SimConfig).
  [[nodiscard]] static absl::StatusOr<TrainingSimulator> Create(SimConfig config);

  // Produces the next step (ranks that stopped reporting are left out). Returns false after
  // config.steps steps.
  bool Next(StepInput* out);

  const StageSchema& schema() const { return schema_; }
  const SimConfig& config() const { return config_; }
  // The (stage, rank) cells where slow-stage faults were injected, for scoring.
  std::vector<std::pair<int32_t, int32_t>> FaultCells() const;

 private:
  TrainingSimulator(SimConfig config, StageSchema schema);
  int64_t Noisy(int32_t rank, const SimStage& stage);
  int64_t ToLocal(int32_t rank, double true_ns) const;
  // Extra nanoseconds of `type` faults (slow-stage or late-exit) on (stage k, rank) at `step`.
  int64_t FaultExtraNs(FaultType type, int32_t rank, int k, int64_t step) const;
  int64_t SlowBy(int32_t rank, int k, int64_t step) const {
    return FaultExtraNs(FaultType::kSlowStage, rank, k, step);
  }
  // Stage k for every rank at once: local work, or a wait ending per group.
  void RunStage(int k, int64_t step, std::exponential_distribution<double>& jitter,
                std::normal_distribution<double>& noise, std::vector<std::vector<double>>* bounds,
                std::vector<std::vector<std::pair<double, double>>>* spans);
  // The forward and backward passes of a pipeline (stages 0..send_grad_).
  void RunPipeline(int64_t step, std::vector<std::vector<double>>* bounds);

  SimConfig config_;
  StageSchema schema_;
  std::vector<int32_t> group_of_;
  std::vector<std::mt19937_64> rng_;  // one per rank: faults elsewhere do not shift noise
  std::mt19937_64 collective_rng_;
  std::vector<int64_t> clock_offset_ns_;
  std::vector<double> clock_drift_;
  std::vector<double> now_;           // true time of each rank, ns
  std::vector<int32_t> fault_stage_;  // resolved stage index per fault
  // Pipeline stage indices (-1 when not a pipeline).
  int recv_act_ = -1;
  int fwd_ = -1;
  int send_act_ = -1;
  int recv_grad_ = -1;
  int bwd_ = -1;
  int send_grad_ = -1;
  int64_t produced_ = 0;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SIM_TRAINING_SIMULATOR_H_
