// EventChannel: hands a request's GenerationEvents from the engine thread to the HTTP session that
// waits for them. The engine side never blocks: it queues the event (stamped with its arrival time,
// which TTFT and inter-token latency are measured from) and calls `wake` once until the consumer
// takes the queue.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "runtime/engine_api.h"

namespace hz {

class EventChannel {
 public:
  using Clock = std::chrono::steady_clock;
  struct TimedEvent {
    Clock::time_point arrival;
    GenerationEvent event;
  };

  // `wake` is called on the engine thread, outside the channel's lock; it must not block.
  explicit EventChannel(std::function<void()> wake) : wake_(std::move(wake)) {}

  void push(GenerationEvent event) {
    bool need_wake = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(TimedEvent{Clock::now(), std::move(event)});
      need_wake = !wake_pending_;
      wake_pending_ = true;
    }
    if (need_wake && wake_) wake_();
  }

  // All queued events, oldest first; the next push wakes the consumer again.
  std::vector<TimedEvent> take() {
    std::lock_guard<std::mutex> lock(mu_);
    wake_pending_ = false;
    std::vector<TimedEvent> out;
    out.swap(queue_);
    return out;
  }

 private:
  std::mutex mu_;
  std::vector<TimedEvent> queue_;
  bool wake_pending_ = false;
  const std::function<void()> wake_;
};

// The GenerationSink handed to the engine: forwards into a channel.
class ChannelSink : public GenerationSink {
 public:
  explicit ChannelSink(std::shared_ptr<EventChannel> channel) : channel_(std::move(channel)) {}
  void on_event(GenerationEvent event) override { channel_->push(std::move(event)); }

 private:
  std::shared_ptr<EventChannel> channel_;
};

}  // namespace hz
