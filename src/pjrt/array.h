// pjrt/array.h — cuxla::Array: one PJRT buffer on one device, with its dtype,
// shape and layout, owned until delete() or destruction.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "pjrt/api.h"
#include "pjrt/client.h"
#include "pjrt/dtype.h"

namespace cuxla {

class Array {
 public:
  // Takes ownership of `buffer`, made by the client of `state`.
  Array(std::shared_ptr<const ClientState> state, pjrt::BufferPtr buffer);
  static Array FromHost(std::shared_ptr<const ClientState> state, const HostBuffer& host,
                        const Device& device);

  DType dtype() const noexcept { return dtype_; }
  const std::vector<int64_t>& dims() const noexcept { return dims_; }
  // Minor-to-major dimension order ({rank-1, ..., 0} is row-major).
  const std::vector<int64_t>& layout() const noexcept { return layout_; }
  const Device& device() const noexcept { return *device_; }
  int64_t size() const noexcept;    // elements
  int64_t nbytes() const noexcept;  // size() * element size

  // Copies to `dst` in row-major order, blocking; dst_size must be nbytes().
  void CopyToHost(void* dst, size_t dst_size) const;
  void BlockUntilReady() const;
  // The device address of the data (for identity checks and interop).
  uintptr_t UnsafeBufferPointer() const;

  // Frees the buffer now; every later use raises. Idempotent.
  void Delete() noexcept { buffer_.reset(); }
  bool is_deleted() const noexcept { return buffer_ == nullptr; }
  // The live buffer; throws a RuntimeError-kind Error after Delete().
  PJRT_Buffer* buffer() const;
  const std::shared_ptr<const ClientState>& state() const noexcept { return state_; }

 private:
  std::shared_ptr<const ClientState> state_;  // declared first: destroyed after buffer_
  pjrt::BufferPtr buffer_;
  DType dtype_;
  std::vector<int64_t> dims_;
  std::vector<int64_t> layout_;
  const Device* device_;  // points into state_->devices
};

}  // namespace cuxla
