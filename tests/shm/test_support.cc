#include "tests/shm/test_support.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace stagefrontier::testing {

std::string MakeTempDir() {
  const char* base = getenv("TEST_TMPDIR");
  std::string tmpl = std::string(base != nullptr ? base : "/tmp") + "/sfXXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) std::perror("mkdtemp");
  return tmpl;
}

std::string RunfilePath(const std::string& relative) {
  const char* src = getenv("TEST_SRCDIR");
  const char* ws = getenv("TEST_WORKSPACE");
  if (src == nullptr || ws == nullptr) return relative;
  return std::string(src) + "/" + ws + "/" + relative;
}

pid_t Spawn(const std::vector<std::string>& argv, const std::string& stdout_path) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  if (!stdout_path.empty()) {
    const int fd = open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) dup2(fd, 1);
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execv(args[0], args.data());
  std::perror("execv");
  _exit(127);
}

int WaitFor(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  return status;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

}  // namespace stagefrontier::testing
