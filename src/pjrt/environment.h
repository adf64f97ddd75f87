// pjrt/environment.h — cuxla's environment variables, read one way: empty is unset, a malformed value a ValueError naming it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cuxla::pjrt {

// The variable's value, or null when it is unset or empty.
const char* EnvValue(const char* name);

// Throws a ValueError-kind Error "NAME='value' <complaint>", e.g.
// complaint "is not an integer".
[[noreturn]] void BadVariable(const char* name, std::string_view value, std::string_view complaint);

// The variable read as text, a boolean (1/0, true/false, yes/no, on/off, any
// case), an integer or a number; nullopt when unset or empty, throws
// (BadVariable) when malformed.
std::optional<std::string> EnvText(const char* name);
std::optional<bool> EnvBool(const char* name);
std::optional<int64_t> EnvInteger(const char* name);
std::optional<double> EnvNumber(const char* name);

}  // namespace cuxla::pjrt
