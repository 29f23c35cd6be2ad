// `import stagefrontier`: the Python binding of the C++ stub (client/client.h).
//
//   import stagefrontier
//   c = stagefrontier.Client(stages=[("data", "io"), ("forward", "compute"),
//                                    ("backward", "mixed"), ("optimizer", "compute")])
//   for batch in loader:
//       c.begin_step()
//       with c.stage("data"): ...
//       c.end_step()
//   print(c.stats())
//
// Errors: a bad schema or identity raises ValueError at construction; nothing else raises
// (an unknown stage name in stage()/mark() raises KeyError, because it is a programming error
// that would otherwise be silently counted).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "client/client.h"

namespace py = pybind11;
using stagefrontier::Client;

namespace {

// The context manager returned by Client.stage(name); one per stage, created once.
struct StageScope {
  Client* client;
  Client::StageId id;
};

struct PyClient {
  std::unique_ptr<Client> client;
  py::dict scopes;  // name -> StageScope

  Client::StageId Id(const py::str& name) const {
    PyObject* scope = PyDict_GetItem(scopes.ptr(), name.ptr());
    if (scope == nullptr) throw py::key_error("unknown stage " + std::string(name));
    return py::handle(scope).cast<const StageScope&>().id;
  }
};

std::unique_ptr<PyClient> MakeClient(const std::vector<std::pair<std::string, std::string>>& stages,
                                     std::optional<std::string> job_id, std::optional<int> rank,
                                     std::optional<int> local_rank, std::optional<int> world_size,
                                     std::optional<int> local_world_size,
                                     std::optional<std::string> shm_dir,
                                     std::optional<std::string> shm_group,
                                     std::optional<int64_t> ring_capacity, bool quiet) {
  std::vector<stagefrontier::Stage> schema;
  for (const auto& [name, kind] : stages) {
    absl::StatusOr<stagefrontier::StageKind> k = stagefrontier::ParseStageKind(kind);
    if (!k.ok())
      throw py::value_error("stage \"" + name + "\": " + std::string(k.status().message()));
    schema.push_back({name, *k});
  }
  stagefrontier::ClientOptions o;
  if (job_id) o.job_id = *job_id;
  if (rank) o.rank = *rank;
  if (local_rank) o.local_rank = *local_rank;
  if (world_size) o.world_size = *world_size;
  if (local_world_size) o.local_world_size = *local_world_size;
  if (shm_dir) o.shm_dir = *shm_dir;
  if (shm_group) o.shm_group = *shm_group;
  if (ring_capacity) o.ring_capacity = *ring_capacity;
  o.quiet = quiet;
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(std::move(schema), o);
  if (!client.ok()) throw py::value_error(std::string(client.status().message()));
  auto out = std::make_unique<PyClient>();
  out->client = *std::move(client);
  for (size_t k = 0; k < out->client->schema().size(); ++k) {
    out->scopes[py::str(out->client->schema().stage(k).name)] =
        py::cast(StageScope{out->client.get(), static_cast<Client::StageId>(k)});
  }
  return out;
}

py::dict Stats(const PyClient& c) {
  const stagefrontier::ClientStats s = c.client->stats();
  py::dict d;
  d["steps_begun"] = s.steps_begun;
  d["steps_recorded"] = s.steps_recorded;
  d["steps_dropped_full"] = s.steps_dropped_full;
  d["steps_not_recorded"] = s.steps_not_recorded;
  d["steps_paused"] = s.steps_paused;
  d["steps_sampled_out"] = s.steps_sampled_out;
  d["misuse"] = s.misuse;
  d["control_updates"] = s.control_updates;
  return d;
}

}  // namespace

PYBIND11_MODULE(stagefrontier, m) {
  m.doc() = "StageFrontier stub: per-step stage marks into the node's shared-memory segment.";

  py::class_<StageScope>(m, "StageScope")
      .def(
          "__enter__",
          [](StageScope& s) -> StageScope& {
            s.client->Enter(s.id);
            return s;
          },
          py::return_value_policy::reference)
      .def("__exit__", [](StageScope& s, py::args) {
        s.client->Exit(s.id);
        return false;
      });

  py::class_<PyClient>(m, "Client")
      .def(py::init(&MakeClient), py::arg("stages"), py::kw_only(), py::arg("job_id") = py::none(),
           py::arg("rank") = py::none(), py::arg("local_rank") = py::none(),
           py::arg("world_size") = py::none(), py::arg("local_world_size") = py::none(),
           py::arg("shm_dir") = py::none(), py::arg("shm_group") = py::none(),
           py::arg("ring_capacity") = py::none(), py::arg("quiet") = false,
           "stages: list of (name, kind), kind one of io, compute, sync, mixed. Identity "
           "arguments default to the launcher's environment (RANK, LOCAL_RANK, ...).")
      .def(
          "stage",
          [](PyClient& c, const py::str& name) -> py::object {
            PyObject* scope = PyDict_GetItem(c.scopes.ptr(), name.ptr());
            if (scope == nullptr) throw py::key_error("unknown stage " + std::string(name));
            return py::reinterpret_borrow<py::object>(scope);
          },
          py::arg("name"), "A context manager timing the stage: `with c.stage(\"data\"): ...`")
      .def(
          "begin_step",
          [](PyClient& c, std::optional<int64_t> step) {
            if (step) {
              c.client->BeginStep(*step);
            } else {
              c.client->BeginStep();
            }
          },
          py::arg("step") = py::none())
      .def("end_step", [](PyClient& c) { c.client->EndStep(); })
      .def("enter", [](PyClient& c, const py::str& name) { c.client->Enter(c.Id(name)); })
      .def("exit", [](PyClient& c, const py::str& name) { c.client->Exit(c.Id(name)); })
      .def(
          "mark", [](PyClient& c, const py::str& name) { c.client->Mark(c.Id(name)); },
          "Stage `name` ended now (it covers the time since the previous stage ended).")
      .def("stats", &Stats, "Counters: steps begun, recorded, dropped, not recorded, ...")
      .def("should_capture_trace",
           [](const PyClient& c) { return c.client->should_capture_trace(); })
      .def_property_readonly("enabled", [](const PyClient& c) { return c.client->enabled(); })
      .def_property_readonly("disabled_reason",
                             [](const PyClient& c) { return c.client->disabled_reason(); })
      .def_property_readonly("rank", [](const PyClient& c) { return c.client->identity().rank; })
      .def_property_readonly("local_rank",
                             [](const PyClient& c) { return c.client->identity().local_rank; })
      .def_property_readonly("job_id",
                             [](const PyClient& c) { return c.client->identity().job_id; })
      .def_property_readonly("current_step",
                             [](const PyClient& c) { return c.client->current_step(); })
      .def_property_readonly("schema",
                             [](const PyClient& c) { return c.client->schema().ToString(); });
}
