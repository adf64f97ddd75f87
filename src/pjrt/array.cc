#include "pjrt/array.h"

#include <numeric>
#include <string>

namespace cuxla {
namespace {

std::vector<int64_t> RowMajor(size_t rank) {
  std::vector<int64_t> layout(rank);
  for (size_t i = 0; i < rank; ++i) layout[i] = static_cast<int64_t>(rank - 1 - i);
  return layout;
}

std::vector<int64_t> MinorToMajor(const pjrt::Api& api, PJRT_Buffer* buffer, size_t rank) {
  if (!api.Has(&PJRT_Api::PJRT_Buffer_GetMemoryLayout)) return RowMajor(rank);
  auto args = CUXLA_PJRT_ARGS(PJRT_Buffer_GetMemoryLayout_Args);
  args.buffer = buffer;
  CUXLA_PJRT_CALL(api, PJRT_Buffer_GetMemoryLayout, &args);
  if (args.layout.type != PJRT_Buffer_MemoryLayout_Type_Tiled) return RowMajor(rank);
  const PJRT_Buffer_MemoryLayout_Tiled& tiled = args.layout.tiled;
  return std::vector<int64_t>(tiled.minor_to_major, tiled.minor_to_major + tiled.minor_to_major_size);
}

}  // namespace

Array::Array(std::shared_ptr<const ClientState> state, pjrt::BufferPtr buffer)
    : state_(std::move(state)), buffer_(std::move(buffer)) {
  const pjrt::Api& api = state_->api();
  PJRT_Buffer* raw = buffer_.get();

  auto type_args = CUXLA_PJRT_ARGS(PJRT_Buffer_ElementType_Args);
  type_args.buffer = raw;
  CUXLA_PJRT_CALL(api, PJRT_Buffer_ElementType, &type_args);
  std::optional<DType> dtype = FromPjrt(type_args.type);
  if (!dtype)
    throw Error(ErrorKind::kBuffer, "PJRT buffer has element type " +
                                        std::to_string(static_cast<int>(type_args.type)) +
                                        ", which cuxla does not support");
  dtype_ = *dtype;

  auto dim_args = CUXLA_PJRT_ARGS(PJRT_Buffer_Dimensions_Args);
  dim_args.buffer = raw;
  CUXLA_PJRT_CALL(api, PJRT_Buffer_Dimensions, &dim_args);
  dims_.assign(dim_args.dims, dim_args.dims + dim_args.num_dims);
  layout_ = MinorToMajor(api, raw, dims_.size());

  auto dev_args = CUXLA_PJRT_ARGS(PJRT_Buffer_Device_Args);
  dev_args.buffer = raw;
  CUXLA_PJRT_CALL(api, PJRT_Buffer_Device, &dev_args);
  device_ = &state_->DeviceOf(dev_args.device);
}

Array Array::FromHost(std::shared_ptr<const ClientState> state, const HostBuffer& host,
                      const Device& device) {
  if (!host.byte_strides.empty() && host.byte_strides.size() != host.dims.size())
    throw Error(ErrorKind::kValue, "byte_strides has " + std::to_string(host.byte_strides.size()) +
                                       " entries for " + std::to_string(host.dims.size()) +
                                       " dimensions");
  const pjrt::Api& api = state->api();
  auto args = CUXLA_PJRT_ARGS(PJRT_Client_BufferFromHostBuffer_Args);
  args.client = state->client.get();
  args.data = host.data;
  args.type = ToPjrt(host.dtype);
  args.dims = host.dims.data();
  args.num_dims = host.dims.size();
  args.byte_strides = host.byte_strides.empty() ? nullptr : host.byte_strides.data();
  args.num_byte_strides = host.byte_strides.size();
  // The host data is only promised for the call: wait for the copy below.
  args.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes;
  args.device = device.handle;
  CUXLA_PJRT_CALL(api, PJRT_Client_BufferFromHostBuffer, &args);
  pjrt::BufferPtr buffer(args.buffer, pjrt::BufferDestroy{&api});
  if (args.done_with_host_buffer != nullptr)
    pjrt::Await(api, args.done_with_host_buffer, "PJRT_Client_BufferFromHostBuffer");
  return Array(std::move(state), std::move(buffer));
}

int64_t Array::size() const noexcept {
  return std::accumulate(dims_.begin(), dims_.end(), int64_t{1}, std::multiplies<>());
}

int64_t Array::nbytes() const noexcept { return size() * static_cast<int64_t>(DTypeSize(dtype_)); }

PJRT_Buffer* Array::buffer() const {
  if (buffer_ == nullptr) throw Error(ErrorKind::kRuntime, "Array has been deleted");
  return buffer_.get();
}

void Array::CopyToHost(void* dst, size_t dst_size) const {
  if (dst_size != static_cast<size_t>(nbytes()))
    throw Error(ErrorKind::kValue, "host buffer is " + std::to_string(dst_size) +
                                       " bytes, the array needs " + std::to_string(nbytes()));
  const pjrt::Api& api = state_->api();
  auto args = CUXLA_PJRT_ARGS(PJRT_Buffer_ToHostBuffer_Args);
  args.src = buffer();
  // Ask for row-major on the host whatever the device layout is.
  std::vector<int64_t> row_major = RowMajor(dims_.size());
  PJRT_Buffer_MemoryLayout host_layout = CUXLA_PJRT_ARGS(PJRT_Buffer_MemoryLayout);
  if (layout_ != row_major) {
    host_layout.type = PJRT_Buffer_MemoryLayout_Type_Tiled;
    host_layout.tiled = CUXLA_PJRT_ARGS(PJRT_Buffer_MemoryLayout_Tiled);
    host_layout.tiled.minor_to_major = row_major.data();
    host_layout.tiled.minor_to_major_size = row_major.size();
    args.host_layout = &host_layout;
  }
  args.dst = dst;
  args.dst_size = dst_size;
  CUXLA_PJRT_CALL(api, PJRT_Buffer_ToHostBuffer, &args);
  pjrt::Await(api, args.event, "PJRT_Buffer_ToHostBuffer");
}

void Array::BlockUntilReady() const {
  const pjrt::Api& api = state_->api();
  auto args = CUXLA_PJRT_ARGS(PJRT_Buffer_ReadyEvent_Args);
  args.buffer = buffer();
  CUXLA_PJRT_CALL(api, PJRT_Buffer_ReadyEvent, &args);
  pjrt::Await(api, args.event, "PJRT_Buffer_ReadyEvent");
}

uintptr_t Array::UnsafeBufferPointer() const {
  const pjrt::Api& api = state_->api();
  auto args = CUXLA_PJRT_ARGS(PJRT_Buffer_UnsafePointer_Args);
  args.buffer = buffer();
  CUXLA_PJRT_CALL(api, PJRT_Buffer_UnsafePointer, &args);
  return args.buffer_pointer;
}

}  // namespace cuxla
