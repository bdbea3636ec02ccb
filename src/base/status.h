// Status and Result<T>: recoverable failures (bad file, bad request, does not fit) as values.
// Programmer errors use HZ_CHECK (check.h) instead.
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace hz {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad flag or request value
  kNotFound,         // missing file, tensor or key
  kDataLoss,         // corrupt or truncated file
  kOutOfRange,       // does not fit: context, memory budget
  kUnimplemented,    // valid input that this build cannot handle
  kResourceExhausted,
  kIoError,
  kCancelled,
  kInternal,
  kDeadlineExceeded,  // a time limit passed first
};

const char* status_code_name(StatusCode code);

// A status is a code and a message; the message names the file, field or parameter at fault.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string to_string() const;

  // Returns a copy with "context: " prepended to the message (e.g. the file name).
  Status with_context(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

template <typename... Args>
Status make_error(StatusCode code, fmt::format_string<Args...> f, Args&&... args) {
  return Status(code, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status invalid_argument(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kInvalidArgument, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status data_loss(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kDataLoss, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status not_found(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kNotFound, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status unimplemented(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kUnimplemented, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status out_of_range(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kOutOfRange, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status io_error(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kIoError, fmt::format(f, std::forward<Args>(args)...));
}

// Result<T> holds a T or a non-ok Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace hz

// Propagates a non-ok Status from an expression returning Status.
#define HZ_RETURN_IF_ERROR(expr)         \
  do {                                   \
    ::hz::Status hz_status_ = (expr);    \
    if (!hz_status_.ok()) return hz_status_; \
  } while (0)

#define HZ_CONCAT_INNER_(a, b) a##b
#define HZ_CONCAT_(a, b) HZ_CONCAT_INNER_(a, b)
// `HZ_ASSIGN_OR_RETURN(auto x, f());` assigns the value or returns the error status.
#define HZ_ASSIGN_OR_RETURN(lhs, expr) HZ_ASSIGN_OR_RETURN_IMPL_(HZ_CONCAT_(hz_result_, __LINE__), lhs, expr)
#define HZ_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
