// pjrt/text.h — integer lists and addresses spelled for messages and HLO text.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace cuxla::pjrt {

// "(2, 3)", "(5,)", "()": a shape or strides as Python spells a tuple, for messages.
std::string TupleText(std::span<const int64_t> values);

// "2,3": values joined by commas, as HLO sharding text and PJRT attributes spell them.
std::string ListText(std::span<const int64_t> values);

// "0x7f3a5c000010": a memory address as Python's hex() spells it, for messages.
std::string AddressText(const void* address);

}  // namespace cuxla::pjrt
