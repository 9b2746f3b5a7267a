#include "pipeline/infer_reload.h"

#include <algorithm>
#include <filesystem>

#include "pipeline/atomic_file.h"
#include "pipeline/config_sections.h"
#include "pipeline/file_identity.h"

namespace vapipe {

namespace {

// The settings a reload changes in the running infer: how each is taken and compared. `new_model`: a
// change of it loads the model again (with the reloaded settings), beside the running one.
struct ReloadableInferKey {
  const char* key;
  bool new_model;
  void (*take)(const InferConfig& from, InferConfig& to);
  bool (*differs)(const InferConfig& a, const InferConfig& b);
};
template <auto Member>
ReloadableInferKey reloadable(const char* key, bool new_model) {
  return {key, new_model, [](const InferConfig& from, InferConfig& to) { to.*Member = from.*Member; },
          [](const InferConfig& a, const InferConfig& b) { return a.*Member != b.*Member; }};
}
const ReloadableInferKey kReloadable[] = {
    reloadable<&InferConfig::model>("model", true),
    reloadable<&InferConfig::labels>("labels", true),
    reloadable<&InferConfig::model_name>("model_name", false),
    reloadable<&InferConfig::top_k>("top_k", false),
    reloadable<&InferConfig::output>("output", true),
    reloadable<&InferConfig::precision>("precision", true),
    reloadable<&InferConfig::channels_last>("channels_last", true),
    reloadable<&InferConfig::optimize>("optimize", true),
    reloadable<&InferConfig::warmup_batches>("warmup_batches", true),
};

const ReloadableInferKey* reloadable_key(const std::string& key) {
  for (const ReloadableInferKey& k : kReloadable) {
    if (key == k.key) return &k;
  }
  return nullptr;
}

}  // namespace

const std::vector<std::string>& reloadable_infer_keys() {
  static const std::vector<std::string> keys = keys_of_table(kReloadable);
  return keys;
}

std::vector<std::string> changed_infer_settings(const InferConfig& before, const InferConfig& after) {
  std::vector<std::string> keys;
  for (const ReloadableInferKey& k : kReloadable) {
    if (k.differs(before, after)) keys.push_back(k.key);
  }
  return keys;
}

bool infer_change_needs_new_model(const std::vector<std::string>& keys) {
  return std::any_of(keys.begin(), keys.end(), [](const std::string& key) {
    const ReloadableInferKey* k = reloadable_key(key);
    return k && k->new_model;
  });
}

void take_reloadable_infer_settings(const InferConfig& from, InferConfig& to) {
  for (const ReloadableInferKey& k : kReloadable) k.take(from, to);
}

Result<InferReload> compare_infer_sections(const std::string& running_yaml, const std::string& reloaded_yaml,
                                           const std::string& source, const InferConfig* reloaded) {
  VAPIPE_ASSIGN_OR_RETURN(ConfigDocuments docs, load_config_documents(running_yaml, reloaded_yaml, source));
  InferReload change;
  for (const ChangedKey& c : changed_section_keys(docs, "infer")) {
    if (!reloadable_key(c.key)) return refused_section_key(source, c, "infer", reloadable_infer_keys());
    change.keys.push_back(c.key);
    // A file that is not there: refused now, with its line, rather than said by infer after the reload
    // was taken.
    const std::string* path = !reloaded ? nullptr : c.key == "model" ? &reloaded->model
                                                  : c.key == "labels" ? &reloaded->labels : nullptr;
    std::error_code ec;
    if (path && !std::filesystem::is_regular_file(*path, ec)) {
      return FailedPrecondition(where_in(source, c.line) + ": infer." + c.key + ": " + *path +
                                (std::filesystem::exists(*path, ec) ? " is not a file" : ": file not found") +
                                " (the running model goes on)");
    }
  }
  return change;
}

InferFileIdentities infer_file_identities(const InferConfig& infer) {
  return {file_identity(infer.model), file_identity(infer.labels)};
}

void note_replaced_infer_files(const InferConfig& infer, const InferFileIdentities& before, InferReload& change) {
  const std::pair<const char*, std::pair<const std::string*, const std::string*>> files[] = {
      {"model", {&infer.model, &before.model}}, {"labels", {&infer.labels, &before.labels}}};
  for (const auto& [key, file] : files) {
    const auto& [path, identity_before] = file;
    if (std::find(change.keys.begin(), change.keys.end(), key) != change.keys.end()) continue;  // (loaded anyway)
    std::error_code ec;
    if (!std::filesystem::is_regular_file(*path, ec)) {
      change.missing.push_back(key);
      change.missing_paths.push_back(*path);
    } else if (file_identity(*path) != *identity_before) {
      change.replaced.push_back(key);
      change.replaced_paths.push_back(*path);
    }
  }
}

namespace {
std::string infer_files_path(const std::string& run_dir) { return run_dir + "/infer-files"; }
}  // namespace

Status write_infer_file_identities(const std::string& run_dir, const InferFileIdentities& identities) {
  // One line each: an identity is one line (pipeline/file_identity.h).
  return write_file_atomically(infer_files_path(run_dir), identities.model + "\n" + identities.labels + "\n", 0600);
}

std::optional<InferFileIdentities> read_infer_file_identities(const std::string& run_dir) {
  auto text = read_file_bytes(infer_files_path(run_dir));
  if (!text.ok()) return std::nullopt;
  const size_t first = text->find('\n');
  const size_t second = first == std::string::npos ? first : text->find('\n', first + 1);
  if (second == std::string::npos) return std::nullopt;
  return InferFileIdentities{text->substr(0, first), text->substr(first + 1, second - first - 1)};
}

std::string describe_infer_reload(const InferReload& change) {
  std::string out;
  for (const std::string& k : change.keys) out += (out.empty() ? "infer." : ", infer.") + k;
  if (!out.empty()) out += " changed";
  for (size_t i = 0; i < change.replaced.size(); ++i) {
    out += (out.empty() ? "" : "; ") + std::string("infer.") + change.replaced[i] + "'s file " +
           change.replaced_paths[i] + " was replaced";
  }
  return out;
}

}  // namespace vapipe
