// python/bindings/call_views.h — the views cuxla.torch.call keeps of the
// tensors it is given: one per live tensor, reused while the tensor's memory,
// shape, strides and dtype stay the same, dropped when the tensor dies.
//
// A call on a tensor otherwise makes a PJRT view of it and lets go of it once
// the program is done (the greater part of a call's overhead:
// docs/gpu-results.md); a model's weights, passed to every call, are the same
// tensors each time. A kept view holds its tensor's memory no longer than the
// tensor does: it is dropped (and let go of once its programs are done) when
// the tensor dies, through a weak reference. All functions need the GIL.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "bindings.h"
#include "dlpack/dlpack.h"

namespace cuxla::bindings {

// What a kept view was made of: a tensor's memory and how it reads it.
struct TensorDescription {
  void* data = nullptr;
  uint64_t byte_offset = 0;
  DLDevice device{};
  DLDataType dtype{};
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // empty: compact row-major

  explicit TensorDescription(const DLTensor& tensor);
  bool Describes(const DLTensor& tensor) const noexcept;
};

// The view kept of `tensor` on `device` of `state`'s client, if `now` (the
// tensor as it is now) is still what it was made of; else null (and a view
// kept of it before is dropped).
std::shared_ptr<const Array> FindCallView(nb::handle tensor, const DLTensor& now, const ClientState& state,
                                          const Device& device);

// Whether a view of `tensor` (as `now`) is worth keeping: this very tensor,
// alive since, was seen before on this memory. A tensor made for one call
// (an input, an activation) then costs a call little more than a view made
// per call (a weak reference); keeping it (a detached alias, a weak
// reference with a callback) and dropping it at once would cost more.
bool SeenBefore(nb::handle tensor, const DLTensor& now);

// Keeps `view`, made of `tensor` as `described`, until the tensor dies or
// ForgetCallViews runs, and returns it. A tensor that takes no weak
// reference is not kept (the view is returned all the same).
std::shared_ptr<const Array> StoreCallView(nb::handle tensor, TensorDescription described, Array view);

// Drops every kept view (each let go of once its programs are done).
void ForgetCallViews();

// How many views are kept.
size_t CallViewCount();

}  // namespace cuxla::bindings
