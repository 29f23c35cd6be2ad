#include "client/c/stagefrontier_c.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "client/client.h"

struct sf_client {
  std::unique_ptr<stagefrontier::Client> impl;
  std::string last_error;  // sf_client_last_error
};

namespace {

// A string_view: called from catch handlers, where a std::string built from e.what() could
// throw bad_alloc across the C boundary.
void WriteError(char* err, size_t err_len, std::string_view message) {
  if (err == nullptr || err_len == 0) return;
  const size_t n = std::min(message.size(), err_len - 1);
  std::memcpy(err, message.data(), n);
  err[n] = '\0';
}

// True if the caller's struct ends after `field_end` bytes, i.e. it has that field.
bool Has(const sf_client_options* o, size_t field_end) { return o->struct_size >= field_end; }

#define SF_HAS(o, field) Has(o, offsetof(sf_client_options, field) + sizeof((o)->field))

// In a catch handler: the copy may throw bad_alloc, which must not cross the C boundary.
void SetLastError(sf_client* client, const char* what) noexcept {
  try {
    client->last_error = what;
  } catch (...) {
    client->last_error.clear();
  }
}

}  // namespace

extern "C" {

uint32_t sf_abi_version(void) { return SF_ABI_VERSION; }

void sf_client_options_init(sf_client_options* options) {
  if (options == nullptr) return;
  std::memset(options, 0, sizeof(*options));
  options->struct_size = sizeof(*options);
  options->rank = options->local_rank = options->world_size = options->local_world_size = -1;
  options->ring_capacity = -1;
}

int sf_client_create(const sf_client_options* o, const sf_stage* stages, size_t stage_count,
                     sf_client** out, char* err, size_t err_len) {
  if (out == nullptr) {
    WriteError(err, err_len, "sf_client_create: `out` is NULL");
    return SF_ERR_INVALID_ARGUMENT;
  }
  *out = nullptr;
  try {
    stagefrontier::ClientOptions options;
    if (o != nullptr) {
      if (o->struct_size > sizeof(sf_client_options)) {
        WriteError(err, err_len,
                   "sf_client_options.struct_size is larger than this library knows: link a "
                   "newer StageFrontier");
        return SF_ERR_VERSION;
      }
      if (SF_HAS(o, job_id) && o->job_id != nullptr) options.job_id = o->job_id;
      if (SF_HAS(o, rank)) options.rank = o->rank;
      if (SF_HAS(o, local_rank)) options.local_rank = o->local_rank;
      if (SF_HAS(o, world_size)) options.world_size = o->world_size;
      if (SF_HAS(o, local_world_size)) options.local_world_size = o->local_world_size;
      if (SF_HAS(o, shm_dir) && o->shm_dir != nullptr) options.shm_dir = o->shm_dir;
      if (SF_HAS(o, shm_group) && o->shm_group != nullptr) options.shm_group = o->shm_group;
      if (SF_HAS(o, ring_capacity)) options.ring_capacity = o->ring_capacity;
      if (SF_HAS(o, quiet)) options.quiet = o->quiet != 0;
      // The four layout fields came together: a struct without the last of them declares
      // none (pipeline_stage may lie in an older struct's tail padding).
      if (SF_HAS(o, tensor_size)) {
        options.layout.pipeline_stage = o->pipeline_stage;
        options.layout.pipeline_stages = o->pipeline_stages;
        options.layout.tensor_rank = o->tensor_rank;
        options.layout.tensor_size = o->tensor_size;
      }
    }
    if (stages == nullptr && stage_count > 0) {
      WriteError(err, err_len, "sf_client_create: `stages` is NULL");
      return SF_ERR_INVALID_ARGUMENT;
    }
    std::vector<stagefrontier::Stage> schema;
    for (size_t i = 0; i < stage_count; ++i) {
      if (stages[i].name == nullptr || stages[i].kind < SF_STAGE_IO ||
          stages[i].kind > SF_STAGE_TENSOR) {
        WriteError(err, err_len,
                   "sf_client_create: stage " + std::to_string(i) +
                       " has a NULL name or a kind outside SF_STAGE_IO..SF_STAGE_TENSOR");
        return SF_ERR_INVALID_ARGUMENT;
      }
      schema.push_back({stages[i].name, static_cast<stagefrontier::StageKind>(stages[i].kind)});
    }
    auto client = stagefrontier::Client::Create(std::move(schema), options);
    if (!client.ok()) {
      WriteError(err, err_len, std::string(client.status().message()));
      return SF_ERR_INVALID_ARGUMENT;
    }
    *out = new sf_client{*std::move(client), std::string()};
    return SF_OK;
  } catch (const std::exception& e) {
    WriteError(err, err_len, e.what());
  } catch (...) {
    WriteError(err, err_len, "unknown exception");
  }
  return SF_ERR_INTERNAL;
}

void sf_client_destroy(sf_client* client) { delete client; }

int32_t sf_stage_id(const sf_client* client, const char* name) {
  if (client == nullptr || name == nullptr) return -1;
  try {
    const auto id = client->impl->stage_id(name);
    return id == stagefrontier::Client::kNoStage ? -1 : static_cast<int32_t>(id);
  } catch (...) {
    return -1;
  }
}

void sf_begin_step(sf_client* client) {
  if (client != nullptr) client->impl->BeginStep();
}
void sf_begin_step_at(sf_client* client, int64_t step) {
  if (client != nullptr) client->impl->BeginStep(step);
}
// Negative ids become out-of-range ids: the recorder counts them as misuse.
void sf_enter(sf_client* client, int32_t id) {
  if (client != nullptr) client->impl->Enter(static_cast<uint32_t>(id));
}
void sf_exit(sf_client* client, int32_t id) {
  if (client != nullptr) client->impl->Exit(static_cast<uint32_t>(id));
}
void sf_mark(sf_client* client, int32_t id) {
  if (client != nullptr) client->impl->Mark(static_cast<uint32_t>(id));
}
void sf_end_step(sf_client* client) {
  if (client != nullptr) client->impl->EndStep();
}
void sf_note_uncaught_exception(sf_client* client) {
  if (client != nullptr) client->impl->NoteUncaughtException();
}
void sf_note_collective_exception(sf_client* client) {
  if (client != nullptr) client->impl->NoteUncaughtException(/*in_collective=*/true);
}

int sf_client_enabled(const sf_client* client) {
  return client != nullptr && client->impl->enabled() ? 1 : 0;
}

const char* sf_client_disabled_reason(const sf_client* client) {
  return client == nullptr ? "no client" : client->impl->disabled_reason().c_str();
}

int sf_should_capture_trace(const sf_client* client) {
  return client != nullptr && client->impl->should_capture_trace() ? 1 : 0;
}

int sf_set_capture_callbacks(sf_client* client, const sf_capture_callbacks* callbacks) {
  if (client == nullptr) return SF_ERR_INVALID_ARGUMENT;
  stagefrontier::Client::CaptureCallbacks c;
  if (callbacks != nullptr) {
    if (callbacks->struct_size > sizeof(sf_capture_callbacks)) return SF_ERR_VERSION;
    sf_capture_callbacks full{};
    std::memcpy(&full, callbacks, std::min<size_t>(callbacks->struct_size, sizeof(full)));
    c.begin = full.begin;
    c.end = full.begin != nullptr ? full.end : nullptr;
    c.user = full.user;
  }
  client->impl->SetCaptureCallbacks(c);
  return SF_OK;
}

int sf_enable_hang_dumps(sf_client* client, int signal_number,
                         void (*callback)(void* user, uint64_t capture_id, int fd), void* user) {
  if (client == nullptr) return SF_ERR_INVALID_ARGUMENT;
  try {
    stagefrontier::HangDumpOptions o;
    if (signal_number != 0) o.signal_number = signal_number;
    if (callback != nullptr) {
      o.callback = [callback, user](const stagefrontier::HangDumpRequest& r, int fd) {
        callback(user, r.capture_id, fd);
      };
    }
    const absl::Status s = client->impl->EnableHangDumps(std::move(o));
    client->last_error = std::string(s.message());
    switch (s.code()) {
      case absl::StatusCode::kOk:
        return SF_OK;
      case absl::StatusCode::kInvalidArgument:
        return SF_ERR_INVALID_ARGUMENT;
      case absl::StatusCode::kFailedPrecondition:
        return SF_ERR_FAILED_PRECONDITION;
      case absl::StatusCode::kAlreadyExists:
        return SF_ERR_ALREADY_EXISTS;
      default:
        return SF_ERR_INTERNAL;
    }
  } catch (const std::exception& e) {
    SetLastError(client, e.what());
  } catch (...) {
    SetLastError(client, "unknown exception");
  }
  return SF_ERR_INTERNAL;
}

const char* sf_client_last_error(const sf_client* client) {
  return client == nullptr ? "no client" : client->last_error.c_str();
}

int sf_client_get_stats(const sf_client* client, sf_client_stats* stats) {
  if (client == nullptr || stats == nullptr) return SF_ERR_INVALID_ARGUMENT;
  if (stats->struct_size > sizeof(sf_client_stats)) return SF_ERR_VERSION;
  const stagefrontier::ClientStats s = client->impl->stats();
  sf_client_stats full;
  full.struct_size = stats->struct_size;
  full.steps_begun = s.steps_begun;
  full.steps_recorded = s.steps_recorded;
  full.steps_dropped_full = s.steps_dropped_full;
  full.steps_not_recorded = s.steps_not_recorded;
  full.steps_paused = s.steps_paused;
  full.steps_sampled_out = s.steps_sampled_out;
  full.misuse = s.misuse;
  full.control_updates = s.control_updates;
  full.steps_invalid = s.steps_invalid;
  full.selftest_steps = s.selftest_steps;
  full.selftest_refused = s.selftest_refused;
  full.captures_begun = s.captures_begun;
  full.captures_done = s.captures_done;
  full.captures_failed = s.captures_failed;
  full.dumps_written = s.dumps_written;
  full.dumps_unrequested = s.dumps_unrequested;
  full.dump_errors = s.dump_errors;
  // Write only the fields the caller's struct has.
  const size_t n = std::min<size_t>(stats->struct_size, sizeof(full));
  if (n > sizeof(uint32_t)) {
    std::memcpy(reinterpret_cast<char*>(stats) + sizeof(uint32_t),
                reinterpret_cast<const char*>(&full) + sizeof(uint32_t), n - sizeof(uint32_t));
  }
  return SF_OK;
}

}  // extern "C"
