// UTF-8 checks for text that ends up in JSON (results, events, summaries): nlohmann::json refuses to
// write a string that is not UTF-8 (it throws), so such text is refused where it is read, or escaped.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace vapipe {

// The offset of the first byte of `text` that does not start or continue a well-formed UTF-8
// character (overlong forms, surrogates and code points above U+10FFFF are not well-formed), or
// std::string_view::npos when all of it is UTF-8.
size_t first_invalid_utf8(std::string_view text);

// "not UTF-8 text (byte 0xE8 at column 19): save the file as UTF-8": for an error that names a file and
// line before it. `column` counts from 1.
std::string not_utf8_text(unsigned char byte, size_t column);

// `text` with each byte that is not part of well-formed UTF-8 written as \xNN (a file name in
// Latin-1, "caf\xe9.mp4"): printable in JSON and in the log, and still telling which file it was.
std::string escape_invalid_utf8(std::string_view text);

}  // namespace vapipe
