// Executables: compiling StableHLO text, running it on Arrays, the compile
// cache, and the checks on arguments.
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "pjrt/disk_cache.h"
#include "test_env.h"

namespace cuxla {
namespace {

using test::Contains;
using test::Download;
using test::TestClient;
using test::ThrownError;
using test::UploadFloats;

constexpr const char* kAdd = R"(
func.func public @main(%x: tensor<2x3xf32>, %y: tensor<2x3xf32>) -> (tensor<2x3xf32>) {
  %0 = stablehlo.add %x, %y : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
)";

constexpr const char* kDot = R"(
func.func public @main(%x: tensor<2x3xf32>, %y: tensor<3x4xf32>) -> (tensor<2x4xf32>) {
  %0 = stablehlo.dot_general %x, %y, contracting_dims = [1] x [0]
      : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}
)";

constexpr const char* kRowSums = R"(
func.func public @main(%x: tensor<4x5xf32>) -> (tensor<4xf32>) {
  %init = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.reduce(%x init: %init) applies stablehlo.add across dimensions = [1]
      : (tensor<4x5xf32>, tensor<f32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
)";

constexpr const char* kSumAndProduct = R"(
func.func public @main(%x: tensor<2x3xf32>, %y: tensor<2x3xf32>)
    -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %0 = stablehlo.add %x, %y : tensor<2x3xf32>
  %1 = stablehlo.multiply %x, %y : tensor<2x3xf32>
  return %0, %1 : tensor<2x3xf32>, tensor<2x3xf32>
}
)";

std::shared_ptr<const Executable> Compile(std::string_view program) {
  return TestClient()->Compile(program, TestClient()->devices().front());
}

std::vector<Array> Execute(const Executable& executable, std::vector<const Array*> args) {
  return executable.Execute(args);
}

// 0, 1, 2, ... : small integers, exact in every float format a dot may use.
std::vector<float> Iota(size_t count, float start = 0.0f) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = start + static_cast<float>(i);
  return values;
}

TEST(ExecutableTest, AddsTwoArrays) {
  const Array x = UploadFloats(*TestClient(), Iota(6), {2, 3});
  const Array y = UploadFloats(*TestClient(), Iota(6, 10.0f), {2, 3});
  const std::vector<Array> out = Execute(*Compile(kAdd), {&x, &y});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].dtype(), DType::kFloat32);
  EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Download<float>(out[0]), (std::vector<float>{10, 12, 14, 16, 18, 20}));
}

TEST(ExecutableTest, MultipliesMatrices) {
  // x = [[0 1 2] [3 4 5]], y = [[0 1 2 3] [4 5 6 7] [8 9 10 11]]
  const Array x = UploadFloats(*TestClient(), Iota(6), {2, 3});
  const Array y = UploadFloats(*TestClient(), Iota(12), {3, 4});
  const std::vector<Array> out = Execute(*Compile(kDot), {&x, &y});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(Download<float>(out[0]), (std::vector<float>{20, 23, 26, 29, 56, 68, 80, 92}));
}

TEST(ExecutableTest, SumsRows) {
  const Array x = UploadFloats(*TestClient(), Iota(20), {4, 5});
  const std::vector<Array> out = Execute(*Compile(kRowSums), {&x});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{4}));
  EXPECT_EQ(Download<float>(out[0]), (std::vector<float>{10, 35, 60, 85}));
}

TEST(ExecutableTest, ReturnsEveryOutputInOrder) {
  const Array x = UploadFloats(*TestClient(), Iota(6, 1.0f), {2, 3});
  const Array y = UploadFloats(*TestClient(), Iota(6, 2.0f), {2, 3});
  const std::vector<Array> out = Execute(*Compile(kSumAndProduct), {&x, &y});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(Download<float>(out[0]), (std::vector<float>{3, 5, 7, 9, 11, 13}));
  EXPECT_EQ(Download<float>(out[1]), (std::vector<float>{2, 6, 12, 20, 30, 42}));
}

TEST(ExecutableTest, OutputsLiveOnTheExecutablesDevice) {
  const auto executable = Compile(kAdd);
  EXPECT_EQ(&executable->device(), &TestClient()->devices().front());
  const Array x = UploadFloats(*TestClient(), Iota(6), {2, 3});
  const std::vector<Array> out = Execute(*executable, {&x, &x});
  ASSERT_EQ(out.size(), 1u);
  out[0].BlockUntilReady();
  EXPECT_EQ(&out[0].device(), &executable->device());
}

TEST(ExecutableTest, ReportsOutputCount) {
  EXPECT_EQ(Compile(kDot)->num_outputs(), 1u);
  EXPECT_EQ(Compile(kSumAndProduct)->num_outputs(), 2u);
}

