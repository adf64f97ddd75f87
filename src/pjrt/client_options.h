// pjrt/client_options.h — ClientOptions, their CUXLA_* environment and checks, and the plugin options they become.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pjrt/device.h"
#include "pjrt/key_value_store.h"
#include "xla/pjrt/c/pjrt_c_api.h"

namespace cuxla {

// Options for a client. The memory options are a CUDA client's (README,
// "CUDA memory"): unset, they fall back to CUXLA_PREALLOCATE / CUXLA_MEM_FRACTION
// / CUXLA_ALLOCATOR, then to the defaults: no preallocation, the plugin's own
// fraction and allocator. `device_count` is a CPU client's number of
// devices (unset: CUXLA_CPU_DEVICE_COUNT, else the plugin's default);
// with several, the plugin gets twice as many threads (PJRT_NPROC, unless
// set) so that SPMD partitions waiting in collectives cannot starve it.
// `num_nodes` > 1 makes one CUDA client of several processes (one per
// node_id), which find each other through `kv_store`.
struct ClientOptions {
  std::optional<bool> preallocate;
  std::optional<double> memory_fraction;  // in (0, 1]
  std::optional<std::string> allocator;   // "platform", "bfc", "cuda_async", "default"
  std::vector<int64_t> visible_devices;   // empty: all
  std::optional<int64_t> device_count;    // CPU only, >= 1
  int64_t node_id = 0;                    // this process, in [0, num_nodes)
  int64_t num_nodes = 1;
  std::shared_ptr<KeyValueStore> kv_store;  // needed when num_nodes > 1

  // These options with the environment of `platform` filled in for unset
  // fields; throws a ValueError-kind Error naming a malformed variable or value.
  ClientOptions WithEnvironment(Platform platform = Platform::kCuda) const;
};

namespace pjrt {

// `options` for a client of `platform` (a plugin's platform name), the
// environment filled in, checked: a ValueError-kind Error names an option
// of another platform or a value out of range.
ClientOptions ResolveOptions(std::string_view platform, const ClientOptions& options);

// The plugin's client-creation options for resolved `options` of a client of
// `platform`, pointing into `options`, which must outlive them.
std::vector<PJRT_NamedValue> CreateOptions(Platform platform, const ClientOptions& options);

}  // namespace pjrt
}  // namespace cuxla
