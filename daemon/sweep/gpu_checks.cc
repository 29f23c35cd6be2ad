#include "daemon/sweep/gpu_checks.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <string>

#include "absl/strings/str_cat.h"

namespace stagefrontier {
namespace {

std::string OwnDirectory() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string path(buf, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/') + 1);
}

std::vector<SweepCheckResult> AllSkipped(const std::string& why) {
  std::vector<SweepCheckResult> out;
  for (const char* name : kGpuCheckNames) out.push_back({name, "", 0, "skipped", why});
  return out;
}

}  // namespace

std::vector<SweepCheckResult> GpuChecks(double scale) {
  void* lib = dlopen((OwnDirectory() + "libsfsweep_cuda.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) lib = dlopen("libsfsweep_cuda.so", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* e = dlerror();
    return AllSkipped(absl::StrCat(
        "GPU checks not installed (libsfsweep_cuda.so: ", e != nullptr ? e : "not found",
        "); built where CUDA is installed"));
  }
  auto run = reinterpret_cast<SfSweepGpuChecksFn>(dlsym(lib, "sf_sweep_gpu_checks"));
  if (run == nullptr) return AllSkipped("libsfsweep_cuda.so has no sf_sweep_gpu_checks");
  SfSweepGpuResult results[8] = {};
  const int n = run(scale, results, 8);
  std::vector<SweepCheckResult> out;
  for (int i = 0; i < n && i < 8; ++i) {
    const SfSweepGpuResult& r = results[i];
    static const char* kStates[] = {"measured", "skipped", "failed"};
    out.push_back({std::string(r.name, strnlen(r.name, sizeof r.name)),
                   std::string(r.unit, strnlen(r.unit, sizeof r.unit)), r.value,
                   kStates[r.state >= 0 && r.state <= 2 ? r.state : 2],
                   std::string(r.detail, strnlen(r.detail, sizeof r.detail))});
  }
  return out;
}

}  // namespace stagefrontier
