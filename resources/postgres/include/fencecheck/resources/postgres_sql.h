// fencecheck — named parameters in the user's SQL, compiled to PostgreSQL's positional ones.
//
// The postgres resource kind runs the user's own fencing SQL (docs/resource-postgres.md), written
// with named parameters because they read better than numbers:
//
//   INSERT INTO fence AS f (key, token) VALUES ($key, $token)
//   ON CONFLICT (key) DO UPDATE SET token = EXCLUDED.token WHERE f.token <= EXCLUDED.token
//
// PostgreSQL's extended query protocol only knows positional parameters ($1, $2, ...; PostgreSQL 15
// docs, 55.2.3 "Extended Query" and PREPARE). compile_sql() rewrites each `$name` into `$n`, where
// n is the name's 1-based position in the caller's list, and leaves everything else byte for byte.
// It finds parameters with PostgreSQL's own lexical rules (docs 4.1 "Lexical Structure"), so a `$`
// inside any of these is not a parameter and is left alone:
//   - string constants '...' ('' escapes a quote; standard_conforming_strings = on, the default
//     since 9.1, so a backslash is an ordinary character: 4.1.2.1), including B'..', X'..', N'..',
//     U&'..';
//   - escape strings E'...' (a backslash escapes the next character, \' included: 4.1.2.2);
//   - quoted identifiers "..." ("" escapes a quote: 4.1.1), including U&"...";
//   - dollar-quoted strings $$...$$ and $tag$...$tag$ (4.1.2.4: a tag is an identifier without $);
//   - comments: -- to the end of the line, and /* ... */, which nest (4.1.5);
//   - an identifier, where $ is an ordinary continuation character (4.1.1: foo$bar is one name).
//
// Pure functions of their arguments; thread-safe.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fencecheck::postgres {

/// A statement the compiler refuses, with the byte offset in the statement's text of the character
/// at fault (the `$` of a bad parameter, the quote that opens an unterminated string, ...), so the
/// scenario loader can point at it (KindFields::fail(field, what(), offset())). `statement()`
/// is the statement's index when a list of statements was compiled (compile_write_sql), else 0.
class SqlCompileError : public std::invalid_argument {
 public:
  SqlCompileError(const std::string& message, std::size_t offset, std::size_t statement = 0)
      : std::invalid_argument(message), offset_(offset), statement_(statement) {}
  [[nodiscard]] std::size_t offset() const noexcept { return offset_; }
  [[nodiscard]] std::size_t statement() const noexcept { return statement_; }

 private:
  std::size_t offset_;
  std::size_t statement_;
};

/// One `$name` -> `$n` replacement: where it is in the compiled text and in the source, and how
/// long it is in each (bytes, '$' included).
struct SqlReplacement {
  std::size_t compiled_offset = 0;
  std::size_t source_offset = 0;
  std::size_t compiled_length = 0;
  std::size_t source_length = 0;
};

/// One compiled statement.
struct CompiledSql {
  std::string text;               ///< the statement with every $name replaced by $n
  std::vector<std::string> used;  ///< the names used (without '$'), each once, in order of first use
  std::vector<SqlReplacement> replacements;  ///< every replacement, in order (source_offset() reads it)
  /// The byte offset in `text` just past the statement's last token: what follows is only
  /// whitespace, comments and a ';'. text.substr(0, statement_end) can be wrapped in a subquery.
  std::size_t statement_end = 0;

  /// True when `$name` occurs (outside literals and comments).
  [[nodiscard]] bool uses(std::string_view name) const;
  /// The byte offset in the source statement that corresponds to byte offset `compiled_offset` of
  /// `text` (an offset inside a replaced `$n` maps to its `$`). For error positions PostgreSQL
  /// reports against the compiled text.
  [[nodiscard]] std::size_t source_offset(std::size_t compiled_offset) const;
};

