#include "core/cpuset.h"

#include <gtest/gtest.h>

namespace polyaccel {
namespace {

TEST(CpuSet, ParsesKernelListFormat) {
  auto s = CpuSet::parse_list("0-3,8,10-11\n");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->to_vector(), (std::vector<unsigned>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(s->to_list(), "0-3,8,10-11");
  EXPECT_EQ(s->count(), 7u);
  EXPECT_EQ(s->first(), 0u);
}

TEST(CpuSet, EmptyStringIsEmptySet) {
  auto s = CpuSet::parse_list("");
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->empty());
  EXPECT_EQ(s->to_list(), "");
  EXPECT_FALSE(s->first());
}

TEST(CpuSet, RefusesMalformedLists) {
  for (const char* bad : {"a", "1-", "-3", "3-1", "1,,2", "1.5", "99999999999"}) {
    EXPECT_FALSE(CpuSet::parse_list(bad)) << bad;
  }
}

TEST(CpuSet, SetOperationsAcrossWords) {
  CpuSet a{1, 63, 64, 200};
  CpuSet b{63, 200, 300};
  EXPECT_EQ((a & b).to_vector(), (std::vector<unsigned>{63, 200}));
  EXPECT_EQ((a | b).count(), 5u);
  EXPECT_EQ((a - b).to_vector(), (std::vector<unsigned>{1, 64}));
  EXPECT_TRUE(a.intersects(b));
  EXPECT_FALSE((a - b).intersects(b));
  EXPECT_TRUE((a | b).contains(a));
  EXPECT_FALSE(a.contains(b));
  // Trailing empty words do not make equal sets differ.
  CpuSet c{300};
  c.clear(300);
  EXPECT_EQ(c, CpuSet{});
}

// The fit's allocation-free forms agree with operator- across words and sets of other lengths.
TEST(CpuSet, CountAndAppendWithoutAgreeWithDifference) {
  const CpuSet a{1, 63, 64, 200};
  for (const CpuSet& b : {CpuSet{63, 200, 300}, CpuSet{}, CpuSet{1}, CpuSet{1, 63, 64, 200}}) {
    EXPECT_EQ(a.count_without(b), (a - b).count());
    std::vector<unsigned> out{7};  // appended to, not replaced
    a.append_without(b, out);
    std::vector<unsigned> expected{7};
    for (unsigned pu : (a - b).to_vector())
      expected.push_back(pu);
    EXPECT_EQ(out, expected);
  }
  EXPECT_EQ(CpuSet{}.count_without(a), 0u);
}

}  // namespace
}  // namespace polyaccel
