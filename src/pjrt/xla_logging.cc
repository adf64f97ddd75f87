#include "pjrt/xla_logging.h"

#include <cstdlib>
#include <string_view>

#include "base/error.h"

namespace cuxla::pjrt {
namespace {

constexpr const char* kVariable = "CUXLA_LOG";

const char* Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

// XLA's logging (a copy in each plugin, another in jaxlib) reads
// TF_CPP_MIN_LOG_LEVEL once, while its library is being loaded: the level
// must be in the environment before the first plugin is opened. It is put
// there while libcuxla itself is being loaded, for a C++ program before main,
// for Python during `import cuxla` (as `import jax` does for JAX). setenv is
// unsafe only against another thread using the environment meanwhile: here
// cuxla has started no thread and opened no plugin, whereas by the time a
// plugin is opened XLA's, PyTorch's and the program's own threads may run.
[[maybe_unused]] const bool kXlaLevelSet = [] {
  const auto level = XlaMinLogLevel(Env(kVariable), Env("TF_CPP_MIN_LOG_LEVEL"),
                                    Env("TF_CPP_MAX_VLOG_LEVEL"), Env("TF_CPP_VMODULE"));
  return level && setenv("TF_CPP_MIN_LOG_LEVEL", level->c_str(), 1) == 0;
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

void CheckXlaLogLevel() {
  const char* value = Env(kVariable);
  if (value != nullptr && !XlaMinLogLevel(value, nullptr, nullptr, nullptr))
    throw Error(ErrorKind::kValue, std::string(kVariable) + "='" + value +
                                       "' is not a log level (use info, warning or error)");
}

}  // namespace cuxla::pjrt
