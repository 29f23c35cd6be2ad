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

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "client/client.h"
#include "client/probe/probe_ring_attach.h"
#include "shm/segment_layout_v1.h"

namespace py = pybind11;
using stagefrontier::Client;

namespace {

// The context manager returned by Client.stage(name): a plain CPython type, because
// pybind11's dispatch of __enter__/__exit__ costs ~0.8 us a pair and this runs 10+ times per
// training step. One per stage, created once. It shares ownership of the C++ client, so a
// scope kept after its Client is gone stays safe. Only Client.stage makes one (Python code
// cannot: a scope without a client would crash the trainer at __enter__).
struct StageScopeObject {
  PyObject_HEAD std::shared_ptr<Client>* client;  // heap-held: PyObject memory is C-allocated
  Client::StageId id;
};

PyObject* ScopeEnter(PyObject* self, PyObject*) {
  auto* s = reinterpret_cast<StageScopeObject*>(self);
  (*s->client)->Enter(s->id);
  Py_INCREF(self);
  return self;
}

PyObject* ScopeExit(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  auto* s = reinterpret_cast<StageScopeObject*>(self);
  // Left by an exception (exc_type set): the stage stays published as open, so that a trainer
  // ending on it is placed where it raised (Client::ExitRaising).
  if (nargs > 0 && args[0] != Py_None) {
    (*s->client)->ExitRaising(s->id);
  } else {
    (*s->client)->Exit(s->id);
  }
  Py_RETURN_FALSE;  // never swallows the trainer's exception
}

void ScopeDealloc(PyObject* self) {
  auto* s = reinterpret_cast<StageScopeObject*>(self);
  delete s->client;
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);
}

PyMethodDef kScopeMethods[] = {
    {"__enter__", reinterpret_cast<PyCFunction>(ScopeEnter), METH_NOARGS, "Enter the stage."},
    {"__exit__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(ScopeExit)),
     METH_FASTCALL, "Exit the stage."},
    {nullptr, nullptr, 0, nullptr}};

PyType_Slot kScopeSlots[] = {{Py_tp_dealloc, reinterpret_cast<void*>(ScopeDealloc)},
                             {Py_tp_methods, kScopeMethods},
                             {0, nullptr}};

PyType_Spec kScopeSpec = {"stagefrontier.StageScope", sizeof(StageScopeObject), 0,
                          Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION, kScopeSlots};

PyTypeObject* g_scope_type = nullptr;

struct PyClient {
  std::shared_ptr<Client> client;
  // Every client this process made, for the uncaught-exception hook (only under the GIL).
  static std::vector<std::weak_ptr<Client>>& All() {
    static auto* all = new std::vector<std::weak_ptr<Client>>();
    return *all;
  }
  py::dict scopes;  // name -> StageScope

  Client::StageId Id(PyObject* name) const {
    PyObject* scope = PyDict_GetItemWithError(scopes.ptr(), name);
    if (scope == nullptr) {
      if (PyErr_Occurred()) throw py::error_already_set();
      throw py::key_error("unknown stage " + py::repr(name).cast<std::string>());
    }
    return reinterpret_cast<StageScopeObject*>(scope)->id;
  }
};