TEST(ExecutableTest, ReportsParameterDTypesAndDims) {
  const auto& parameters = Compile(kDot)->parameters();
  ASSERT_EQ(parameters.size(), 2u);
  EXPECT_EQ(parameters[0].dtype, DType::kFloat32);
  EXPECT_EQ(parameters[0].dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(parameters[1].dtype, DType::kFloat32);
  EXPECT_EQ(parameters[1].dims, (std::vector<int64_t>{3, 4}));
}

TEST(ExecutableTest, CompilingTheSameProgramTwiceGivesTheSameExecutable) {
  EXPECT_EQ(Compile(kAdd).get(), Compile(kAdd).get());
  EXPECT_NE(Compile(kAdd).get(), Compile(kSumAndProduct).get());
}

TEST(ExecutableTest, TheCacheCompilesTwoProgramsAtOnce) {
  // Each compile waits (up to 10 s) for the other to begin: under a lock
  // held through compiles, the first would wait alone and time out.
  pjrt::ExecutableCache cache;
  std::mutex mutex;
  std::condition_variable changed;
  int started = 0;
  auto compile_meeting_the_other = [&](bool& met) {
    return [&] {
      std::unique_lock<std::mutex> lock(mutex);
      ++started;
      changed.notify_all();
      met = changed.wait_for(lock, std::chrono::seconds(10), [&] { return started == 2; });
      return std::shared_ptr<const Executable>();
    };
  };
  bool first_met = false, second_met = false;
  std::thread first([&] { cache.Get("first", {}, compile_meeting_the_other(first_met)); });
  std::thread second([&] { cache.Get("second", {}, compile_meeting_the_other(second_met)); });
  first.join();
  second.join();
  EXPECT_TRUE(first_met);
  EXPECT_TRUE(second_met);
}

TEST(ExecutableTest, InvalidMlirThrowsTheCompilersMessage) {
  auto error = ThrownError([] { Compile("this is not MLIR"); });
  ASSERT_TRUE(error);
  const std::string message = error->what();
  EXPECT_GT(message.size(), std::string("PJRT_Client_Compile: ").size());
  EXPECT_EQ(message.rfind("PJRT_Client_Compile", 0), 0u) << message;
}

TEST(ExecutableTest, EmptyProgramIsACompileError) {
  auto error = ThrownError([] { Compile(""); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->kind(), ErrorKind::kCompile);
}

TEST(ExecutableTest, WrongArgumentCountThrowsValueError) {
  const Array x = UploadFloats(*TestClient(), Iota(6), {2, 3});
  const auto executable = Compile(kAdd);
  auto error = ThrownError([&] { Execute(*executable, {&x}); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->kind(), ErrorKind::kValue);
  EXPECT_TRUE(Contains(error->what(), "2 arguments"));
  EXPECT_TRUE(Contains(error->what(), "1 given"));
}

TEST(ExecutableTest, WrongShapeThrowsValueErrorNamingTheArgument) {
  const Array x = UploadFloats(*TestClient(), Iota(6), {2, 3});
  const Array transposed = UploadFloats(*TestClient(), Iota(6), {3, 2});
  const auto executable = Compile(kAdd);
  auto error = ThrownError([&] { Execute(*executable, {&x, &transposed}); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->kind(), ErrorKind::kValue);
  EXPECT_TRUE(Contains(error->what(), "argument 1"));
  EXPECT_TRUE(Contains(error->what(), "(3, 2)"));
  EXPECT_TRUE(Contains(error->what(), "(2, 3)"));
}

TEST(ExecutableTest, WrongDTypeThrowsValueErrorNamingTheArgument) {
  Client& client = *TestClient();
  const Array ints = test::Upload(client, std::vector<int32_t>(6), {2, 3}, DType::kInt32,
                                  client.devices().front());
  const Array x = UploadFloats(client, Iota(6), {2, 3});
  const auto executable = Compile(kAdd);
  auto error = ThrownError([&] { Execute(*executable, {&ints, &x}); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->kind(), ErrorKind::kValue);
  EXPECT_TRUE(Contains(error->what(), "argument 0"));
  EXPECT_TRUE(Contains(error->what(), "int32"));
  EXPECT_TRUE(Contains(error->what(), "float32"));
}

TEST(ExecutableTest, DeletedArgumentThrowsRuntimeError) {
  const Array x = UploadFloats(*TestClient(), Iota(6), {2, 3});
  Array deleted = UploadFloats(*TestClient(), Iota(6), {2, 3});
  deleted.Delete();
  const auto executable = Compile(kAdd);
  auto error = ThrownError([&] { Execute(*executable, {&x, &deleted}); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->kind(), ErrorKind::kRuntime);
  EXPECT_TRUE(Contains(error->what(), "deleted"));
}

// A fresh folder for one test's disk cache, CUXLA_CACHE_DIR pointing at it
// while the test runs.
constexpr uint64_t kTwoGiB = uint64_t{2} << 30;

class CacheDir {
 public:
  CacheDir() : path_(std::filesystem::temp_directory_path() /
                     ("cuxla-cache-test-" + std::to_string(::getpid()) + "-" + std::to_string(serial_++))) {
    std::filesystem::remove_all(path_);
    const char* old = std::getenv("CUXLA_CACHE_DIR");
    if (old != nullptr) old_ = old;
    setenv("CUXLA_CACHE_DIR", path_.c_str(), 1);
  }
  ~CacheDir() {
    if (old_) setenv("CUXLA_CACHE_DIR", old_->c_str(), 1);
    else unsetenv("CUXLA_CACHE_DIR");
    std::filesystem::remove_all(path_);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  static inline int serial_ = 0;
  std::filesystem::path path_;
  std::optional<std::string> old_;
};

TEST(DiskCacheTest, ASecondClientLoadsTheProgramFromDisk) {
  const CacheDir dir;
  const std::shared_ptr<const pjrt::Plugin> plugin = pjrt::Plugin::Load(test::PluginPath());
  if (!plugin->api().Has(&PJRT_Api::PJRT_Executable_Serialize)) GTEST_SKIP() << "the plugin cannot serialize";
  const std::string program = std::string(kAdd) + "// disk cache test\n";
  auto first = Client::Create(plugin, test::TestPlatform(), {});
  const pjrt::DiskCacheStats before = pjrt::GetDiskCacheStats();
  first->Compile(program, first->devices().front());
  const pjrt::DiskCacheStats compiled = pjrt::GetDiskCacheStats();
  EXPECT_EQ(compiled.misses, before.misses + 1);
  if (compiled.stores == before.stores) GTEST_SKIP() << "the plugin did not serialize this executable";
  auto second = Client::Create(plugin, test::TestPlatform(), {});
  auto executable = second->Compile(program, second->devices().front());
  EXPECT_EQ(pjrt::GetDiskCacheStats().hits, compiled.hits + 1);
  const Array x = UploadFloats(*second, Iota(6), {2, 3});
  const Array y = UploadFloats(*second, Iota(6, 10.0f), {2, 3});
  EXPECT_EQ(Download<float>(executable->Execute(std::vector<const Array*>{&x, &y})[0]),
            (std::vector<float>{10, 12, 14, 16, 18, 20}));
}

TEST(DiskCacheTest, EntriesComeBackOnlyWholeAndUnderTheirOwnKey) {
  const CacheDir dir;
  const std::string d = dir.path().string();
  pjrt::StoreEntry(d, "key a", "payload of a", kTwoGiB);
  pjrt::StoreEntry(d, "key b", "payload of b", kTwoGiB);
  EXPECT_EQ(pjrt::LoadEntry(d, "key a"), "payload of a");
  EXPECT_EQ(pjrt::LoadEntry(d, "key c"), std::nullopt);
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(d)) files.push_back(e.path());
  ASSERT_EQ(files.size(), 2u);
  // b's bytes under a's name (and the reverse): neither loads.
  std::filesystem::rename(files[0], dir.path() / "x");
  std::filesystem::rename(files[1], files[0]);
  std::filesystem::rename(dir.path() / "x", files[1]);
  EXPECT_EQ(pjrt::LoadEntry(d, "key a"), std::nullopt);
  EXPECT_EQ(pjrt::LoadEntry(d, "key b"), std::nullopt);
  // Truncated: nothing.
  for (const auto& f : files) std::filesystem::remove(f);
  pjrt::StoreEntry(d, "key c", "payload of c", kTwoGiB);
  for (const auto& e : std::filesystem::directory_iterator(d)) std::filesystem::resize_file(e.path(), 10);
  EXPECT_EQ(pjrt::LoadEntry(d, "key c"), std::nullopt);
}

TEST(DiskCacheTest, TheSizeBoundIsANumberOfBytes) {
  const CacheDir dir;
  EXPECT_EQ(pjrt::DiskCacheMaxBytes(), uint64_t{2} << 30);
  for (const char* bad : {"2G", "-1"}) {
    setenv("CUXLA_CACHE_MAX_BYTES", bad, 1);
    // A program of its own: one compiled before is found in the client's cache, not on disk.
    auto error = ThrownError([&] { Compile(std::string(kAdd) + "// bound " + bad + "\n"); });
    ASSERT_TRUE(error.has_value()) << bad;
    EXPECT_EQ(error->kind(), ErrorKind::kValue);
    EXPECT_TRUE(Contains(error->what(), std::string("CUXLA_CACHE_MAX_BYTES='") + bad + "' is not")) << error->what();
  }
  setenv("CUXLA_CACHE_MAX_BYTES", "4096", 1);
  EXPECT_EQ(pjrt::DiskCacheMaxBytes(), 4096u);
  unsetenv("CUXLA_CACHE_MAX_BYTES");
}

TEST(DiskCacheTest, TheSizeBoundDropsTheOldestEntries) {
  const CacheDir dir;
  const std::string d = dir.path().string();
  const std::string payload(100, 'p');
  for (const char* key : {"one", "two", "three", "four"}) {
    pjrt::StoreEntry(d, key, payload, 300);
  }
  uint64_t total = 0;
  for (const auto& e : std::filesystem::directory_iterator(d)) total += e.file_size();
  EXPECT_LE(total, 300u);
  EXPECT_EQ(pjrt::LoadEntry(d, "four"), payload);  // the newest stays
  EXPECT_EQ(pjrt::LoadEntry(d, "one"), std::nullopt);
}

}  // namespace
}  // namespace cuxla
