// pjrt/client_state.h — ClientState: what a client shares with the arrays and executables it makes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pjrt/api.h"
#include "pjrt/device.h"
#include "pjrt/key_value_store.h"
#include "pjrt/plugin.h"

namespace cuxla {

class Array;
class Executable;

namespace pjrt {

// A device's compute stream, or why it is not known (then `stream` is 0).
struct ComputeStream {
  intptr_t stream = 0;
  std::string why_not;
};

// The programs cuxla runs on a client's devices for its own needs. They are
// Executables run on Arrays, so they are made above both (pjrt/programs/);
// Arrays, Executables and the client's state reach them through this
// interface, which Client::Create hands to the state.
class InternalPrograms {
 public:
  virtual ~InternalPrograms() = default;
  // `program` compiled for `device`, once per client and device. Such an
  // executable does not own the client's state (the state owns it); its
  // outputs belong to the arguments' client.
  virtual std::shared_ptr<const Executable> Compiled(std::string_view program, const Device& device) const = 0;
  // `array` laid out row-major: itself when it already is, else a copy on its
  // device (plugins execute and read back views as if they were row-major).
  virtual Array RowMajor(const Array& array) const = 0;
  // CUDA: the stream XLA runs `device`'s programs on, probed on first use
  // (pjrt/programs/compute_stream.h), or why it is unknown.
  virtual const ComputeStream& compute_stream(const Device& device) const = 0;
};

}  // namespace pjrt

// What every object made by a client needs, shared by the client, its arrays
// and its executables so that the PJRT client is destroyed after all of them.
struct ClientState {
  std::shared_ptr<const pjrt::Plugin> plugin;  // keeps the Api alive (never unloaded)
  std::shared_ptr<KeyValueStore> kv_store;     // PJRT may call it until the client is gone
  pjrt::ClientPtr client;
  Platform platform = Platform::kOther;
  std::string platform_name;  // the plugin's: "cuda", "cpu"
  std::vector<Device> devices;  // addressable devices
  size_t global_device_count = 0;  // every process's devices
  // Declared after `client`, so destroyed, with the executables it compiled,
  // before the PJRT client that made them.
  std::unique_ptr<const pjrt::InternalPrograms> programs;

  const pjrt::Api& api() const noexcept { return plugin->api(); }
  const Device& DeviceOf(PJRT_Device* handle) const;
  size_t buffer_alignment() const noexcept { return BufferAlignment(platform); }
  // The device whose local_hardware_id is `id`; ValueError-kind Error if none.
  const Device& DeviceWithHardwareId(int id) const;
  // CUDA: an XLA stream on which externally made buffers of `device` are
  // marked ready (the PJRT stream extension; throws where the plugin has
  // none). A view given it as its ready stream is used only after the work
  // queued on it so far — at the price of PJRT's own event bookkeeping for a
  // stream not its own (its cost: docs/gpu-results.md).
  intptr_t ExternalReadyStream(const Device& device) const;
  // CUDA: the stream XLA runs `device`'s programs on, or why it is unknown.
  const pjrt::ComputeStream& compute_stream(const Device& device) const { return programs->compute_stream(device); }
};

}  // namespace cuxla
