#include "core/file_io.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "support/test_support.h"

namespace polyaccel {
namespace {

using polyaccel::testing::TempDir;

TEST(FileIo, ReadsSysfsStyleFiles) {
  TempDir dir;
  std::ofstream(dir.path() / "nr_hugepages") << "2048\n";
  std::ofstream(dir.path() / "class") << "0x030200\n";
  std::ofstream(dir.path() / "speed") << "  16.0 GT/s PCIe  \nsecond line\n";
  EXPECT_EQ(read_int_file(dir.path() / "nr_hugepages"), 2048);
  EXPECT_EQ(read_int_file(dir.path() / "class"), 0x030200);
  EXPECT_EQ(read_first_line(dir.path() / "speed"), "16.0 GT/s PCIe");
  EXPECT_FALSE(read_text_file(dir.path() / "absent"));
  EXPECT_FALSE(read_text_file(dir.path()));  // a directory
  EXPECT_FALSE(read_int_file(dir.path() / "speed"));
}

TEST(FileIo, AtomicWriteReplacesWholeFileAndLeavesNoTemporary) {
  TempDir dir;
  auto target = dir.path() / "state.json";
  ASSERT_TRUE(write_file_atomically(target, "first"));
  ASSERT_TRUE(write_file_atomically(target, "second, longer content"));
  EXPECT_EQ(read_text_file(target), "second, longer content");
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST(FileIo, AtomicWriteIntoMissingDirectoryFailsWithPath) {
  TempDir dir;
  auto target = dir.path() / "no" / "such" / "state.json";
  auto st = write_file_atomically(target, "x");
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().input, target.string());
  EXPECT_FALSE(std::filesystem::exists(target));
}

}  // namespace
}  // namespace polyaccel
