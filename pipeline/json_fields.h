// Fields of JSON that may not be whole or ours: a results file after a crash, a damaged disk or a hand
// edit. nlohmann's value() and get() throw type_error when a field has another type than asked; these
// read such a field as missing instead, so a damaged line is told apart by its reader, not thrown out
// of it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace vapipe {

// The object's text field `key`; empty when it is missing, not text, or `object` is not an object.
inline std::string text_field(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return {};
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The object's field `key` as a count or number of a frame (an integer from 0); none when it is
// missing, negative, fractional or not a number. (Parsed JSON holds such integers unsigned; a document
// built in code may hold them signed.)
inline std::optional<uint64_t> count_field(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return std::nullopt;
  const auto it = object.find(key);
  if (it == object.end()) return std::nullopt;
  if (it->is_number_unsigned()) return it->get<uint64_t>();
  if (it->is_number_integer() && it->get<int64_t>() >= 0) return static_cast<uint64_t>(it->get<int64_t>());
  return std::nullopt;
}

// The object's field `key` as a number (integer or not); none when it is missing or not a number.
inline std::optional<double> number_field(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return std::nullopt;
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

}  // namespace vapipe
