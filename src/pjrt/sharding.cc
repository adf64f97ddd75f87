#include "pjrt/sharding.h"

#include <algorithm>
#include <numeric>

#include "base/error.h"
#include "pjrt/text.h"

namespace cuxla {
namespace {

using pjrt::ListText;
using pjrt::TupleText;

[[noreturn]] void Bad(const std::string& message) { throw Error(ErrorKind::kValue, message); }

// The mesh axis of each array dimension (nullopt: whole), checked.
std::vector<std::optional<size_t>> SpecAxes(const Mesh& mesh, const PartitionSpec& spec, size_t rank) {
  if (spec.size() != rank)
    Bad("the partition spec has " + std::to_string(spec.size()) + " entries for an array of rank " +
        std::to_string(rank));
  std::vector<std::optional<size_t>> axes;
  for (const auto& name : spec) {
    if (!name) {
      axes.emplace_back();
      continue;
    }
    const size_t axis = mesh.Axis(*name);
    if (std::find(axes.begin(), axes.end(), axis) != axes.end())
      Bad("mesh axis '" + *name + "' is used by two dimensions of the partition spec");
    axes.emplace_back(axis);
  }
  return axes;
}

}  // namespace

void Mesh::Validate() const {
  if (shape.empty() || shape.size() != axis_names.size())
    Bad("a mesh needs one name per axis: " + std::to_string(shape.size()) + " axes, " +
        std::to_string(axis_names.size()) + " names");
  int64_t size = 1;
  for (int64_t n : shape) {
    if (n < 1) Bad("mesh axes must have at least one device, got shape (" + ListText(shape) + ")");
    size *= n;
  }
  if (static_cast<size_t>(size) != devices.size())
    Bad("a mesh of shape (" + ListText(shape) + ") needs " + std::to_string(size) + " devices, got " +
        std::to_string(devices.size()));
  for (size_t i = 0; i < axis_names.size(); ++i)
    if (std::find(axis_names.begin(), axis_names.begin() + i, axis_names[i]) != axis_names.begin() + i)
      Bad("mesh axis name '" + axis_names[i] + "' is given twice");
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i] == nullptr) Bad("a mesh device is missing");
    if (devices[i]->platform != devices.front()->platform) Bad("a mesh's devices must be of one platform");
    if (std::find(devices.begin(), devices.begin() + i, devices[i]) != devices.begin() + i)
      Bad("device " + std::to_string(devices[i]->id) + " appears twice in the mesh");
  }
}

size_t Mesh::Axis(std::string_view name) const {
  auto it = std::find(axis_names.begin(), axis_names.end(), name);
  if (it == axis_names.end()) Bad("the mesh has no axis '" + std::string(name) + "'");
  return static_cast<size_t>(it - axis_names.begin());
}

std::vector<int64_t> pjrt::Unravel(size_t flat, std::span<const int64_t> dims) {
  std::vector<int64_t> coordinate(dims.size());
  for (size_t k = dims.size(); k-- > 0;) {
    coordinate[k] = static_cast<int64_t>(flat % static_cast<size_t>(dims[k]));
    flat /= static_cast<size_t>(dims[k]);
  }
  return coordinate;
}

Sharding Sharding::Replicated(size_t rank, size_t partitions) {
  return Sharding{std::vector<int64_t>(rank, 1),
                  std::vector<std::vector<int64_t>>(partitions, std::vector<int64_t>(rank, 0))};
}

Sharding Sharding::Of(const Mesh& mesh, const PartitionSpec& spec, size_t rank) {
  const std::vector<std::optional<size_t>> axes = SpecAxes(mesh, spec, rank);
  Sharding sharding = Replicated(rank, mesh.devices.size());
  for (size_t d = 0; d < rank; ++d)
    if (axes[d]) sharding.tiles[d] = mesh.shape[*axes[d]];
  for (size_t p = 0; p < mesh.devices.size(); ++p) {
    const std::vector<int64_t> coordinate = pjrt::Unravel(p, mesh.shape);  // along each mesh axis
    for (size_t d = 0; d < rank; ++d)
      if (axes[d]) sharding.tile_of_partition[p][d] = coordinate[*axes[d]];
  }
  return sharding;
}

std::vector<int64_t> Sharding::GlobalDims(std::span<const int64_t> tile_dims) const {
  std::vector<int64_t> dims(tile_dims.begin(), tile_dims.end());
  for (size_t d = 0; d < dims.size() && d < tiles.size(); ++d) dims[d] *= tiles[d];
  return dims;
}

std::vector<int64_t> Sharding::TileDims(std::span<const int64_t> global_dims) const {
  std::vector<int64_t> dims(global_dims.begin(), global_dims.end());
  for (size_t d = 0; d < dims.size() && d < tiles.size(); ++d) {
    if (dims[d] % tiles[d] != 0)
      Bad("dimension " + std::to_string(d) + " of shape " + TupleText(global_dims) +
          " does not split evenly into " + std::to_string(tiles[d]) + " tiles");
    dims[d] /= tiles[d];
  }
  return dims;
}

std::string Sharding::Description() const {
  return "tiles " + TupleText(tiles) + " over " + std::to_string(partitions()) + " partitions";
}

std::string HloShardingText(const Mesh& mesh, const PartitionSpec& spec, size_t rank) {
  const std::vector<std::optional<size_t>> axes = SpecAxes(mesh, spec, rank);
  // The tile grid takes the used axes in dimension order, then the unused
  // ones, which replicate: "<=[mesh shape]T(order)" lists the devices so.
  std::vector<int64_t> tile_dims, order;
  for (const auto& axis : axes) {
    tile_dims.push_back(axis ? mesh.shape[*axis] : 1);
    if (axis) order.push_back(static_cast<int64_t>(*axis));
  }
  int64_t replicas = 1;
  for (size_t a = 0; a < mesh.shape.size(); ++a)
    if (std::find(order.begin(), order.end(), static_cast<int64_t>(a)) == order.end()) {
      order.push_back(static_cast<int64_t>(a));
      replicas *= mesh.shape[a];
    }
  if (replicas == static_cast<int64_t>(mesh.devices.size())) return "{replicated}";
  std::vector<int64_t> identity(order.size());
  std::iota(identity.begin(), identity.end(), 0);
  std::string text = "{devices=[" + ListText(tile_dims);
  if (replicas > 1) text += ',' + std::to_string(replicas);
  text += "]<=[" + ListText(mesh.shape) + "]";
  if (order != identity) text += "T(" + ListText(order) + ")";
  return text + (replicas > 1 ? " last_tile_dim_replicate}" : "}");
}

}  // namespace cuxla
