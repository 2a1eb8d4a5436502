// Unit tests (no database): the named-parameter compiler (postgres_sql.h), DSN redaction
// (postgres.h), and the postgres kind's field validation (parse(), evidence(), design()) through a
// stand-in for the scenario loader.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "../support/fake_resource_fields.h"
#include "fencecheck/resources/postgres.h"
#include "fencecheck/resources/postgres_sql.h"
#include "fencecheck/resources/resource_kind.h"

namespace {

using fencecheck::postgres::compile_sql;
using fencecheck::postgres::compile_write_sql;
using fencecheck::postgres::CompiledSql;
using fencecheck::postgres::SqlCompileError;
using fencecheck::postgres::read_parameters;
using fencecheck::postgres::text_array_literal;
using fencecheck::postgres::write_parameters;
using fencecheck::testing::FakeFields;
using fencecheck::testing::FieldError;
namespace pg = fencecheck::postgres;

CompiledSql compile(std::string_view sql) { return compile_sql(sql, write_parameters(), "write"); }

/// The error compile() throws for `sql`; fails the test when none.
SqlCompileError error_of(std::string_view sql, const std::vector<std::string_view>& names = write_parameters()) {
  try {
    (void)compile_sql(sql, names, "write");
  } catch (const SqlCompileError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for: " << sql;
  return SqlCompileError("none", 0);
}

// ---- compile_sql

TEST(PostgresSql, NamesBecomeTheirPositionsAndRepeatsShareOne) {
  auto c = compile("UPDATE t SET token = $token, data = $data WHERE key = $key AND token <= $token");
  EXPECT_EQ(c.text, "UPDATE t SET token = $4, data = $6 WHERE key = $1 AND token <= $4");
  EXPECT_EQ(c.used, (std::vector<std::string>{"token", "data", "key"}));
  EXPECT_TRUE(c.uses("token"));
  EXPECT_FALSE(c.uses("segment"));
  EXPECT_EQ(compile("SELECT $key,$segment,$chunk,$token,$writer,$data").text, "SELECT $1,$2,$3,$4,$5,$6");
}

TEST(PostgresSql, DollarSignsInsideLiteralsIdentifiersAndCommentsAreLeftAlone) {
  const std::string sql =
      "SELECT '$key', 'it''s $token', E'\\'$writer', \"$chunk\", \"a\"\"$data\", $$ $key $$, $f$ $key $ $f$, "
      "foo$key, U&'$key', B'0101' -- $key\n"
      "/* outer /* $token */ still $token */ FROM t WHERE k = $key";
  auto c = compile(sql);
  EXPECT_EQ(c.used, std::vector<std::string>{"key"});
  EXPECT_EQ(c.text.substr(c.text.size() - 2), "$1");
  EXPECT_EQ(c.text.substr(0, c.text.size() - 2), sql.substr(0, sql.size() - 4)) << "everything else byte for byte";
}

TEST(PostgresSql, AnEscapeStringEndsAtItsRealQuote) {
  // E'\\' is one backslash: the string ends there and $key after it is a parameter.
  auto c = compile("SELECT E'\\\\', $key");
  EXPECT_EQ(c.text, "SELECT E'\\\\', $1");
  // e'...' is an escape string too, but only as a word of its own: "te'" is an identifier then a string.
  EXPECT_EQ(compile("SELECT e'\\'$token', $key").used, std::vector<std::string>{"key"});
}

TEST(PostgresSql, PositionalParametersAreRefusedAtTheirDollar) {
  auto e = error_of("UPDATE t SET token = $1 WHERE key = $key");
  EXPECT_EQ(e.offset(), 21u);
  EXPECT_NE(std::string(e.what()).find("positional parameter $1: use the named parameters ($key, $segment"),
            std::string::npos)
      << e.what();
  auto q = error_of("SELECT * FROM t WHERE k = $2", {});
  EXPECT_NE(std::string(q.what()).find("takes no parameters"), std::string::npos) << q.what();
}

TEST(PostgresSql, UnknownNamesAreRefusedAtTheirDollar) {
  auto e = error_of("SELECT 1 WHERE k = $key AND t <= $tokn");
  EXPECT_EQ(e.offset(), 33u);
  EXPECT_EQ(std::string(e.what()),
            "write: unknown parameter $tokn; expected one of: $key, $segment, $chunk, $token, $writer, $data");
  EXPECT_EQ(error_of("SELECT $keys").offset(), 7u) << "a longer name is another name";
  auto q = error_of("SELECT key, token FROM fence WHERE key = $key", {});
  EXPECT_EQ(q.offset(), 41u);
  EXPECT_NE(std::string(q.what()).find("parameter $key: write takes no parameters"), std::string::npos) << q.what();
}

TEST(PostgresSql, UnterminatedLiteralsAndCommentsPointAtTheirOpening) {
  EXPECT_EQ(error_of("SELECT $key, 'abc").offset(), 13u);
  EXPECT_EQ(error_of("SELECT \"abc").offset(), 7u);
  EXPECT_EQ(error_of("SELECT E'abc\\'").offset(), 7u);
  EXPECT_EQ(error_of("SELECT $$abc$").offset(), 7u);
  EXPECT_EQ(error_of("SELECT $q$abc$$").offset(), 7u);
  auto c = error_of("SELECT 1 /* a /* b */");
  EXPECT_EQ(c.offset(), 9u);
  EXPECT_NE(std::string(c.what()).find("unterminated /* comment"), std::string::npos);
}

TEST(PostgresSql, OneStatementOnlyButATrailingSemicolonIsFine) {
  EXPECT_EQ(compile("SELECT $token;  -- done\n").text, "SELECT $4;  -- done\n");
  auto e = error_of("SELECT $token; SELECT 2");
  EXPECT_EQ(e.offset(), 15u);
  EXPECT_NE(std::string(e.what()).find("more than one statement"), std::string::npos);
  EXPECT_EQ(error_of("  -- nothing\n ;").offset(), 0u);
  EXPECT_NE(std::string(error_of("   ").what()).find("empty statement"), std::string::npos);
}

TEST(PostgresSql, StatementEndIsBeforeATrailingSemicolonOrComment) {
  auto c = compile_sql("SELECT key, token FROM fence -- all keys\n ; /* done */\n", {}, "high_water");
  EXPECT_EQ(c.text.substr(0, c.statement_end), "SELECT key, token FROM fence");
  auto d = compile("SELECT 'a;b' WHERE $token > 0");
  EXPECT_EQ(d.statement_end, d.text.size());
}

TEST(PostgresSql, SourceOffsetMapsCompiledPositionsBack) {
  const std::string src = "SELECT $segment, $writer, bogus";
  auto c = compile(src);
  ASSERT_EQ(c.text, "SELECT $2, $5, bogus");
  EXPECT_EQ(c.source_offset(0), 0u);
  EXPECT_EQ(c.source_offset(7), 7u);   // the '$' of $2 -> the '$' of $segment
  EXPECT_EQ(c.source_offset(8), 7u);   // inside $2
  EXPECT_EQ(c.source_offset(11), 17u);  // '$' of $5 -> '$' of $writer
  EXPECT_EQ(c.source_offset(15), src.find("bogus"));
}

TEST(PostgresSql, TheWritePathMustUseToken) {
  try {
    (void)compile_write_sql({"SELECT 1 WHERE $key = 'x'", "UPDATE t SET v = $data"});
    FAIL() << "no error";
  } catch (const SqlCompileError& e) {
    EXPECT_EQ(e.offset(), 0u);
    EXPECT_EQ(e.statement(), 0u);
    EXPECT_EQ(std::string(e.what()).rfind("write: must use $token", 0), 0u) << e.what();
  }
  try {
    (void)compile_write_sql({"SELECT $token", "UPDATE t SET v = $1"});
    FAIL() << "no error";
  } catch (const SqlCompileError& e) {
    EXPECT_EQ(e.statement(), 1u) << "the second statement is at fault";
    EXPECT_EQ(e.offset(), 17u);
  }
  auto ok = compile_write_sql({"SELECT 1 WHERE $token > 0", "UPDATE t SET v = $data"});
  ASSERT_EQ(ok.size(), 2u);
  EXPECT_EQ(ok[1].text, "UPDATE t SET v = $6");
}

TEST(PostgresSql, TheDefaultsCompile) {
  auto w = compile_write_sql({std::string(pg::kDefaultWrite)});
  EXPECT_EQ(w[0].used, (std::vector<std::string>{"key", "token", "segment", "chunk", "writer", "data"}));
  for (auto q : {pg::kDefaultReadBack, pg::kDefaultAcceptLog, pg::kDefaultHighWater, pg::kDefaultDelete,
                 pg::kDefaultIgnoredChunks, pg::kDefaultIgnoredAcceptLog, pg::kDefaultIgnoredHighWater}) {
    const auto c = compile_sql(q, read_parameters(), "query");
    EXPECT_EQ(c.used, (std::vector<std::string>{"keys"})) << q << ": the defaults are scoped to the run's keys";
    EXPECT_EQ(c.text.find("$keys"), std::string::npos) << c.text;
  }
}

TEST(PostgresSql, KeysAreBoundAsATextArrayLiteralNeverSpliced) {
  EXPECT_EQ(text_array_literal({}), "{}");
  EXPECT_EQ(text_array_literal({"ledger", "us-2"}), "{\"ledger\",\"us-2\"}");
  // A quote, a backslash, a comma and braces stay inside their element.
  EXPECT_EQ(text_array_literal({"a\"b", "c\\d", "e,f", "{g}"}), "{\"a\\\"b\",\"c\\\\d\",\"e,f\",\"{g}\"}");
  // $keys is a parameter like the write's: positional, never text in the statement.
  const auto c = compile_sql("SELECT key, token FROM t WHERE key = ANY($keys) AND $keys IS NOT NULL", read_parameters(), "high_water");
  EXPECT_EQ(c.text, "SELECT key, token FROM t WHERE key = ANY($1) AND $1 IS NOT NULL");
  EXPECT_THROW((void)compile_sql("SELECT key FROM t WHERE key = $key", read_parameters(), "read_back"), SqlCompileError);
}

TEST(PostgresKindFields, DeleteDefaultsWithTheDefaultWriteAndMustTakeKeys) {
  const auto& kind = *fencecheck::resources::find_resource_kind("postgres");
  auto c = kind.parse(FakeFields(nlohmann::json::object()));
  EXPECT_EQ(c["delete"], pg::kDefaultDelete);
  c = kind.parse(FakeFields({{"write", "UPDATE t SET token = $token WHERE key = $key"}}));
  EXPECT_EQ(c["delete"], "none") << "a custom write: no default delete";
  c = kind.parse(FakeFields({{"write", "UPDATE t SET token = $token WHERE key = $key"},
                             {"delete", "DELETE FROM t WHERE key = ANY($keys)"}}));
  EXPECT_EQ(c["delete"], "DELETE FROM t WHERE key = ANY($keys)");
  try {
    (void)kind.parse(FakeFields({{"delete", "DELETE FROM fencecheck_chunks"}}));
    FAIL() << "a delete without $keys was taken";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("delete must use $keys"), std::string::npos) << e.what();
  }
}

// ---- DSNs

TEST(PostgresDsn, RedactionDropsEveryPassword) {
  EXPECT_EQ(pg::redact_dsn("host=db.example port=5433 dbname=app user=me password=s3cret"),
            "user=me dbname=app host=db.example port=5433");
  const std::string uri = pg::redact_dsn("postgresql://me:s3cret@db.example:5433/app?sslmode=require");
  EXPECT_EQ(uri.find("s3cret"), std::string::npos) << uri;
  EXPECT_NE(uri.find("host=db.example"), std::string::npos) << uri;
  EXPECT_NE(uri.find("port=5433"), std::string::npos) << uri;
  EXPECT_EQ(pg::redact_dsn("host='a b' password='x y'"), "host='a b'");
  EXPECT_EQ(pg::redact_dsn("host=a password=s3cret bogus"), "<a DSN libpq cannot parse>");
  EXPECT_TRUE(pg::dsn_has_password("host=a password=x"));
  EXPECT_TRUE(pg::dsn_has_password("postgres://u:x@h/d"));
  EXPECT_FALSE(pg::dsn_has_password("postgres://u@h/d"));
  EXPECT_FALSE(pg::dsn_has_password("host=a dbname=b"));
}

// ---- the kind's fields

const fencecheck::resources::ResourceKind& kind() {
  const auto* k = fencecheck::resources::find_resource_kind("postgres");
  if (!k) throw std::logic_error("postgres is not registered");
  return *k;
}

FieldError parse_error(const nlohmann::json& fields) {
  try {
    (void)kind().parse(FakeFields(fields));
  } catch (const FieldError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << fields.dump();
  return FieldError("", "", std::nullopt);
}

TEST(PostgresKindFields, EmbeddedDefaultsAreFilledIn) {
  auto c = kind().parse(FakeFields(nlohmann::json::object()));
  EXPECT_FALSE(c.contains("dsn"));
  EXPECT_EQ(c["schema"], pg::kDefaultSchema);
  EXPECT_EQ(c["write"], pg::kDefaultWrite);
  EXPECT_EQ(c["read_back"], pg::kDefaultReadBack);
  EXPECT_EQ(c["accept_log"], pg::kDefaultAcceptLog);
  EXPECT_EQ(c["high_water"], pg::kDefaultHighWater);
  EXPECT_TRUE(kind().embedded(c));
  EXPECT_EQ(kind().design(c), "per-key (default SQL)");
  auto ev = kind().evidence(c);
  EXPECT_TRUE(ev.chunks);
  EXPECT_TRUE(ev.accept_log);
  EXPECT_TRUE(ev.high_water);
  EXPECT_FALSE(ev.rejections);
  EXPECT_FALSE(ev.effects);
  EXPECT_EQ(kind().parse(FakeFields(c)), c) << "normalized fields parse to themselves";
}

TEST(PostgresKindFields, AUserWriteHasNoLogOrMarkUnlessItSaysSo) {
  nlohmann::json f{{"write", nlohmann::json::array({"SELECT 1 WHERE $token > 0", "UPDATE t SET v = $data"})}};
  auto c = kind().parse(FakeFields(f));
  EXPECT_EQ(c["write"].size(), 2u);
  EXPECT_EQ(c["accept_log"], "none");
  EXPECT_EQ(c["high_water"], "none");
  EXPECT_EQ(kind().design(c), "user SQL, 2 statements");
  EXPECT_FALSE(kind().evidence(c).accept_log);
  EXPECT_FALSE(kind().evidence(c).high_water);
  EXPECT_EQ(kind().parse(FakeFields(c)), c);
  f["high_water"] = "SELECT key, token FROM t";
  c = kind().parse(FakeFields(f));
  EXPECT_TRUE(kind().evidence(c).high_water);
  // "none" turns a default off.
  auto d = kind().parse(FakeFields(nlohmann::json{{"accept_log", "none"}}));
  EXPECT_FALSE(kind().evidence(d).accept_log);
  EXPECT_TRUE(kind().evidence(d).high_water);
}

TEST(PostgresKindFields, AnExternalDsnRunsNoSchemaUnlessGiven) {
  auto c = kind().parse(FakeFields(nlohmann::json{{"dsn", "host=db.example dbname=app"}}));
  EXPECT_EQ(c["dsn"], "host=db.example dbname=app");
  EXPECT_FALSE(c.contains("schema"));
  EXPECT_FALSE(kind().embedded(c));
  EXPECT_EQ(kind().parse(FakeFields(c)), c);
}

TEST(PostgresKindFields, ErrorsPointAtTheFieldAndTheByte) {
  auto e = parse_error({{"dsn", "postgresql://me:hunter2@db/app"}});
  EXPECT_EQ(e.field, "dsn");
  EXPECT_NE(e.message.find("holds a password"), std::string::npos);
  EXPECT_EQ(e.message.find("hunter2"), std::string::npos);
  EXPECT_EQ(parse_error({{"dsn", "host=a = b"}}).field, "dsn");

  e = parse_error({{"write", "UPDATE t SET v = $data WHERE k = $key"}});
  EXPECT_EQ(e.field, "write[0]");
  EXPECT_EQ(e.offset, 0u);
  EXPECT_EQ(e.message.rfind("write: must use $token", 0), 0u) << e.message;

  e = parse_error({{"write", nlohmann::json::array({"SELECT $token", "UPDATE t SET v = $vaule"})}});
  EXPECT_EQ(e.field, "write[1]");
  EXPECT_EQ(e.offset, 17u);

  e = parse_error({{"read_back", "SELECT key, segment, chunk, token, writer, data FROM t WHERE key = $key"}});
  EXPECT_EQ(e.field, "read_back");
  EXPECT_EQ(e.offset, 67u);

  e = parse_error({{"high_water", "SELECT key, token FROM t; DROP TABLE t"}});
  EXPECT_EQ(e.field, "high_water");
  EXPECT_EQ(e.offset, 26u);
  EXPECT_EQ(parse_error({{"schema", "  "}}).field, "schema");
}

}  // namespace

// ---- what a command worker is told (issue 34, item 4)

TEST(PostgresWorkerEnv, OneStatementIsHandedOverAsWrittenAndCompiled) {
  const std::string sql = "UPDATE shipments SET payload = $data, token = $token\n WHERE key = $key AND token <= $token";
  const nlohmann::json endpoint{{"kind", "postgres"}, {"dsn", "host=db dbname=orders"}, {"write", nlohmann::json::array({sql})}};
  const auto env = kind().worker_env(endpoint);
  const std::vector<std::pair<std::string, std::string>> want{
      {"FENCECHECK_RESOURCE_DSN", "host=db dbname=orders"},
      {"FENCECHECK_PG_WRITE", sql},
      {"FENCECHECK_PG_WRITE_COUNT", "1"},
      {"FENCECHECK_PG_WRITE_1", sql},
      {"FENCECHECK_PG_WRITE_1_POSITIONAL", "UPDATE shipments SET payload = $6, token = $4\n WHERE key = $1 AND token <= $4"},
      {"FENCECHECK_PG_WRITE_PARAMS", "key,segment,chunk,token,writer,data"},
      {"FENCECHECK_PG_WRITE_TYPES", "text,int8,int8,int8,text,bytea"},
  };
  EXPECT_EQ(env, want);
  // The endpoint's "write" as one string (as the scenario spells one statement) says the same.
  nlohmann::json one = endpoint;
  one["write"] = sql;
  EXPECT_EQ(kind().worker_env(one), want);
}

TEST(PostgresWorkerEnv, SeveralStatementsAreOneVariableEachAndNoSingleStatementVariable) {
  const std::vector<std::string> statements{
      "SELECT pg_advisory_xact_lock(hashtextextended($key, 0))",
      "SELECT 1 WHERE COALESCE((SELECT token FROM fence WHERE key = $key), 0) <= $token",
      "INSERT INTO rows (key, token, writer, doc) VALUES ($key, $token, $writer, '$data is not a parameter here')"};
  const auto env = kind().worker_env({{"kind", "postgres"}, {"dsn", "host=db"}, {"write", statements}});
  const std::vector<std::pair<std::string, std::string>> want{
      {"FENCECHECK_RESOURCE_DSN", "host=db"},
      {"FENCECHECK_PG_WRITE_COUNT", "3"},
      {"FENCECHECK_PG_WRITE_1", statements[0]},
      {"FENCECHECK_PG_WRITE_1_POSITIONAL", "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))"},
      {"FENCECHECK_PG_WRITE_2", statements[1]},
      {"FENCECHECK_PG_WRITE_2_POSITIONAL", "SELECT 1 WHERE COALESCE((SELECT token FROM fence WHERE key = $1), 0) <= $4"},
      {"FENCECHECK_PG_WRITE_3", statements[2]},
      {"FENCECHECK_PG_WRITE_3_POSITIONAL",
       "INSERT INTO rows (key, token, writer, doc) VALUES ($1, $4, $5, '$data is not a parameter here')"},
      {"FENCECHECK_PG_WRITE_PARAMS", "key,segment,chunk,token,writer,data"},
      {"FENCECHECK_PG_WRITE_TYPES", "text,int8,int8,int8,text,bytea"},
  };
  EXPECT_EQ(env, want);
}

TEST(PostgresWorkerEnv, TheDefaultStatementIsHandedOverToo) {
  const auto config = kind().parse(FakeFields(nlohmann::json::object()));
  const auto env = kind().worker_env({{"kind", "postgres"}, {"dsn", "host=/tmp/s"}, {"write", config["write"]}});
  ASSERT_EQ(env.size(), 7u);
  EXPECT_EQ(env[1], (std::pair<std::string, std::string>{"FENCECHECK_PG_WRITE", std::string(pg::kDefaultWrite)}));
  EXPECT_EQ(env[4].second, pg::compile_write_sql({std::string(pg::kDefaultWrite)})[0].text);
}
