#include "pipeline/utf8.h"

#include <gtest/gtest.h>

namespace vapipe {
namespace {

TEST(Utf8, WellFormedTextPassesAndTheFirstBadByteIsFound) {
  EXPECT_EQ(first_invalid_utf8(""), std::string_view::npos);
  EXPECT_EQ(first_invalid_utf8("plain ascii"), std::string_view::npos);
  EXPECT_EQ(first_invalid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x8E\xA5"), std::string_view::npos);  // é € 🎥
  EXPECT_EQ(first_invalid_utf8("caf\xE9.mp4"), 3u);             // Latin-1
  EXPECT_EQ(first_invalid_utf8("ab\xC3"), 2u);                   // cut short
  EXPECT_EQ(first_invalid_utf8("\xC0\xAF"), 0u);                 // overlong '/'
  EXPECT_EQ(first_invalid_utf8("\xED\xA0\x80"), 0u);             // a surrogate
  EXPECT_EQ(first_invalid_utf8("\xF4\x90\x80\x80"), 0u);         // above U+10FFFF
  EXPECT_EQ(first_invalid_utf8("a\x80"), 1u);                    // a lone continuation byte
}

TEST(Utf8, BadBytesAreEscapedAndGoodOnesKept) {
  EXPECT_EQ(escape_invalid_utf8("caf\xE9 \xC3\xA9.mp4"), "caf\\xe9 \xC3\xA9.mp4");
  EXPECT_EQ(escape_invalid_utf8("ok"), "ok");
  EXPECT_EQ(escape_invalid_utf8("\xFF\xFE"), "\\xff\\xfe");
}

}  // namespace
}  // namespace vapipe