// Client.stage and Client.mark as plain CPython methods (METH_O): same reason as above.
PyObject* FastStage(PyObject* self, PyObject* name) {
  try {
    PyClient& c = py::handle(self).cast<PyClient&>();
    PyObject* scope = PyDict_GetItemWithError(c.scopes.ptr(), name);
    if (scope == nullptr) {
      if (!PyErr_Occurred()) PyErr_Format(PyExc_KeyError, "unknown stage %R", name);
      return nullptr;
    }
    Py_INCREF(scope);
    return scope;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

PyObject* FastMark(PyObject* self, PyObject* name) {
  try {
    PyClient& c = py::handle(self).cast<PyClient&>();
    c.client->Mark(c.Id(name));
    Py_RETURN_NONE;
  } catch (py::error_already_set& e) {
    e.restore();
    return nullptr;
  } catch (const py::key_error& e) {
    PyErr_SetString(PyExc_KeyError, e.what());
    return nullptr;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

PyMethodDef kStageDef = {"stage", FastStage, METH_O,
                         "A context manager timing the stage: `with c.stage(\"data\"): ...`"};
PyMethodDef kMarkDef = {
    "mark", FastMark, METH_O,
    "Stage `name` ended now (it covers the time since the previous stage ended)."};

// Client(layout=...): None, or a dict of pipeline_stage, pipeline_stages, tensor_rank and
// tensor_size (missing: 0, 1, 0, 1). Unknown keys raise ValueError, values that are not ints
// TypeError; the values themselves are checked by Client::Create (ValueError).
// Client(layout_source=...): a shm::v1::LayoutSource name; "" leaves it to the client.
uint32_t ParseLayoutSource(const std::string& name) {
  const uint32_t s = stagefrontier::shm::v1::LayoutSourceFromName(name);
  if (s <= stagefrontier::shm::v1::kLayoutSourceMax) return s;
  throw py::value_error("layout_source: unknown \"" + name +
                        "\" (declared, none, environment, inferred, data_parallel_only, "
                        "inference_off, not_inferred, no_ddp, refused)");
}

stagefrontier::RankLayout ParseLayout(const py::object& layout) {
  stagefrontier::RankLayout l;
  if (layout.is_none()) return l;
  if (!py::isinstance<py::dict>(layout)) {
    throw py::type_error(
        "layout must be None or a dict with keys pipeline_stage, "
        "pipeline_stages, tensor_rank, tensor_size, not " +
        std::string(Py_TYPE(layout.ptr())->tp_name));
  }
  l.pipeline_stages = 1;
  l.tensor_size = 1;
  for (const auto& [key, value] : layout.cast<py::dict>()) {
    if (!py::isinstance<py::str>(key)) {
      throw py::value_error("layout: unknown key " + std::string(py::repr(key)) +
                            " (keys: pipeline_stage, pipeline_stages, tensor_rank, tensor_size)");
    }
    const std::string k = key.cast<std::string>();
    int32_t* field = k == "pipeline_stage"    ? &l.pipeline_stage
                     : k == "pipeline_stages" ? &l.pipeline_stages
                     : k == "tensor_rank"     ? &l.tensor_rank
                     : k == "tensor_size"     ? &l.tensor_size
                                              : nullptr;
    if (field == nullptr) {
      throw py::value_error("layout: unknown key \"" + k +
                            "\" (keys: pipeline_stage, pipeline_stages, tensor_rank, tensor_size)");
    }
    // bool is an int in Python; True as a stage count is a mistake, not a 1.
    if (!py::isinstance<py::int_>(value) || py::isinstance<py::bool_>(value)) {
      throw py::type_error("layout: " + k + " must be an int, not " +
                           std::string(Py_TYPE(value.ptr())->tp_name));
    }
    const long long v = PyLong_AsLongLong(value.ptr());
    if (v == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      throw py::value_error("layout: " + k + " " + std::string(py::repr(value)) +
                            " is out of range");
    }
    if (v < INT32_MIN || v > INT32_MAX) {
      throw py::value_error("layout: " + k + " " + std::to_string(v) + " is out of range");
    }
    *field = static_cast<int32_t>(v);
  }
  return l;
}

std::unique_ptr<PyClient> MakeClient(const std::vector<std::pair<std::string, std::string>>& stages,
                                     std::optional<std::string> job_id, std::optional<int> rank,
                                     std::optional<int> local_rank, std::optional<int> world_size,
                                     std::optional<int> local_world_size,
                                     std::optional<std::string> shm_dir,
                                     std::optional<std::string> shm_group,
                                     std::optional<int64_t> ring_capacity, bool quiet,
                                     const py::object& layout, const std::string& layout_source) {
  std::vector<stagefrontier::Stage> schema;
  for (const auto& [name, kind] : stages) {
    absl::StatusOr<stagefrontier::StageKind> k = stagefrontier::ParseStageKind(kind);
    if (!k.ok()) {
      throw py::value_error("stage \"" + name + "\": " + std::string(k.status().message()));
    }
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
  o.layout = ParseLayout(layout);
  o.layout_source = ParseLayoutSource(layout_source);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(std::move(schema), o);
  if (!client.ok()) throw py::value_error(std::string(client.status().message()));
  auto out = std::make_unique<PyClient>();
  out->client = std::shared_ptr<Client>(*std::move(client));
  std::vector<std::weak_ptr<Client>>& all = PyClient::All();
  std::erase_if(all, [](const std::weak_ptr<Client>& c) { return c.expired(); });
  all.push_back(out->client);
  for (size_t k = 0; k < out->client->schema().size(); ++k) {
    PyObject* obj = PyType_GenericAlloc(g_scope_type, 0);
    if (obj == nullptr) throw py::error_already_set();
    auto* scope = reinterpret_cast<StageScopeObject*>(obj);
    scope->client = new std::shared_ptr<Client>(out->client);
    scope->id = static_cast<Client::StageId>(k);
    out->scopes[py::str(out->client->schema().stage(k).name)] =
        py::reinterpret_steal<py::object>(obj);
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
  d["steps_invalid"] = s.steps_invalid;
  d["selftest_steps"] = s.selftest_steps;
  d["selftest_refused"] = s.selftest_refused;
  d["captures_begun"] = s.captures_begun;
  d["captures_done"] = s.captures_done;
  d["captures_failed"] = s.captures_failed;
  d["dumps_written"] = s.dumps_written;
  d["dumps_unrequested"] = s.dumps_unrequested;
  d["dump_errors"] = s.dump_errors;
  return d;
}

// A framework hook's view of this process's probe ring (the PyTorch DDP comm hook reports
// Gloo all-reduce intervals through it). One per process; publish/resolved_through are
// serialized by the caller (stagefrontier.torch holds a lock).
struct PyProbeRing {
  stagefrontier::probe::AttachedProbeRing ring;
};

std::unique_ptr<PyProbeRing> MakeProbeRing(const PyClient& c) {
  absl::StatusOr<stagefrontier::probe::AttachedProbeRing> r = stagefrontier::probe::AttachProbeRing(
      c.client->identity(), stagefrontier::shm::v2::kProbeBackendCommHook);
  if (!r.ok()) throw std::runtime_error(std::string(r.status().message()));
  return std::make_unique<PyProbeRing>(PyProbeRing{std::move(*r)});
}

// ProbeRing: the collective probe ring a framework hook feeds (Client.probe_ring()).
void DefineProbeRing(py::module& m) {
  py::class_<PyProbeRing>(m, "ProbeRing",
                          "This process's collective probe ring (segment layout v2), fed by a "
                          "framework hook; from Client.probe_ring().")
      .def(
          "publish",
          [](PyProbeRing& p, int op, uint64_t nbytes, int64_t call_ns, int64_t start_ns,
             int64_t end_ns, uint64_t seq) {
            stagefrontier::shm::ProbeInterval in;
            in.op = static_cast<uint16_t>(op);
            in.bytes = nbytes;
            in.call_ns = call_ns;
            in.start_ns = start_ns;
            in.end_ns = end_ns;
            in.collective_seq = seq;
            p.ring.writer->CountSeen();
            return p.ring.writer->TryPublish(in);
          },
          py::arg("op"), py::arg("nbytes"), py::arg("call_ns"), py::arg("start_ns"),
          py::arg("end_ns"), py::arg("seq"),
          "One collective (op 0 all_reduce ... 6 recv), times from time.monotonic_ns(). "
          "Returns False when the ring is full (counted).")
      .def(
          "resolved_through",
          [](PyProbeRing& p, int64_t t_ns) { p.ring.writer->SetResolvedThrough(t_ns); },
          py::arg("t_ns"), "Every collective called before t_ns is published.")
      .def("close", [](PyProbeRing& p) { p.ring.writer->Release(); });
}

// Client.enable_hang_dumps / publish_hang_dumps / unpublish_hang_dumps / wait_hang_dump
// (client/hang_dump.h).
void DefineHangDumps(py::class_<PyClient>& cls) {
  cls.def(
         "enable_hang_dumps",
         [](PyClient& c, int signal, bool install_handler) {
           stagefrontier::HangDumpOptions o;
           o.signal_number = signal;
           o.install_handler = install_handler;
           const absl::Status s = c.client->EnableHangDumps(std::move(o));
           if (!s.ok()) throw std::runtime_error(std::string(s.message()));
           return c.client->hang_dump_signal_fd();
         },
         py::arg("signal") = 12, py::arg("install_handler") = true,
         "Lets the coordinator ask this rank for its stacks when the job hangs: the sidecar "
         "sends `signal` (SIGUSR1 or SIGUSR2) after storing the request, and the stub writes "
         "<capture dir>/<job>/stacks_rank<R>_capture<ID>.txt from what the handler wrote into "
         "the returned fd (the pipe's write end, non-blocking). install_handler=False: install "
         "your own, faulthandler.register(signal, file=fd, all_threads=True), after this call. "
         "Raises RuntimeError, also when `signal` has a handler already (one installed from C "
         "included, which signal.getsignal reports as None).")
      .def(
          "publish_hang_dumps",
          [](PyClient& c) {
            const absl::Status s = c.client->PublishHangDumps();
            if (!s.ok()) throw std::runtime_error(std::string(s.message()));
          },
          "After enable_hang_dumps(install_handler=False) and registering the handler (e.g. "
          "faulthandler.register(signal.SIGUSR2, file=fd, all_threads=True)): the sidecar may "
          "send the signal from now on. May be called again after unpublish_hang_dumps().")
      .def(
          "unpublish_hang_dumps",
          [](PyClient& c) {
            const absl::Status s = c.client->UnpublishHangDumps();
            if (!s.ok()) throw std::runtime_error(std::string(s.message()));
          },
          "The sidecar stops sending the signal. Call it BEFORE faulthandler.unregister (which "
          "restores the default action: a signal between the two would end the process). A "
          "no-op once closed; RuntimeError when hang dumps are not enabled.")
      .def(
          "wait_hang_dump",
          [](PyClient& c, double timeout_s, uint64_t after) {
            // Clamped: at most ~31 years, so that the deadline cannot overflow.
            const double ms = std::min(std::max(0.0, timeout_s) * 1000.0, 1e12);
            const stagefrontier::HangDumpWait w = c.client->WaitForHangDump(
                std::chrono::milliseconds(static_cast<int64_t>(ms)), after);
            return std::make_pair(w.capture_id, w.count);
          },
          py::arg("timeout_s"), py::arg("after") = 0, py::call_guard<py::gil_scoped_release>(),
          "Blocks (without the GIL) until more than `after` hang dump files have been completed "
          "(at once if so already): (capture_id, count), the newest one's capture id and the "
          "count so far; on timeout, when not enabled or once closed (0, count). Pass the "
          "count last returned as `after` and no dump is missed between two calls.");
}

// The client's read-only state: recording, identity, layout, step, schema.
void DefineClientState(py::class_<PyClient>& cls) {
  cls.def_property_readonly("enabled", [](const PyClient& c) { return c.client->enabled(); })
      .def_property_readonly("disabled_reason",
                             [](const PyClient& c) { return c.client->disabled_reason(); })
      .def_property_readonly("rank", [](const PyClient& c) { return c.client->identity().rank; })
      .def_property_readonly("local_rank",
                             [](const PyClient& c) { return c.client->identity().local_rank; })
      .def_property_readonly("job_id",
                             [](const PyClient& c) { return c.client->identity().job_id; })
      .def_property_readonly(
          "layout",
          [](const PyClient& c) -> std::optional<py::dict> {
            const stagefrontier::RankLayout& l = c.client->layout();
            if (l.pipeline_stages == 0) return std::nullopt;
            py::dict d;
            d["pipeline_stage"] = l.pipeline_stage;
            d["pipeline_stages"] = l.pipeline_stages;
            d["tensor_rank"] = l.tensor_rank;
            d["tensor_size"] = l.tensor_size;
            return d;
          },
          "The rank layout declared (a dict, missing keys completed), or None.")
      .def_property_readonly(
          "layout_source",
          [](const PyClient& c) {
            return std::string(stagefrontier::shm::v1::LayoutSourceName(c.client->layout_source()));
          },
          "how the layout came (declared, environment, inferred) or why none")
      .def_property_readonly("current_step",
                             [](const PyClient& c) { return c.client->current_step(); })
      .def_property_readonly("schema",
                             [](const PyClient& c) { return c.client->schema().ToString(); });
}

// Capture requests and answers (stagefrontier.torch runs the captures).
void DefineCaptures(py::class_<PyClient>& cls) {
  cls.def("should_capture_trace",
          [](const PyClient& c) { return c.client->should_capture_trace(); })
      .def_property_readonly(
          "capture_window",
          [](const PyClient& c) -> std::optional<std::pair<int64_t, int64_t>> {
            if (c.client->capture_last_step() < c.client->capture_first_step()) {
              return std::nullopt;
            }
            return std::make_pair(c.client->capture_first_step(), c.client->capture_last_step());
          },
          "The trace window (first, last) of the capture request in force, or None.")
      .def(
          "declare_capture_handler", [](PyClient& c) { c.client->DeclareCaptureHandler(); },
          "This trainer runs captures (stagefrontier.torch): a request whose steps are past "
          "when it arrives is answered 'missed' by the stub.")
      .def(
          "answer_capture",
          [](PyClient& c, int64_t first_step, const std::string& state, const std::string& failure,
             uint64_t nbytes) {
            const auto s = stagefrontier::shm::ParseCaptureState(state);
            if (!s) throw py::value_error("unknown capture state \"" + state + "\"");
            const auto f = stagefrontier::shm::ParseCaptureFailure(failure);
            if (!f) throw py::value_error("unknown capture failure \"" + failure + "\"");
            c.client->AnswerCapture(first_step, *s, *f, nbytes);
          },
          py::arg("first_step"), py::arg("state"), py::arg("failure") = "", py::arg("bytes") = 0,
          "Answers the capture request whose window starts at first_step: state running, "
          "done (bytes: the trace's size) or failed (failure: busy, start, write, missed).");
}

// The uncaught-exception hook's way in (docs/segment-format.md "Exit reason"): every client of
// the process, for the hook stagefrontier/__init__.py chains before sys.excepthook.
void DefineExitReason(py::module_& m, py::class_<PyClient>& cls) {
  m.def(
      "_note_uncaught_exception",
      [](bool in_collective) {
        for (const std::weak_ptr<Client>& w : PyClient::All()) {
          if (std::shared_ptr<Client> c = w.lock()) c->NoteUncaughtException(in_collective);
        }
      },
      py::arg("in_collective") = false,
      "Client.note_uncaught_exception() of every client this process made (sys.excepthook).");
  cls.def(
      "note_uncaught_exception",
      [](PyClient& c, bool in_collective) { c.client->NoteUncaughtException(in_collective); },
      py::arg("in_collective") = false,
      "The trainer is ending on an uncaught exception (stagefrontier's sys.excepthook calls it "
      "for every client): the coordinator reads this rank as gone where its open stage says, "
      "not as finished. in_collective: a collective raised it (a peer gone), so the rank is "
      "that collective's victim");
}

}  // namespace

PYBIND11_MODULE(_stagefrontier, m) {
  m.doc() = "StageFrontier stub: per-step stage marks into the node's shared-memory segment.";

  g_scope_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&kScopeSpec));
  if (g_scope_type == nullptr) throw py::error_already_set();
  m.attr("StageScope") = py::handle(reinterpret_cast<PyObject*>(g_scope_type));

  py::class_<PyClient> cls(m, "Client");
  cls.def(py::init(&MakeClient), py::arg("stages"), py::kw_only(), py::arg("job_id") = py::none(),
          py::arg("rank") = py::none(), py::arg("local_rank") = py::none(),
          py::arg("world_size") = py::none(), py::arg("local_world_size") = py::none(),
          py::arg("shm_dir") = py::none(), py::arg("shm_group") = py::none(),
          py::arg("ring_capacity") = py::none(), py::arg("quiet") = false,
          py::arg("layout") = py::none(), py::arg("layout_source") = "",
          "stages: list of (name, kind), kind one of io, compute, sync, mixed, p2p, tensor. "
          "Identity arguments default to the launcher's environment (RANK, LOCAL_RANK, ...). "
          "layout: None, or this rank's place in a 3D-parallel job, a dict {pipeline_stage, "
          "pipeline_stages, tensor_rank, tensor_size} (missing keys: 0, 1, 0, 1); "
          "pipeline_stages * tensor_size must divide the world size. layout_source: how the "
          "caller came by the layout, or why none (shown by sfctl health): '' (declared, or "
          "none), declared, none, environment, inferred, data_parallel_only, inference_off, "
          "not_inferred, no_ddp, refused.")
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
      .def(
          "close", [](PyClient& c) { c.client->Close(); },
          "Stops recording and gives the slot back now (at exit: the next run takes it cleanly)")
      .def("enter", [](PyClient& c, const py::str& name) { c.client->Enter(c.Id(name.ptr())); })
      .def(
          "mark_at",
          [](PyClient& c, const py::str& name, int64_t t_ns) {
            c.client->MarkAt(c.Id(name.ptr()), t_ns);
          },
          py::arg("stage"), py::arg("t_ns"),
          "Stage `stage` ended at t_ns (time.monotonic_ns(), CLOCK_MONOTONIC): for boundaries "
          "known only after the fact, such as the last gradient bucket handed to all-reduce.")
      .def("exit", [](PyClient& c, const py::str& name) { c.client->Exit(c.Id(name.ptr())); })
      .def(
          "show_open",
          [](PyClient& c, const py::str& name, int64_t t_ns) {
            c.client->ShowOpen(c.Id(name.ptr()), t_ns);
          },
          py::arg("stage"), py::arg("t_ns"),
          "Publishes that stage `stage` is open since t_ns (time.monotonic_ns()) without marking: "
          "where the rank is, for the stall verdict, when a boundary is marked only later.")
      .def("probe_ring", &MakeProbeRing,
           "The collective probe ring of this client's slot, for a framework hook to report "
           "collective intervals. Raises RuntimeError if it cannot be attached (a layout v1 "
           "segment, or another live producer such as libsfprobe.so).")
      .def("stats", &Stats, "Counters: steps begun, recorded, dropped, not recorded, ...");
  DefineCaptures(cls);
  DefineClientState(cls);
  DefineProbeRing(m);
  DefineHangDumps(cls);
  DefineExitReason(m, cls);

  // The hot methods, installed as plain CPython method descriptors.
  cls.attr("stage") = py::reinterpret_steal<py::object>(
      PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(cls.ptr()), &kStageDef));
  cls.attr("mark") = py::reinterpret_steal<py::object>(
      PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(cls.ptr()), &kMarkDef));
}
