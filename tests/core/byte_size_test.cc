#include "core/byte_size.h"

#include <gtest/gtest.h>

namespace polyaccel {
namespace {

TEST(ByteSize, ParsesBinaryUnits) {
  EXPECT_EQ(parse_byte_size("4096"), 4096u);
  EXPECT_EQ(parse_byte_size("2MiB"), 2u << 20);
  EXPECT_EQ(parse_byte_size("2M"), 2u << 20);
  EXPECT_EQ(parse_byte_size("1GiB"), 1ull << 30);
  EXPECT_EQ(parse_byte_size("64 GB"), 64ull << 30);
  EXPECT_EQ(parse_byte_size("1048576kb"), 1ull << 30);
  EXPECT_EQ(parse_byte_size("2TiB"), 2ull << 40);
}

TEST(ByteSize, RefusesGarbageAndOverflow) {
  for (const char* bad : {"", "GiB", "12XB", "-1", "1.5GiB", "99999999999TiB"}) {
    EXPECT_FALSE(parse_byte_size(bad)) << bad;
  }
}

TEST(ByteSize, FormatsForPeople) {
  EXPECT_EQ(format_byte_size(4096), "4 KiB");
  EXPECT_EQ(format_byte_size(2u << 20), "2 MiB");
  EXPECT_EQ(format_byte_size(1ull << 30), "1 GiB");
  EXPECT_EQ(format_byte_size(1536ull << 20), "1.5 GiB");
  EXPECT_EQ(format_byte_size(100), "100 B");
}

}  // namespace
}  // namespace polyaccel
