// What the process-level harnesses (pipeline_harness, ingest_load_harness) need to drive and
// measure real daemons: start a program with its output in a log file, read a process's CPU
// time and resident memory from /proc.
//
//   pid_t coord = bench::Spawn({"/path/to/coordinator", "--listen", addr}, dir + "/c.log");
//   const double cpu0 = bench::CpuSeconds(coord);   ...   bench::RssBytes(coord);
#ifndef STAGEFRONTIER_TESTS_BENCH_BENCH_PROCESSES_H_
#define STAGEFRONTIER_TESTS_BENCH_BENCH_PROCESSES_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace stagefrontier::bench {

// Forks and execs argv[0] with `argv`, its stdout and stderr into `log`. Returns the child's
// pid (the child exits 127 if the program cannot be started).
pid_t Spawn(const std::vector<std::string>& argv, const std::string& log);

// User + system CPU seconds `pid` has used so far; 0 if it cannot be read.
double CpuSeconds(pid_t pid);

// CPU seconds of `pid`'s threads so far, summed by thread name (/proc/PID/task/*/stat):
// threads that exited are not counted. Empty if it cannot be read.
std::map<std::string, double> ThreadCpuSeconds(pid_t pid);

// "name 12.3 s, name 4.5 s" for the names whose seconds grew from `before` to `after`, the most
// first; at most `top` of them.
std::string DescribeThreadCpu(const std::map<std::string, double>& before,
                              const std::map<std::string, double>& after, size_t top = 6);

// Resident memory of `pid` in bytes (VmRSS); 0 if it cannot be read.
int64_t RssBytes(pid_t pid);

}  // namespace stagefrontier::bench

#endif  // STAGEFRONTIER_TESTS_BENCH_BENCH_PROCESSES_H_
