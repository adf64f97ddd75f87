// The default CUDA memory pool: allocations in a stream's order, frees, usage; and what a machine without a GPU says.
#include <cstdint>
#include <string>

#include "base/error.h"
#include "cuda/driver.h"
#include "cuda/memory_pool.h"
#include "test_env.h"

namespace cuxla {
namespace {

using test::Contains;
using test::ThrownError;

TEST(MemoryPoolTest, WithoutAGpuAllocationIsNullAndSaysWhy) {
  if (cuda::Driver().available) GTEST_SKIP() << "a machine with a GPU";
  std::string why;
  EXPECT_EQ(cuda::PoolAllocate(0, 1 << 20, 0, why), nullptr);
  EXPECT_TRUE(Contains(why, "CUDA driver unavailable")) << why;
  auto error = ThrownError([] { cuda::DefaultPoolUsage(0); });
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->kind(), ErrorKind::kRuntime);
}

TEST(MemoryPoolTest, FreedMemoryStaysInThePoolUntilTrimmed) {
  if (!cuda::Driver().available) GTEST_SKIP() << "needs a CUDA GPU";
  constexpr size_t kSize = 256 << 20;
  cuda::KeepFreedMemoryInPool(0);
  const cuda::PoolUsage before = cuda::DefaultPoolUsage(0);
  std::string why;
  void* ptr = cuda::PoolAllocate(0, kSize, /*legacy default stream*/ 0, why);
  ASSERT_NE(ptr, nullptr) << why;
  const cuda::PoolUsage held = cuda::DefaultPoolUsage(0);
  EXPECT_GE(held.used, before.used + kSize);
  EXPECT_GE(held.used_peak, held.used);
  cuda::PoolFree(0, ptr, 0, {});
  cuda::StreamMarker(0, 0, 0).Wait();  // a synchronisation: a pool that keeps nothing gives memory back here
  const cuda::PoolUsage kept = cuda::DefaultPoolUsage(0);
  EXPECT_EQ(kept.used, before.used);
  EXPECT_GE(kept.reserved, kept.used + kSize);
  cuda::TrimPool(0);
  const cuda::PoolUsage trimmed = cuda::DefaultPoolUsage(0);
  EXPECT_LT(trimmed.reserved, kept.reserved - kSize / 2);
}

TEST(MemoryPoolTest, AnImpossibleAllocationIsOutOfMemory) {
  if (!cuda::Driver().available) GTEST_SKIP() << "needs a CUDA GPU";
  std::string why;
  // 1 TiB: more than any card has, within what an allocation may ask (a
  // request past the address space can be refused as an invalid value).
  EXPECT_EQ(cuda::PoolAllocate(0, size_t{1} << 40, 0, why), nullptr);
  EXPECT_EQ(why, "out of memory");
}

TEST(MemoryPoolTest, ANonexistentDeviceIsAValueError) {
  if (!cuda::Driver().available) GTEST_SKIP() << "needs a CUDA GPU";
  auto error = ThrownError([] { cuda::DefaultPoolUsage(1 << 20); });
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->kind(), ErrorKind::kValue);
}

}  // namespace
}  // namespace cuxla
