#include "pipeline/bounded_queue.h"

namespace vapipe {

const char* queue_policy_name(QueuePolicy p) { return p == QueuePolicy::kBlock ? "block" : "drop_oldest"; }

std::optional<QueuePolicy> parse_queue_policy(std::string_view name) {
  if (name == "block") return QueuePolicy::kBlock;
  if (name == "drop_oldest") return QueuePolicy::kDropOldest;
  return std::nullopt;
}

}  // namespace vapipe
