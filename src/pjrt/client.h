// pjrt/client.h — Client: a PJRT client made from a plugin; arrays from host data; compiled executables.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pjrt/array.h"
#include "pjrt/client_options.h"
#include "pjrt/client_state.h"
#include "pjrt/executable.h"
#include "pjrt/plugin.h"

namespace cuxla {

struct MemoryStats {
  int64_t bytes_in_use = 0;
  std::optional<int64_t> peak_bytes_in_use;
  std::optional<int64_t> bytes_limit;
  std::optional<int64_t> pool_bytes;
};

class Client {
 public:
  // Creates a client of `platform` ("cuda", "cpu") from `plugin`; refuses a
  // plugin whose client reports another platform, and memory options on a
  // platform other than CUDA.
  static std::shared_ptr<Client> Create(std::shared_ptr<const pjrt::Plugin> plugin,
                                        const std::string& platform,
                                        const ClientOptions& options);
  // The same from a plugin path; the options are checked before it is loaded.
  static std::shared_ptr<Client> Create(const std::string& plugin_path,
                                        const std::string& platform,
                                        const ClientOptions& options);

  Platform platform() const noexcept { return state_->platform; }
  const std::string& platform_name() const noexcept { return state_->platform_name; }
  std::string platform_version() const;
  const std::vector<Device>& devices() const noexcept { return state_->devices; }
  const Device& device(int id) const;  // by global id; ValueError if absent
  const pjrt::Plugin& plugin() const noexcept { return *state_->plugin; }
  const ClientOptions& options() const noexcept { return options_; }
  // nullopt when the plugin does not report memory statistics.
  std::optional<MemoryStats> memory_stats(const Device& device) const { return MemoryStatsOf(*state_, device); }
  // The same for a device of the client whose state `state` is (as its
  // arrays and executables hold it).
  static std::optional<MemoryStats> MemoryStatsOf(const ClientState& state, const Device& device);

  Array FromHost(const HostBuffer& host, const Device& device) const;
  // Compiles StableHLO (MLIR text or bytecode) for `device`, or as an SPMD
  // program with partition i on devices[i]; the same program and devices
  // give the same Executable.
  std::shared_ptr<const Executable> Compile(std::string_view program, const Device& device);
  std::shared_ptr<const Executable> Compile(std::string_view program, std::span<const Device* const> devices);

  const std::shared_ptr<const ClientState>& state() const noexcept { return state_; }

  Client(std::shared_ptr<const ClientState> state, ClientOptions options)
      : state_(std::move(state)), options_(std::move(options)) {}

 private:
  // `options` already resolved by pjrt::ResolveOptions.
  static std::shared_ptr<Client> CreateResolved(std::shared_ptr<const pjrt::Plugin> plugin,
                                                const std::string& platform,
                                                ClientOptions options);

  std::shared_ptr<const ClientState> state_;
  ClientOptions options_;
  pjrt::ExecutableCache cache_;
};

}  // namespace cuxla
