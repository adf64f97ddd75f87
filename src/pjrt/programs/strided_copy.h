// pjrt/programs/strided_copy.h — compact copies made on the device by a small
// XLA program: of strided memory XLA cannot view (steps, broadcasts, negative
// strides, misaligned starts), and of Arrays in a non-row-major layout.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "pjrt/array.h"
#include "pjrt/stream_order.h"

namespace cuxla::pjrt {

// Strided data on a device: element (i_0, ..., i_n) is at element offset
// sum(i_k * strides[k]) from `data`.
struct StridedTensor {
  void* data;
  DType dtype;
  std::span<const int64_t> dims;
  std::span<const int64_t> strides;  // in elements
  // CUDA: what the copy, a program, waits for before it reads the data
  // (pjrt/stream_order.h).
  ReadOrder order;
};

// A compact row-major copy of `tensor` on `device`. The source memory must
// stay valid until `release(data, release_arg)` is called: exactly once, in
// every case, once the copy has read it or failed (possibly on another
// thread). Data not aligned to its element size is a BufferError-kind Error.
Array CopyStrided(const std::shared_ptr<const ClientState>& state, const Device& device,
                  const StridedTensor& tensor, void (*release)(void* data, void* arg),
                  void* release_arg);

// `array` laid out row-major: itself when it already is, else a device copy.
// (Plugins execute and read back views as if they were row-major, whatever
// layout the view was made with.)
Array RowMajor(const Array& array);

}  // namespace cuxla::pjrt
