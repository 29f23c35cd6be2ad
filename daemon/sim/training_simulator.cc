#include "daemon/sim/training_simulator.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace stagefrontier {

int64_t Fault::MagnitudeAt(int64_t step) const {
  if (step < start_step || step >= end_step) return 0;
  switch (pattern) {
    case FaultPattern::kPersistent:
      return magnitude_ns;
    case FaultPattern::kIntermittent:
      return (step - start_step) % every == 0 ? magnitude_ns : 0;
    case FaultPattern::kRamp: {
      const double f = std::min(
          1.0, static_cast<double>(step - start_step + 1) / static_cast<double>(ramp_steps));
      return static_cast<int64_t>(f * static_cast<double>(magnitude_ns));
    }
  }
  return 0;
}

namespace {

absl::StatusOr<int64_t> ParseDuration(absl::string_view text) {
  struct Unit {
    const char* suffix;
    double scale;
  };
  for (Unit u : {Unit{"ns", 1.0}, Unit{"us", 1e3}, Unit{"ms", 1e6}, Unit{"s", 1e9}}) {
    if (absl::EndsWith(text, u.suffix)) {
      double value = 0;
      if (absl::SimpleAtod(text.substr(0, text.size() - std::string_view(u.suffix).size()),
                           &value) &&
          value >= 0 && value * u.scale < 1e15) {
        return static_cast<int64_t>(std::llround(value * u.scale));
      }
      break;
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("\"", text, "\" is not a duration like 40ms, 500us or 1.5s"));
}

absl::StatusOr<int64_t> ParseCount(absl::string_view key, absl::string_view text) {
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, "=", text, " is not a non-negative integer"));
  }
  return value;
}

}  // namespace

absl::StatusOr<Fault> ParseFault(absl::string_view text) {
  std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  Fault f;
  size_t i = 1;
  if (parts[0] == "slow" || parts[0] == "collective" || parts[0] == "exit") {
    f.type = parts[0] == "slow"         ? FaultType::kSlowStage
             : parts[0] == "collective" ? FaultType::kSlowCollective
                                        : FaultType::kLateExit;
    if (parts.size() < 2 || parts[1].empty() || parts[1].find('=') != absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("fault \"", text, "\": stage name missing"));
    }
    f.stage = std::string(parts[1]);
    i = 2;
  } else if (parts[0] == "stop") {
    f.type = FaultType::kStopReporting;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("fault \"", text, "\" must start with slow:, collective:, exit: or stop:"));
  }
  for (; i < parts.size(); ++i) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(parts[i], '=');
    const absl::string_view key = kv.first;
    const absl::string_view value = kv.second;
    if (key == "rank" || key == "ranks") {
      for (absl::string_view r : absl::StrSplit(value, '+')) {
        int32_t rank = 0;
        if (!absl::SimpleAtoi(r, &rank) || rank < 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("fault \"", text, "\": bad rank \"", r, "\""));
        }
        f.ranks.push_back(rank);
      }
    } else if (key == "magnitude") {
      absl::StatusOr<int64_t> d = ParseDuration(value);
      if (!d.ok())
        return absl::InvalidArgumentError(
            absl::StrCat("fault \"", text, "\": ", d.status().message()));
      f.magnitude_ns = *d;
    } else if (key == "every" || key == "ramp" || key == "start" || key == "end") {
      absl::StatusOr<int64_t> n = ParseCount(key, value);
      if (!n.ok())
        return absl::InvalidArgumentError(
            absl::StrCat("fault \"", text, "\": ", n.status().message()));
      if (key == "every") {
        if (*n < 1)
          return absl::InvalidArgumentError(
              absl::StrCat("fault \"", text, "\": every must be >= 1"));
        f.pattern = FaultPattern::kIntermittent;
        f.every = *n;
      } else if (key == "ramp") {
        if (*n < 1)
          return absl::InvalidArgumentError(
              absl::StrCat("fault \"", text, "\": ramp must be >= 1"));
        f.pattern = FaultPattern::kRamp;
        f.ramp_steps = *n;
      } else if (key == "start") {
        f.start_step = *n;
      } else {
        f.end_step = *n;
      }
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("fault \"", text, "\": unknown field \"", key, "\""));
    }
  }
  if (f.type != FaultType::kSlowCollective && f.ranks.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("fault \"", text, "\": rank=R is required"));
  }
  if (f.type != FaultType::kStopReporting && f.magnitude_ns <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("fault \"", text, "\": magnitude=... is required"));
  }
  return f;
}

