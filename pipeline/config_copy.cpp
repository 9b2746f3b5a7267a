#include "pipeline/config_copy.h"

#include <cstdlib>

#include "pipeline/atomic_file.h"
#include "pipeline/file_identity.h"
#include "pipeline/job_layout.h"

namespace vapipe {

std::optional<Result<Config>> ConfigCopy::start(const Config& config) {
  source_ = config.source;
  if (path_.empty() && config.job.mode == JobMode::kLive) {
    if (const char* copy = std::getenv(kConfigAsStartedEnv); copy && *copy) path_ = copy;
  }
  if (path_.empty()) return std::nullopt;
  // Its identity before its text: a reload that rewrites it between the two is seen at the next look.
  identity_ = file_identity(path_);
  auto text = read_file_bytes(path_);
  Result<Config> copy = text.ok() ? load(*text) : Result<Config>(text.status());
  if (!copy.ok()) {
    path_.clear();
    return copy;
  }
  running_text_ = std::move(text).value();
  next_ = std::chrono::steady_clock::now() + period_;
  return copy;
}

Result<std::optional<std::string>> ConfigCopy::look(bool* rewritten) {
  next_ = std::chrono::steady_clock::now() + period_;
  const std::string identity = file_identity(path_);
  if (rewritten) *rewritten = identity != identity_;
  if (identity == identity_) return std::optional<std::string>();
  identity_ = identity;
  VAPIPE_ASSIGN_OR_RETURN(std::string text, read_file_bytes(path_));
  if (text == running_text_) return std::optional<std::string>();
  return std::optional<std::string>(std::move(text));
}

Result<Config> ConfigCopy::load(const std::string& text) const {
  ConfigLoadOptions options;
  options.expand_globs = false;
  options.file_text = &text;
  return load_config_file(source_, nullptr, options);
}

}  // namespace vapipe
