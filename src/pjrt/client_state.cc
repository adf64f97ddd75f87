#include "pjrt/client_state.h"

#include <string>

namespace cuxla {

const Device& ClientState::DeviceOf(PJRT_Device* handle) const {
  for (const Device& device : devices)
    if (device.handle == handle) return device;
  throw Error(ErrorKind::kValue, "the device does not belong to this " + platform_name + " client");
}

const Device& ClientState::DeviceWithHardwareId(int id) const {
  for (const Device& device : devices)
    if (device.local_hardware_id == id) return device;
  throw Error(ErrorKind::kValue, "the " + platform_name + " client has no device with local_hardware_id " +
                                     std::to_string(id));
}

intptr_t ClientState::ExternalReadyStream(const Device& device) const {
  const PJRT_Stream_Extension* streams = plugin->stream_extension();
  if (streams == nullptr)
    throw Error(ErrorKind::kRuntime, "PJRT plugin " + plugin->path() + " has no stream extension");
  auto args = CUXLA_PJRT_ARGS(PJRT_Get_Stream_For_External_Ready_Events_Args);
  args.device = device.handle;
  api().Check(streams->get_stream(&args), "PJRT_Get_Stream_For_External_Ready_Events");
  return args.stream;
}

ClientState::ProducerOrder ClientState::OrderAfter(const Device& device, intptr_t producer,
                                                  bool only_programs_read) const {
  const int ordinal = device.local_hardware_id;
  if (const intptr_t compute = compute_stream(device).stream; compute != 0) {
    if (only_programs_read) {
      cuda::StreamWaitStream(ordinal, compute, producer);
      return {};
    }
    return {0, std::make_shared<const cuda::StreamMarker>(ordinal, producer, compute)};
  }
  // PJRT's bookkeeping of a ready stream costs far more than asking
  // (docs/gpu-results.md): spared when the producer has nothing pending. (An
  // event and a wait on the compute stream above cost what asking would.)
  if (cuda::StreamIdle(ordinal, producer)) return {};
  const intptr_t ready = ExternalReadyStream(device);
  cuda::StreamWaitStream(ordinal, ready, producer);
  return {ready, nullptr};
}

}  // namespace cuxla
