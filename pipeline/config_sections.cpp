#include "pipeline/config_sections.h"

#include <set>

namespace vapipe {

std::string canonical_yaml(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "~";
  if (node.IsScalar()) return "'" + node.Scalar() + "'";
  std::string out;
  if (node.IsSequence()) {
    out = "[";
    for (const YAML::Node& item : node) out += canonical_yaml(item) + ",";
    return out + "]";
  }
  out = "{";
  for (const auto& [key, value] : mapping_keys(node)) out += key + ":" + canonical_yaml(value) + ",";
  return out + "}";
}

std::map<std::string, YAML::Node> mapping_keys(const YAML::Node& map) {
  std::map<std::string, YAML::Node> keys;
  if (!map.IsDefined() || !map.IsMap()) return keys;
  for (auto it = map.begin(); it != map.end(); ++it) {
    const std::string key = it->first.as<std::string>();
    if (key != "<<") keys.emplace(key, it->second);
  }
  if (const YAML::Node merged = map["<<"]; merged.IsDefined()) {
    auto take = [&](const YAML::Node& m) {
      for (const auto& [key, value] : mapping_keys(m)) keys.emplace(key, value);
    };
    if (merged.IsMap()) take(merged);
    if (merged.IsSequence()) {
      for (const YAML::Node& m : merged) take(m);
    }
  }
  return keys;
}

Result<ConfigDocuments> load_config_documents(const std::string& running_yaml, const std::string& reloaded_yaml,
                                              const std::string& source) {
  ConfigDocuments docs;
  try {
    docs.running = YAML::Load(running_yaml);
    docs.reloaded = YAML::Load(reloaded_yaml);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(source + ": YAML: " + e.what());
  }
  return docs;
}

std::vector<ChangedKey> changed_section_keys(const ConfigDocuments& docs, const std::string& section) {
  auto section_of = [&](const YAML::Node& doc) { return doc.IsMap() ? doc[section] : YAML::Node(); };
  const auto before = mapping_keys(section_of(docs.running)), after = mapping_keys(section_of(docs.reloaded));
  std::set<std::string> keys;
  for (const auto* m : {&before, &after}) {
    for (const auto& entry : *m) keys.insert(entry.first);
  }
  auto value = [](const std::map<std::string, YAML::Node>& m, const std::string& key) {
    auto it = m.find(key);
    return it == m.end() ? YAML::Node() : it->second;
  };
  int section_line = -1;
  if (docs.reloaded.IsMap()) {
    for (auto it = docs.reloaded.begin(); it != docs.reloaded.end(); ++it) {
      if (it->first.as<std::string>() == section) section_line = it->first.Mark().line;
    }
  }
  std::vector<ChangedKey> changed;
  for (const std::string& key : keys) {
    ChangedKey c{key, value(before, key), value(after, key), -1};
    if (canonical_yaml(c.running) == canonical_yaml(c.reloaded)) continue;
    c.line = c.reloaded.Mark().line >= 0 ? c.reloaded.Mark().line : section_line;
    changed.push_back(std::move(c));
  }
  return changed;
}

std::string where_in(const std::string& source, int line) {
  return line >= 0 ? source + ":" + std::to_string(line + 1) : source;
}

Status refused_section_key(const std::string& source, const ChangedKey& changed, const std::string& section,
                           const std::vector<std::string>& takes) {
  std::string list;
  for (const std::string& k : takes) list += (list.empty() ? "" : ", ") + k;
  return FailedPrecondition(where_in(source, changed.line) + ": `" + section + "." + changed.key + "` changed; of `" +
                            section + "`, a running job takes only " + list + " (restart the job for the rest)");
}

}  // namespace vapipe
