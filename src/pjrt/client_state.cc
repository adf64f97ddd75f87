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

}  // namespace cuxla
