#include "pjrt/program_shape.h"

#include <string>

#include "cuxla/error.h"

namespace cuxla::pjrt {
namespace {

// Field numbers from xla/service/hlo.proto and xla/xla_data.proto.
constexpr uint32_t kWithConfigModule = 1;
constexpr uint32_t kModuleHostProgramShape = 4;
constexpr uint32_t kProgramShapeParameters = 1;
constexpr uint32_t kProgramShapeResult = 2;
constexpr uint32_t kShapeElementType = 2;
constexpr uint32_t kShapeDimensions = 3;
constexpr uint32_t kShapeTupleShapes = 4;
constexpr uint32_t kShapeLayout = 5;
constexpr int kTupleType = 13;  // xla.PrimitiveType TUPLE
constexpr uint32_t kLayoutMinorToMajor = 1;

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

[[noreturn]] void Malformed(const char* what) {
  throw Error(ErrorKind::kRuntime, std::string("malformed HloModuleProto from the plugin: ") + what);
}

// A forward-only reader over one protobuf message.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : rest_(bytes) {}
  bool done() const { return rest_.empty(); }

  uint64_t Varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (rest_.empty()) Malformed("truncated varint");
      auto byte = static_cast<uint8_t>(rest_.front());
      rest_.remove_prefix(1);
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    Malformed("varint longer than 10 bytes");
  }

  std::string_view Bytes() {
    uint64_t size = Varint();
    if (size > rest_.size()) Malformed("field longer than its message");
    std::string_view bytes = rest_.substr(0, size);
    rest_.remove_prefix(size);
    return bytes;
  }

  void Skip(uint32_t wire_type) {
    switch (wire_type) {
      case kVarint: Varint(); return;
      case kLengthDelimited: Bytes(); return;
      case kFixed64: Advance(8); return;
      case kFixed32: Advance(4); return;
      default: Malformed("unknown wire type");
    }
  }

  // Appends a repeated int64 field's value(s), packed or not.
  void Int64s(uint32_t wire_type, std::vector<int64_t>& out) {
    if (wire_type == kVarint) {
      out.push_back(static_cast<int64_t>(Varint()));
      return;
    }
    if (wire_type != kLengthDelimited) Malformed("repeated int64 with a bad wire type");
    Reader packed(Bytes());
    while (!packed.done()) out.push_back(static_cast<int64_t>(packed.Varint()));
  }

 private:
  void Advance(size_t n) {
    if (n > rest_.size()) Malformed("truncated fixed-size field");
    rest_.remove_prefix(n);
  }
  std::string_view rest_;
};

template <class OnField>
void ForEachField(std::string_view message, OnField on_field) {
  Reader reader(message);
  while (!reader.done()) {
    uint64_t key = reader.Varint();
    on_field(static_cast<uint32_t>(key >> 3), static_cast<uint32_t>(key & 7), reader);
  }
}

// One shape; a tuple's element shapes go to `tuple_elements` when given.
HloShape ParseShape(std::string_view shape_proto, std::vector<HloShape>* tuple_elements = nullptr) {
  HloShape shape;
  bool tuple = false;
  std::vector<HloShape> elements;
  ForEachField(shape_proto, [&](uint32_t field, uint32_t wire, Reader& r) {
    if (field == kShapeElementType && wire == kVarint) {
      const int type = static_cast<int>(r.Varint());
      tuple = type == kTupleType;
      shape.dtype = FromXlaPrimitiveType(type);
    } else if (field == kShapeTupleShapes && wire == kLengthDelimited) {
      elements.push_back(ParseShape(r.Bytes()));
    } else if (field == kShapeDimensions) {
      r.Int64s(wire, shape.dims);
    } else if (field == kShapeLayout && wire == kLengthDelimited) {
      ForEachField(r.Bytes(), [&](uint32_t lf, uint32_t lw, Reader& lr) {
        if (lf == kLayoutMinorToMajor) lr.Int64s(lw, shape.minor_to_major);
        else lr.Skip(lw);
      });
    } else {
      r.Skip(wire);
    }
  });
  if (tuple_elements != nullptr) {
    if (tuple) *tuple_elements = std::move(elements);
    else tuple_elements->push_back(shape);
  }
  return shape;
}

}  // namespace

ProgramShape EntryProgramShape(std::string_view format, std::string_view program) {
  std::string_view hlo_module_proto = program;
  if (format == "hlo_with_config") {
    hlo_module_proto = {};
    ForEachField(program, [&](uint32_t field, uint32_t wire, Reader& r) {
      if (field == kWithConfigModule && wire == kLengthDelimited) hlo_module_proto = r.Bytes();
      else r.Skip(wire);
    });
  } else if (format != "hlo") {
    throw Error(ErrorKind::kRuntime, "the plugin returned its optimized program as '" +
                                         std::string(format) + "', not HLO");
  }
  ProgramShape shape;
  bool seen = false;
  ForEachField(hlo_module_proto, [&](uint32_t field, uint32_t wire, Reader& r) {
    if (field != kModuleHostProgramShape || wire != kLengthDelimited) return r.Skip(wire);
    seen = true;
    ForEachField(r.Bytes(), [&](uint32_t pf, uint32_t pw, Reader& pr) {
      if (pf == kProgramShapeParameters && pw == kLengthDelimited) shape.parameters.push_back(ParseShape(pr.Bytes()));
      else if (pf == kProgramShapeResult && pw == kLengthDelimited) ParseShape(pr.Bytes(), &shape.results);
      else pr.Skip(pw);
    });
  });
  if (!seen) Malformed("no host_program_shape");
  return shape;
}

}  // namespace cuxla::pjrt
