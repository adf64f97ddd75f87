// pjrt/device.h — a client's devices and the platforms they belong to.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "xla/pjrt/c/pjrt_c_api.h"

namespace cuxla {

// The platforms cuxla tells apart; a plugin of any other platform makes
// kOther clients, known by their name alone.
enum class Platform { kCuda, kCpu, kOther };

// The Platform a plugin's platform name ("cuda", "cpu") stands for.
constexpr Platform PlatformOf(std::string_view name) noexcept {
  return name == "cuda" ? Platform::kCuda : name == "cpu" ? Platform::kCpu : Platform::kOther;
}

// The alignment XLA needs of a buffer's address on `platform`: XLA's GPU
// entry parameters assume 16 bytes; the CPU plugin refuses views under 64.
constexpr size_t BufferAlignment(Platform platform) noexcept { return platform == Platform::kCpu ? 64 : 16; }

struct Device {
  PJRT_Device* handle = nullptr;  // valid while the client that listed it lives
  int id = 0;                     // global id
  int local_hardware_id = -1;     // CUDA ordinal on GPUs
  std::string kind;               // "NVIDIA H200", "cpu"...
  Platform platform = Platform::kOther;
  std::string platform_name;      // the plugin's: "cuda", "cpu"
};

}  // namespace cuxla
