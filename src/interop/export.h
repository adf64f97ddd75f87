// interop/export.h — cuxla Arrays -> DLPack tensors aliasing the XLA buffer,
// valid until their deleter runs, whatever happens to the Array; and the
// Arrays behind the live ones.
#pragma once

#include <cstdint>
#include <optional>

#include "dlpack/dlpack.h"
#include "pjrt/array.h"

namespace cuxla::interop {

// Orders the consumer after XLA's writes to `array`. CUDA: `consumer_stream`
// waits for them on the device (nullopt: no ordering, the consumer's
// responsibility); CPU: waits on the host until the buffer is ready.
void OrderConsumer(const Array& array, std::optional<intptr_t> consumer_stream);

// A DLPack 1.x tensor of `array`'s memory (no copy); the caller owns it and
// must call its deleter once. Make it after OrderConsumer.
DLManagedTensorVersioned* ExportDLPack(const Array& array);
// The same as a legacy (unversioned) tensor, for consumers older than DLPack 1.0.
DLManagedTensor* ExportLegacyDLPack(const Array& array);

// Whether `a` and `b` read the same memory the same way: address, byte
// offset, device, dtype, shape and strides (both absent, or equal).
bool SameReading(const DLTensor& a, const DLTensor& b) noexcept;

// The Array a live export of one of XLA's own buffers was made of, when
// `tensor` reads exactly its memory (its address, dtype, shape and strides)
// on `device` of `state`'s client; else nullopt. A tensor handed back (an
// activation saved for the backward) is then read through its buffer, not
// a new view. Callable from any thread.
std::optional<Array> LiveExportOf(const DLTensor& tensor, const ClientState& state, const Device& device);

// The DLPack device of `device`, and of `array`'s.
DLDevice DLDeviceOf(const Device& device);
DLDevice DLDeviceOf(const Array& array);

}  // namespace cuxla::interop
