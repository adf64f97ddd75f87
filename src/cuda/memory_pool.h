// cuda/memory_pool.h — a device's default stream-ordered memory pool, the one XLA's "cuda_async" allocator draws from: allocations in a stream's order, frees, usage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace cuxla::cuda {

// Bytes the pool holds from the device (reserved) and hands out (used), now
// and at most since the peaks were last reset.
struct PoolUsage {
  uint64_t reserved = 0;
  uint64_t used = 0;
  uint64_t reserved_peak = 0;
  uint64_t used_peak = 0;
};

// `size` bytes from device `ordinal`'s default pool, usable by work queued on
// `stream` from now on. Null when the pool cannot grow by that much (out of
// memory), or when a driver call fails: `why` then says which. Never throws.
void* PoolAllocate(int ordinal, size_t size, intptr_t stream, std::string& why) noexcept;

// Gives `ptr` (from PoolAllocate) back in `stream`'s order, once the work
// queued so far on `also_used_on` (other streams that used it) is done too.
// Never throws: a failed driver call leaves the memory allocated.
void PoolFree(int ordinal, void* ptr, intptr_t stream, std::span<const intptr_t> also_used_on) noexcept;

// The pool's usage; throws a RuntimeError-kind cuxla::Error naming a failed
// driver call.
PoolUsage DefaultPoolUsage(int ordinal);

// Keeps freed memory in the pool for any later allocation, of either
// runtime, where the pool would otherwise give it back to the device at
// each synchronisation (XLA sets that when it does not preallocate).
void KeepFreedMemoryInPool(int ordinal);

// Waits for the device's work, then gives every byte the pool holds but has
// not handed out back to the device.
void TrimPool(int ordinal);

// Starts the peaks of DefaultPoolUsage again from the current usage.
void ResetPoolPeaks(int ordinal);

}  // namespace cuxla::cuda
