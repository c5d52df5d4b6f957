// The one number parser: every value that does not fit is refused by name, never wrapped.
#include "core/number.h"

#include "core/host_model.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace polyaccel {
namespace {

using namespace std::chrono_literals;

TEST(ParseInteger, AcceptsPlainDecimalsInRange) {
  EXPECT_EQ(*parse_integer<unsigned>("0", "n"), 0u);
  EXPECT_EQ(*parse_integer<unsigned>("4294967295", "n"), 4294967295u);
  EXPECT_EQ(*parse_unsigned("18446744073709551615", "n"), UINT64_MAX);
  EXPECT_EQ(*parse_integer<int>("-2147483648", "n"), INT32_MIN);
  EXPECT_EQ(*parse_integer<unsigned>("007", "n"), 7u);
}

// The values that wrapped or aborted before: each type's limit plus one, 2^32 and 2^64 and past.
TEST(ParseInteger, RefusesWhatDoesNotFitByName) {
  for (const char* text : {"4294967296", "4294967297", "18446744073709551616",
                           "99999999999999999999", "340282366920938463463374607431768211456"}) {
    auto v = parse_integer<unsigned>(text, "hw:numa_nodes");
    ASSERT_FALSE(v) << text;
    EXPECT_EQ(v.error().code, ErrorCode::bad_input);
    EXPECT_EQ(v.error().input, "hw:numa_nodes");
    EXPECT_NE(v.error().problem.find("out of range"), std::string::npos) << v.error().problem;
  }
  EXPECT_FALSE(parse_integer<std::uint8_t>("256", "n"));
  EXPECT_FALSE(parse_integer<int>("2147483648", "n"));
  EXPECT_FALSE(parse_integer<int>("-2147483649", "n"));
  EXPECT_FALSE(parse_signed("9223372036854775808", "n", INT64_MIN, INT64_MAX));
  EXPECT_FALSE(parse_signed("-9223372036854775809", "n", INT64_MIN, INT64_MAX));
}

TEST(ParseInteger, RefusesWhatIsNoPlainWholeNumber) {
  for (const char* text : {"", " 1", "1 ", "+1", "-1", "1e8", "0x10", "1.0", "1,000", "١", "nan",
                           "inf", "1\n", "\xff"}) {
    auto v = parse_integer<unsigned>(text, "--vcpus");
    ASSERT_FALSE(v) << text;
    EXPECT_EQ(v.error().input, "--vcpus");
    // The text is quoted escaped: the message stays one line whatever it held.
    EXPECT_EQ(v.error().message().find('\n'), std::string::npos);
  }
  EXPECT_FALSE(parse_signed("-", "n", -5, 5));
  EXPECT_FALSE(parse_signed("--1", "n", -5, 5));
}

TEST(ParseInteger, HonoursTheRangeGiven) {
  EXPECT_FALSE(parse_integer<unsigned>("0", "replicas", 1, 1024));
  EXPECT_FALSE(parse_integer<unsigned>("1025", "replicas", 1, 1024));
  EXPECT_EQ(*parse_integer<unsigned>("1024", "replicas", 1, 1024), 1024u);
  auto v = parse_integer<unsigned>("0", "replicas", 1, 1024);
  EXPECT_NE(v.error().problem.find("1..1024"), std::string::npos) << v.error().problem;
}

TEST(ParseHex, AcceptsPrefixAndRefusesOverflow) {
  EXPECT_EQ(*parse_hex("10de", "vendor", 0xffff), 0x10deu);
  EXPECT_EQ(*parse_hex("0x10DE", "vendor", 0xffff), 0x10deu);
  EXPECT_FALSE(parse_hex("10000", "vendor", 0xffff));
  EXPECT_FALSE(parse_hex("0x", "vendor", 0xffff));
  EXPECT_FALSE(parse_hex("fffffffffffffffff", "id", UINT64_MAX));
  EXPECT_FALSE(parse_hex("g", "id", UINT64_MAX));
  EXPECT_FALSE(parse_hex("-1", "id", UINT64_MAX));
}

TEST(ParseFinite, RefusesNanInfAndHuge) {
  EXPECT_DOUBLE_EQ(*parse_finite("1.5", "--cpu-allocation-ratio", 0, 1000), 1.5);
  EXPECT_DOUBLE_EQ(*parse_finite("2e2", "r", 0, 1000), 200);
  for (const char* text : {"nan", "NaN", "inf", "-inf", "infinity", "1e300", "1e400", "0x10", "",
                           " 1", "1.5x", "1001", "-0.5"}) {
    EXPECT_FALSE(parse_finite(text, "r", 0, 1000)) << text;
  }
}

TEST(ParseDuration, UnitsAndBounds) {
  const auto lo = 100ms;
  const auto hi = std::chrono::milliseconds(std::chrono::hours(24));
  EXPECT_EQ(*parse_duration("10", "--interval", lo, hi), 10000ms);
  EXPECT_EQ(*parse_duration("2.5s", "--interval", lo, hi), 2500ms);
  EXPECT_EQ(*parse_duration("500ms", "--interval", lo, hi), 500ms);
  EXPECT_EQ(*parse_duration("1m", "--interval", lo, hi), 60000ms);
  EXPECT_EQ(*parse_duration("1h", "--interval", lo, hi), 3600000ms);
  EXPECT_EQ(*parse_duration("1d", "--interval", lo, hi), 86400000ms);
  // Each of these made the samplers spin ("sampling every -9223372036854775808 ms").
  for (const char* text : {"nan", "inf", "-inf", "1e300", "9e12s", "1e15", "2d", "99ms", "0", "0s",
                           "-1s", "", "s", "10x", "10 s", "1e-9"}) {
    auto v = parse_duration(text, "--interval", lo, hi);
    ASSERT_FALSE(v) << text;
    EXPECT_EQ(v.error().input, "--interval") << text;
  }
}

// A vendor library's or a capture's text, read with the same parser: nothing wraps or overflows
// the sm number NCCL and the node labels are made of.
TEST(ComputeCapability, TwoSmallWholeNumbers) {
  EXPECT_EQ(compute_capability_numbers("9.0"), std::pair(9u, 0u));
  EXPECT_EQ(compute_capability_numbers("12.1"), std::pair(12u, 1u));
  for (const char* bad : {"", "9", "9.", ".0", "-1.5", "9.-1", "4294967305.0", "100.0", "9.0.1",
                          "9,0", " 9.0", "0x9.0", "9.0a"})
    EXPECT_EQ(compute_capability_numbers(bad), std::nullopt) << bad;
}

}  // namespace
}  // namespace polyaccel
