#include "interop/import.h"

#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "interop/dtype.h"
#include "pjrt/layout.h"
#include "pjrt/programs/strided_copy.h"
#include "pjrt/text.h"

namespace cuxla::interop {
namespace {

using pjrt::AddressText;
using pjrt::CompactStrides;
using pjrt::CopyStrided;
using pjrt::IsRowMajor;
using pjrt::MinorToMajor;
using pjrt::StridedTensor;
using pjrt::TupleText;

// PJRT's on-delete callback: hands the memory back to its producer.
void CallDeleter(void* /*data*/, void* tensor) noexcept {
  auto* managed = static_cast<DLManagedTensorVersioned*>(tensor);
  if (managed->deleter != nullptr) managed->deleter(managed);
}

// Calls the deleter unless released: the owner of a tensor until a view or a
// copy takes it over.
class TensorOwner {
 public:
  explicit TensorOwner(DLManagedTensorVersioned* tensor) : tensor_(tensor) {}
  ~TensorOwner() {
    if (tensor_ != nullptr) CallDeleter(nullptr, tensor_);
  }
  DLManagedTensorVersioned* release() noexcept { return std::exchange(tensor_, nullptr); }

 private:
  DLManagedTensorVersioned* tensor_;
};

[[noreturn]] void Refuse(const std::string& why) { throw Error(ErrorKind::kBuffer, why); }

std::string DeviceText(DLDevice device) {
  switch (device.device_type) {
    case kDLCPU: return "cpu:" + std::to_string(device.device_id);
    case kDLCUDA: return "cuda:" + std::to_string(device.device_id);
    default:
      return "DLPack device type " + std::to_string(device.device_type) + " id " +
             std::to_string(device.device_id);
  }
}

// The device `tensor` lives on, in `state`'s client. Host memory is every
// CPU device's: a CPU tensor bound for another CPU device of this client
// lives there as much as on the first.
const Device& SourceDevice(const ClientState& state, DLDevice device, const ImportOptions& options) {
  const DLDeviceType expected = state.platform == Platform::kCuda ? kDLCUDA : kDLCPU;
  if (device.device_type != expected)
    Refuse("a tensor on " + DeviceText(device) + " cannot be imported into a '" + state.platform_name +
           "' client");
  if (device.device_type == kDLCPU && options.target_device != nullptr && options.target_state.get() == &state)
    return *options.target_device;
  return state.DeviceWithHardwareId(device.device_id);
}

DType TensorDType(DLDataType type) {
  if (auto dtype = FromDLDataType(type)) return *dtype;
  Refuse("unsupported DLPack dtype (code " + std::to_string(type.code) + ", bits " +
         std::to_string(type.bits) + ", lanes " + std::to_string(type.lanes) + ")");
}

// Refuses a tensor whose element count or memory reach is beyond what XLA
// sizes in 64-bit bytes (its arrays, and the int64 index arrays of a strided
// copy, must stay under 2^63 bytes; XLA aborts the process otherwise): no
// arithmetic on the tensor further down may overflow.
void CheckExtent(std::span<const int64_t> dims, std::span<const int64_t> strides) {
  constexpr int64_t kMaxElements = int64_t{1} << 58;  // x 16 bytes < 2^63
  int64_t count = 1, low = 0, high = 0, span = 0;
  bool overflow = false;
  for (size_t k = 0; k < dims.size(); ++k) {
    overflow |= __builtin_mul_overflow(count, dims[k], &count);
    if (dims[k] == 0 || strides.empty()) continue;
    int64_t reach = 0;
    overflow |= __builtin_mul_overflow(dims[k] - 1, strides[k], &reach);
    overflow |= __builtin_add_overflow(reach < 0 ? low : high, reach, reach < 0 ? &low : &high);
  }
  overflow |= __builtin_sub_overflow(high, low, &span) || __builtin_add_overflow(span, 1, &span);
  if (overflow || count > kMaxElements || span > kMaxElements)
    Refuse("DLPack tensor of shape " + TupleText(dims) + " and strides " + TupleText(strides) +
           " spans more than the 2^58 elements XLA can address");
}

// A legacy tensor wrapped as a versioned one; its deleter frees the wrapper.
struct LegacyTensor {
  DLManagedTensorVersioned versioned;
  DLManagedTensor* legacy;

