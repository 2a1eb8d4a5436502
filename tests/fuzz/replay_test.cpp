// The normal suite's side of a fuzz target (docs/fuzzing.md): runs its LLVMFuzzerTestOneInput,
// compiled by the suite's own compiler and sanitizers, over every input of its committed seed
// corpus (tests/fuzz/corpus/<target>/) and every input that once crashed it
// (tests/fuzz/regressions/<target>/, kept there with the fix). The target's oracle aborts on a
// failure, which fails this test; a target that ran no input fails too.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

std::vector<std::filesystem::path> inputs_in(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return out;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.is_regular_file()) out.push_back(entry.path());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(FuzzReplay, SeedCorpusAndRegressions) {
  if (LLVMFuzzerInitialize != nullptr) {
    int argc = 0;
    char** argv = nullptr;
    LLVMFuzzerInitialize(&argc, &argv);
  }
  std::size_t ran = 0;
  for (const char* dir : {FUZZ_CORPUS_DIR, FUZZ_REGRESSION_DIR}) {
    for (const auto& file : inputs_in(dir)) {
      SCOPED_TRACE(file.string());
      std::ifstream in(file, std::ios::binary);
      ASSERT_TRUE(in) << "cannot read " << file;
      const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      EXPECT_EQ(LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()), 0);
      ++ran;
    }
  }
  EXPECT_GT(ran, 0U) << "no input in " << FUZZ_CORPUS_DIR;
}

}  // namespace
