#include "tests/bench/bench_processes.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>

namespace stagefrontier::bench {

pid_t Spawn(const std::vector<std::string>& argv, const std::string& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    FILE* f = std::fopen(log.c_str(), "w");
    if (f != nullptr) {
      dup2(fileno(f), 1);
      dup2(fileno(f), 2);
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

namespace {

// User + system CPU seconds in a /proc stat file, and the command name in it.
double StatCpuSeconds(const std::string& stat_path, std::string* comm = nullptr) {
  std::ifstream in(stat_path);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t open = s.find('(');
  const size_t close = s.rfind(')');  // the command name may hold spaces
  if (open == std::string::npos || close == std::string::npos || close < open) return 0;
  if (comm != nullptr) *comm = s.substr(open + 1, close - open - 1);
  std::istringstream rest(s.substr(close + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace

double CpuSeconds(pid_t pid) { return StatCpuSeconds("/proc/" + std::to_string(pid) + "/stat"); }

std::map<std::string, double> ThreadCpuSeconds(pid_t pid) {
  std::map<std::string, double> out;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::string comm;
    const double s = StatCpuSeconds(dir + "/" + e->d_name + "/stat", &comm);
    if (!comm.empty()) out[comm] += s;
  }
  closedir(d);
  return out;
}

std::string DescribeThreadCpu(const std::map<std::string, double>& before,
                              const std::map<std::string, double>& after, size_t top) {
  std::vector<std::pair<double, std::string>> grew;
  for (const auto& [name, s] : after) {
    const auto b = before.find(name);
    const double d = s - (b == before.end() ? 0 : b->second);
    if (d > 0) grew.emplace_back(d, name);
  }
  std::sort(grew.rbegin(), grew.rend());
  std::string out;
  char buf[96];
  for (size_t i = 0; i < grew.size() && i < top; ++i) {
    std::snprintf(buf, sizeof(buf), "%s%s %.1f s", i == 0 ? "" : ", ", grew[i].second.c_str(),
                  grew[i].first);
    out += buf;
  }
  return out.empty() ? "(not read)" : out;
}

int64_t RssBytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;
  }
  return 0;
}

}  // namespace stagefrontier::bench
