// pjrt/array.h — cuxla::Array: one PJRT buffer on one device, with its dtype,
// shape and layout; owned, or a view of memory owned elsewhere.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cuda/driver.h"
#include "pjrt/api.h"
#include "pjrt/client_state.h"
#include "pjrt/dtype.h"
#include "pjrt/stream_order.h"

namespace cuxla {

// Host data to copy to a device: a pointer valid for the duration of the copy.
struct HostBuffer {
  const void* data = nullptr;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> dims;
  std::vector<int64_t> byte_strides;  // empty: C-contiguous
};

// Memory owned elsewhere, to wrap as an Array without copying.
struct DeviceView {
  void* data = nullptr;  // the first element; aligned as the platform needs
  DType dtype = DType::kFloat32;
  std::vector<int64_t> dims;
  std::vector<int64_t> minor_to_major;  // empty: row-major
  // Called once by PJRT after the view is deleted and every computation
  // using it has finished; may run on any thread. Null: nothing to release.
  void (*on_delete)(void* data, void* arg) = nullptr;
  void* on_delete_arg = nullptr;
  // CUDA: what its readers wait for (pjrt/stream_order.h): PJRT makes every
  // use wait for the ready stream; every reader but a program on the compute
  // stream waits for the pending writes, which PJRT does not know of.
  pjrt::ReadOrder order;
};

// What an Array is, when its maker knows it (no PJRT queries needed).
struct ArrayShape {
  DType dtype;
  std::vector<int64_t> dims;
  std::vector<int64_t> minor_to_major;  // empty: row-major
};

class Array {
 public:
  // Takes ownership of `buffer`, made by the client of `state`; asks PJRT
  // for its dtype, shape, layout and device.
  Array(std::shared_ptr<const ClientState> state, pjrt::BufferPtr buffer);
  // The same when the caller knows them: `device` must be one of `state`'s.
  Array(std::shared_ptr<const ClientState> state, pjrt::BufferPtr buffer, ArrayShape shape,
        const Device& device, bool is_view);
  static Array FromHost(std::shared_ptr<const ClientState> state, const HostBuffer& host,
                        const Device& device);
  // Wraps `view` on `device`. If PJRT refuses, view.on_delete is not called:
  // the caller still owns the memory.
  static Array CreateView(std::shared_ptr<const ClientState> state, const DeviceView& view,
                          const Device& device);

  DType dtype() const noexcept { return dtype_; }
  const std::vector<int64_t>& dims() const noexcept { return dims_; }
  // Minor-to-major dimension order ({rank-1, ..., 0} is row-major).
  const std::vector<int64_t>& layout() const noexcept { return layout_; }
  bool is_row_major() const noexcept;
  const Device& device() const noexcept { return *device_; }
  bool is_view() const noexcept { return is_view_; }
  int64_t size() const noexcept;    // elements
  int64_t nbytes() const noexcept;  // size() * element size

  // Copies to `dst` in row-major order, blocking; dst_size must be nbytes().
  void CopyToHost(void* dst, size_t dst_size) const;
  void BlockUntilReady() const;
  // A copy on `device` (of this client: on the device; of another: through the host).
  Array CopyToDevice(const ClientState& target_state, std::shared_ptr<const ClientState> owner,
                     const Device& device) const;
  // The device address of the data (for identity checks and interop).
  uintptr_t UnsafeBufferPointer() const;
  // CUDA: makes `stream` wait, on the device, until the data is written.
  void WaitUntilReadyOnStream(intptr_t stream) const;

  // Drops this Array's hold on the buffer; the memory goes when no external
  // reference holds it either. Idempotent.
  void Delete() noexcept { buffer_.reset(); }
  bool is_deleted() const noexcept { return buffer_ == nullptr; }
  // The live buffer; throws a RuntimeError-kind Error after Delete().
  PJRT_Buffer* buffer() const;
  // The same, held: it stays alive while the result does.
  std::shared_ptr<PJRT_Buffer> shared_buffer() const;
  const std::shared_ptr<const ClientState>& state() const noexcept { return state_; }

  // A hold on the device memory for another framework (DLPack export): the
  // buffer stays alive, marked externally referenced, until this is destroyed,
  // whatever happens to the Array.
  class ExternalReference {
   public:
    explicit ExternalReference(const Array& array);
    ~ExternalReference();
    ExternalReference(const ExternalReference&) = delete;
    ExternalReference& operator=(const ExternalReference&) = delete;
    void* data() const noexcept { return data_; }

   private:
    std::shared_ptr<const ClientState> state_;  // destroyed after buffer_
    std::shared_ptr<PJRT_Buffer> buffer_;
    void* data_ = nullptr;
  };

 private:
  std::shared_ptr<const ClientState> state_;  // declared first: destroyed after buffer_
  std::shared_ptr<PJRT_Buffer> buffer_;       // shared with ExternalReferences
  DType dtype_;
  std::vector<int64_t> dims_;
  std::vector<int64_t> layout_;
  const Device* device_;  // points into state_->devices
  bool is_view_ = false;
  std::shared_ptr<const cuda::StreamMarker> pending_writes_;  // its DeviceView's order.pending_writes
};

}  // namespace cuxla
