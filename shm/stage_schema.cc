#include "shm/stage_schema.h"

#include <set>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "shm/record_limits.h"

namespace stagefrontier {

const char* StageKindName(StageKind kind) {
  switch (kind) {
    case StageKind::kIo:
      return "io";
    case StageKind::kCompute:
      return "compute";
    case StageKind::kSync:
      return "sync";
    case StageKind::kMixed:
      return "mixed";
    case StageKind::kP2p:
      return "p2p";
    case StageKind::kTensor:
      return "tensor";
  }
  return "unknown";
}

absl::StatusOr<StageKind> ParseStageKind(absl::string_view text) {
  for (StageKind kind : {StageKind::kIo, StageKind::kCompute, StageKind::kSync, StageKind::kMixed,
                         StageKind::kP2p, StageKind::kTensor}) {
    if (text == StageKindName(kind)) return kind;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown stage kind \"", absl::CHexEscape(text.substr(0, 40)),
                   "\" (expected io, compute, sync, mixed, p2p or tensor)"));
}

StageSchema::StageSchema(std::vector<Stage> stages) : stages_(std::move(stages)) {
  for (size_t k = 0; k < stages_.size(); ++k) {
    if (IsWait(k)) last_wait_ = k;
  }
}

absl::StatusOr<StageSchema> StageSchema::Create(std::vector<Stage> stages) {
  if (stages.empty()) return absl::InvalidArgumentError("stage schema is empty");
  if (stages.size() > kMaxStages) {
    return absl::InvalidArgumentError(
        absl::StrCat("stage schema has ", stages.size(), " stages; at most ", kMaxStages));
  }
  std::set<std::string> seen;
  for (size_t k = 0; k < stages.size(); ++k) {
    const std::string& name = stages[k].name;
    if (name.empty()) return absl::InvalidArgumentError(absl::StrCat("stage ", k, " has no name"));
    if (name.size() > shm::kMaxStageNameChars) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stage ", k, " has a name of ", name.size(), " characters; at most ",
          shm::kMaxStageNameChars, " (\"", absl::CHexEscape(name.substr(0, 20)), "...\")"));
    }
    if (!shm::ValidStageName(name)) {
      return absl::InvalidArgumentError(absl::StrCat("stage name \"", absl::CHexEscape(name),
                                                     "\" has a character outside [A-Za-z0-9_.-]"));
    }
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat("stage \"", name, "\" is declared twice"));
    }
  }
  return StageSchema(std::move(stages));
}

absl::StatusOr<StageSchema> StageSchema::Parse(absl::string_view text) {
  std::vector<Stage> stages;
  for (absl::string_view entry : absl::StrSplit(text, ',')) {
    std::vector<absl::string_view> parts = absl::StrSplit(entry, ':');
    if (parts.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("schema entry \"", absl::CHexEscape(entry), "\" is not name:kind"));
    }
    absl::StatusOr<StageKind> kind = ParseStageKind(parts[1]);
    if (!kind.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("schema entry \"", absl::CHexEscape(entry),
                                                     "\": ", kind.status().message()));
    }
    stages.push_back(Stage{std::string(parts[0]), *kind});
  }
  return Create(std::move(stages));
}

bool StageSchema::IsWait(size_t k) const {
  return stages_[k].kind == StageKind::kSync || stages_[k].kind == StageKind::kMixed;
}

bool StageSchema::IsWork(size_t k) const {
  return stages_[k].kind == StageKind::kIo || stages_[k].kind == StageKind::kCompute ||
         stages_[k].kind == StageKind::kTensor;
}

bool StageSchema::WaitsOutsideGroup(size_t k) const {
  return stages_[k].kind == StageKind::kP2p || stages_[k].kind == StageKind::kTensor;
}

std::optional<size_t> StageSchema::NextWaitStage(size_t k) const {
  for (size_t j = k + 1; j < stages_.size(); ++j) {
    if (IsWait(j)) return j;
  }
  return std::nullopt;
}

std::optional<size_t> StageSchema::FirstWaitStage() const {
  for (size_t j = 0; j < stages_.size(); ++j) {
    if (IsWait(j)) return j;
  }
  return std::nullopt;
}

bool StageSchema::IsTail(size_t k) const { return last_wait_.has_value() && k > *last_wait_; }

std::optional<size_t> StageSchema::Find(absl::string_view name) const {
  for (size_t k = 0; k < stages_.size(); ++k) {
    if (stages_[k].name == name) return k;
  }
  return std::nullopt;
}

std::string StageSchema::ToString() const {
  std::string out;
  for (size_t k = 0; k < stages_.size(); ++k) {
    absl::StrAppend(&out, k ? "," : "", stages_[k].name, ":", StageKindName(stages_[k].kind));
  }
  return out;
}

}  // namespace stagefrontier
