// The allocation state file: round trip, refusal of broken and foreign files, the lock.
#include <gtest/gtest.h>

#include <fstream>

#include "core/file_io.h"
#include "place/allocation_store.h"
#include "place_test_support.h"

namespace polyaccel::place {
namespace {

using polyaccel::testing::TempDir;
using namespace polyaccel::place::testing;

TEST(AllocationStore, AbsentFileIsEmptyAndRoundTrips) {
  TempDir tmp;
  AllocationStore store(tmp.path() / "sub" / "state.json");
  auto empty = store.load();
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->placements.empty());
  auto v = view_of(fixture(kXe8640));
  auto f = fit_on(
      v,
      request(6, 8, {{"hw:cpu_policy", "dedicated"}, {"hw:emulator_threads_policy", "isolate"}}));
  ASSERT_TRUE(f.fit);
  f.placement.name = "vm1";
  ASSERT_TRUE(store.update([&](AllocationState& s) -> Result<bool> {
    s.host = v.hostname;
    s.placements.push_back(f.placement);
    return true;
  }));
  auto back = store.load();
  ASSERT_TRUE(back) << back.error().message();
  ASSERT_EQ(back->placements.size(), 1u);
  EXPECT_EQ(to_json(back->placements[0]), to_json(f.placement));
  EXPECT_EQ(back->host, v.hostname);
}

TEST(AllocationStore, BrokenOrForeignFilesAreRefusedAndKept) {
  TempDir tmp;
  for (const std::string& text :
       {std::string("{\"placements\": ["), std::string("{\"vms\": []}"),
        std::string(
            "{\"schema\": \"polyaccel-allocations\", \"schema_version\": 99, \"placements\": []}"),
        std::string("{\"schema\": \"polyaccel-allocations\", \"schema_version\": 1, "
                    "\"placements\": [{\"name\": \"x\"}]}")}) {
    auto path = tmp.path() / "state.json";
    ASSERT_TRUE(write_file_atomically(path, text));
    AllocationStore store(path);
    EXPECT_FALSE(store.load()) << text;
    auto s = store.update([](AllocationState&) -> Result<bool> { return true; });
    ASSERT_FALSE(s) << text;
    EXPECT_NE(s.error().message().find("state.json"), std::string::npos);
    EXPECT_EQ(*read_text_file(path), text) << "a refused file is never overwritten";
  }
}

TEST(AllocationStore, NoWriteWhenTheChangeDeclines) {
  TempDir tmp;
  auto path = tmp.path() / "state.json";
  AllocationStore store(path);
  ASSERT_TRUE(store.update([](AllocationState&) -> Result<bool> { return false; }));
  EXPECT_FALSE(std::filesystem::exists(path));
  auto err = store.update([](AllocationState&) -> Result<bool> { return bad_input("x", "y"); });
  EXPECT_FALSE(err);
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace polyaccel::place
