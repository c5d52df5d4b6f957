#include "core/pci_address.h"

#include <gtest/gtest.h>

namespace polyaccel {
namespace {

TEST(PciAddress, ParsesSysfsNvmlAndShortForms) {
  auto a = PciAddress::parse("0000:3b:00.0");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->bus, 0x3b);
  EXPECT_EQ(a->to_string(), "0000:3b:00.0");
  auto nvml = PciAddress::parse("00000000:3B:00.1");
  ASSERT_TRUE(nvml);
  EXPECT_EQ(nvml->to_string(), "0000:3b:00.1");
  auto shortform = PciAddress::parse("cb:00.0");
  ASSERT_TRUE(shortform);
  EXPECT_EQ(shortform->to_string(), "0000:cb:00.0");
  auto domain = PciAddress::parse("0035:04:00.0");
  ASSERT_TRUE(domain);
  EXPECT_EQ(domain->domain, 0x35u);
}

TEST(PciAddress, RefusesMalformed) {
  for (const char* bad :
       {"", "3b:00", "0000:3b:00.8", "0000:3b:20.0", "zz:00.0", "0000:3b:00.0x", "0000:123:00.0"}) {
    EXPECT_FALSE(PciAddress::parse(bad)) << bad;
  }
}

TEST(PciAddress, SameDeviceIgnoresFunction) {
  auto a = *PciAddress::parse("0000:4d:00.0");
  auto b = *PciAddress::parse("0000:4d:00.1");
  auto c = *PciAddress::parse("0000:4e:00.0");
  EXPECT_TRUE(a.same_device(b));
  EXPECT_FALSE(a.same_device(c));
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
}

}  // namespace
}  // namespace polyaccel
