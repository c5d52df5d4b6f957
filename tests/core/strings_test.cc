// Escaping what we print: bytes we did not choose stay on one line and never break JSON.
#include "core/strings.h"
#include "core/format_control.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/json.h"

namespace polyaccel {
namespace {

TEST(Printable, KeepsUtf8AndEscapesTheRest) {
  EXPECT_EQ(printable("gpu0 ok"), "gpu0 ok");
  EXPECT_EQ(printable("Zürich 東京"), "Zürich 東京");
  EXPECT_EQ(printable("a\nb\tc\rd"), "a\\nb\\tc\\rd");
  EXPECT_EQ(printable(std::string("\x00\x1b[31m\x7f", 7)), "\\x00\\x1b[31m\\x7f");
  EXPECT_EQ(printable("bad\xff"), "bad\\xff");
  // Overlong, surrogate, truncated and beyond-U+10FFFF sequences are not UTF-8.
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");
  EXPECT_EQ(printable("\xe6\x9d"), "\\xe6\\x9d");
  EXPECT_EQ(printable("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");
}

// issue 40 (7): C1 controls and bidi overrides are valid UTF-8 yet rewrite what a terminal shows
// (U+009B is a CSI; U+202E turns the rest of the line around): escaped, and named by the check.
TEST(Printable, EscapesC1ControlsAndBidiOverrides) {
  EXPECT_EQ(printable("vm\u009b31m"), "vm\\u{009B}31m");
  EXPECT_EQ(printable("a\u0085b"), "a\\u{0085}b");
  EXPECT_EQ(printable("evil\u202Egnp.exe"), "evil\\u{202E}gnp.exe");
  EXPECT_EQ(printable("x\u2066y\u2069\u200F\u2028"), "x\\u{2066}y\\u{2069}\\u{200F}\\u{2028}");
  EXPECT_EQ(printable("caf\u00e9 \u65e5\u672c"), "caf\u00e9 \u65e5\u672c");  // letters stay
  EXPECT_EQ(format_control_in("vm-\u202e1"), 0x202Eu);
  EXPECT_EQ(format_control_in("\u00a0\u00e9"), std::nullopt);  // U+00A0 is not C1
}

TEST(Printable, ValidUtf8) {
  EXPECT_TRUE(valid_utf8("plain"));
  EXPECT_TRUE(valid_utf8("東京"));
  EXPECT_FALSE(valid_utf8("bad\xff"));
  EXPECT_FALSE(valid_utf8("\xc0\xaf"));
}

TEST(Printable, QuoteInputCutsLongValues) {
  EXPECT_EQ(quote_input("x\ny"), "'x\\ny'");
  std::string big(100000, 'a');
  std::string q = quote_input(big);
  EXPECT_LT(q.size(), 200u);
  EXPECT_NE(q.find("100000 bytes"), std::string::npos);
}

TEST(ErrorMessage, IsOneLineWhateverTheInputHeld) {
  Error e = bad_input("--name bad\nname\xff", "is not\r\na name", "try\tagain");
  std::string m = e.message();
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  EXPECT_EQ(m.find('\r'), std::string::npos) << m;
  EXPECT_NE(m.find("bad\\nname\\xff"), std::string::npos) << m;
  EXPECT_TRUE(valid_utf8(m));
}

TEST(JsonText, NonUtf8DoesNotAbortTheDump) {
  nlohmann::json j = {{"hostname", "node\xff\xfe"}, {"name", "bad\xff"}};
  std::string text;
  ASSERT_NO_THROW(text = json_text(j));
  auto back = nlohmann::json::parse(text);  // what we print is valid JSON again
  EXPECT_EQ(back["name"], "bad\xef\xbf\xbd");
}

TEST(JsonInteger, RefusesWhatGetWouldWrap) {
  auto parse = [](const char* text) { return nlohmann::json::parse(text); };
  EXPECT_EQ(*json_integer<unsigned>(parse("4294967295"), "vcpus"), 4294967295u);
  for (const char* text : {"4294967296", "4294967297", "18446744073709551615", "-1", "1.5",
                           "99999999999999999999", "1e300", "\"4\"", "null", "true", "[1]"}) {
    auto v = json_integer<unsigned>(parse(text), "vcpus");
    ASSERT_FALSE(v) << text;
    EXPECT_EQ(v.error().input, "vcpus");
  }
  EXPECT_FALSE(json_integer<int>(parse("4294967297"), "schema_version"));
  EXPECT_EQ(*json_integer<int>(parse("-3"), "n"), -3);
  EXPECT_FALSE(json_integer<unsigned>(parse("0"), "vcpus", 1u, 10u));
  EXPECT_EQ(*json_integer<unsigned>(nlohmann::json(5), "n"), 5u);  // built in code: signed
}

// What a server says is read field by field with the type asked: a member of another type, a
// missing one or a parent that is no object gives the fallback, never nlohmann's type_error (an
// API server's `"kind": 1` threw out of parse_claim, found by fuzz_dra_claim in CI).
TEST(JsonMember, AnotherTypeIsNoMember) {
  auto parse = [](const char* text) { return nlohmann::json::parse(text); };
  const auto claim =
      parse(R"({"kind":"ResourceClaim","n":1,"meta":{"name":"a"},"list":[1],"b":true})");
  EXPECT_EQ(json_string(claim, "kind"), "ResourceClaim");
  EXPECT_EQ(json_string(claim, "n", "none"), "none");
  EXPECT_EQ(json_string(claim, "absent"), "");
  EXPECT_EQ(json_string(parse("[1]"), "kind", "x"), "x");
  EXPECT_EQ(json_string(json_object(claim, "meta"), "name"), "a");
  EXPECT_TRUE(json_object(claim, "kind").is_object() && json_object(claim, "kind").empty());
  EXPECT_TRUE(json_object(parse("3"), "meta").empty());
  EXPECT_EQ(json_array(claim, "list").size(), 1u);
  EXPECT_TRUE(json_array(claim, "meta").is_array() && json_array(claim, "meta").empty());
  EXPECT_TRUE(json_bool(claim, "b", false));
  EXPECT_FALSE(json_bool(claim, "n", false));
  EXPECT_TRUE(json_bool(parse("null"), "b", true));
}

}  // namespace
}  // namespace polyaccel

// A message cut to an API field's limit (an Event's 1024 bytes) stays valid UTF-8: the cut never
// lands inside a character, and a byte that is not UTF-8 counts alone.
TEST(Strings, Utf8PrefixNeverEndsInsideACharacter) {
  const std::string name = "konfig-\xc3\xa9t\xc3\xa9-\xe6\x97\xa5\xe6\x9c\xac-\xf0\x9f\x9a\x80";
  for (size_t max = 0; max <= name.size() + 1; ++max) {
    std::string_view cut = polyaccel::utf8_prefix(name, max);
    EXPECT_LE(cut.size(), max);
    EXPECT_TRUE(polyaccel::valid_utf8(cut)) << max;
    EXPECT_EQ(name.compare(0, cut.size(), cut), 0);
  }
  EXPECT_EQ(polyaccel::utf8_prefix(name, 9), "konfig-\xc3\xa9");
  EXPECT_EQ(polyaccel::utf8_prefix(name, 8), "konfig-");
  EXPECT_EQ(polyaccel::utf8_prefix(std::string(2000, 'a') + "\xe6\x97\xa5", 2001).size(), 2000u);
  EXPECT_EQ(polyaccel::utf8_prefix("ab\xff\xfe", 3), "ab\xff");
}
