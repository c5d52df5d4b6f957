// `polyaccel flavors`: accelerator flavors that tile this host, as `openstack flavor create`
// commands with their nova.conf settings, or as JSON.
#include <iostream>

#include "cli/commands.h"
#include "core/byte_size.h"
#include "core/json.h"
#include "core/page_size.h"
#include "render/openstack.h"

namespace polyaccel::cli {

Result<render::FlavorOptions> flavor_options(const FlavorsOptions& o) {
  render::FlavorOptions f;
  f.reserve_cores_per_node = o.reserve_cores_per_node;
  auto memory = parse_byte_size(o.reserve_memory_per_node);
  if (!memory)
    return bad_input("--reserve-memory-per-node " + o.reserve_memory_per_node, "is not a size");
  f.reserve_memory_per_node = *memory;
  if (!o.page_size.empty()) {
    auto page = parse_byte_size(o.page_size);
    if (!page || !is_page_size(*page))
      return bad_input("--page-size " + o.page_size,
                       "is not a page size: a power of two from 4KiB to 16GiB, like 2MiB or 1GiB");
    f.page_size_bytes = *page;
  }
  return f;
}

int run_flavors(const GlobalOptions& g, const FlavorsOptions& o, std::ostream& out) {
  auto options = flavor_options(o);
  if (!options) return fail(options.error());
  auto model = discover_host(g.discover);
  if (!model) return fail(model.error());
  // Options this host cannot meet are bad input (exit 2), not "no flavor".
  if (auto ok = render::check_flavor_options(*model, *options); !ok) return fail(ok.error());
  auto plan = render::plan_flavors(*model, *options);
  if (!plan) {
    if (g.json) {
      out << json_text(nlohmann::json{{"schema_version", render::kFlavorsSchemaVersion},
                                      {"flavors", nlohmann::json::array()},
                                      {"notes", {plan.error().problem}}})
          << "\n";
    } else {
      out << "no accelerator flavors: " << plan.error().message() << "\n";
    }
    return kExitFindings;
  }
  out << (g.json ? json_text(render::to_json(*plan)) + "\n" : render::openstack_commands(*plan));
  return kExitOk;
}

}  // namespace polyaccel::cli
