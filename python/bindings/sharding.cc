// python/bindings/sharding.cc — meshes, sharded arrays and SPMD execution as
// Python sees them: cuxla.Mesh, cuxla.ShardedArray, cuxla.shard.
#include <string>
#include <vector>

#include "bindings.h"

namespace cuxla::bindings {
namespace {

using namespace nb::literals;

// A mesh and the client its devices belong to (kept alive).
struct PyMesh {
  Mesh mesh;
  std::shared_ptr<const ClientState> state;
};

// A partition spec: per dimension, the mesh axis it is split over, or None.
PartitionSpec SpecArgument(nb::handle spec) {
  return ArgumentAs<PartitionSpec>(spec, "a partition spec", "a sequence with a mesh axis name or None per dimension");
}

// Mesh's arguments as JAX's Mesh takes them: one axis name may be a bare string.
PyMesh MakeMesh(nb::handle devices_arg, nb::handle names_arg, nb::handle shape_arg) {
  const auto devices = ArgumentAs<std::vector<PyDevice>>(devices_arg, "Mesh's devices", "a sequence of cuxla.Device");
  const auto axis_names = nb::isinstance<nb::str>(names_arg)
                              ? std::vector<std::string>{nb::cast<std::string>(names_arg)}
                              : ArgumentAs<std::vector<std::string>>(names_arg, "Mesh's axis_names",
                                                                     "a name or a sequence of names");
  const auto shape = shape_arg.is_none()
                         ? std::vector<int64_t>{static_cast<int64_t>(devices.size())}
                         : ArgumentAs<std::vector<int64_t>>(shape_arg, "Mesh's shape", "a sequence of ints");
  if (devices.empty()) throw Error(ErrorKind::kValue, "a mesh needs at least one device");
  PyMesh py{Mesh{shape, axis_names, {}},
            devices.front().state};
  for (const PyDevice& d : devices) {
    if (d.state->client.get() != py.state->client.get())
      throw Error(ErrorKind::kValue, "a mesh's devices must belong to one client");
    py.mesh.devices.push_back(d.device);
  }
  py.mesh.Validate();
  return py;
}

}  // namespace

void RegisterSharding(nb::module_& m, nb::class_<Executable>& executable) {
  nb::class_<PyMesh>(m, "Mesh")
      .def(nb::new_(&MakeMesh), "devices"_a.none(), "axis_names"_a.none(), "shape"_a = nb::none(),
           "Devices of one client in a grid with named axes (row-major); `shape` "
           "defaults to one axis of all the devices.")
      .def_prop_ro("shape", [](const PyMesh& p) { return Tuple(p.mesh.shape); })
      .def_prop_ro("axis_names", [](const PyMesh& p) { return p.mesh.axis_names; })
      .def_prop_ro("devices", [](const PyMesh& p) {
        std::vector<PyDevice> out;
        for (const Device* d : p.mesh.devices) out.emplace_back(p.state, *d);
        return out;
      })
      .def("hlo_sharding", [](const PyMesh& p, nb::handle spec_arg) {
        const auto spec = SpecArgument(spec_arg);
        return HloShardingText(p.mesh, spec, spec.size());
      }, "spec"_a.none(), "The mhlo.sharding attribute text of `spec` (one mesh axis name or "
                   "None per dimension), for annotating a program's arguments and results.")
      .def("__repr__", [](const PyMesh& p) {
        std::string names;
        for (const auto& n : p.mesh.axis_names) names += (names.empty() ? "'" : ", '") + n + "'";
        if (p.mesh.axis_names.size() == 1) names += ",";
        return "Mesh(shape=" + pjrt::TupleText(p.mesh.shape) + ", axis_names=(" + names + "))";
      });

  nb::class_<ShardedArray>(m, "ShardedArray")
      .def_prop_ro("shape", [](const ShardedArray& a) { return Tuple(a.dims()); })
      .def_prop_ro("dtype", [](const ShardedArray& a) { return NumpyDType(a.dtype()); })
      .def_prop_ro("shards", [](const ShardedArray& a) { return a.shards(); },
                   "One Array per partition, in partition (mesh) order.")
      .def_prop_ro("tiles", [](const ShardedArray& a) { return Tuple(a.sharding().tiles); },
                   "How many tiles along each dimension.")
      .def_prop_ro("tile_index", [](const ShardedArray& a) {
        nb::list out;
        for (const auto& index : a.sharding().tile_of_partition) out.append(Tuple(index));
        return out;
      }, "Per shard, the index of its tile along each dimension.")
      .def("__repr__", [](const ShardedArray& a) {
        return "ShardedArray(shape=" + pjrt::TupleText(a.dims()) + ", dtype=" + std::string(DTypeName(a.dtype())) +
               ", " + a.sharding().Description() + ")";
      });

  m.def("_shard", [](std::vector<Array> shards, const PyMesh& mesh, nb::handle spec) {
    return ShardedArray::Of(std::move(shards), mesh.mesh, SpecArgument(spec));
  }, "shards"_a, "mesh"_a, "spec"_a.none());

  // With no client, the mesh's own compiles it (not cached: the cache is a Client's).
  m.def("_compile_for", [](nb::bytes program, const PyMesh& mesh, Client* client) {
    std::string_view text(program.c_str(), program.size());
    if (client != nullptr && mesh.state->client.get() != client->state()->client.get())
      throw Error(ErrorKind::kValue, "the mesh's devices belong to another client than the one "
                                     "compiling: pass the mesh's client, or none");
    nb::gil_scoped_release release;
    return client != nullptr ? client->Compile(text, mesh.mesh.devices)
                             : Executable::Compile(mesh.state, text, mesh.mesh.devices);
  }, "program"_a, "mesh"_a, "client"_a.none());

  executable
      .def_prop_ro("num_partitions", &Executable::num_partitions)
      // Checked and held with the GIL (no other thread can delete a shard
      // meanwhile), run without it (PJRT's threads may need it).
      .def("call_sharded", [](const Executable& e, nb::handle args_arg) {
        const auto args = ArgumentAs<std::vector<const ShardedArray*>>(args_arg, "call_sharded's args",
                                                                       "a sequence of cuxla.ShardedArray");
        const ShardedCall call = PrepareSharded(e, args);
        nb::gil_scoped_release release;
        return RunSharded(e, call);
      }, "args"_a.none(), "Runs an SPMD program on ShardedArrays split as its parameters are; "
                   "returns its results as ShardedArrays.");
}

}  // namespace cuxla::bindings
