#include "pjrt/environment.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "base/error.h"

namespace cuxla::pjrt {

const char* EnvValue(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

void BadVariable(const char* name, std::string_view value, std::string_view complaint) {
  throw Error(ErrorKind::kValue, std::string(name) + "='" + std::string(value) + "' " + std::string(complaint));
}

std::optional<std::string> EnvText(const char* name) {
  const char* value = EnvValue(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::optional<bool> EnvBool(const char* name) {
  const char* value = EnvValue(name);
  if (value == nullptr) return std::nullopt;
  std::string lower(value);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "1" || lower == "true" || lower == "yes" || lower == "on") return true;
  if (lower == "0" || lower == "false" || lower == "no" || lower == "off") return false;
  BadVariable(name, value, "is not a boolean (use 1/0, true/false)");
}

std::optional<int64_t> EnvInteger(const char* name) {
  const char* value = EnvValue(name);
  if (value == nullptr) return std::nullopt;
  char* end = nullptr;
  const long long parsed = std::strtoll(value, &end, 10);
  if (end == value || *end != '\0') BadVariable(name, value, "is not an integer");
  return parsed;
}

std::optional<double> EnvNumber(const char* name) {
  const char* value = EnvValue(name);
  if (value == nullptr) return std::nullopt;
  char* end = nullptr;
  const double parsed = std::strtod(value, &end);
  if (end == value || *end != '\0') BadVariable(name, value, "is not a number");
  return parsed;
}

}  // namespace cuxla::pjrt