/// Compiles one statement whose parameters are `names` ("key", "token", ... without '$'): the i-th
/// name becomes $(i+1). `what` names the statement in messages ("write", "read_back").
///
/// Throws SqlCompileError (offset = the byte at fault) for:
///  - a positional parameter ($1): "positional parameter $1: use the named parameters ..." (or
///    "... takes no parameters" when `names` is empty);
///  - an unknown name: "unknown parameter $foo; expected one of: $key, ..." ("<what> takes no
///    parameters" when `names` is empty);
///  - an unterminated string constant, quoted identifier, dollar-quoted string or comment (at its
///    opening character);
///  - more than one statement (SQL after a top-level ';': at the first character of the second
///    statement): one prepared statement holds one SQL command (PQprepare; docs 34.3.1);
///  - an empty statement (only whitespace, comments and ';'): at offset 0.
[[nodiscard]] CompiledSql compile_sql(std::string_view sql, const std::vector<std::string_view>& names,
                                      std::string_view what);

/// The write path's named parameters, in their positional order and with the types the writer
/// declares for them in PQprepare (so the user's SQL needs no casts):
///   $key -> $1 text, $segment -> $2 int8, $chunk -> $3 int8, $token -> $4 int8,
///   $writer -> $5 text, $data -> $6 bytea (sent in binary format: the chunk's bytes as written).
[[nodiscard]] const std::vector<std::string_view>& write_parameters();

/// The read-back queries' (read_back, accept_log, high_water) and `delete`'s one named parameter:
/// $keys -> $1 text[] (kOidTextArray), the keys the run wrote (docs/resource-postgres.md, "Only
/// the run's rows"), sent as text_array_literal() of them.
[[nodiscard]] const std::vector<std::string_view>& read_parameters();

/// PostgreSQL's text[] input for `values` (PostgreSQL 15 docs 8.15.6 "Array Value Input"): every
/// element double-quoted, `"` and `\` backslash-escaped: {"us-1","a\"b"}; {} for none. Bound as a
/// parameter value, so no quoting of the statement is involved. Pure.
[[nodiscard]] std::string text_array_literal(const std::vector<std::string>& values);

/// Compiles the `write` statements (one, or several run in order in one transaction) with
/// write_parameters(). Throws SqlCompileError with statement() = the index of the statement at
/// fault for the errors of compile_sql(), and "write: must use $token (the fencing token: the
/// resource must compare it with the key's high-water mark)" at offset 0 of statement 0 when no
/// statement uses $token. Throws std::invalid_argument for an empty list.
[[nodiscard]] std::vector<CompiledSql> compile_write_sql(const std::vector<std::string>& statements);

/// The types write_parameters() are declared with, in their order, as PostgreSQL spells them in
/// PREPARE: "text", "int8", "int8", "int8", "text", "bytea".
[[nodiscard]] const std::vector<std::string_view>& write_parameter_types();

/// The environment a command worker gets for the `write` statements (issue 34, item 4;
/// docs/worker-protocol.md, "The environment"), so that it runs the scenario's own SQL:
///   FENCECHECK_PG_WRITE               the statement as written (named parameters), only when
///                                     there is exactly one;
///   FENCECHECK_PG_WRITE_COUNT         how many statements (>= 1), run in order in one
///                                     transaction when more than one;
///   FENCECHECK_PG_WRITE_<i>           statement i (1-based: FENCECHECK_PG_WRITE_1 is write[0]) as
///                                     written, with $key $segment $chunk $token $writer $data;
///   FENCECHECK_PG_WRITE_<i>_POSITIONAL the same compiled to $1..$6 (compile_write_sql()), for a
///                                     client that prepares it: PREPARE name (<TYPES>) AS <this>;
///   FENCECHECK_PG_WRITE_PARAMS        "key,segment,chunk,token,writer,data" ($1..$6 in order);
///   FENCECHECK_PG_WRITE_TYPES         "text,int8,int8,int8,text,bytea" (their declared types).
/// In that order. Throws what compile_write_sql() throws (never for statements the scenario
/// loader accepted). Pure; thread-safe.
[[nodiscard]] std::vector<std::pair<std::string, std::string>> write_statement_env(
    const std::vector<std::string>& statements);

}  // namespace fencecheck::postgres
