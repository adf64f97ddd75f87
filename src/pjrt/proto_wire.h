// pjrt/proto_wire.h — the protobuf wire format, read and written by hand (cuxla links no protobuf).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cuxla::pjrt {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// Throws a RuntimeError-kind Error: `source` (such as "HloModuleProto from
// the plugin") is malformed, as `why` says.
[[noreturn]] void Malformed(std::string_view source, std::string_view why);

// A forward-only reader over one message; what it cannot read is Malformed
// `source`.
class WireReader {
 public:
  WireReader(std::string_view bytes, std::string_view source) : rest_(bytes), source_(source) {}
  bool done() const { return rest_.empty(); }

  uint64_t Varint();
  // A length-delimited field's bytes.
  std::string_view Bytes();
  // A length-delimited field read as a message of its own.
  WireReader Message() { return WireReader(Bytes(), source_); }
  void Skip(uint32_t wire_type);
  // Appends a repeated int64 field's value(s), packed or not.
  void Int64s(uint32_t wire_type, std::vector<int64_t>& out);

  // Calls on_field(field number, wire type, *this) for each field, which
  // must read or Skip the field's value.
  template <class OnField>
  void ForEachField(OnField on_field) {
    while (!done()) {
      const uint64_t key = Varint();
      on_field(static_cast<uint32_t>(key >> 3), static_cast<uint32_t>(key & 7), *this);
    }
  }

 private:
  void Advance(size_t n);

  std::string_view rest_;
  std::string_view source_;  // for errors; outlives the reader
};

// Appends to `out` a base-128 varint, and fields: an int32/int64 (negative
// values as their 64-bit two's complement) and a nested message.
void PutVarint(std::string& out, uint64_t value);
void PutInt(std::string& out, uint32_t field, int64_t value);
void PutMessage(std::string& out, uint32_t field, std::string_view message);

}  // namespace cuxla::pjrt
