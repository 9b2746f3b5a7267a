// A live job's copy of its config (run_dir/config.yaml, kConfigAsStartedEnv: pipeline/job_layout.h), as
// a stage follows it. The supervisor rewrites the copy with each reload that changes a stage's settings
// (publish's outputs, ingest's sampling, infer's model: pipeline/publish_reload.h, ingest_reload.h,
// infer_reload.h); a stage reads it as it opens, then looks at it (a stat) when due, and compares a
// changed text with the one it runs with before it takes it.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "pipeline/config.h"
#include "pipeline/status.h"

namespace vapipe {

class ConfigCopy {
 public:
  explicit ConfigCopy(std::chrono::milliseconds period) : period_(period) {}
  // Tests: the copy to follow (else, in a live job, $VAPIPE_CONFIG_AS_STARTED). Before start().
  void set_path(std::string path) { path_ = std::move(path); }
  // As the stage opens (`config`: what it parsed): the copy's config, its text the running text from
  // now on; nullopt when no copy is followed (an archive job, a stage driven alone); or why it cannot be
  // read, and then none is followed.
  std::optional<Result<Config>> start(const Config& config);
  bool followed() const { return !path_.empty(); }
  bool due(std::chrono::steady_clock::time_point now) const { return followed() && now >= next_; }
  std::chrono::steady_clock::time_point next_look() const { return next_; }
  const std::string& running_text() const { return running_text_; }
  // The copy's identity (pipeline/file_identity.h) as of the latest look: `vapipe reload` compares it
  // with the copy's now to know that the stage has seen a reload.
  std::string identity() const { return identity_.value_or(""); }
  // A look (a stat; a read when it changed): the copy's text when it differs from the running text,
  // nullopt when it does not, or why it cannot be read. The next one is due a period on. `rewritten`:
  // whether the copy was written since the last look, its text changed or not (a reload that found a
  // file the config names replaced under the same path rewrites the same text: infer's model).
  Result<std::optional<std::string>> look(bool* rewritten = nullptr);
  // The config of a text of the copy, read as the stage read the copy at its start.
  Result<Config> load(const std::string& text) const;
  // The text later looks compare with: the stage took it.
  void take(std::string text) { running_text_ = std::move(text); }

 private:
  std::chrono::milliseconds period_;
  std::string path_, source_, running_text_;
  std::optional<std::string> identity_;  // file_identity(): size, times, inode
  std::chrono::steady_clock::time_point next_{};
};

}  // namespace vapipe
