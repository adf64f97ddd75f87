#include "pjrt/program_shape.h"

#include <algorithm>
#include <string>

#include "base/error.h"
#include "pjrt/proto_wire.h"
#include "pjrt/xla_proto_fields.h"

namespace cuxla::pjrt {
namespace {

enum ShardingType : int64_t { kReplicated = 0, kTupleSharding = 2, kOther = 3 };  // of xla.OpSharding.Type
constexpr int kTupleType = 13;  // xla.PrimitiveType TUPLE
constexpr std::string_view kSource = "HloModuleProto from the plugin";

// One shape; a tuple's element shapes go to `tuple_elements` when given.
HloShape ParseShape(WireReader shape_proto, std::vector<HloShape>* tuple_elements = nullptr) {
  HloShape shape;
  bool tuple = false;
  std::vector<HloShape> elements;
  shape_proto.ForEachField([&](uint32_t field, uint32_t wire, WireReader& r) {
    if (field == kShapeElementType && wire == kVarint) {
      const int type = static_cast<int>(r.Varint());
      tuple = type == kTupleType;
      shape.dtype = FromXlaPrimitiveType(type);
    } else if (field == kShapeTupleShapes && wire == kLengthDelimited) {
      elements.push_back(ParseShape(r.Message()));
    } else if (field == kShapeDimensions) {
      r.Int64s(wire, shape.dims);
    } else if (field == kShapeLayout && wire == kLengthDelimited) {
      r.Message().ForEachField([&](uint32_t lf, uint32_t lw, WireReader& lr) {
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

// An xla.OpSharding, as read.
struct OpSharding {
  int64_t type = kReplicated;
  std::vector<int64_t> tile_dims, devices, last_tile_dims, iota_dims, iota_perm;
  bool replicate_on_last_tile_dim = false;
  std::vector<OpSharding> tuple;
};

OpSharding ParseOpSharding(WireReader op_sharding) {
  OpSharding op;
  op_sharding.ForEachField([&](uint32_t field, uint32_t wire, WireReader& r) {
    const bool varint = wire == kVarint, message = wire == kLengthDelimited;
    switch (field) {
      case kShardingType: varint ? void(op.type = static_cast<int64_t>(r.Varint())) : r.Skip(wire); break;
      case kShardingTileAssignmentDimensions: r.Int64s(wire, op.tile_dims); break;
      case kShardingTileAssignmentDevices: r.Int64s(wire, op.devices); break;
      case kShardingTupleShardings: message ? op.tuple.push_back(ParseOpSharding(r.Message())) : r.Skip(wire); break;
      case kShardingReplicateOnLastTileDim:
        varint ? void(op.replicate_on_last_tile_dim = r.Varint() != 0) : r.Skip(wire);
        break;
      case kShardingLastTileDims: r.Int64s(wire, op.last_tile_dims); break;
      case kShardingIotaReshapeDims: r.Int64s(wire, op.iota_dims); break;
      case kShardingIotaTransposePerm: r.Int64s(wire, op.iota_perm); break;
      default: r.Skip(wire);
    }
  });
  return op;
}

int64_t Product(const std::vector<int64_t>& values) {
  int64_t product = 1;
  for (int64_t v : values) product *= v;
  return product;
}

// The tile assignment's devices in row-major order: listed, or the iota
// form (iota(n) reshaped to iota_dims, then transposed by iota_perm).
std::vector<int64_t> TileDevices(const OpSharding& op) {
  if (op.iota_dims.empty()) return op.devices;
  const size_t rank = op.iota_dims.size();
  std::vector<int64_t> perm = op.iota_perm;
  if (perm.empty())
    for (size_t k = 0; k < rank; ++k) perm.push_back(static_cast<int64_t>(k));
  if (perm.size() != rank) Malformed(kSource, "iota_transpose_perm of another rank than iota_reshape_dims");
  std::vector<int64_t> transposed(rank);  // the shape after the transpose
  for (size_t k = 0; k < rank; ++k) {
    if (perm[k] < 0 || static_cast<size_t>(perm[k]) >= rank) Malformed(kSource, "iota_transpose_perm out of range");
    transposed[k] = op.iota_dims[static_cast<size_t>(perm[k])];
  }
  const int64_t count = Product(op.iota_dims);
  std::vector<int64_t> devices(static_cast<size_t>(count));
  for (int64_t flat = 0; flat < count; ++flat) {
    const std::vector<int64_t> at = Unravel(static_cast<size_t>(flat), transposed);
    std::vector<int64_t> source(rank);  // the index into the reshaped iota
    for (size_t k = 0; k < rank; ++k) source[static_cast<size_t>(perm[k])] = at[k];
    int64_t value = 0;
    for (size_t k = 0; k < rank; ++k) value = value * op.iota_dims[k] + source[k];
    devices[static_cast<size_t>(flat)] = value;
  }
  return devices;
}

// `op` as tiles of an array of `rank` dimensions over `partitions`
// partitions; nullopt for what Sharding does not describe.
std::optional<Sharding> ToSharding(const OpSharding& op, size_t rank, size_t partitions) {
  if (op.type == kReplicated) return Sharding::Replicated(rank, partitions);
  if (op.type != kOther || op.tile_dims.size() < rank) return std::nullopt;  // maximal, manual, tuple here
  // Tile dimensions past the array's may only replicate.
  const size_t extra = op.tile_dims.size() - rank;
  const bool replicas_only =
      op.replicate_on_last_tile_dim
          ? extra == 1 && op.last_tile_dims.empty()
          : extra == op.last_tile_dims.size() &&
                std::all_of(op.last_tile_dims.begin(), op.last_tile_dims.end(), [](int64_t t) { return t == kReplicated; });
  if (!replicas_only) return std::nullopt;
  const std::vector<int64_t> devices = TileDevices(op);
  if (static_cast<int64_t>(devices.size()) != Product(op.tile_dims) || devices.size() != partitions)
    return std::nullopt;
  Sharding sharding{std::vector<int64_t>(op.tile_dims.begin(), op.tile_dims.begin() + static_cast<std::ptrdiff_t>(rank)),
                    std::vector<std::vector<int64_t>>(partitions)};
  for (size_t flat = 0; flat < devices.size(); ++flat) {
    const std::vector<int64_t> index = Unravel(flat, op.tile_dims);
    const auto partition = static_cast<size_t>(devices[flat]);
    if (partition >= partitions || !sharding.tile_of_partition[partition].empty()) return std::nullopt;
    sharding.tile_of_partition[partition].assign(index.begin(), index.begin() + static_cast<std::ptrdiff_t>(rank));
  }
  return sharding;
}

}  // namespace

ProgramShape EntryProgramShape(std::string_view format, std::string_view program, size_t partitions) {
  std::string_view hlo_module_proto = program;
  if (format == "hlo_with_config") {
    hlo_module_proto = {};
    WireReader(program, kSource).ForEachField([&](uint32_t field, uint32_t wire, WireReader& r) {
      if (field == kWithConfigModule && wire == kLengthDelimited) hlo_module_proto = r.Bytes();
      else r.Skip(wire);
    });
  } else if (format != "hlo") {
    throw Error(ErrorKind::kRuntime, "the plugin returned its optimized program as '" +
                                         std::string(format) + "', not HLO");
  }
  ProgramShape shape;
  bool seen = false;
  std::vector<OpSharding> parameter_ops;
  std::optional<OpSharding> output_op;
  WireReader(hlo_module_proto, kSource).ForEachField([&](uint32_t field, uint32_t wire, WireReader& r) {
    if (field == kModuleSpmdParametersShardings && wire == kLengthDelimited)
      return parameter_ops.push_back(ParseOpSharding(r.Message()));
    if (field == kModuleSpmdOutputSharding && wire == kLengthDelimited) return output_op.emplace(ParseOpSharding(r.Message())), void();
    if (field != kModuleHostProgramShape || wire != kLengthDelimited) return r.Skip(wire);
    seen = true;
    r.Message().ForEachField([&](uint32_t pf, uint32_t pw, WireReader& pr) {
      if (pf == kProgramShapeParameters && pw == kLengthDelimited) shape.parameters.push_back(ParseShape(pr.Message()));
      else if (pf == kProgramShapeResult && pw == kLengthDelimited) ParseShape(pr.Message(), &shape.results);
      else pr.Skip(pw);
    });
  });
  if (!seen) Malformed(kSource, "no host_program_shape");
  // Without SPMD shardings in the module (one partition, or none annotated),
  // every value is whole on each partition.
  for (size_t i = 0; i < shape.parameters.size(); ++i) {
    const size_t rank = shape.parameters[i].dims.size();
    shape.parameter_shardings.push_back(i < parameter_ops.size() ? ToSharding(parameter_ops[i], rank, partitions)
                                                                 : Sharding::Replicated(rank, partitions));
  }
  for (size_t i = 0; i < shape.results.size(); ++i) {
    const size_t rank = shape.results[i].dims.size();
    if (!output_op) {
      shape.result_shardings.push_back(Sharding::Replicated(rank, partitions));
    } else if (output_op->type == kTupleSharding) {
      shape.result_shardings.push_back(i < output_op->tuple.size() ? ToSharding(output_op->tuple[i], rank, partitions)
                                                                   : std::nullopt);
    } else {
      shape.result_shardings.push_back(shape.results.size() == 1 ? ToSharding(*output_op, rank, partitions)
                                                                 : std::nullopt);
    }
  }
  return shape;
}

}  // namespace cuxla::pjrt
