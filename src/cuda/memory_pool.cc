#include "cuda/memory_pool.h"

#include <array>
#include <atomic>
#include <limits>

#include "base/error.h"
#include "cuda/driver.h"
#include "cuda/driver_calls.h"

namespace cuxla::cuda {
namespace {

// The default pools of the first devices, found once (an allocation needs its pool).
std::array<std::atomic<CUmemoryPool>, 64> known_pools{};

// The device's default pool; throws a RuntimeError-kind cuxla::Error where
// the driver has no stream-ordered pools.
CUmemoryPool DefaultPool(const DeviceContext& context, int ordinal) {
  const bool cached = ordinal < static_cast<int>(known_pools.size());
  if (cached)
    if (CUmemoryPool pool = known_pools[ordinal].load(std::memory_order_acquire)) return pool;
  if (!context.cu.HasPools())
    throw Error(ErrorKind::kRuntime, "the CUDA driver has no stream-ordered memory pools (CUDA 11.2 and later)");
  CUmemoryPool pool = nullptr;
  if (CUresult rc = context.cu.cuDeviceGetDefaultMemPool(&pool, context.device)) Fail("cuDeviceGetDefaultMemPool", rc);
  if (cached) known_pools[ordinal].store(pool, std::memory_order_release);
  return pool;
}

uint64_t Attribute(const DeviceContext& context, CUmemoryPool pool, PoolAttribute attribute) {
  uint64_t value = 0;
  if (CUresult rc = context.cu.cuMemPoolGetAttribute(pool, attribute, &value)) Fail("cuMemPoolGetAttribute", rc);
  return value;
}

void SetAttribute(const DeviceContext& context, CUmemoryPool pool, PoolAttribute attribute, uint64_t value) {
  if (CUresult rc = context.cu.cuMemPoolSetAttribute(pool, attribute, &value)) Fail("cuMemPoolSetAttribute", rc);
}

}  // namespace

void* PoolAllocate(int ordinal, size_t size, intptr_t stream, std::string& why) noexcept {
  try {
    const DeviceContext context(ordinal);
    CUdeviceptr ptr = 0;
    const CUresult rc =
        context.cu.cuMemAllocFromPoolAsync(&ptr, size, DefaultPool(context, ordinal), reinterpret_cast<CUstream>(stream));
    if (rc == kOutOfMemory) {
      why = "out of memory";
    } else if (rc != 0) {
      why = "cuMemAllocFromPoolAsync failed with CUresult " + std::to_string(rc);
    }
    return rc == 0 ? reinterpret_cast<void*>(ptr) : nullptr;
  } catch (const std::exception& e) {
    why = e.what();
    return nullptr;
  }
}

void PoolFree(int ordinal, void* ptr, intptr_t stream, std::span<const intptr_t> also_used_on) noexcept {
  try {
    const DeviceContext context(ordinal);
    for (intptr_t other : also_used_on)
      if (other != stream) const StreamMarker waited(ordinal, other, stream);
    context.cu.cuMemFreeAsync(reinterpret_cast<CUdeviceptr>(ptr), reinterpret_cast<CUstream>(stream));
  } catch (...) {
    // A free has no one to tell: the memory stays allocated rather than reused too soon.
  }
}

PoolUsage DefaultPoolUsage(int ordinal) {
  const DeviceContext context(ordinal);
  const CUmemoryPool pool = DefaultPool(context, ordinal);
  return {Attribute(context, pool, kPoolReservedCurrent), Attribute(context, pool, kPoolUsedCurrent),
          Attribute(context, pool, kPoolReservedHigh), Attribute(context, pool, kPoolUsedHigh)};
}

void KeepFreedMemoryInPool(int ordinal) {
  const DeviceContext context(ordinal);
  SetAttribute(context, DefaultPool(context, ordinal), kPoolReleaseThreshold, std::numeric_limits<uint64_t>::max());
}

void TrimPool(int ordinal) {
  const DeviceContext context(ordinal);
  // Memory whose frees are still queued cannot go back: let them happen first.
  if (CUresult rc = context.cu.cuCtxSynchronize()) Fail("cuCtxSynchronize", rc);
  if (CUresult rc = context.cu.cuMemPoolTrimTo(DefaultPool(context, ordinal), 0)) Fail("cuMemPoolTrimTo", rc);
}

void ResetPoolPeaks(int ordinal) {
  const DeviceContext context(ordinal);
  const CUmemoryPool pool = DefaultPool(context, ordinal);
  // The driver takes only 0 for a peak: the peak then starts again from the current value.
  SetAttribute(context, pool, kPoolReservedHigh, 0);
  SetAttribute(context, pool, kPoolUsedHigh, 0);
}

}  // namespace cuxla::cuda
