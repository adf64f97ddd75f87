// pjrt/sharding.h — how an array is split over the partitions of an SPMD
// program: device meshes, partition specs, the grid of tiles they make, and
// the HLO sharding text that annotates a program with them.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pjrt/device.h"

namespace cuxla {

// Devices in a grid with named axes, in row-major order: a program compiled
// for the mesh runs its partition p on devices[p].
struct Mesh {
  std::vector<int64_t> shape;
  std::vector<std::string> axis_names;
  std::vector<const Device*> devices;

  // Checks sizes, names and devices (distinct, one client); ValueError-kind Error.
  void Validate() const;
  // The index of the axis called `name`; ValueError-kind Error if none.
  size_t Axis(std::string_view name) const;
};

// For each dimension of an array, the mesh axis it is split over, or
// nullopt: whole. Along the axes no dimension uses, the array is replicated.
using PartitionSpec = std::vector<std::optional<std::string>>;

// The tiles of an array split over N partitions: how many along each
// dimension, and which tile each partition holds (partitions holding the
// same tile are replicas). Tiles are equal: every dimension divides evenly.
struct Sharding {
  std::vector<int64_t> tiles;                             // per dimension, >= 1
  std::vector<std::vector<int64_t>> tile_of_partition;  // per partition, a tile index per dimension

  static Sharding Replicated(size_t rank, size_t partitions);
  // `spec` over `mesh` for an array of rank `rank`; ValueError-kind Error for
  // a spec of another rank, an unknown axis or one used twice.
  static Sharding Of(const Mesh& mesh, const PartitionSpec& spec, size_t rank);

  size_t partitions() const noexcept { return tile_of_partition.size(); }
  // The array's shape from one tile's, and a tile's from the array's (the
  // latter a ValueError-kind Error when a dimension does not divide evenly).
  std::vector<int64_t> GlobalDims(std::span<const int64_t> tile_dims) const;
  std::vector<int64_t> TileDims(std::span<const int64_t> global_dims) const;
  // "tiles (2, 1) over 2 partitions", for messages.
  std::string Description() const;
  bool operator==(const Sharding&) const = default;
};

namespace pjrt {

// The row-major coordinates of element `flat` of a grid of `dims`.
std::vector<int64_t> Unravel(size_t flat, std::span<const int64_t> dims);

}  // namespace pjrt

// The HLO sharding (the `mhlo.sharding` attribute of a StableHLO argument or
// result) of `spec` over `mesh`, e.g. "{devices=[2,1]<=[2]}".
std::string HloShardingText(const Mesh& mesh, const PartitionSpec& spec, size_t rank);

}  // namespace cuxla
