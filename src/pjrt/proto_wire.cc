#include "pjrt/proto_wire.h"

#include "base/error.h"

namespace cuxla::pjrt {

void Malformed(std::string_view source, std::string_view why) {
  throw Error(ErrorKind::kRuntime, "malformed " + std::string(source) + ": " + std::string(why));
}

uint64_t WireReader::Varint() {
  uint64_t value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (rest_.empty()) Malformed(source_, "truncated varint");
    auto byte = static_cast<uint8_t>(rest_.front());
    rest_.remove_prefix(1);
    value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return value;
  }
  Malformed(source_, "varint longer than 10 bytes");
}

std::string_view WireReader::Bytes() {
  const uint64_t size = Varint();
  if (size > rest_.size()) Malformed(source_, "field longer than its message");
  std::string_view bytes = rest_.substr(0, size);
  rest_.remove_prefix(size);
  return bytes;
}

void WireReader::Skip(uint32_t wire_type) {
  switch (wire_type) {
    case kVarint: Varint(); return;
    case kLengthDelimited: Bytes(); return;
    case kFixed64: Advance(8); return;
    case kFixed32: Advance(4); return;
    default: Malformed(source_, "unknown wire type");
  }
}

void WireReader::Int64s(uint32_t wire_type, std::vector<int64_t>& out) {
  if (wire_type == kVarint) {
    out.push_back(static_cast<int64_t>(Varint()));
    return;
  }
  if (wire_type != kLengthDelimited) Malformed(source_, "repeated int64 with a bad wire type");
  WireReader packed = Message();
  while (!packed.done()) out.push_back(static_cast<int64_t>(packed.Varint()));
}

void WireReader::Advance(size_t n) {
  if (n > rest_.size()) Malformed(source_, "truncated fixed-size field");
  rest_.remove_prefix(n);
}

void PutVarint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void PutInt(std::string& out, uint32_t field, int64_t value) {
  PutVarint(out, (static_cast<uint64_t>(field) << 3) | kVarint);
  PutVarint(out, static_cast<uint64_t>(value));
}

void PutMessage(std::string& out, uint32_t field, std::string_view message) {
  PutVarint(out, (static_cast<uint64_t>(field) << 3) | kLengthDelimited);
  PutVarint(out, message.size());
  out += message;
}

}  // namespace cuxla::pjrt
