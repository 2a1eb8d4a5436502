// Named parameters -> positional ones, with PostgreSQL's lexical rules (postgres_sql.h; PostgreSQL
// 15 docs, 4.1 "Lexical Structure"; the rules below are those of src/backend/parser/scan.l).
#include "fencecheck/resources/postgres_sql.h"

#include <algorithm>

namespace fencecheck::postgres {
namespace {

bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
// scan.l: ident_start [A-Za-z\200-\377_]
bool ident_start(unsigned char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || c >= 0x80; }
// scan.l: ident_cont [A-Za-z\200-\377_0-9\$]
bool ident_cont(unsigned char c) { return ident_start(c) || is_digit(c) || c == '$'; }
// scan.l: dolq_cont [A-Za-z\200-\377_0-9] (a dollar-quote tag has no '$')
bool dolq_cont(unsigned char c) { return ident_start(c) || is_digit(c); }
bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string expected_names(const std::vector<std::string_view>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i) out += ", ";
    out += "$";
    out += names[i];
  }
  return out;
}

// Shows a name from the user's text in a message: at most 40 bytes.
std::string shown_name(std::string_view s) { return s.size() <= 40 ? std::string(s) : std::string(s.substr(0, 40)) + "..."; }

}  // namespace

bool CompiledSql::uses(std::string_view name) const { return std::find(used.begin(), used.end(), name) != used.end(); }

std::size_t CompiledSql::source_offset(std::size_t compiled_offset) const {
  std::ptrdiff_t delta = 0;
  for (const SqlReplacement& r : replacements) {
    if (compiled_offset < r.compiled_offset) break;
    if (compiled_offset < r.compiled_offset + r.compiled_length) return r.source_offset;
    delta = static_cast<std::ptrdiff_t>(r.source_offset + r.source_length) -
            static_cast<std::ptrdiff_t>(r.compiled_offset + r.compiled_length);
  }
  return static_cast<std::size_t>(static_cast<std::ptrdiff_t>(compiled_offset) + delta);
}

CompiledSql compile_sql(std::string_view sql, const std::vector<std::string_view>& names, std::string_view what) {
  const std::string prefix = std::string(what) + ": ";
  CompiledSql out;
  out.text.reserve(sql.size());
  const std::size_t n = sql.size();
  auto at = [&](std::size_t i) -> unsigned char { return i < n ? static_cast<unsigned char>(sql[i]) : 0; };
  bool seen_content = false;     // a token of a statement has been seen
  bool after_semicolon = false;  // a top-level ';' ended that statement
  std::size_t i = 0;
  auto copy_to = [&](std::size_t end) {
    out.text.append(sql.substr(i, end - i));
    i = end;
  };
  while (i < n) {
    const unsigned char c = at(i);
    if (is_space(c)) {
      copy_to(i + 1);
      continue;
    }
    if (c == '-' && at(i + 1) == '-') {  // 4.1.5: a comment to the end of the line
      std::size_t end = sql.find('\n', i);
      copy_to(end == std::string_view::npos ? n : end);
      continue;
    }
    if (c == '/' && at(i + 1) == '*') {  // 4.1.5: C-style block comments nest
      std::size_t j = i + 2;
      int depth = 1;
      while (j < n && depth > 0) {
        if (at(j) == '/' && at(j + 1) == '*') {
          ++depth;
          j += 2;
        } else if (at(j) == '*' && at(j + 1) == '/') {
          --depth;
          j += 2;
        } else {
          ++j;
        }
      }
      if (depth > 0) throw SqlCompileError(prefix + "unterminated /* comment", i);
      copy_to(j);
      continue;
    }
    if (c == ';') {
      if (seen_content) after_semicolon = true;
      copy_to(i + 1);
      continue;
    }
    // Anything else starts a token of a statement.
    if (after_semicolon)
      throw SqlCompileError(prefix +
                                "more than one statement (SQL after a ';'): a prepared statement holds one SQL "
                                "command; give several statements as a list",
                            i);
    seen_content = true;
    struct MarkEnd {  // when this token has been copied, the statement ends after it (so far)
      CompiledSql& target;
      ~MarkEnd() { target.statement_end = target.text.size(); }
    } mark_end{out};

    if (c == '\'' || c == '"') {  // 4.1.2.1 string constant / 4.1.1 quoted identifier; doubled = escaped
      std::size_t j = i + 1;
      for (;;) {
        j = sql.find(static_cast<char>(c), j);
        if (j == std::string_view::npos)
          throw SqlCompileError(prefix + (c == '\'' ? "unterminated quoted string" : "unterminated quoted identifier"),
                                i);
        if (at(j + 1) == c) {
          j += 2;
          continue;
        }
        break;
      }
      copy_to(j + 1);
      continue;
    }
    if (ident_start(c)) {  // 4.1.1: an identifier or key word; '$' continues it
      std::size_t j = i;
      while (j < n && ident_cont(at(j))) ++j;
      if (j == i + 1 && (c == 'E' || c == 'e') && at(j) == '\'') {
        // 4.1.2.2: an escape string E'...': a backslash escapes the next character
        std::size_t k = j + 1;
        for (;;) {
          if (k >= n) throw SqlCompileError(prefix + "unterminated quoted string", i);
          if (at(k) == '\\') {
            k += 2;
          } else if (at(k) == '\'') {
            if (at(k + 1) == '\'') {
              k += 2;
            } else {
              break;
            }
          } else {
            ++k;
          }
        }
        copy_to(k + 1);
        continue;
      }
      copy_to(j);
      continue;
    }
    if (is_digit(c)) {  // a numeric constant (4.1.2.6); its letters and dots are not identifiers
      std::size_t j = i;
      while (j < n && (is_digit(at(j)) || ident_start(at(j)) || at(j) == '.')) ++j;
      copy_to(j);
      continue;
    }
    if (c == '$') {
      if (is_digit(at(i + 1))) {  // 4.1.4: a positional parameter
        std::size_t j = i + 1;
        while (j < n && is_digit(at(j))) ++j;
        const std::string param(sql.substr(i, j - i));
        throw SqlCompileError(prefix + "positional parameter " + param +
                                  (names.empty() ? ": " + std::string(what) + " takes no parameters"
                                                 : ": use the named parameters (" + expected_names(names) + ")"),
                              i);
      }
      std::size_t j = i + 1;
      if (at(j) != '$') {
        if (!ident_start(at(j))) {  // a lone '$': not ours; PostgreSQL will say what it thinks of it
          copy_to(i + 1);
          continue;
        }
        while (j < n && dolq_cont(at(j))) ++j;
      }
      if (at(j) == '$') {  // 4.1.2.4: $$ or $tag$ opens a dollar-quoted string, closed by the same tag
        const std::string_view tag = sql.substr(i, j + 1 - i);
        std::size_t close = sql.find(tag, j + 1);
        if (close == std::string_view::npos)
          throw SqlCompileError(prefix + "unterminated dollar-quoted string " + shown_name(tag) + " (no closing " +
                                    shown_name(tag) + ")",
                                i);
        copy_to(close + tag.size());
        continue;
      }
      const std::string_view name = sql.substr(i + 1, j - i - 1);
      auto it = std::find(names.begin(), names.end(), name);
      if (it == names.end()) {
        throw SqlCompileError(prefix + (names.empty() ? "parameter $" + shown_name(name) + ": " + std::string(what) +
                                                            " takes no parameters"
                                                      : "unknown parameter $" + shown_name(name) +
                                                            "; expected one of: " + expected_names(names)),
                              i);
      }
      const std::string positional = "$" + std::to_string(it - names.begin() + 1);
      out.replacements.push_back(SqlReplacement{out.text.size(), i, positional.size(), j - i});
      out.text += positional;
      if (!out.uses(name)) out.used.emplace_back(name);
      i = j;
      continue;
    }
    copy_to(i + 1);  // an operator or punctuation
  }
  if (!seen_content) throw SqlCompileError(prefix + "empty statement", 0);
  return out;
}

