// What the journal's checksum costs per byte, table-driven and with the CPU's CRC32
// instruction (daemon/journal/crc32c.h), at a journaled record's size and at a record block's:
//   bazel run -c opt //tests/bench:crc32c_benchmark
#include <benchmark/benchmark.h>

#include <random>
#include <string>

#include "daemon/journal/crc32c.h"

namespace stagefrontier {
namespace {

std::string Bytes(size_t n) {
  std::mt19937_64 rng(20261129);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

void BM_Crc32cTables(benchmark::State& state) {
  const std::string b = Bytes(static_cast<size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(Crc32cTables(b.data(), b.size()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_Crc32cTables)->Arg(160)->Arg(1 << 20);

void BM_Crc32cHardware(benchmark::State& state) {
  const std::string b = Bytes(static_cast<size_t>(state.range(0)));
  uint32_t c = 0;
  if (!Crc32cHardware(b.data(), b.size(), &c)) {
    state.SkipWithError("this CPU has no CRC32 instruction");
    return;
  }
  for (auto _ : state) {
    Crc32cHardware(b.data(), b.size(), &c);
    benchmark::DoNotOptimize(c);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_Crc32cHardware)->Arg(160)->Arg(1 << 20);

}  // namespace
}  // namespace stagefrontier
