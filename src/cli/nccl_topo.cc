// `polyaccel nccl-topo [-o FILE]`: the NCCL topology file of this host (NCCL_TOPO_FILE).
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/file_io.h"
#include "render/nccl.h"

namespace polyaccel::cli {

namespace {

// GPUDirect RDMA needs a peer-memory module (or dma-buf, which a sysfs root cannot show): say
// gdr="1" only when the module is loaded, otherwise leave NCCL to decide.
std::optional<bool> gpu_direct_from(const std::string& root, const std::string& mode) {
  if (mode == "on") return true;
  if (mode == "off") return false;
  if (root.empty()) return std::nullopt;
  std::error_code ec;
  for (const char* m : {"sys/module/nvidia_peermem", "sys/module/nv_peer_mem"}) {
    if (std::filesystem::exists(std::filesystem::path(root) / m, ec)) return true;
  }
  return std::nullopt;
}

}  // namespace

int run_nccl_topo(const GlobalOptions& options, const NcclTopoCliOptions& cli, std::ostream& out) {
  auto model = discover_host(options.discover);
  if (!model) return fail(model.error());
  NcclTopoOptions render_options;
  render_options.gpu_direct = gpu_direct_from(filesystem_root(options.discover), cli.gdr);
  std::string xml = render_nccl_topology(*model, render_options);
  if (!cli.output.empty()) {
    if (auto s = write_file_atomically(cli.output, xml); !s) return fail(s.error());
  }
  if (options.json) {
    nlohmann::json j = {
        {"schema_version", 1},
        {"output", cli.output.empty() ? nlohmann::json(nullptr) : nlohmann::json(cli.output)},
        {"xml", xml}};
    out << j.dump(2) << "\n";
  } else if (cli.output.empty()) {
    out << xml;
  } else {
    out << "wrote " << cli.output << " (export NCCL_TOPO_FILE=" << cli.output << ")\n";
  }
  return kExitOk;
}

}  // namespace polyaccel::cli
