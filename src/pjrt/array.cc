#include "pjrt/array.h"

#include <numeric>
#include <string>

#include "pjrt/layout.h"

namespace cuxla {
namespace {

using pjrt::FromPjrt;
using pjrt::IsRowMajor;
using pjrt::RowMajorLayout;
using pjrt::ToPjrt;

// The layout PJRT reports for `buffer`; row-major when it reports none.
std::vector<int64_t> BufferLayout(const pjrt::Api& api, PJRT_Buffer* buffer, size_t rank) {
  if (!api.Has(&PJRT_Api::PJRT_Buffer_GetMemoryLayout)) return RowMajorLayout(rank);
  const auto args = CUXLA_PJRT_QUERY(api, PJRT_Buffer_GetMemoryLayout, buffer, buffer);
  if (args.layout.type != PJRT_Buffer_MemoryLayout_Type_Tiled) return RowMajorLayout(rank);
  const PJRT_Buffer_MemoryLayout_Tiled& tiled = args.layout.tiled;
  return std::vector<int64_t>(tiled.minor_to_major, tiled.minor_to_major + tiled.minor_to_major_size);
}

}  // namespace

Array::Array(std::shared_ptr<const ClientState> state, pjrt::BufferPtr buffer, ArrayShape shape,
             const Device& device, bool is_view)
    : state_(std::move(state)),
      buffer_(std::move(buffer)),
      dtype_(shape.dtype),
      dims_(std::move(shape.dims)),
      layout_(shape.minor_to_major.empty() ? RowMajorLayout(dims_.size()) : std::move(shape.minor_to_major)),
      device_(&state_->DeviceOf(device.handle)),
      is_view_(is_view) {}

Array::Array(std::shared_ptr<const ClientState> state, pjrt::BufferPtr buffer)
    : state_(std::move(state)), buffer_(std::move(buffer)) {
  const pjrt::Api& api = state_->api();
  PJRT_Buffer* raw = buffer_.get();

  const PJRT_Buffer_Type type = CUXLA_PJRT_QUERY(api, PJRT_Buffer_ElementType, buffer, raw).type;
  std::optional<DType> dtype = FromPjrt(type);
  if (!dtype)
    throw Error(ErrorKind::kBuffer, "PJRT buffer has element type " +
                                        std::to_string(static_cast<int>(type)) +
                                        ", which cuxla does not support");
  dtype_ = *dtype;

  const auto dim_args = CUXLA_PJRT_QUERY(api, PJRT_Buffer_Dimensions, buffer, raw);
  dims_.assign(dim_args.dims, dim_args.dims + dim_args.num_dims);
  layout_ = BufferLayout(api, raw, dims_.size());

  device_ = &state_->DeviceOf(CUXLA_PJRT_QUERY(api, PJRT_Buffer_Device, buffer, raw).device);
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
  return Array(std::move(state), std::move(buffer), ArrayShape{host.dtype, host.dims, {}}, device,
               /*is_view=*/false);
}

Array Array::CreateView(std::shared_ptr<const ClientState> state, const DeviceView& view,
                        const Device& device) {
  const pjrt::Api& api = state->api();
  auto args = CUXLA_PJRT_ARGS(PJRT_Client_CreateViewOfDeviceBuffer_Args);
  args.client = state->client.get();
  args.device_buffer_ptr = view.data;
  args.dims = view.dims.data();
  args.num_dims = view.dims.size();
  args.element_type = ToPjrt(view.dtype);
  PJRT_Buffer_MemoryLayout layout = CUXLA_PJRT_ARGS(PJRT_Buffer_MemoryLayout);
  if (!view.minor_to_major.empty()) {
    layout.type = PJRT_Buffer_MemoryLayout_Type_Tiled;
    layout.tiled = CUXLA_PJRT_ARGS(PJRT_Buffer_MemoryLayout_Tiled);
    layout.tiled.minor_to_major = view.minor_to_major.data();
    layout.tiled.minor_to_major_size = view.minor_to_major.size();
    args.layout = &layout;
  }
  args.device = device.handle;
  // Plugins call the callback unconditionally (a null one aborts the
  // process when the view is deleted): "nothing to release" is a no-op.
  args.on_delete_callback = view.on_delete != nullptr ? view.on_delete : [](void*, void*) {};
  args.on_delete_callback_arg = view.on_delete_arg;
  args.stream = view.order.ready_stream;
  CUXLA_PJRT_CALL(api, PJRT_Client_CreateViewOfDeviceBuffer, &args);
  Array array(std::move(state), pjrt::BufferPtr(args.buffer, pjrt::BufferDestroy{&api}),
              ArrayShape{view.dtype, view.dims, view.minor_to_major}, device, /*is_view=*/true);
  array.pending_writes_ = view.order.pending_writes;
  return array;
}

bool Array::is_row_major() const noexcept { return IsRowMajor(layout_); }

Array Array::CopyToDevice(const ClientState& target_state, std::shared_ptr<const ClientState> owner,
                          const Device& device) const {
  if (&target_state != state_.get()) {
    // Another client (another platform): through the host.
    std::vector<std::byte> host(static_cast<size_t>(nbytes()));
    CopyToHost(host.data(), host.size());
    return FromHost(std::move(owner), HostBuffer{host.data(), dtype_, dims_, {}}, device);
  }
  if (pending_writes_ != nullptr) pending_writes_->Wait();  // PJRT's copy does not wait for them
  const pjrt::Api& api = state_->api();
  auto args = CUXLA_PJRT_ARGS(PJRT_Buffer_CopyToDevice_Args);
  args.buffer = buffer();
  args.dst_device = device.handle;
  CUXLA_PJRT_CALL(api, PJRT_Buffer_CopyToDevice, &args);
  return Array(std::move(owner), pjrt::BufferPtr(args.dst_buffer, pjrt::BufferDestroy{&api}));
}

void Array::WaitUntilReadyOnStream(intptr_t stream) const {
  const PJRT_Stream_Extension* streams = state_->plugin->stream_extension();
  if (streams == nullptr)
    throw Error(ErrorKind::kRuntime, "PJRT plugin " + state_->plugin->path() +
                                         " has no stream extension to order work on stream " +
                                         std::to_string(stream));
  if (pending_writes_ != nullptr) pending_writes_->MakeWait(stream);
  auto args = CUXLA_PJRT_ARGS(PJRT_Wait_Until_Buffer_Ready_On_Stream_Args);
  args.stream = stream;
  args.buffer = buffer();
  state_->api().Check(streams->wait_stream(&args), "PJRT_Wait_Until_Buffer_Ready_On_Stream");
}

namespace {

void DecreaseExternalReferenceCount(const pjrt::Api& api, PJRT_Buffer* buffer) {
  auto dec = CUXLA_PJRT_ARGS(PJRT_Buffer_DecreaseExternalReferenceCount_Args);
  dec.buffer = buffer;
  api.Check(api.raw()->PJRT_Buffer_DecreaseExternalReferenceCount(&dec),
            "PJRT_Buffer_DecreaseExternalReferenceCount");
}

}  // namespace

Array::ExternalReference::ExternalReference(const Array& array)
    : state_(array.state_), buffer_(array.buffer_) {
  if (buffer_ == nullptr) throw Error(ErrorKind::kRuntime, "Array has been deleted");
  const pjrt::Api& api = state_->api();
  CUXLA_PJRT_QUERY(api, PJRT_Buffer_IncreaseExternalReferenceCount, buffer, buffer_.get());
  try {
    data_ = CUXLA_PJRT_QUERY(api, PJRT_Buffer_OpaqueDeviceMemoryDataPointer, buffer, buffer_.get()).device_memory_ptr;
  } catch (...) {
    try {
      DecreaseExternalReferenceCount(api, buffer_.get());
    } catch (const Error&) {
      // The pointer's error is the one to report.
    }
    throw;
  }
}

Array::ExternalReference::~ExternalReference() {
  try {
    DecreaseExternalReferenceCount(state_->api(), buffer_.get());
  } catch (const Error&) {
    // Nothing to report to from a destructor; the buffer is released below anyway.
  }
}

int64_t Array::size() const noexcept {
  return std::accumulate(dims_.begin(), dims_.end(), int64_t{1}, std::multiplies<>());
}

int64_t Array::nbytes() const noexcept { return size() * static_cast<int64_t>(DTypeSize(dtype_)); }

PJRT_Buffer* Array::buffer() const { return shared_buffer().get(); }

std::shared_ptr<PJRT_Buffer> Array::shared_buffer() const {
  if (buffer_ == nullptr) throw Error(ErrorKind::kRuntime, "Array has been deleted");
  return buffer_;
}

void Array::CopyToHost(void* dst, size_t dst_size) const {
  if (dst_size != static_cast<size_t>(nbytes()))
    throw Error(ErrorKind::kValue, "host buffer is " + std::to_string(dst_size) +
                                       " bytes, the array needs " + std::to_string(nbytes()));
  // Plugins read views back in their raw order whatever their layout: make
  // a row-major copy on the device first.
  if (!is_row_major()) return state_->programs->RowMajor(*this).CopyToHost(dst, dst_size);
  if (pending_writes_ != nullptr) pending_writes_->Wait();  // PJRT's copy does not wait for them
  const pjrt::Api& api = state_->api();
  auto args = CUXLA_PJRT_ARGS(PJRT_Buffer_ToHostBuffer_Args);
  args.src = buffer();
  args.dst = dst;
  args.dst_size = dst_size;
  CUXLA_PJRT_CALL(api, PJRT_Buffer_ToHostBuffer, &args);
  pjrt::Await(api, args.event, "PJRT_Buffer_ToHostBuffer");
}

void Array::BlockUntilReady() const {
  if (pending_writes_ != nullptr) pending_writes_->Wait();
  const pjrt::Api& api = state_->api();
  pjrt::Await(api, CUXLA_PJRT_QUERY(api, PJRT_Buffer_ReadyEvent, buffer, buffer()).event, "PJRT_Buffer_ReadyEvent");
}

uintptr_t Array::UnsafeBufferPointer() const {
  return CUXLA_PJRT_QUERY(state_->api(), PJRT_Buffer_UnsafePointer, buffer, buffer()).buffer_pointer;
}

}  // namespace cuxla
