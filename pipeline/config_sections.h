// A config document's sections compared as the config reader takes them. A live job's reload compares
// the text the job runs with and the reloaded one section by section and key by key: which keys changed
// decides what the reload does, or why it is refused (pipeline/stream_table.h, publish_reload.h,
// ingest_reload.h).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "pipeline/status.h"

namespace vapipe {

// A YAML value as the config reader takes it, whatever its style (flow or block, quoted or not, keys
// in any order, merge keys taken in): two values with the same text are the same settings.
std::string canonical_yaml(const YAML::Node& node);

// A mapping's keys with their values, its merge keys (`<<: *defaults`) taken in as the config reader
// takes them: its own keys first, then each merged mapping's that it lacks. Empty for a non-mapping.
std::map<std::string, YAML::Node> mapping_keys(const YAML::Node& map);

// The running config's text and the reloaded one's, parsed. An error: "SOURCE: YAML: ...".
struct ConfigDocuments {
  YAML::Node running, reloaded;
};
Result<ConfigDocuments> load_config_documents(const std::string& running_yaml, const std::string& reloaded_yaml,
                                              const std::string& source);

// A key of a top-level section whose value differs between the two documents (canonical_yaml): its
// value in each (null where it is not set), and its line in the reloaded document, or the
// section's where the key went (0-based; -1: neither is there).
struct ChangedKey {
  std::string key;
  YAML::Node running, reloaded;
  int line = -1;
};
// The keys of `section` ("publish", "ingest") that differ, in key order.
std::vector<ChangedKey> changed_section_keys(const ConfigDocuments& docs, const std::string& section);

// "job.yaml:12" for a 0-based line, the source alone for -1.
std::string where_in(const std::string& source, int line);

// The keys of a table of the settings a running job takes from a reload (entries with a `key`), in its
// order.
template <typename Entry, size_t N>
std::vector<std::string> keys_of_table(const Entry (&table)[N]) {
  std::vector<std::string> keys;
  for (const Entry& entry : table) keys.push_back(entry.key);
  return keys;
}

// The refusal of a reload that changed a key of `section` the running job does not take (`takes`):
// "job.yaml:9: `ingest.decoder` changed; of `ingest`, a running job takes only max_fps, ... (restart the
// job for the rest)".
Status refused_section_key(const std::string& source, const ChangedKey& changed, const std::string& section,
                           const std::vector<std::string>& takes);

}  // namespace vapipe
