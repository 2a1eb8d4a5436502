// The redis lock-service kind's own fields, endpoint spelling and documentation strings: no server.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "redis_test_util.h"

namespace fencecheck::testing {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

TEST(RedisKindFields, DefaultsAreNoPersistenceAndAFencedToken) {
  const auto& kind = redis_kind();
  EXPECT_EQ(kind.name(), "redis");
  EXPECT_EQ(kind.fields(), (std::vector<std::string_view>{"persistence", "token"}));
  const json out = kind.parse(FakeFields(json::object()));
  EXPECT_EQ(out, (json{{"persistence", "none"}, {"token", "fenced"}}));
  EXPECT_EQ(kind.parse(FakeFields(out)), out) << "the normalized fields parse again to themselves";
  EXPECT_EQ(kind.parse(FakeFields(json{{"persistence", "aof"}, {"token", "none"}})),
            (json{{"persistence", "aof"}, {"token", "none"}}));
}

TEST(RedisKindFields, AnUnknownValueIsAnErrorAtItsField) {
  const auto& kind = redis_kind();
  try {
    (void)kind.parse(FakeFields(json{{"persistence", "rdb"}}));
    FAIL() << "persistence rdb was accepted";
  } catch (const FieldError& err) {
    EXPECT_EQ(err.field, "persistence");
    EXPECT_THAT(err.message, HasSubstr("redis persistence"));
  }
  try {
    (void)kind.parse(FakeFields(json{{"token", "maybe"}}));
    FAIL() << "token maybe was accepted";
  } catch (const FieldError& err) {
    EXPECT_EQ(err.field, "token");
    EXPECT_THAT(err.message, HasSubstr("redis token"));
  }
  try {
    (void)kind.parse(FakeFields(json{{"persistence", true}}));
    FAIL() << "persistence true was accepted";
  } catch (const FieldError& err) {
    EXPECT_EQ(err.field, "persistence");
  }
}

TEST(RedisKindFields, EndpointsAreRedisUrls) {
  const auto& kind = redis_kind();
  EXPECT_EQ(kind.check_endpoint("redis://127.0.0.1:6379"), "");
  EXPECT_EQ(kind.check_endpoint("redis://redis.internal:7000"), "");
  EXPECT_THAT(kind.check_endpoint("127.0.0.1:6379"), HasSubstr("does not start with redis://"));
  EXPECT_THAT(kind.check_endpoint("http://127.0.0.1:2379"), HasSubstr("expected redis://host:port"));
  EXPECT_THAT(kind.check_endpoint("redis://127.0.0.1"), HasSubstr("the port is missing"));
  EXPECT_THAT(kind.check_endpoint("redis://:6379"), HasSubstr("the host is empty"));
  EXPECT_THAT(kind.check_endpoint("redis://127.0.0.1:0"), HasSubstr("1..65535"));
  EXPECT_THAT(kind.check_endpoint("redis://127.0.0.1:65536"), HasSubstr("1..65535"));
  EXPECT_THAT(kind.check_endpoint("redis://127.0.0.1:63x9"), HasSubstr("1..65535"));
  EXPECT_THAT(kind.check_endpoint("redis://user:pw@127.0.0.1:6379"), HasSubstr("password"));
  EXPECT_THAT(kind.check_endpoint("redis://127.0.0.1:6379/2"), HasSubstr("database"));
}

TEST(RedisKindFields, RestartEffectFollowsPersistenceAndToken) {
  const auto& kind = redis_kind();
  EXPECT_THAT(kind.restart_effect(json{{"persistence", "none"}, {"token", "fenced"}}),
              HasSubstr("tokens start again at 1, below the resource's high-water mark"));
  EXPECT_THAT(kind.restart_effect(json{{"persistence", "aof"}, {"token", "fenced"}}), HasSubstr("tokens keep rising"));
  EXPECT_THAT(kind.restart_effect(json{{"persistence", "aof"}, {"token", "none"}}), HasSubstr("no token"));
  EXPECT_THAT(kind.token_description(), HasSubstr("INCR"));
}

TEST(RedisKindFields, TheKindIsRegisteredAndTheClientToo) {
  const auto names = locks::lock_service_kind_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "redis"), names.end());
  auto client = locks::make_lock_client(json{{"kind", "redis"}, {"endpoints", {"redis://127.0.0.1:6379"}}});
  EXPECT_EQ(client->kind(), "redis");
  EXPECT_THAT(client->describe(), HasSubstr("redis://127.0.0.1:6379"));
  try {
    (void)locks::make_lock_client(json{{"kind", "memcached"}});
    FAIL() << "an unknown kind was accepted";
  } catch (const std::invalid_argument& err) {
    EXPECT_THAT(err.what(), HasSubstr("redis"));
  }
}

}  // namespace
}  // namespace fencecheck::testing
