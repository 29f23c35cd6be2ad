// Replays a fuzz target's corpus as a normal test (no libFuzzer needed), then feeds it
// deterministic mutations of every corpus file: bit flips, byte overwrites with boundary
// values, truncations. Usage: fuzz_replay CORPUS_DIR [MUTATIONS_PER_FILE]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {
void Run(const std::string& bytes) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR [MUTATIONS_PER_FILE]\n", argv[0]);
    return 2;
  }
  const int mutations = argc > 2 ? std::atoi(argv[2]) : 2000;
  std::vector<std::string> corpus;
  for (const auto& e : std::filesystem::directory_iterator(argv[1])) {
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    corpus.push_back(ss.str());
  }
  if (corpus.empty()) {
    std::fprintf(stderr, "no corpus files in %s\n", argv[1]);
    return 1;
  }
  std::mt19937_64 rng(20261121);
  const uint8_t interesting[] = {0x00, 0x01, 0x02, 0x03, 0x7f, 0x80, 0xfe, 0xff};
  uint64_t runs = 0;
  for (const std::string& seed : corpus) {
    Run(seed);
    ++runs;
    for (int m = 0; m < mutations; ++m) {
      std::string b = seed;
      if (b.empty()) b.push_back('x');
      const int edits = 1 + static_cast<int>(rng() % 8);
      for (int e = 0; e < edits; ++e) {
        const size_t at = rng() % b.size();
        switch (rng() % 4) {
          case 0:
            b[at] = static_cast<char>(b[at] ^ (1 << (rng() % 8)));
            break;
          case 1:
            b[at] = static_cast<char>(interesting[rng() % sizeof(interesting)]);
            break;
          case 2:  // a whole 8-byte field set to an extreme
            for (size_t k = at & ~size_t{7}; k < std::min(b.size(), (at & ~size_t{7}) + 8); ++k) {
              b[k] = static_cast<char>((rng() & 1) ? 0xff : 0x00);
            }
            break;
          default:
            if (rng() % 8 == 0) b.resize(at);
            break;
        }
        if (b.empty()) break;
      }
      Run(b);
      ++runs;
    }
  }
  std::printf("replayed %zu corpus files, %llu inputs in all\n", corpus.size(),
              static_cast<unsigned long long>(runs));
  return 0;
}
