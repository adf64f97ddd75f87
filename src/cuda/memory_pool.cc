#include "cuda/memory_pool.h"

#include <limits>

#include "base/error.h"
#include "cuda/driver.h"
#include "cuda/driver_calls.h"

namespace cuxla::cuda {
namespace {

CUmemoryPool DefaultPool(const DeviceContext& context) {
  CUmemoryPool pool = nullptr;
  if (CUresult rc = context.cu.cuDeviceGetDefaultMemPool(&pool, context.device)) Fail("cuDeviceGetDefaultMemPool", rc);
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
        context.cu.cuMemAllocFromPoolAsync(&ptr, size, DefaultPool(context), reinterpret_cast<CUstream>(stream));
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
    for (intptr_t other : also_used_on) const StreamMarker waited(ordinal, other, stream);
    context.cu.cuMemFreeAsync(reinterpret_cast<CUdeviceptr>(ptr), reinterpret_cast<CUstream>(stream));
  } catch (...) {
    // A free has no one to tell: the memory stays allocated rather than reused too soon.
  }
}

PoolUsage DefaultPoolUsage(int ordinal) {
  const DeviceContext context(ordinal);
  const CUmemoryPool pool = DefaultPool(context);
  return {Attribute(context, pool, kPoolReservedCurrent), Attribute(context, pool, kPoolUsedCurrent),
          Attribute(context, pool, kPoolReservedHigh), Attribute(context, pool, kPoolUsedHigh)};
}

void KeepFreedMemoryInPool(int ordinal) {
  const DeviceContext context(ordinal);
  SetAttribute(context, DefaultPool(context), kPoolReleaseThreshold, std::numeric_limits<uint64_t>::max());
}

void TrimPool(int ordinal) {
  const DeviceContext context(ordinal);
  // Memory whose frees are still queued cannot go back: let them happen first.
  if (CUresult rc = context.cu.cuCtxSynchronize()) Fail("cuCtxSynchronize", rc);
  if (CUresult rc = context.cu.cuMemPoolTrimTo(DefaultPool(context), 0)) Fail("cuMemPoolTrimTo", rc);
}

void ResetPoolPeaks(int ordinal) {
  const DeviceContext context(ordinal);
  const CUmemoryPool pool = DefaultPool(context);
  // The driver takes only 0 for a peak: the peak then starts again from the current value.
  SetAttribute(context, pool, kPoolReservedHigh, 0);
  SetAttribute(context, pool, kPoolUsedHigh, 0);
}

}  // namespace cuxla::cuda
