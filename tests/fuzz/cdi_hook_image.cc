// polyaccel-cdi-hook on a hostile image (src/cdi_hook/hook.h): the input is the container's
// root (fuzz_support.h's FuzzTree: files such as etc/ld.so.cache and libraries, directories,
// links), then the hooks of an NVIDIA spec run on it: create-symlinks, and update-ldcache over
// the folders the spec names. Whatever the image holds, a hook either works or says why, writes
// nothing beside the container's root, and leaves a cache that reads back whole.
#include <filesystem>

#include "cdi_hook/hook.h"
#include "cdi_hook/ld_cache.h"
#include "core/file_io.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace fs = std::filesystem;
  using namespace polyaccel::cdi_hook;
  polyaccel::fuzz::FuzzTree tree(polyaccel::fuzz::as_string(data, size));
  const std::string root = tree.root().string();
  (void)create_symlinks(root, {"libcuda.so.550.54.15::/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                               "libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so"});
  auto st = update_ldcache(
      root, {"/usr/lib/x86_64-linux-gnu", "/lib", "/usr/lib/x86_64-linux-gnu/vdpau"});
  std::error_code ec;
  if (st) {
    std::string cache;
    if (auto text = polyaccel::read_input_file(tree.root() / "etc/ld.so.cache", kMaxLdCacheBytes,
                                               "cache")) {
      cache = *text;
    }
    POLYACCEL_FUZZ_CHECK(parse_ld_cache(cache).problem.empty());
  }
  // The scratch directory holds the tree and nothing the hooks made beside it.
  for (const auto& e : fs::directory_iterator(polyaccel::fuzz::scratch_dir(), ec))
    POLYACCEL_FUZZ_CHECK(e.path().filename() == "tree");
  return 0;
}
