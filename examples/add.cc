// examples/add.cc — cuxla from C++: load a plugin (CUDA when a GPU and its
// plugin are there, else CPU), make a client,
// copy two arrays to the device, compile and run a StableHLO program, read
// the result back. Built and run as a test (ctest -R example_add).
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "cuxla/cuxla.h"

int main() {
  // Where installed Python packages are; the plugin wheels live there.
  std::vector<std::string> package_dirs;
  std::stringstream dirs(std::getenv("CUXLA_PACKAGE_DIRS") ? std::getenv("CUXLA_PACKAGE_DIRS") : "");
  for (std::string dir; std::getline(dirs, dir, ':');) package_dirs.push_back(dir);

  try {
    const auto choice = cuxla::ChoosePlugin("", "", package_dirs);
    auto client = cuxla::Client::Create(cuxla::Plugin::Load(choice.path), choice.platform, {});
    const cuxla::Device& device = client->devices().front();

    const float x[] = {1, 2, 3, 4, 5, 6};
    const float y[] = {10, 20, 30, 40, 50, 60};
    cuxla::Array a = client->FromHost({x, cuxla::DType::kFloat32, {2, 3}, {}}, device);
    cuxla::Array b = client->FromHost({y, cuxla::DType::kFloat32, {2, 3}, {}}, device);

    auto add = client->Compile(R"(
      func.func public @main(%x: tensor<2x3xf32>, %y: tensor<2x3xf32>) -> tensor<2x3xf32> {
        %0 = stablehlo.add %x, %y : tensor<2x3xf32>
        return %0 : tensor<2x3xf32>
      })", device);
    const cuxla::Array* args[] = {&a, &b};
    std::vector<cuxla::Array> out = add->Execute(args);

    float sum[6];
    out.front().CopyToHost(sum, sizeof(sum));
    for (int i = 0; i < 6; ++i) {
      if (sum[i] != x[i] + y[i]) {
        std::fprintf(stderr, "element %d is %g, not %g\n", i, sum[i], x[i] + y[i]);
        return 1;
      }
    }
    std::printf("%s: [%g %g %g; %g %g %g]\n", client->platform_name().c_str(), sum[0], sum[1], sum[2],
                sum[3], sum[4], sum[5]);
    return 0;
  } catch (const cuxla::Error& error) {
    std::fprintf(stderr, "cuxla: %s\n", error.what());
    return 1;
  }
}
