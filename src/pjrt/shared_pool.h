// pjrt/shared_pool.h — another runtime's CUDA allocations (PyTorch's) from the device pool a client with allocator "cuda_async" draws from: its blocks, the streams each was used on, its bytes, and failures told with both runtimes' usage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace cuxla::pjrt {

// A device's default pool as the two runtimes share it.
struct SharedPoolUsage {
  uint64_t reserved = 0;  // held from the device
  uint64_t used = 0;      // handed out, to either runtime
  uint64_t reserved_peak = 0;
  uint64_t used_peak = 0;
  uint64_t external = 0;  // of `used`, the other runtime's blocks (SharedPoolAllocate)
  uint64_t external_peak = 0;
};

// `size` bytes on device `ordinal` for the other runtime, usable by work on
// `stream` from now; null when they cannot be had, `failure` then saying why
// in a sentence (out of memory: with both runtimes' usage). Never throws.
void* SharedPoolAllocate(int ordinal, size_t size, intptr_t stream, std::string& failure) noexcept;

// A block of SharedPoolAllocate (`size` bytes) given back in `stream`'s order,
// once the work queued so far on every stream recorded for it is done too.
void SharedPoolFree(int ordinal, void* ptr, size_t size, intptr_t stream) noexcept;

// `ptr`, if it is one of SharedPoolAllocate's blocks, is used on `stream` too
// (a pointer the other runtime only wraps is its owner's to order).
void SharedPoolRecordStream(void* ptr, intptr_t stream) noexcept;

// The pool of every device SharedPoolAllocate served, or that was set to
// keep freed memory, gives what it holds unused back to the device, after
// the device's work.
void TrimSharedPools() noexcept;

// Throw a RuntimeError-kind cuxla::Error naming a failed driver call.
SharedPoolUsage GetSharedPoolUsage(int ordinal);
void ResetSharedPoolPeaks(int ordinal);  // the peaks start again from the current usage
// Freed memory stays in the pool for either runtime's next allocation until
// trimmed (XLA alone, not preallocating, gives it back at each synchronisation).
void KeepFreedMemoryInSharedPool(int ordinal);

}  // namespace cuxla::pjrt
