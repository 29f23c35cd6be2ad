// Files for tests: a fresh temporary directory and a whole file's bytes.
//
//   const std::string dir = stagefrontier::testing::TempDir("sf_journal");
//   std::string bytes = stagefrontier::testing::ReadAll(dir + "/job.journal");
#ifndef STAGEFRONTIER_TESTS_TEST_FILES_H_
#define STAGEFRONTIER_TESTS_TEST_FILES_H_

#include <stdlib.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace stagefrontier::testing {

// A new directory /tmp/<prefix>_XXXXXX (left for the operator to inspect after a failure).
inline std::string TempDir(const std::string& prefix) {
  std::string path = "/tmp/" + prefix + "_XXXXXX";
  if (mkdtemp(path.data()) == nullptr) throw std::runtime_error("mkdtemp " + path + " failed");
  return path;
}

// The file's bytes ("" when it cannot be read).
inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace stagefrontier::testing

#endif  // STAGEFRONTIER_TESTS_TEST_FILES_H_
