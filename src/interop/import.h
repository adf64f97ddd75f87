// interop/import.h — DLPack tensors from any producer -> cuxla Arrays: a
// zero-copy view when XLA can use the memory as it is, else one compact copy
// on the device, as the copy policy allows.
#pragma once

#include <cstdint>
#include <memory>

#include "dlpack/dlpack.h"
#include "pjrt/array.h"
#include "pjrt/stream_order.h"

namespace cuxla::interop {

// The Python array API's `copy`: None, False, True.
enum class CopyPolicy { kIfNeeded, kNever, kAlways };

struct ImportOptions {
  // Where the Array goes; null: the tensor's own device. A device of another
  // client (another platform) is reached through the host.
  std::shared_ptr<const ClientState> target_state;
  const Device* target_device = nullptr;
  CopyPolicy copy = CopyPolicy::kIfNeeded;
  // CUDA: how XLA is ordered after the producer's pending writes
  // (pjrt/stream_order.h). A row-major view under `only_copies_wait` does not
  // wait; a copy — made now, or later from a view in another layout — does.
  pjrt::ImportOrder order;
};

// Imports `tensor` into `state`'s client (whose platform must match the
// tensor's device type), on the device whose local_hardware_id is the
// tensor's device id. Takes ownership: the tensor's deleter runs exactly
// once, in every case — after the last XLA use of a view, once a copy has
// read it, or on error. Errors are BufferError-kind for what cannot be
// imported as asked, naming the offending values.
Array ImportDLPack(const std::shared_ptr<const ClientState>& state,
                   DLManagedTensorVersioned* tensor, const ImportOptions& options);
// The same for a legacy (DLPack 0.x, unversioned) tensor.
Array ImportDLPack(const std::shared_ptr<const ClientState>& state, DLManagedTensor* tensor,
                   const ImportOptions& options);

}  // namespace cuxla::interop
