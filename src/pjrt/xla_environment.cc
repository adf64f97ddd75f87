#include "pjrt/xla_environment.h"

#include <cstdlib>
#include <initializer_list>
#include <string_view>

#include "pjrt/environment.h"

namespace cuxla::pjrt {
namespace {

constexpr const char* kLogVariable = "CUXLA_LOG";
constexpr const char* kCommandBuffersVariable = "CUXLA_COMMAND_BUFFERS";
constexpr const char* kAutotuneVariable = "CUXLA_AUTOTUNE_LEVEL";
constexpr const char* kTritonGemmVariable = "CUXLA_TRITON_GEMM";
constexpr const char* kDotMergerVariable = "CUXLA_DOT_MERGER";
constexpr std::string_view kCommandBufferFlag = "--xla_gpu_enable_command_buffer";
constexpr std::string_view kTritonGemmFlag = "--xla_gpu_enable_triton_gemm";
constexpr std::string_view kDotMergerFlag = "--xla_gpu_dot_merger_threshold_mb";
constexpr std::string_view kAutotuneFlag = "--xla_gpu_autotune_level";
constexpr std::string_view kXnnpackFlag = "--xla_cpu_use_xnnpack";

bool OneOf(std::string_view value, std::initializer_list<std::string_view> allowed) {
  for (std::string_view a : allowed)
    if (value == a) return true;
  return false;
}

// XLA (a copy in each plugin, another in jaxlib) reads TF_CPP_MIN_LOG_LEVEL
// while its library is being loaded, and XLA_FLAGS once, when first needed:
// both must be in the environment before the first plugin is opened. They are
// put there while libcuxla itself is being loaded, for a C++ program before
// main, for Python during `import cuxla` (as `import jax` does for JAX).
// setenv is unsafe only against another thread using the environment
// meanwhile: here cuxla has started no thread and opened no plugin, whereas
// by the time a plugin is opened XLA's, PyTorch's and the program's own
// threads may run.
[[maybe_unused]] const bool kXlaEnvironmentSet = [] {
  const auto level = XlaMinLogLevel(EnvValue(kLogVariable), EnvValue("TF_CPP_MIN_LOG_LEVEL"),
                                    EnvValue("TF_CPP_MAX_VLOG_LEVEL"), EnvValue("TF_CPP_VMODULE"));
  const auto flags = XlaFlags(EnvValue("XLA_FLAGS"), {.command_buffers = EnvValue(kCommandBuffersVariable),
                                                      .triton_gemm = EnvValue(kTritonGemmVariable),
                                                      .dot_merger = EnvValue(kDotMergerVariable),
                                                      .autotune_level = EnvValue(kAutotuneVariable)});
  return (!level || setenv("TF_CPP_MIN_LOG_LEVEL", level->c_str(), 1) == 0) &&
         (!flags || setenv("XLA_FLAGS", flags->c_str(), 1) == 0);
}();

}  // namespace

std::optional<std::string> XlaMinLogLevel(const char* cuxla_log, const char* min_log_level,
                                          const char* max_vlog_level, const char* vmodule) {
  if (cuxla_log != nullptr) {
    const std::string_view level(cuxla_log);
    if (level == "info") return "0";
    if (level == "warning") return "1";
    if (level == "error") return "2";
    return std::nullopt;
  }
  if (min_log_level != nullptr) return std::nullopt;
  // XLA's VLOG lines are INFO lines: a level of 1 would hide what was asked for.
  if (max_vlog_level != nullptr || vmodule != nullptr) return "0";
  return "1";
}

std::optional<std::string> XlaFlags(const char* xla_flags, const XlaSettings& settings) {
  const std::string_view flags = xla_flags != nullptr ? xla_flags : "";
  std::string amended(flags);
  auto add = [&](std::string_view flag, std::string_view value) {
    if (flags.find(flag) != std::string_view::npos) return;  // the user's own setting stands
    if (!amended.empty()) amended += ' ';
    amended.append(flag).append("=").append(value);
  };
  auto off = [](const char* setting) { return setting == nullptr || std::string_view(setting) == "0"; };
  if (off(settings.command_buffers)) add(kCommandBufferFlag, "");
  if (off(settings.triton_gemm)) add(kTritonGemmFlag, "false");
  if (off(settings.dot_merger)) add(kDotMergerFlag, "0");
  if (settings.autotune_level != nullptr) add(kAutotuneFlag, settings.autotune_level);
  add(kXnnpackFlag, "false");
  if (amended == flags) return std::nullopt;
  return amended;
}

std::string XlaFlagsInEffect() {
  const char* flags = std::getenv("XLA_FLAGS");
  return flags != nullptr ? flags : "";
}

void CheckXlaEnvironment() {
  if (const char* value = EnvValue(kLogVariable); value != nullptr && !XlaMinLogLevel(value, nullptr, nullptr, nullptr))
    BadVariable(kLogVariable, value, "is not a log level (use info, warning or error)");
  for (const char* variable : {kCommandBuffersVariable, kTritonGemmVariable, kDotMergerVariable})
    if (const char* value = EnvValue(variable); value != nullptr && !OneOf(value, {"0", "1"}))
      BadVariable(variable, value, "is neither 0 nor 1");
  if (const char* value = EnvValue(kAutotuneVariable); value != nullptr && !OneOf(value, {"0", "1", "2", "3", "4"}))
    BadVariable(kAutotuneVariable, value, "is not a level from 0 to 4");
}

}  // namespace cuxla::pjrt
