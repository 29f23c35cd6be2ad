// The node sweep's host checks (Guard-style qualification before a node joins production
// work): a fixed amount of work per check, timed, reported as a rate where higher is better.
//
//   SweepCheckResult cpu = CpuCheck(scale);           // GFLOP/s, one core
//   SweepCheckResult mem = MemoryBandwidthCheck(scale);  // GB/s, STREAM triad
//   SweepCheckResult disk = DiskReadCheck("/var/tmp", scale);  // MB/s, cold read
//   SweepCheckResult net = LoopbackCheck(scale);      // GB/s over a loopback TCP connection
//
// `scale` multiplies the work (1.0: about a second per check on a current server core;
// `--quick` uses 0.1). A check that cannot run (no space, no socket) says failed with the
// reason; nothing is left behind (the disk check's file is unlinked as soon as it is open, so
// even a killed sweep leaves no file).
#ifndef STAGEFRONTIER_DAEMON_SWEEP_HOST_CHECKS_H_
#define STAGEFRONTIER_DAEMON_SWEEP_HOST_CHECKS_H_

#include <string>

namespace stagefrontier {

struct SweepCheckResult {
  std::string name;    // "cpu_gflops", "memory_gbps", "disk_read_mbps", "loopback_gbps", ...
  std::string unit;    // "GFLOP/s", "GB/s", "MB/s"
  double value = 0;    // higher is better
  std::string state;   // "measured", "skipped", "failed"
  std::string detail;  // why skipped or failed; what was measured
};

SweepCheckResult CpuCheck(double scale);
SweepCheckResult MemoryBandwidthCheck(double scale);
SweepCheckResult DiskReadCheck(const std::string& scratch_dir, double scale);
SweepCheckResult LoopbackCheck(double scale);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SWEEP_HOST_CHECKS_H_