SimConfig SimConfig::DataParallel(int32_t world_size) {
  SimConfig c;
  c.world_size = world_size;
  c.stages = {
      {"data", StageKind::kIo, 20'000'000, 0.03, 0},
      {"forward", StageKind::kCompute, 30'000'000, 0.02, 0},
      {"backward", StageKind::kCompute, 50'000'000, 0.02, 0},
      {"grad_sync", StageKind::kSync, 10'000'000, 0.02, 0},
      {"optimizer", StageKind::kCompute, 8'000'000, 0.02, 0},
  };
  return c;
}

SimConfig SimConfig::MixedBackward(int32_t world_size) {
  // The same job with DDP's overlapped all-reduce folded into backward.
  SimConfig c = DataParallel(world_size);
  c.stages[2].kind = StageKind::kMixed;
  c.stages[2].collective_ns = c.stages[3].base_ns;
  c.stages.erase(c.stages.begin() + 3);
  return c;
}

SimConfig SimConfig::Pipeline(int32_t pipeline_stages, int32_t replicas) {
  SimConfig c;
  c.world_size = pipeline_stages * replicas;
  c.pipeline_stages = pipeline_stages;
  c.stages = {
      {"data", StageKind::kIo, 2'000'000, 0.03, 0},
      {"recv_act", StageKind::kP2p, 300'000, 0.02, 0},  // the transfer, when there is one
      {"fwd", StageKind::kCompute, 8'000'000, 0.02, 0},
      {"send_act", StageKind::kP2p, 300'000, 0.02, 0},
      {"recv_grad", StageKind::kP2p, 300'000, 0.02, 0},
      {"bwd", StageKind::kCompute, 12'000'000, 0.02, 0},
      {"send_grad", StageKind::kP2p, 300'000, 0.02, 0},
      {"dp_sync", StageKind::kSync, 1'000'000, 0.02, 0},
      {"optimizer", StageKind::kCompute, 2'000'000, 0.02, 0},
  };
  if (pipeline_stages >= 1 && replicas >= 1) {
    c.groups = ContiguousGroups(c.world_size, pipeline_stages);
  }
  return c;
}

std::vector<std::vector<int32_t>> ContiguousGroups(int32_t world_size, int32_t count) {
  std::vector<std::vector<int32_t>> groups(count);
  for (int32_t r = 0; r < world_size; ++r) {
    groups[static_cast<size_t>(r) * count / world_size].push_back(r);
  }
  return groups;
}

namespace {

// The pipeline part of Create's checks: sizes, work scales, and the stages the timing needs.
absl::Status ValidatePipeline(const SimConfig& config, const StageSchema* schema) {
  if (config.pipeline_stages == 0) {
    return config.stage_work_scale.empty()
               ? absl::OkStatus()
               : absl::InvalidArgumentError("stage_work_scale needs pipeline_stages > 0");
  }
  const int32_t P = config.pipeline_stages;
  if (P < 1 || config.world_size % P != 0) {
    return absl::InvalidArgumentError(absl::StrCat("pipeline_stages ", P,
                                                   " must be positive and divide the world "
                                                   "size ",
                                                   config.world_size));
  }
  if (!config.stage_work_scale.empty() &&
      config.stage_work_scale.size() != static_cast<size_t>(P)) {
    return absl::InvalidArgumentError(
        absl::StrCat("stage_work_scale has ", config.stage_work_scale.size(),
                     " entries; a pipeline of ", P, " stages needs ", P, " (or none)"));
  }
  for (double f : config.stage_work_scale) {
    if (!(f > 0) || f > 1e3) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage_work_scale entry ", f, " is outside (0, 1000]"));
    }
  }
  int prev = -1;
  for (const char* name : {"recv_act", "fwd", "send_act", "recv_grad", "bwd", "send_grad"}) {
    std::optional<size_t> k = schema->Find(name);
    if (!k) {
      return absl::InvalidArgumentError(
          absl::StrCat("a pipeline schema needs the stages recv_act, fwd, send_act, "
                       "recv_grad, bwd, send_grad (in this order); \"",
                       name, "\" is missing"));
    }
    if (static_cast<int>(*k) <= prev) {
      return absl::InvalidArgumentError(
          absl::StrCat("pipeline stage \"", name,
                       "\" is out of order: recv_act, fwd, send_act, recv_grad, bwd, send_grad"));
    }
    prev = static_cast<int>(*k);
    const bool transfer = absl::StartsWith(name, "recv_") || absl::StartsWith(name, "send_");
    if (transfer && schema->stage(*k).kind != StageKind::kP2p) {
      return absl::InvalidArgumentError(
          absl::StrCat("pipeline stage \"", name, "\" must be of kind p2p"));
    }
  }
  for (int k = 0; k <= prev; ++k) {
    if (schema->IsWait(k)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stage \"", schema->stage(k).name,
          "\" is a wait before send_grad: a pipeline's waits must follow its backward pass"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TrainingSimulator> TrainingSimulator::Create(SimConfig config) {
  if (config.world_size < 1 || config.world_size > (1 << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("world size ", config.world_size, " is out of range"));
  }
  if (config.steps < 0) return absl::InvalidArgumentError("steps must be >= 0");
  std::vector<Stage> stages;
  for (const SimStage& s : config.stages) {
    if (s.base_ns < 0 || s.collective_ns < 0 || s.noise_cv < 0 || s.noise_cv > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage \"", s.name, "\" has a negative duration or noise outside [0, 1]"));
    }
    stages.push_back(Stage{s.name, s.kind});
  }
  absl::StatusOr<StageSchema> schema = StageSchema::Create(std::move(stages));
  if (!schema.ok()) return schema.status();
  if (config.groups.empty()) config.groups = ContiguousGroups(config.world_size, 1);
  std::vector<int> seen(config.world_size, 0);
  for (const auto& g : config.groups) {
    for (int32_t r : g) {
      if (r < 0 || r >= config.world_size || seen[r]++) {
        return absl::InvalidArgumentError(
            absl::StrCat("groups: rank ", r, " is out of range or repeated"));
      }
    }
  }
  if (std::count(seen.begin(), seen.end(), 0) != 0) {
    return absl::InvalidArgumentError("groups must cover every rank");
  }
  for (const Fault& f : config.faults) {
    for (int32_t r : f.ranks) {
      if (r < 0 || r >= config.world_size) {
        return absl::InvalidArgumentError(
            absl::StrCat("fault names rank ", r, ", outside [0, ", config.world_size, ")"));
      }
    }
    if (f.type == FaultType::kStopReporting) continue;
    std::optional<size_t> k = schema->Find(f.stage);
    if (!k)
      return absl::InvalidArgumentError(
          absl::StrCat("fault names unknown stage \"", f.stage, "\""));
    if (f.type == FaultType::kSlowStage && schema->stage(*k).kind == StageKind::kSync) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stage \"", f.stage, "\" is a sync stage: slow it for the group with collective:"));
    }
    if ((f.type == FaultType::kSlowCollective || f.type == FaultType::kLateExit) &&
        !schema->IsWait(*k)) {
      return absl::InvalidArgumentError(absl::StrCat("stage \"", f.stage, "\" has no collective"));
    }
  }
  if (absl::Status s = ValidatePipeline(config, &*schema); !s.ok()) return s;
  return TrainingSimulator(std::move(config), *std::move(schema));
}

TrainingSimulator::TrainingSimulator(SimConfig config, StageSchema schema)
    : config_(std::move(config)), schema_(std::move(schema)) {
  const int32_t R = config_.world_size;
  group_of_.assign(R, 0);
  for (size_t g = 0; g < config_.groups.size(); ++g) {
    for (int32_t r : config_.groups[g]) group_of_[r] = static_cast<int32_t>(g);
  }
  for (int32_t r = 0; r < R; ++r)
    rng_.emplace_back(config_.seed * 1'000'003ULL + static_cast<uint64_t>(r));
  collective_rng_.seed(config_.seed ^ 0x5f3759dfULL);
  // Clocks come from their own generator so that skew never changes what happens.
  std::mt19937_64 clocks(config_.seed ^ 0xC10CC10CULL);
  std::uniform_real_distribution<double> offset(0.0, 6.0 * 3600e9);
  std::uniform_real_distribution<double> drift(-100e-6, 100e-6);
  for (int32_t r = 0; r < R; ++r) {
    const double o = offset(clocks);
    const double d = drift(clocks);
    clock_offset_ns_.push_back(config_.clock_skew ? static_cast<int64_t>(o) : 0);
    clock_drift_.push_back(config_.clock_skew ? d : 0.0);
  }
  now_.assign(R, 0.0);
  for (const Fault& f : config_.faults) {
    fault_stage_.push_back(
        f.type == FaultType::kStopReporting ? -1 : static_cast<int32_t>(*schema_.Find(f.stage)));
  }
  if (config_.pipeline_stages > 0) {
    recv_act_ = static_cast<int>(*schema_.Find("recv_act"));
    fwd_ = static_cast<int>(*schema_.Find("fwd"));
    send_act_ = static_cast<int>(*schema_.Find("send_act"));
    recv_grad_ = static_cast<int>(*schema_.Find("recv_grad"));
    bwd_ = static_cast<int>(*schema_.Find("bwd"));
    send_grad_ = static_cast<int>(*schema_.Find("send_grad"));
  }
}

int64_t TrainingSimulator::Noisy(int32_t rank, const SimStage& stage) {
  std::normal_distribution<double> noise(0.0, 1.0);
  const double v = static_cast<double>(stage.base_ns) * (1.0 + stage.noise_cv * noise(rng_[rank]));
  return std::max<int64_t>(static_cast<int64_t>(0.2 * static_cast<double>(stage.base_ns)),
                           static_cast<int64_t>(v));
}

int64_t TrainingSimulator::ToLocal(int32_t rank, double true_ns) const {
  return clock_offset_ns_[rank] +
         static_cast<int64_t>(std::llround(true_ns * (1.0 + clock_drift_[rank])));
}

std::vector<std::pair<int32_t, int32_t>> TrainingSimulator::FaultCells() const {
  std::vector<std::pair<int32_t, int32_t>> cells;
  for (size_t i = 0; i < config_.faults.size(); ++i) {
    if (config_.faults[i].type != FaultType::kSlowStage) continue;
    for (int32_t r : config_.faults[i].ranks) cells.emplace_back(fault_stage_[i], r);
  }
  return cells;
}

int64_t TrainingSimulator::FaultExtraNs(FaultType type, int32_t rank, int k, int64_t step) const {
  int64_t extra = 0;
  for (size_t f = 0; f < config_.faults.size(); ++f) {
    const Fault& fault = config_.faults[f];
    if (fault.type == type && fault_stage_[f] == k &&
        std::find(fault.ranks.begin(), fault.ranks.end(), rank) != fault.ranks.end()) {
      extra += fault.MagnitudeAt(step);
    }
  }
  return extra;
}

void TrainingSimulator::RunStage(int k, int64_t step, std::exponential_distribution<double>& jitter,
                                 std::normal_distribution<double>& noise,
                                 std::vector<std::vector<double>>* bounds,
                                 std::vector<std::vector<std::pair<double, double>>>* spans) {
  const int32_t R = config_.world_size;
  const SimStage& st = config_.stages[k];
  std::vector<double> arrive(R);
  for (int32_t r = 0; r < R; ++r) {
    int64_t local = st.kind == StageKind::kSync ? 0 : Noisy(r, st);
    local += SlowBy(r, k, step);
    arrive[r] = now_[r] + static_cast<double>(local);
  }
  if (!schema_.IsWait(k)) {
    for (int32_t r = 0; r < R; ++r) now_[r] = arrive[r];
  } else {
    std::vector<std::vector<int32_t>> everyone;
    if (st.job_scope) everyone = ContiguousGroups(R, 1);
    const std::vector<std::vector<int32_t>>& groups = st.job_scope ? everyone : config_.groups;
    for (size_t g = 0; g < groups.size(); ++g) {
      double last = 0;
      for (int32_t r : groups[g]) last = std::max(last, arrive[r]);
      const int64_t base = st.kind == StageKind::kSync ? st.base_ns : st.collective_ns;
      double collective = static_cast<double>(base) * (1.0 + st.noise_cv * noise(collective_rng_));
      for (size_t f = 0; f < config_.faults.size(); ++f) {
        const Fault& fault = config_.faults[f];
        if (fault.type != FaultType::kSlowCollective || fault_stage_[f] != k) continue;
        // A job-wide wait is one collective: a fault naming any rank slows it.
        bool hits = fault.ranks.empty() || st.job_scope;
        for (int32_t fr : fault.ranks) hits = hits || group_of_[fr] == static_cast<int32_t>(g);
        if (hits) collective += static_cast<double>(fault.MagnitudeAt(step));
      }
      const double end = last + std::max(0.0, collective);
      for (int32_t r : groups[g]) {
        now_[r] = end + jitter(rng_[r]) +
                  static_cast<double>(FaultExtraNs(FaultType::kLateExit, r, k, step));
        (*spans)[r].emplace_back(arrive[r], now_[r]);
      }
    }
  }
  for (int32_t r = 0; r < R; ++r) (*bounds)[r][k + 1] = now_[r];
}

void TrainingSimulator::RunPipeline(int64_t step, std::vector<std::vector<double>>* bounds) {
  const int32_t P = config_.pipeline_stages;
  const int32_t D = config_.world_size / P;
  const double empty = static_cast<double>(SimConfig::kEmptyP2pNs);
  std::vector<double> send_act_end(config_.world_size, 0.0);
  std::vector<double> send_grad_end(config_.world_size, 0.0);
  // One stage of one rank of pipeline stage s: every stage but the four transfers is local
  // work (fwd and bwd scaled by stage_work_scale[s]); a slow-stage fault adds to any of them.
  auto run = [&](int32_t s, int32_t r, int k) {
    const SimStage& st = config_.stages[k];
    const double extra = static_cast<double>(SlowBy(r, k, step));
    if (k == recv_act_ || k == recv_grad_) {
      // Waits for the neighbour's send (upstream for activations, downstream for gradients),
      // then the transfer; without a neighbour it is empty.
      const bool has_neighbour = k == recv_act_ ? s > 0 : s < P - 1;
      double end = now_[r] + empty;
      if (has_neighbour) {
        const double sent = k == recv_act_ ? send_act_end[r - D] : send_grad_end[r + D];
        end = std::max(end, sent + static_cast<double>(Noisy(r, st)));
      }
      now_[r] = end + extra;
    } else if (k == send_act_ || k == send_grad_) {
      const bool has_neighbour = k == send_act_ ? s < P - 1 : s > 0;
      now_[r] += (has_neighbour ? static_cast<double>(Noisy(r, st)) : empty) + extra;
      (k == send_act_ ? send_act_end : send_grad_end)[r] = now_[r];
    } else {
      double work = static_cast<double>(Noisy(r, st));
      if ((k == fwd_ || k == bwd_) && !config_.stage_work_scale.empty()) {
        work *= config_.stage_work_scale[s];
      }
      now_[r] += work + extra;
    }
    (*bounds)[r][k + 1] = now_[r];
  };
  for (int32_t s = 0; s < P; ++s) {  // forward: every stage before recv_grad
    for (int32_t r = s * D; r < (s + 1) * D; ++r) {
      for (int k = 0; k < recv_grad_; ++k) run(s, r, k);
    }
  }
  for (int32_t s = P - 1; s >= 0; --s) {  // backward: recv_grad..send_grad
    for (int32_t r = s * D; r < (s + 1) * D; ++r) {
      for (int k = recv_grad_; k <= send_grad_; ++k) run(s, r, k);
    }
  }
}

bool TrainingSimulator::Next(StepInput* out) {
  if (produced_ >= config_.steps) return false;
  const int64_t step = config_.first_step + produced_++;
  const int32_t R = config_.world_size;
  const int S = static_cast<int>(schema_.size());
  std::vector<std::vector<double>> bounds(R, std::vector<double>(S + 1, 0.0));
  std::vector<std::vector<ProbeSpan>> probe(R);
  std::vector<std::vector<std::pair<double, double>>> spans(R);  // true enter/exit per rank
  std::exponential_distribution<double> jitter(
      1.0 / std::max<double>(1.0, static_cast<double>(config_.exit_jitter_ns)));
  // Shared by the collectives and the step gaps (it caches a draw: keep one per step).
  std::normal_distribution<double> noise(0.0, 1.0);

  for (int32_t r = 0; r < R; ++r) bounds[r][0] = now_[r];
  int first = 0;
  if (config_.pipeline_stages > 0) {
    RunPipeline(step, &bounds);
    first = send_grad_ + 1;
  }
  for (int k = first; k < S; ++k) RunStage(k, step, jitter, noise, &bounds, &spans);

  out->step = step;
  out->ranks.clear();
  for (int32_t r = 0; r < R; ++r) {
    now_[r] += static_cast<double>(config_.step_gap_ns) * (1.0 + 0.1 * noise(rng_[r]));
    bool reporting = true;
    for (const Fault& fault : config_.faults) {
      if (fault.type == FaultType::kStopReporting && step >= fault.start_step &&
          step < fault.end_step &&
          std::find(fault.ranks.begin(), fault.ranks.end(), r) != fault.ranks.end()) {
        reporting = false;
      }
    }
    if (!reporting) continue;
    RankStep rs;
    rs.rank = r;
    for (double b : bounds[r]) rs.boundaries_ns.push_back(ToLocal(r, b));
    if (config_.probe) {
      size_t next_span = 0;
      for (int k = 0; k < S; ++k) {
        if (!schema_.IsWait(k)) continue;
        const auto& [enter, exit] = spans[r][next_span++];
        // Clamp to the reported boundaries: rounding must not move a span outside its stage.
        const int64_t lo = rs.boundaries_ns[k];
        const int64_t hi = rs.boundaries_ns[k + 1];
        ProbeSpan span;
        span.stage = static_cast<uint32_t>(k);
        span.enter_ns = std::clamp(ToLocal(r, enter), lo, hi);
        span.exit_ns = std::clamp(ToLocal(r, exit), lo, hi);
        span.op = 0;  // all_reduce
        span.call_ns = span.enter_ns;
        rs.probe.push_back(span);
      }
    }
    out->ranks.push_back(std::move(rs));
  }
  return true;
}

}  // namespace stagefrontier
