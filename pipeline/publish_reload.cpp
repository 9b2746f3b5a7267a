#include "pipeline/publish_reload.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <set>

#include <yaml-cpp/yaml.h>

namespace vapipe {

namespace {

// A value as the config reader takes it, whatever the style it is written in (flow or block, quoted
// or not, keys in any order, merge keys taken in): equal texts, equal settings.
std::map<std::string, YAML::Node> keys_of(const YAML::Node& map);
std::string canonical(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "~";
  if (node.IsScalar()) return "'" + node.Scalar() + "'";
  std::string out;
  if (node.IsSequence()) {
    out = "[";
    for (const YAML::Node& item : node) out += canonical(item) + ",";
    return out + "]";
  }
  out = "{";
  for (const auto& [key, value] : keys_of(node)) out += key + ":" + canonical(value) + ",";
  return out + "}";
}

// A mapping's keys with their values, its merge keys (`<<: *defaults`) taken in as the config reader
// takes them: its own keys first, then each merged mapping's that it lacks.
std::map<std::string, YAML::Node> keys_of(const YAML::Node& map) {
  std::map<std::string, YAML::Node> keys;
  if (!map.IsDefined() || !map.IsMap()) return keys;
  for (auto it = map.begin(); it != map.end(); ++it) {
    const std::string key = it->first.as<std::string>();
    if (key != "<<") keys.emplace(key, it->second);
  }
  if (const YAML::Node merged = map["<<"]; merged.IsDefined()) {
    auto take = [&](const YAML::Node& m) {
      for (const auto& [key, value] : keys_of(m)) keys.emplace(key, value);
    };
    if (merged.IsMap()) take(merged);
    if (merged.IsSequence()) {
      for (const YAML::Node& m : merged) take(m);
    }
  }
  return keys;
}

PublishReload::Outputs compare_outputs(const YAML::Node& running, const YAML::Node& reloaded) {
  auto entries = [](const YAML::Node& list) {
    std::vector<std::string> out;
    if (list.IsDefined() && list.IsSequence()) {
      for (const YAML::Node& entry : list) out.push_back(canonical(entry));
    }
    return out;
  };
  const std::vector<std::string> before = entries(running), after = entries(reloaded);
  PublishReload::Outputs outputs;
  outputs.running = before.size();
  std::vector<bool> taken(before.size(), false);
  // The same entry at the same place first, then anywhere: a list whose first entry was removed keeps
  // the others (renumbered), and two equal entries keep one each.
  outputs.kept_from.resize(after.size());
  for (size_t j = 0; j < after.size() && j < before.size(); ++j) {
    if (after[j] == before[j]) {
      outputs.kept_from[j] = j;
      taken[j] = true;
    }
  }
  for (size_t j = 0; j < after.size(); ++j) {
    if (outputs.kept_from[j]) continue;
    for (size_t i = 0; i < before.size(); ++i) {
      if (!taken[i] && before[i] == after[j]) {
        outputs.kept_from[j] = i;
        taken[i] = true;
        break;
      }
    }
  }
  for (size_t i = 0; i < before.size(); ++i) {
    if (!taken[i]) outputs.removed.push_back(i);
  }
  return outputs;
}

}  // namespace

std::string canonical_yaml(const YAML::Node& node) { return canonical(node); }

bool PublishReload::Outputs::changed() const {
  if (!removed.empty() || kept_from.size() != running) return true;
  for (size_t j = 0; j < kept_from.size(); ++j) {
    if (kept_from[j] != j) return true;
  }
  return false;
}

Result<PublishReload> compare_publish_sections(const std::string& running_yaml, const std::string& reloaded_yaml,
                                               const std::string& source) {
  YAML::Node a, b;
  try {
    a = YAML::Load(running_yaml);
    b = YAML::Load(reloaded_yaml);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(source + ": YAML: " + e.what());
  }
  const YAML::Node running_publish = a.IsMap() ? a["publish"] : YAML::Node();
  const YAML::Node reloaded_publish = b.IsMap() ? b["publish"] : YAML::Node();
  const auto before = keys_of(running_publish), after = keys_of(reloaded_publish);
  std::set<std::string> keys;
  for (const auto* m : {&before, &after}) {
    for (const auto& entry : *m) keys.insert(entry.first);
  }
  auto value = [](const std::map<std::string, YAML::Node>& m, const std::string& key) {
    auto it = m.find(key);
    return it == m.end() ? YAML::Node() : it->second;
  };
  PublishReload change;
  const std::set<std::string> reloadable(std::begin(kReloadablePublishKeys), std::end(kReloadablePublishKeys));
  for (const std::string& key : keys) {
    const YAML::Node old_value = value(before, key), new_value = value(after, key);
    if (key == "webhooks") {
      change.webhooks = compare_outputs(old_value, new_value);
    } else if (key == "mqtt") {
      change.mqtt = compare_outputs(old_value, new_value);
    } else if (key == "redis") {
      change.redis = compare_outputs(old_value, new_value);
    } else if (canonical(old_value) != canonical(new_value)) {
      if (reloadable.count(key)) {
        change.segment_keys.push_back(key);
        continue;
      }
      // Its line, or (a key that went) the section's.
      int line = new_value.IsDefined() ? new_value.Mark().line : -1;
      if (line < 0 && b.IsMap()) {
        for (auto it = b.begin(); it != b.end(); ++it) {
          if (it->first.as<std::string>() == "publish") line = it->first.Mark().line;
        }
      }
      const std::string where = line >= 0 ? source + ":" + std::to_string(line + 1) : source;
      std::string takes;
      for (const char* k : kReloadablePublishKeys) takes += std::string(takes.empty() ? "" : ", ") + k;
      return FailedPrecondition(where + ": `publish." + key + "` changed; of `publish`, a running job takes only " +
                                takes + " (restart the job for the rest)");
    }
  }
  return change;
}

std::string describe_publish_reload(const PublishReload& change) {
  std::string out;
  auto outputs = [&](const char* name, const PublishReload::Outputs& o) {
    if (!o.changed()) return;
    std::string added, moved, removed;
    for (size_t j = 0; j < o.kept_from.size(); ++j) {
      if (!o.kept_from[j]) {
        added += (added.empty() ? "[" : ", [") + std::to_string(j) + "]";
      } else if (*o.kept_from[j] != j) {
        moved += (moved.empty() ? "[" : ", [") + std::to_string(*o.kept_from[j]) + "] is [" + std::to_string(j) + "]";
      }
    }
    for (size_t i : o.removed) removed += (removed.empty() ? "[" : ", [") + std::to_string(i) + "]";
    std::string what;
    for (const auto& [label, text] : {std::pair<const char*, std::string&>{"added ", added},
                                      std::pair<const char*, std::string&>{"removed ", removed},
                                      std::pair<const char*, std::string&>{"", moved}}) {
      if (!text.empty()) what += (what.empty() ? "" : ", ") + std::string(label) + text;
    }
    out += (out.empty() ? "" : "; ") + std::string("publish.") + name + " " + what;
  };
  outputs("webhooks", change.webhooks);
  outputs("mqtt", change.mqtt);
  outputs("redis", change.redis);
  std::string settings;
  for (const std::string& key : change.segment_keys) settings += (settings.empty() ? "publish." : ", publish.") + key;
  if (!settings.empty()) out += (out.empty() ? "" : "; ") + settings + " changed";
  return out;
}

}  // namespace vapipe
