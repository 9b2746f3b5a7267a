// Status and Result<T>: expected failures are values, not exceptions (Triton's Status habit).
// Exceptions are caught and turned into a Status only at process boundaries (cli/).
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace vapipe {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad config value, bad CLI argument
  kNotFound,         // missing file, unknown stream
  kFailedPrecondition,
  kUnavailable,      // peer gone, resource busy
  kDataLoss,         // malformed message, corrupt input
  kCancelled,        // shutdown requested
  kTimeout,
  kInternal,
  kAborted,  // the stage cannot go on (its record cannot be written): it stops, and its process fails
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string to_string() const;

  // Prefixes the message with context, e.g. "stream 'cam1': " + message.
  Status with_context(const std::string& context) const {
    if (ok()) return *this;
    return {code_, context + ": " + message_};
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status FailedPrecondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status Aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }

// Result<T>: a T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : value_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(value_).ok() && "Result from an OK status carries no value");
  }

  bool ok() const { return std::holds_alternative<T>(value_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(value_);
  }
  T& value() & { return std::get<T>(value_); }
  const T& value() const& { return std::get<T>(value_); }
  T&& value() && { return std::get<T>(std::move(value_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, Status> value_;
};

}  // namespace vapipe

#define VAPIPE_RETURN_IF_ERROR(expr)          \
  do {                                        \
    ::vapipe::Status vapipe_status_ = (expr); \
    if (!vapipe_status_.ok()) return vapipe_status_; \
  } while (0)

#define VAPIPE_CONCAT_INNER(a, b) a##b
#define VAPIPE_CONCAT(a, b) VAPIPE_CONCAT_INNER(a, b)
#define VAPIPE_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
#define VAPIPE_ASSIGN_OR_RETURN(lhs, expr) \
  VAPIPE_ASSIGN_OR_RETURN_IMPL(VAPIPE_CONCAT(vapipe_result_, __LINE__), lhs, expr)