  static void Delete(DLManagedTensorVersioned* self) noexcept {
    auto* wrapper = reinterpret_cast<LegacyTensor*>(self);
    if (wrapper->legacy->deleter != nullptr) wrapper->legacy->deleter(wrapper->legacy);
    delete wrapper;
  }
};
static_assert(offsetof(LegacyTensor, versioned) == 0);

}  // namespace

Array ImportDLPack(const std::shared_ptr<const ClientState>& state,
                   DLManagedTensorVersioned* tensor, const ImportOptions& options) {
  if (tensor == nullptr) throw Error(ErrorKind::kValue, "null DLPack tensor");
  TensorOwner owner(tensor);
  if (tensor->version.major != DLPACK_MAJOR_VERSION)
    Refuse("DLPack tensor of version " + std::to_string(tensor->version.major) + "." +
           std::to_string(tensor->version.minor) + ", cuxla reads major version " +
           std::to_string(DLPACK_MAJOR_VERSION));
  const DLTensor& t = tensor->dl_tensor;
  if (t.ndim < 0) Refuse("DLPack tensor with ndim " + std::to_string(t.ndim));
  if (t.ndim > 0 && t.shape == nullptr) Refuse("DLPack tensor of ndim " + std::to_string(t.ndim) + " with a null shape");
  const std::span<const int64_t> dims(t.shape, static_cast<size_t>(t.ndim));
  const std::span<const int64_t> strides(t.strides, t.strides ? dims.size() : 0);
  if (std::any_of(dims.begin(), dims.end(), [](int64_t d) { return d < 0; }))
    Refuse("DLPack tensor with a negative dimension, shape " + TupleText(dims));
  const DType dtype = TensorDType(t.dtype);
  CheckExtent(dims, strides);
  const Device& source = SourceDevice(*state, t.device, options);
  const bool to_elsewhere = options.target_device != nullptr && options.target_device != &source;
  if (to_elsewhere && options.copy == CopyPolicy::kNever)
    Refuse("the tensor is on " + DeviceText(t.device) + ", not on the requested " +
           options.target_device->platform_name + " device " + std::to_string(options.target_device->id) +
           ", and copy=False");

  const bool empty = std::find(dims.begin(), dims.end(), 0) != dims.end();
  if (!empty && t.data == nullptr) Refuse("DLPack tensor of shape " + TupleText(dims) + " has a null data pointer");
  void* data = t.data == nullptr ? nullptr : static_cast<char*>(t.data) + t.byte_offset;
  const size_t alignment = state->buffer_alignment();
  std::optional<std::vector<int64_t>> layout = MinorToMajor(dims, strides);
  const bool aligned = reinterpret_cast<uintptr_t>(data) % alignment == 0;

  std::optional<Array> array;
  if (empty) {
    // No bytes to alias: an empty buffer of the shape, and the producer's
    // tensor is released at once.
    array.emplace(Array::FromHost(state, HostBuffer{nullptr, dtype, {dims.begin(), dims.end()}, {}}, source));
  } else if (layout && aligned && options.copy != CopyPolicy::kAlways) {
    DeviceView view;
    view.data = data;
    view.dtype = dtype;
    view.dims.assign(dims.begin(), dims.end());
    const bool row_major = IsRowMajor(*layout);
    if (!row_major) view.minor_to_major = std::move(*layout);
    view.on_delete = &CallDeleter;
    view.on_delete_arg = tensor;
    // A view in another layout is copied row-major before a program reads
    // it (pjrt::RowMajor), on its own: that copy waits through the view.
    view.order = options.order.read;
    if (options.order.only_copies_wait && row_major) view.order.ready_stream = 0;
    array.emplace(Array::CreateView(state, view, source));
    owner.release();  // the view owns the tensor now
  } else {
    if (options.copy == CopyPolicy::kNever)
      Refuse(!layout ? "XLA cannot view a tensor of shape " + TupleText(dims) + " and strides " +
                           TupleText(strides) + " (steps, broadcasts or negative strides) without "
                           "copying, and copy=False"
                     : "the tensor's data at address " + AddressText(data) + " is not aligned to " +
                           std::to_string(alignment) + " bytes as XLA needs, and copy=False");
    std::vector<int64_t> element_strides =
        strides.empty() ? CompactStrides(dims, *layout) : std::vector<int64_t>(strides.begin(), strides.end());
    StridedTensor strided{data, dtype, dims, element_strides, options.order.read};
    array.emplace(CopyStrided(state, source, strided, &CallDeleter, owner.release()));
  }
  if (!to_elsewhere) return std::move(*array);
  return array->CopyToDevice(*options.target_state, options.target_state, *options.target_device);
}

Array ImportDLPack(const std::shared_ptr<const ClientState>& state, DLManagedTensor* tensor,
                   const ImportOptions& options) {
  if (tensor == nullptr) throw Error(ErrorKind::kValue, "null DLPack tensor");
  auto* wrapper = new LegacyTensor{DLManagedTensorVersioned{}, tensor};
  wrapper->versioned.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  wrapper->versioned.dl_tensor = tensor->dl_tensor;
  wrapper->versioned.deleter = &LegacyTensor::Delete;
  return ImportDLPack(state, &wrapper->versioned, options);
}

}  // namespace cuxla::interop
