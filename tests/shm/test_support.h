// Helpers for tests that use real files and real processes.
//
//   std::string dir = MakeTempDir();
//   pid_t pid = Spawn({RunfilePath("tests/shm/shm_writer_process"), dir, "job", "0", "100"},
//                     dir + "/out0");
//   int status = WaitFor(pid);
#ifndef STAGEFRONTIER_TESTS_SHM_TEST_SUPPORT_H_
#define STAGEFRONTIER_TESTS_SHM_TEST_SUPPORT_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace stagefrontier::testing {

// A fresh directory under $TEST_TMPDIR (or /tmp).
std::string MakeTempDir();

// Path of a data dependency, relative to the workspace root, inside the test's runfiles.
std::string RunfilePath(const std::string& relative);

// fork + exec of argv[0] with argv; stdout goes to `stdout_path` (if not empty).
pid_t Spawn(const std::vector<std::string>& argv, const std::string& stdout_path = "");

// waitpid; returns the raw status.
int WaitFor(pid_t pid);

// The whole content of a file ("" if missing).
std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& bytes);

}  // namespace stagefrontier::testing

#endif  // STAGEFRONTIER_TESTS_SHM_TEST_SUPPORT_H_
