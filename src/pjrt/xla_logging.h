// pjrt/xla_logging.h — how much XLA's own C++ logging (in the plugins and
// jaxlib) prints: CUXLA_LOG, turned into XLA's TF_CPP_MIN_LOG_LEVEL.
#pragma once

#include <optional>
#include <string>

namespace cuxla::pjrt {

// The TF_CPP_MIN_LOG_LEVEL cuxla gives XLA for these settings of CUXLA_LOG,
// TF_CPP_MIN_LOG_LEVEL, TF_CPP_MAX_VLOG_LEVEL and TF_CPP_VMODULE (null:
// unset), or nullopt to leave it as it is: CUXLA_LOG decides when set (info
// "0", warning "1", error "2"); else the user's own TF_CPP_MIN_LOG_LEVEL
// stands; else a VLOG setting asks for INFO lines ("0"); else "1", warnings
// and errors only. An unknown CUXLA_LOG gives nullopt (CheckXlaLogLevel says
// why).
std::optional<std::string> XlaMinLogLevel(const char* cuxla_log, const char* min_log_level,
                                          const char* max_vlog_level, const char* vmodule);

// Throws a ValueError-kind Error when CUXLA_LOG is neither unset nor one of
// info, warning, error.
void CheckXlaLogLevel();

}  // namespace cuxla::pjrt
