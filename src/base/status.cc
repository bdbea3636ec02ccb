#include "base/status.h"

namespace hz {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kDataLoss: return "corrupt data";
    case StatusCode::kOutOfRange: return "out of range";
    case StatusCode::kUnimplemented: return "unsupported";
    case StatusCode::kResourceExhausted: return "resource exhausted";
    case StatusCode::kIoError: return "i/o error";
    case StatusCode::kCancelled: return "cancelled";
    case StatusCode::kInternal: return "internal error";
    case StatusCode::kDeadlineExceeded: return "deadline exceeded";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  return message_;
}

Status Status::with_context(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

}  // namespace hz
