// Token files: a bearer token on a file's first line (publish.metrics_token_file, a webhook's
// token_file), read at load and again when the file changes while the job runs.
#pragma once

#include <functional>
#include <string>

#include "pipeline/status.h"

namespace vapipe {

// A token file's first line, trimmed: a token for an HTTP header (printable ASCII without blanks),
// whose size `size_error` may refuse (it says why, given the size; empty: the size is fine).
Result<std::string> read_token_line(const std::string& path, const std::function<std::string(size_t)>& size_error);

// A secret's file that users other than its owner may read (group or others): said once, with the
// chmod that keeps it private, as a CURVE secret key's is (pipeline/curve.h). Found 2026-12-07:
// token and password files at 0644 passed without a word.
void warn_if_others_may_read(const std::string& path, const char* what);

// A webhook's bearer token file (publish.webhooks[].token_file): any length but none; its length is
// the receiver's business.
Result<std::string> read_webhook_token_file(const std::string& path);

// A password file's first line (publish.mqtt[].password_file): any characters but control ones, blanks
// inside included; a line break at its end is not part of it; empty is an error.
Result<std::string> read_password_file(const std::string& path);

}  // namespace vapipe
