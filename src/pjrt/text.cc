#include "pjrt/text.h"

#include <charconv>
#include <iterator>
#include <string_view>

namespace cuxla::pjrt {
namespace {

std::string Joined(std::span<const int64_t> values, std::string_view separator) {
  std::string text;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) text += separator;
    text += std::to_string(values[i]);
  }
  return text;
}

}  // namespace

std::string TupleText(std::span<const int64_t> values) {
  std::string text = "(";
  text += Joined(values, ", ");
  return text += values.size() == 1 ? ",)" : ")";
}

std::string ListText(std::span<const int64_t> values) { return Joined(values, ","); }

std::string AddressText(const void* address) {
  char digits[2 * sizeof(uintptr_t)];
  char* end = std::to_chars(std::begin(digits), std::end(digits), reinterpret_cast<uintptr_t>(address), 16).ptr;
  return "0x" + std::string(digits, end);
}

}  // namespace cuxla::pjrt