const std::vector<std::string_view>& write_parameters() {
  static const std::vector<std::string_view> kNames{"key", "segment", "chunk", "token", "writer", "data"};
  return kNames;
}

const std::vector<std::string_view>& write_parameter_types() {
  static const std::vector<std::string_view> kTypes{"text", "int8", "int8", "int8", "text", "bytea"};
  return kTypes;
}

std::vector<std::pair<std::string, std::string>> write_statement_env(const std::vector<std::string>& statements) {
  const std::vector<CompiledSql> compiled = compile_write_sql(statements);
  auto comma_list = [](const std::vector<std::string_view>& items) {
    std::string out;
    for (std::string_view item : items) out += (out.empty() ? "" : ",") + std::string(item);
    return out;
  };
  std::vector<std::pair<std::string, std::string>> env;
  if (statements.size() == 1) env.emplace_back("FENCECHECK_PG_WRITE", statements.front());
  env.emplace_back("FENCECHECK_PG_WRITE_COUNT", std::to_string(statements.size()));
  for (std::size_t i = 0; i < statements.size(); ++i) {
    const std::string name = "FENCECHECK_PG_WRITE_" + std::to_string(i + 1);
    env.emplace_back(name, statements[i]);
    env.emplace_back(name + "_POSITIONAL", compiled[i].text);
  }
  env.emplace_back("FENCECHECK_PG_WRITE_PARAMS", comma_list(write_parameters()));
  env.emplace_back("FENCECHECK_PG_WRITE_TYPES", comma_list(write_parameter_types()));
  return env;
}

std::vector<CompiledSql> compile_write_sql(const std::vector<std::string>& statements) {
  if (statements.empty()) throw std::invalid_argument("write: no statement");
  std::vector<CompiledSql> out;
  out.reserve(statements.size());
  for (std::size_t s = 0; s < statements.size(); ++s) {
    try {
      out.push_back(compile_sql(statements[s], write_parameters(), "write"));
    } catch (const SqlCompileError& e) {
      throw SqlCompileError(e.what(), e.offset(), s);
    }
  }
  const bool token = std::any_of(out.begin(), out.end(), [](const CompiledSql& c) { return c.uses("token"); });
  if (!token)
    throw SqlCompileError(
        "write: must use $token (the fencing token: the resource must compare it with the key's high-water mark, "
        "atomically with the write)",
        0, 0);
  return out;
}

// ---- The read-back queries' and delete's $keys (postgres_sql.h)

const std::vector<std::string_view>& read_parameters() {
  static const std::vector<std::string_view> kNames{"keys"};
  return kNames;
}

std::string text_array_literal(const std::vector<std::string>& values) {
  std::string out = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    out += '"';
    for (const char c : values[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  out += '}';
  return out;
}

}  // namespace fencecheck::postgres
