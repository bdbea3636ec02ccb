// A fixture for HTTP tests against the fake engine: start() runs an HttpServer on an ephemeral
// port over a FakeEngine; both stop at TearDown.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "server/fake_engine.h"
#include "server/http_server.h"

namespace hz::test {

class FakeServerTest : public ::testing::Test {
 protected:
  void start(ServerOptions o = {}, FakeEngine::Options eo = {}) {
    engine_ = std::make_unique<FakeEngine>(eo);
    o.port = 0;
    server_ = std::make_unique<HttpServer>(*engine_, o);
    Status s = server_->start();
    ASSERT_TRUE(s.ok()) << s.to_string();
    port_ = server_->port();
  }
  void TearDown() override {
    server_.reset();
    engine_.reset();
  }

  std::unique_ptr<FakeEngine> engine_;
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
};

}  // namespace hz::test
