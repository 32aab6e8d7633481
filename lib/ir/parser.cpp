// The IR parser: text (as printer.cpp writes it) -> Module.
//
// A Lexer turns the whole text into tokens first; a recursive-descent Parser
// reads them. The module is read in three sweeps over the tokens, so that
// definition order in the file does not matter:
//   1. the names of all `type` definitions (so that types can name any ADT),
//   2. the `type` definitions themselves (so that expressions can use any
//      constructor),
//   3. the functions, skipping the `type` definitions read in sweep 2.
// The grammar (what printer.cpp writes; `//` comments are skipped):
//   module  := (adt | def)*
//   adt     := 'type' NAME ['<' NAME {',' NAME} '>'] '{' [ctor {',' ctor}] '}'
//   ctor    := NAME ['(' type {',' type} ')']
//   def     := ['entry'] 'def' '@'NAME params ['->' type] '{' expr '}'
//   params  := '(' ['%'NAME ':' type {',' ...}] ')'
//   type    := DTYPE '[' [dim {',' dim}] ']' | '(' tuple ')' | 'fn' '(' types ')' '->' type
//            | ADT ['<' types '>'] | TYPE_PARAM           (dim := INT | '?' | NAME ['<=' INT])
//   expr    := 'let' '%'NAME [':' type] '=' expr ';' expr | postfix
//   postfix := primary { '(' [args] [attr {',' attr}] ')' | '.'INT }
//   primary := '%'NAME | '@'NAME | OP | CTOR | literal | 'const' type '[' numbers ']'
//            | 'const' type '[' number ';' count ']'
//            | '(' tuple ')' | 'if' '(' expr ')' '{' expr '}' 'else' '{' expr '}'
//            | 'match' '(' expr ')' '{' pattern '=>' '{' expr '}' {',' ...} '}'
//            | 'fn' params ['->' type] '{' expr '}'
//   pattern := '_' | '%'NAME [':' type] | CTOR ['(' pattern {',' pattern} ')'] | '(' tuple ')'
//   tuple   := '' | item ',' | item {',' item}   (a single item without ',' is grouping)
// Every problem with the text is Error(parse_error) "<file>:<line>:<col>: ...",
// most of them "expected <what>, got <found>". The parser never trusts the
// input: literals are range-checked, and nesting deeper than kMaxNesting is
// an error rather than a stack overflow.
#include "nimble/ir/module.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ir/op.hpp"
#include "support/check.hpp"
#include "support/out_of_memory.hpp"

namespace nimble::ir {
namespace {

/// Expressions, types and patterns may nest this deep (each level costs a
/// few stack frames; this keeps a parse far from the default 8 MiB stack).
constexpr int kMaxNesting = 1000;
/// The largest constant IR text may declare (a splat `[v; n]` is short text
/// for any size).
constexpr std::int64_t kMaxConstantBytes = std::int64_t{1} << 30;

// --- Tokens -----------------------------------------------------------------------

enum class Tok : std::uint8_t {
  end,      ///< end of input
  invalid,  ///< text that starts no token; Token::problem says why
  name,     ///< identifier or keyword: let, Cons, f32, add, _
  local,    ///< %x
  global,   ///< @f
  number,   ///< -12, 0.5e-3, 1i64 (numeric part, then an optional dtype suffix)
  string,   ///< "text" (quotes and escapes as written)
  field,    ///< .0 (a projection)
  lparen,
  rparen,
  lbrace,
  rbrace,
  lbracket,
  rbracket,
  langle,
  rangle,
  comma,
  colon,
  semicolon,
  equal,       ///< =
  arrow,       ///< ->
  fat_arrow,   ///< =>
  minus,       ///< - (before inf or nan)
  less_equal,  ///< <= (a dim's bound)
  question,    ///< ? (an Any dim)
};

struct Token {
  Tok kind = Tok::end;
  std::string_view text;  ///< as written, a view of the input
  std::uint32_t line = 1;
  std::uint32_t column = 1;
  std::size_t number_length = 0;  ///< numbers: length of the numeric part; the rest is a suffix
  std::string problem;            ///< invalid: "expected ..., got ..." (no position)
};

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_ident_char(char c) {
  return is_ident_start(c) || is_digit(c);
}
bool is_hex_digit(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/// `text` as it appears in a message: non-printable bytes escaped, long
/// tokens shortened.
std::string printable(std::string_view text) {
  constexpr std::size_t kMaxShown = 40;
  std::string out;
  for (std::size_t i = 0; i < text.size() && i < kMaxShown; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c >= 0x7f)
      out += fmt::format("\\x{:02x}", c);
    else
      out += static_cast<char>(c);
  }
  if (text.size() > kMaxShown) out += "...";
  return out;
}

// --- Lexer ------------------------------------------------------------------------

/// Splits IR text into tokens, skipping white space and `//` comments.
class Lexer {
 public:
  explicit Lexer(std::string_view text) : text_(text) {}

  /// Every token, ending with an `end` token, or with an `invalid` token at
  /// the first text that starts no token (the parser reports it when it
  /// gets there, so that earlier syntax errors come first).
  std::vector<Token> tokenize() {
    std::vector<Token> tokens;
    for (;;) {
      tokens.push_back(next_token());
      if (tokens.back().kind == Tok::end || tokens.back().kind == Tok::invalid) return tokens;
    }
  }

 private:
  [[nodiscard]] bool at_end(std::size_t ahead = 0) const { return pos_ + ahead >= text_.size(); }
  /// The character `ahead` positions on, or '\0' past the end.
  [[nodiscard]] char peek(std::size_t ahead = 0) const {
    return at_end(ahead) ? '\0' : text_[pos_ + ahead];
  }
  void advance() {
    if (text_[pos_] == '\n') {
      ++line_;
      column_ = 1;
    } else {
      ++column_;
    }
    ++pos_;
  }
  [[nodiscard]] std::string describe_here() const {
    if (at_end()) return "end of input";
    if (peek() == '\n') return "end of line";
    return fmt::format("'{}'", printable(text_.substr(pos_, 1)));
  }

  void skip_space_and_comments();
  Token next_token();
  Token lex_number();
  Token lex_string();
  Token lex_sigil_name(Tok kind, const char* what);
  Token make(Tok kind, std::size_t start, std::uint32_t line, std::uint32_t column) const;
  /// An invalid token at the current position.
  Token invalid(std::string problem) const;

  std::string_view text_;
  std::size_t pos_ = 0;
  std::uint32_t line_ = 1;
  std::uint32_t column_ = 1;
};

Token Lexer::make(Tok kind, std::size_t start, std::uint32_t line, std::uint32_t column) const {
  Token t;
  t.kind = kind;
  t.text = text_.substr(start, pos_ - start);
  t.line = line;
  t.column = column;
  return t;
}

Token Lexer::invalid(std::string problem) const {
  Token t;
  t.kind = Tok::invalid;
  t.text = at_end() ? std::string_view() : text_.substr(pos_, 1);
  t.line = line_;
  t.column = column_;
  t.problem = std::move(problem);
  return t;
}

void Lexer::skip_space_and_comments() {
  while (!at_end()) {
    const char c = peek();
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      advance();
    } else if (c == '/' && peek(1) == '/') {
      while (!at_end() && peek() != '\n') advance();
    } else {
      return;
    }
  }
}

Token Lexer::next_token() {
  skip_space_and_comments();
  const std::size_t start = pos_;
  const std::uint32_t line = line_;
  const std::uint32_t column = column_;
  if (at_end()) return make(Tok::end, start, line, column);
  const char c = peek();
  if (is_ident_start(c)) {
    while (is_ident_char(peek())) advance();
    return make(Tok::name, start, line, column);
  }
  if (is_digit(c) || (c == '-' && is_digit(peek(1)))) return lex_number();
  if (c == '%') return lex_sigil_name(Tok::local, "a variable name after '%'");
  if (c == '@') return lex_sigil_name(Tok::global, "a function name after '@'");
  if (c == '"') return lex_string();
  if (c == '.' && is_digit(peek(1))) {
    advance();
    while (is_digit(peek())) advance();
    return make(Tok::field, start, line, column);
  }
  static constexpr std::pair<std::string_view, Tok> kTwoChar[] = {
      {"->", Tok::arrow}, {"=>", Tok::fat_arrow}, {"<=", Tok::less_equal}};
  for (const auto& [spelling, kind] : kTwoChar) {
    if (text_.substr(pos_, 2) == spelling) {
      advance();
      advance();
      return make(kind, start, line, column);
    }
  }
  static constexpr std::pair<char, Tok> kOneChar[] = {
      {'(', Tok::lparen},   {')', Tok::rparen},   {'{', Tok::lbrace},    {'}', Tok::rbrace},
      {'[', Tok::lbracket}, {']', Tok::rbracket}, {'<', Tok::langle},    {'>', Tok::rangle},
      {',', Tok::comma},    {':', Tok::colon},    {';', Tok::semicolon}, {'=', Tok::equal},
      {'-', Tok::minus},    {'?', Tok::question}};
  for (const auto& [spelling, kind] : kOneChar) {
    if (c == spelling) {
      advance();
      return make(kind, start, line, column);
    }
  }
  return invalid(fmt::format("expected a token, got {}", describe_here()));
}

// [-]digits[.digits][e[+-]digits] then an optional dtype suffix (letters and
// digits). A suffix never starts with 'e' followed by a digit: no dtype does.
Token Lexer::lex_number() {
  const std::size_t start = pos_;
  const std::uint32_t line = line_;
  const std::uint32_t column = column_;
  if (peek() == '-') advance();
  while (is_digit(peek())) advance();
  if (peek() == '.' && is_digit(peek(1))) {
    advance();
    while (is_digit(peek())) advance();
  }
  const bool exponent =
      (peek() == 'e' || peek() == 'E') &&
      (is_digit(peek(1)) || ((peek(1) == '+' || peek(1) == '-') && is_digit(peek(2))));
  if (exponent) {
    advance();
    if (peek() == '+' || peek() == '-') advance();
    while (is_digit(peek())) advance();
  }
  const std::size_t number_length = pos_ - start;
  while (is_ident_char(peek())) advance();
  Token t = make(Tok::number, start, line, column);
  t.number_length = number_length;
  return t;
}

Token Lexer::lex_string() {
  const std::size_t start = pos_;
  const std::uint32_t line = line_;
  const std::uint32_t column = column_;
  advance();  // the opening quote
  for (;;) {
    if (at_end() || peek() == '\n')
      return invalid(fmt::format("expected '\"' to close the string, got {}", describe_here()));
    const char c = peek();
    if (c == '"') break;
    if (c == '\\') {
      const char e = peek(1);
      const bool simple = e == '"' || e == '\\' || e == 'n' || e == 't';
      const bool hex = e == 'x' && is_hex_digit(peek(2)) && is_hex_digit(peek(3));
      if (!simple && !hex) {
        const std::string_view shown = text_.substr(pos_, at_end(1) ? 1 : 2);
        return invalid(
            fmt::format("expected an escape sequence (\\\", \\\\, \\n, \\t or \\xNN), got '{}'",
                        printable(shown)));
      }
      advance();
      if (hex) {
        advance();
        advance();
      }
    }
    advance();
  }
  advance();  // the closing quote
  return make(Tok::string, start, line, column);
}

Token Lexer::lex_sigil_name(Tok kind, const char* what) {
  const std::size_t start = pos_;
  const std::uint32_t line = line_;
  const std::uint32_t column = column_;
  advance();  // the sigil
  if (!is_ident_char(peek()))
    return invalid(fmt::format("expected {}, got {}", what, describe_here()));
  while (is_ident_char(peek())) advance();
  return make(kind, start, line, column);
}

// --- Literals -----------------------------------------------------------------------

bool is_special_float(std::string_view number) {
  return number == "inf" || number == "-inf" || number == "nan" || number == "-nan";
}

bool has_integer_syntax(std::string_view number) {
  return !is_special_float(number) && number.find_first_of(".eE") == std::string_view::npos;
}

/// The whole of `text` as a T (an integer or a floating-point type), or
/// nullopt if it is not one or out of T's range.
template <class T>
std::optional<T> parse_whole(std::string_view text) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

/// "inff32" -> {"inf", f32}: the spelling of a non-finite float scalar.
std::optional<std::pair<std::string_view, DType>> split_special_float(std::string_view name) {
  if (name.size() <= 3) return std::nullopt;
  const std::string_view word = name.substr(0, 3);
  if (word != "inf" && word != "nan") return std::nullopt;
  const auto dtype = parse_dtype(name.substr(3));
  if (!dtype || !is_floating(*dtype)) return std::nullopt;
  return std::pair{word, *dtype};
}

template <class T>
void append_bytes(std::vector<std::byte>& out, T value) {
  std::byte bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.insert(out.end(), bytes, bytes + sizeof(T));
}

std::string decode_string(std::string_view quoted) {
  std::string out;
  const std::string_view body = quoted.substr(1, quoted.size() - 2);
  for (std::size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\') {
      out += body[i];
      continue;
    }
    const char e = body[++i];  // the lexer checked every escape
    if (e == 'n') {
      out += '\n';
    } else if (e == 't') {
      out += '\t';
    } else if (e == 'x') {
      unsigned value = 0;
      std::from_chars(body.data() + i + 1, body.data() + i + 3, value, 16);
      out += static_cast<char>(value);
      i += 2;
    } else {
      out += e;
    }
  }
  return out;
}

// --- Parser ------------------------------------------------------------------------

/// One `let %name [: T] = value;` of a chain, before the chain is built.
struct LetBinding {
  std::string_view name;  ///< the variable's name, a view of the input
  Expr v;
  Expr value;
  SourceLoc where;
};

/// Recursive descent over the tokens of one module (grammar in the file
/// comment).
class Parser {
 public:
  Parser(std::vector<Token> tokens, const char* file) : tokens_(std::move(tokens)), file_(file) {}

  Module parse_module();

 private:
  /// Counts nesting; parse functions that recurse hold one.
  class NestingGuard {
   public:
    explicit NestingGuard(Parser& parser) : parser_(parser) {
      if (parser_.depth_ >= kMaxNesting) parser_.fail_nesting();
      ++parser_.depth_;
    }
    NestingGuard(const NestingGuard&) = delete;
    NestingGuard& operator=(const NestingGuard&) = delete;
    ~NestingGuard() { --parser_.depth_; }

   private:
    Parser& parser_;
  };

  // Tokens. The last token is `end` or `invalid`; reading never moves past it.
  [[nodiscard]] const Token& peek(std::size_t ahead = 0) const {
    return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
  }
  const Token& next() {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  [[nodiscard]] bool at(Tok kind) const { return peek().kind == kind; }
  [[nodiscard]] bool at_keyword(std::string_view word) const {
    return at(Tok::name) && peek().text == word;
  }
  bool accept(Tok kind) {
    if (!at(kind)) return false;
    next();
    return true;
  }
  bool accept_keyword(std::string_view word) {
    if (!at_keyword(word)) return false;
    next();
    return true;
  }
  const Token& expect(Tok kind, std::string_view what) {
    if (!at(kind)) fail_expected(what);
    return next();
  }
  void expect_keyword(std::string_view word) {
    if (!accept_keyword(word)) fail_expected(fmt::format("'{}'", word));
  }
  /// Parses `item {, item} close` (or just `close`), after the opening token.
  template <class F>
  void parse_list(Tok close, std::string_view close_text, F&& item);
  /// After '(': `)` (an empty tuple), `item)` (grouping), or a tuple
  /// `item, [item {, item} [,]])`. Returns the items and whether they form a tuple.
  template <class T, class F>
  std::pair<std::vector<T>, bool> parse_parenthesized(F&& item);

  // Errors.
  [[nodiscard]] SourceLoc loc(const Token& t) const { return {file_, t.line, t.column}; }
  [[noreturn, gnu::noinline]] void fail(const Token& at_token, std::string_view message) const;
  [[noreturn, gnu::noinline]] void fail_expected_at(const Token& found,
                                                    std::string_view what) const;
  [[noreturn]] void fail_expected(std::string_view what) const { fail_expected_at(peek(), what); }
  /// "unknown <what> '<name>'".
  [[noreturn, gnu::noinline]] void fail_unknown(const Token& name, std::string_view what) const;
  [[noreturn, gnu::noinline]] void fail_nesting() const;

  // Variables in scope: per name a stack of bindings, and an undo log.
  /// Binds `v`, named by the token text `name` (a view of the input, which
  /// outlives the parse, unlike a variable that goes out of scope).
  void bind(std::string_view name, const Expr& v);
  [[nodiscard]] std::size_t scope_mark() const { return scope_log_.size(); }
  void unbind_to(std::size_t mark);
  [[gnu::noinline]] Expr lookup(const Token& local);

  // Module level.
  void collect_adt_names();
  void parse_adts();
  void parse_adt();
  ConstructorDef parse_constructor_def();
  void parse_def();
  std::vector<Expr> parse_params();

  // Types, expressions and patterns recurse. Each form gets its own
  // function, kept out of line (gnu::noinline), so that one level of nesting
  // costs only the frames of the forms it goes through: inlined together,
  // sanitizer builds spend several KiB of stack per level.
  Type parse_type();
  [[gnu::noinline]] Type parse_tuple_type();
  [[gnu::noinline]] Type parse_named_type(const Token& name);
  [[gnu::noinline]] Type parse_func_type();
  [[gnu::noinline]] Type parse_adt_type(const Token& name);
  [[gnu::noinline]] Type parse_tensor_type(DType dtype);
  Dim parse_dim();
  std::int64_t parse_dim_value(std::string_view what);

  Expr parse_expr();
  [[gnu::noinline]] Expr parse_let_chain();
  [[gnu::noinline]] LetBinding parse_let_head();
  [[gnu::noinline]] static Expr build_lets(std::vector<LetBinding> bindings, Expr body);
  Expr parse_postfix();
  Expr parse_primary();
  [[gnu::noinline]] Expr parse_global();
  [[gnu::noinline]] Expr parse_named();
  [[gnu::noinline]] Expr parse_name_leaf();
  [[gnu::noinline]] Expr parse_paren_expr();
  [[gnu::noinline]] Expr parse_call(Expr callee, SourceLoc start);
  [[gnu::noinline]] void parse_attr(Attrs& attrs);
  AttrValue parse_attr_value();
  Expr parse_braced_body();
  [[gnu::noinline]] Expr parse_if();
  [[gnu::noinline]] Expr parse_match();
  [[gnu::noinline]] Expr parse_closure(bool primitive = false);
  [[gnu::noinline]] Expr parse_tensor_constant();
  [[gnu::noinline]] Expr parse_scalar_literal(const Token& t);
  [[gnu::noinline]] Expr parse_negative_literal();
  Pattern parse_pattern();
  [[gnu::noinline]] Pattern parse_pattern_var();
  [[gnu::noinline]] Pattern parse_tuple_pattern();
  [[gnu::noinline]] Pattern parse_constructor_pattern();

  // Literal values.
  std::optional<std::string> take_plain_number();
  std::int64_t parse_integer(std::string_view number, const Token& at_token);
  void append_number(std::vector<std::byte>& out, std::string_view number, DType dtype,
                     const Token& at_token);
  void append_element(std::vector<std::byte>& out, DType dtype);

  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
  const char* file_;
  int depth_ = 0;
  Module module_;
  std::unordered_set<std::string_view> adt_names_;
  std::unordered_map<std::size_t, std::size_t>
      adt_extent_;                             // token index of `type` -> after its `}`
  std::vector<std::string_view> type_params_;  // of the ADT being read
  std::unordered_map<std::string_view, std::vector<Expr>> scope_;
  std::vector<std::string_view> scope_log_;
};

void Parser::fail(const Token& at_token, std::string_view message) const {
  throw_error(ErrorKind::parse_error, "{}:{}:{}: {}", file_, at_token.line, at_token.column,
              message);
}

void Parser::fail_unknown(const Token& name, std::string_view what) const {
  fail(name, fmt::format("unknown {} '{}'", what, printable(name.text)));
}

void Parser::fail_nesting() const {
  fail(peek(), fmt::format("nesting deeper than {} levels", kMaxNesting));
}

void Parser::fail_expected_at(const Token& found, std::string_view what) const {
  if (found.kind == Tok::invalid) fail(found, found.problem);
  if (found.kind == Tok::end) fail(found, fmt::format("expected {}, got end of input", what));
  fail(found, fmt::format("expected {}, got '{}'", what, printable(found.text)));
}

template <class F>
void Parser::parse_list(Tok close, std::string_view close_text, F&& item) {
  if (accept(close)) return;
  for (;;) {
    item();
    if (accept(close)) return;
    if (!accept(Tok::comma)) fail_expected(fmt::format("',' or {}", close_text));
  }
}

template <class T, class F>
std::pair<std::vector<T>, bool> Parser::parse_parenthesized(F&& item) {
  std::vector<T> items;
  if (accept(Tok::rparen)) return {std::move(items), true};
  items.push_back(item());
  if (accept(Tok::rparen)) return {std::move(items), false};
  if (!accept(Tok::comma)) fail_expected("',' or ')'");
  while (!accept(Tok::rparen)) {
    items.push_back(item());
    if (at(Tok::rparen)) continue;
    if (!accept(Tok::comma)) fail_expected("',' or ')'");
  }
  return {std::move(items), true};
}

void Parser::bind(std::string_view name, const Expr& v) {
  scope_[name].push_back(v);
  scope_log_.push_back(name);
}

void Parser::unbind_to(std::size_t mark) {
  while (scope_log_.size() > mark) {
    scope_[scope_log_.back()].pop_back();
    scope_log_.pop_back();
  }
}

Expr Parser::lookup(const Token& local) {
  const std::string_view name = local.text.substr(1);
  const auto it = scope_.find(name);
  if (it == scope_.end() || it->second.empty())
    fail(local, fmt::format("unbound variable %{}", name));
  return it->second.back();
}

// --- Module level ---------------------------------------------------------------------

Module Parser::parse_module() {
  collect_adt_names();
  parse_adts();
  pos_ = 0;
  while (!at(Tok::end)) {
    if (const auto it = adt_extent_.find(pos_); it != adt_extent_.end()) {
      pos_ = it->second;  // read by parse_adts()
      continue;
    }
    parse_def();
  }
  return std::move(module_);
}

/// Visits each `type` keyword outside any bracket, in order. `visit(i)`
/// returns the token index to continue the sweep from.
template <class F>
void for_each_type_definition(const std::vector<Token>& tokens, F&& visit) {
  int depth = 0;
  for (std::size_t i = 0; i < tokens.size();) {
    const Token& t = tokens[i];
    if (t.kind == Tok::lparen || t.kind == Tok::lbrace || t.kind == Tok::lbracket) ++depth;
    if (t.kind == Tok::rparen || t.kind == Tok::rbrace || t.kind == Tok::rbracket) --depth;
    if (depth == 0 && t.kind == Tok::name && t.text == "type") {
      i = visit(i);
    } else {
      ++i;
    }
  }
}

void Parser::collect_adt_names() {
  for_each_type_definition(tokens_, [&](std::size_t i) {
    if (i + 1 < tokens_.size() && tokens_[i + 1].kind == Tok::name)
      adt_names_.insert(tokens_[i + 1].text);
    return i + 1;
  });
}

void Parser::parse_adts() {
  for_each_type_definition(tokens_, [&](std::size_t i) {
    pos_ = i;
    parse_adt();
    adt_extent_[i] = pos_;
    return pos_;
  });
}

void Parser::parse_adt() {
  expect_keyword("type");
  const Token& name = expect(Tok::name, "a type name");
  std::vector<std::string> params;
  if (accept(Tok::langle)) {
    for (;;) {
      const Token& param = expect(Tok::name, "a type parameter");
      params.emplace_back(param.text);
      type_params_.push_back(param.text);
      if (accept(Tok::rangle)) break;
      if (!accept(Tok::comma)) fail_expected("',' or '>'");
    }
  }
  expect(Tok::lbrace, "'{'");
  std::vector<ConstructorDef> ctors;
  parse_list(Tok::rbrace, "'}'", [&] { ctors.push_back(parse_constructor_def()); });
  type_params_.clear();
  try {
    module_.add_adt(
        make_ref<AdtDefNode>(std::string(name.text), std::move(params), std::move(ctors)));
  } catch (const Error& e) {
    fail(name, e.message());
  }
}

ConstructorDef Parser::parse_constructor_def() {
  ConstructorDef ctor{std::string(expect(Tok::name, "a constructor name").text), {}};
  if (accept(Tok::lparen))
    parse_list(Tok::rparen, "')'", [&] { ctor.fields.push_back(parse_type()); });
  return ctor;
}

void Parser::parse_def() {
  const Token& first = peek();
  const bool entry = accept_keyword("entry");
  if (!accept_keyword("def")) fail_expected(entry ? "'def'" : "'def', 'entry def' or 'type'");
  const Token& name = expect(Tok::global, "a function name (@name)");
  std::vector<Expr> params = parse_params();
  Type ret;
  if (accept(Tok::arrow)) ret = parse_type();
  Expr body = parse_braced_body();
  unbind_to(0);
  const std::string global_name(name.text.substr(1));
  try {
    module_.add_function(global_name, function(std::move(params), ret, body, loc(first)));
  } catch (const Error& e) {
    fail(name, e.message());
  }
  if (entry) module_.add_entry(global_name);
}

/// `(%a: T, ...)`; binds each parameter.
std::vector<Expr> Parser::parse_params() {
  std::vector<Expr> params;
  expect(Tok::lparen, "'('");
  parse_list(Tok::rparen, "')'", [&] {
    const Token& name = expect(Tok::local, "a parameter (%name)");
    expect(Tok::colon, "':'");
    Expr v = var(std::string(name.text.substr(1)), parse_type(), loc(name));
    bind(name.text.substr(1), v);
    params.push_back(std::move(v));
  });
  return params;
}

// --- Types ------------------------------------------------------------------------------

Type Parser::parse_type() {
  NestingGuard guard(*this);
  if (at(Tok::lparen)) return parse_tuple_type();
  return parse_named_type(expect(Tok::name, "a type"));
}

/// `()`, `(A,)`, `(A, B)`; `(A)` is A.
Type Parser::parse_tuple_type() {
  next();  // '('
  auto [fields, is_tuple] = parse_parenthesized<Type>([&] { return parse_type(); });
  return is_tuple ? tuple_type(std::move(fields)) : fields.front();
}

Type Parser::parse_named_type(const Token& name) {
  if (name.text == "fn") return parse_func_type();
  if (const auto dtype = parse_dtype(name.text)) return parse_tensor_type(*dtype);
  if (std::find(type_params_.begin(), type_params_.end(), name.text) != type_params_.end())
    return type_var(std::string(name.text));
  if (!adt_names_.count(name.text)) fail_unknown(name, "type");
  return parse_adt_type(name);
}

/// After `fn`: `(T, ...) -> R`.
Type Parser::parse_func_type() {
  std::vector<Type> params;
  expect(Tok::lparen, "'('");
  parse_list(Tok::rparen, "')'", [&] { params.push_back(parse_type()); });
  expect(Tok::arrow, "'->'");
  Type ret = parse_type();
  return func_type(std::move(params), std::move(ret));
}

/// `Tree`, `List<T>`.
Type Parser::parse_adt_type(const Token& name) {
  std::vector<Type> args;
  if (accept(Tok::langle)) {
    for (;;) {
      args.push_back(parse_type());
      if (accept(Tok::rangle)) break;
      if (!accept(Tok::comma)) fail_expected("',' or '>'");
    }
  }
  return adt_type(std::string(name.text), std::move(args));
}

Type Parser::parse_tensor_type(DType dtype) {
  std::vector<Dim> dims;
  expect(Tok::lbracket, "'['");
  parse_list(Tok::rbracket, "']'", [&] { dims.push_back(parse_dim()); });
  return tensor_type(std::move(dims), dtype);
}

Dim Parser::parse_dim() {
  if (accept(Tok::question)) return Any;
  if (at(Tok::name)) {
    std::string name(next().text);
    if (!accept(Tok::less_equal)) return Dim(std::move(name));
    return Dim(std::move(name), parse_dim_value("an upper bound (an integer >= 0)"));
  }
  return Dim(parse_dim_value("a dim (an integer >= 0, '?' or a name)"));
}

std::int64_t Parser::parse_dim_value(std::string_view what) {
  const Token& t = peek();
  const bool plain = t.kind == Tok::number && t.number_length == t.text.size() &&
                     t.text[0] != '-' && has_integer_syntax(t.text);
  const auto value = plain ? parse_whole<std::int64_t>(t.text) : std::nullopt;
  if (!value) fail_expected(what);
  next();
  return *value;
}

// --- Expressions --------------------------------------------------------------------------

Expr Parser::parse_expr() {
  NestingGuard guard(*this);
  if (at_keyword("let")) return parse_let_chain();
  return parse_postfix();
}

/// `let %a [: T] = value; ... final`: a loop, not recursion, since bodies of
/// whole models are long chains of lets.
Expr Parser::parse_let_chain() {
  std::vector<LetBinding> bindings;
  const std::size_t mark = scope_mark();
  while (at_keyword("let")) {
    LetBinding& binding = bindings.emplace_back(parse_let_head());
    // A closure may call itself through the let's variable (a local loop, as
    // the builder makes them, and as the verifier allows); any other value
    // sees only the enclosing scope.
    const bool recursive = at_keyword("fn");
    if (recursive) bind(binding.name, binding.v);
    binding.value = parse_expr();
    expect(Tok::semicolon, "';'");
    if (!recursive) bind(binding.name, binding.v);
  }
  Expr body = parse_postfix();
  unbind_to(mark);
  return build_lets(std::move(bindings), std::move(body));
}

/// `let %a [: T] =`.
LetBinding Parser::parse_let_head() {
  const Token& let_token = next();
  const Token& name = expect(Tok::local, "a variable (%name)");
  Type annotation;
  if (accept(Tok::colon)) {
    annotation = parse_type();
    expect(Tok::equal, "'='");
  } else if (!accept(Tok::equal)) {
    fail_expected("':' or '='");
  }
  return {name.text.substr(1),
          var(std::string(name.text.substr(1)), annotation, loc(name)),
          {},
          loc(let_token)};
}

Expr Parser::build_lets(std::vector<LetBinding> bindings, Expr body) {
  for (auto it = bindings.rbegin(); it != bindings.rend(); ++it)
    body = let(std::move(it->v), std::move(it->value), std::move(body), it->where);
  return body;
}

/// A primary expression followed by calls `(...)` and projections `.0`.
Expr Parser::parse_postfix() {
  const SourceLoc start = loc(peek());
  Expr e = parse_primary();
  // Each link nests the expression one level deeper, as a parenthesis does:
  // a chain counts toward the nesting limit.
  for (int links = 1;; ++links) {
    if ((at(Tok::lparen) || at(Tok::field)) && depth_ + links > kMaxNesting) fail_nesting();
    if (at(Tok::lparen)) {
      e = parse_call(std::move(e), start);
    } else if (at(Tok::field)) {
      const Token& field = next();
      const auto index = parse_whole<std::uint32_t>(field.text.substr(1));
      if (!index) fail_expected_at(field, "a field index");
      e = tuple_get(std::move(e), *index, start);
    } else {
      return e;
    }
  }
}

Expr Parser::parse_primary() {
  const Token& t = peek();
  switch (t.kind) {
    case Tok::local:
      return lookup(next());
    case Tok::global:
      return parse_global();
    case Tok::number:
      next();
      return parse_scalar_literal(t);
    case Tok::minus:
      return parse_negative_literal();
    case Tok::lparen:
      return parse_paren_expr();
    case Tok::name:
      return parse_named();
    default:
      fail_expected("an expression");
  }
}

Expr Parser::parse_global() {
  const Token& t = next();
  return global_var(std::string(t.text.substr(1)), loc(t));
}

bool is_reserved(std::string_view word) {
  static constexpr std::string_view kReserved[] = {"let", "else", "def", "entry", "type", "_"};
  return std::find(std::begin(kReserved), std::end(kReserved), word) != std::end(kReserved);
}

/// An expression that starts with a name: a keyword form or a leaf.
Expr Parser::parse_named() {
  const std::string_view word = peek().text;
  if (word == "const") return parse_tensor_constant();
  if (word == "fn") return parse_closure();
  // `primitive fn (...) {...}`: a fused group (FunctionNode::primitive).
  if (word == "primitive" && peek(1).kind == Tok::name && peek(1).text == "fn") {
    next();
    return parse_closure(/*primitive=*/true);
  }
  if (word == "if") return parse_if();
  if (word == "match") return parse_match();
  if (is_reserved(word)) fail_expected("an expression");
  return parse_name_leaf();
}

/// true / false, inff32 / nanf64, a constructor or an op. Constructors of
/// the module come before ops, as local definitions shadow global ones.
Expr Parser::parse_name_leaf() {
  const Token& t = peek();
  if (t.text == "true" || t.text == "false") {
    next();
    return constant(Tensor::scalar<bool>(t.text == "true"), loc(t));
  }
  if (const auto special = split_special_float(t.text)) {
    next();
    std::vector<std::byte> bytes;
    append_number(bytes, special->first, special->second, t);
    return constant(Tensor::from_bytes(Shape{}, special->second, bytes), loc(t));
  }
  next();
  if (const auto [adt, tag] = module_.find_constructor(t.text); adt)
    return constructor(adt, t.text, loc(t));
  if (const OpDef* op = find_op(t.text)) return op_ref(*op, loc(t));
  fail_unknown(t, "operator or constructor");
}

Expr Parser::parse_paren_expr() {
  const Token& open = next();
  auto [fields, is_tuple] = parse_parenthesized<Expr>([&] { return parse_expr(); });
  return is_tuple ? tuple(std::move(fields), loc(open)) : fields.front();
}

Expr Parser::parse_call(Expr callee, SourceLoc start) {
  next();  // '('
  std::vector<Expr> args;
  Attrs attrs;
  parse_list(Tok::rparen, "')'", [&] {
    if (at(Tok::name) && peek(1).kind == Tok::equal) return parse_attr(attrs);
    if (!attrs.empty()) fail_expected("an attribute (name=value)");
    args.push_back(parse_expr());
  });
  return call(std::move(callee), std::move(args), std::move(attrs), start);
}

void Parser::parse_attr(Attrs& attrs) {
  const Token& name = next();
  next();  // '='
  if (attrs.find(name.text)) fail(name, fmt::format("attribute '{}' is given twice", name.text));
  attrs.set(std::string(name.text), parse_attr_value());
}

AttrValue Parser::parse_attr_value() {
  const Token& t = peek();
  if (t.kind == Tok::string) {
    next();
    return decode_string(t.text);
  }
  if (accept(Tok::lbracket)) {
    std::vector<std::int64_t> values;
    parse_list(Tok::rbracket, "']'", [&] {
      const Token& element = peek();
      const auto number = take_plain_number();
      if (!number || !has_integer_syntax(*number)) fail_expected_at(element, "an integer");
      values.push_back(parse_integer(*number, element));
    });
    return values;
  }
  if (t.kind == Tok::name && (t.text == "true" || t.text == "false")) {
    next();
    return t.text == "true";
  }
  if (t.kind == Tok::name) {
    if (const auto dtype = parse_dtype(t.text)) {
      next();
      return *dtype;
    }
  }
  const auto number = take_plain_number();
  if (!number) fail_expected("an attribute value");
  if (has_integer_syntax(*number)) return parse_integer(*number, t);
  if (*number == "inf" || *number == "-inf")
    return *number == "inf" ? std::numeric_limits<double>::infinity()
                            : -std::numeric_limits<double>::infinity();
  if (*number == "nan" || *number == "-nan")
    return *number == "nan" ? std::numeric_limits<double>::quiet_NaN()
                            : -std::numeric_limits<double>::quiet_NaN();
  const auto value = parse_whole<double>(*number);
  if (!value) fail_expected_at(t, "a number in the range of f64");
  return *value;
}

Expr Parser::parse_braced_body() {
  expect(Tok::lbrace, "'{'");
  Expr body = parse_expr();
  expect(Tok::rbrace, "'}'");
  return body;
}

Expr Parser::parse_if() {
  const Token& keyword = next();
  expect(Tok::lparen, "'('");
  Expr cond = parse_expr();
  expect(Tok::rparen, "')'");
  Expr then_branch = parse_braced_body();
  expect_keyword("else");
  Expr else_branch = parse_braced_body();
  return if_then_else(std::move(cond), std::move(then_branch), std::move(else_branch),
                      loc(keyword));
}

Expr Parser::parse_match() {
  const Token& keyword = next();
  expect(Tok::lparen, "'('");
  Expr value = parse_expr();
  expect(Tok::rparen, "')'");
  expect(Tok::lbrace, "'{'");
  std::vector<Clause> clauses;
  for (;;) {
    const std::size_t mark = scope_mark();
    Pattern pattern = parse_pattern();
    expect(Tok::fat_arrow, "'=>'");
    Expr body = parse_braced_body();
    unbind_to(mark);
    clauses.push_back({std::move(pattern), std::move(body)});
    if (accept(Tok::rbrace)) break;
    if (!accept(Tok::comma)) fail_expected("',' or '}'");
  }
  return match(std::move(value), std::move(clauses), loc(keyword));
}

Expr Parser::parse_closure(bool primitive) {
  const Token& keyword = next();
  const std::size_t mark = scope_mark();
  std::vector<Expr> params = parse_params();
  Type ret;
  if (accept(Tok::arrow)) ret = parse_type();
  Expr body = parse_braced_body();
  unbind_to(mark);
  return function(std::move(params), std::move(ret), std::move(body), loc(keyword), primitive);
}

/// `const f32[2, 2] [1, 2, 3, 4]`: a tensor type with static dims, then the
/// elements in row-major order; or `const f32[1, 512] [0; 512]`: one value
/// repeated.
Expr Parser::parse_tensor_constant() {
  const Token& keyword = next();
  const Token& type_token = peek();
  const Type type = parse_type();
  const auto* tensor = type.as<TensorTypeNode>();
  const bool is_static = tensor && std::all_of(tensor->shape.begin(), tensor->shape.end(),
                                               [](const Dim& d) { return d.is_fixed(); });
  if (!is_static)
    fail(type_token,
         fmt::format("expected a tensor type with static dims, got '{}'", to_string(type)));
  std::vector<std::int64_t> dims;
  std::int64_t numel = 1;
  for (const Dim& d : tensor->shape) {
    if (d.value() != 0 && numel > std::numeric_limits<std::int64_t>::max() / d.value())
      fail(type_token, fmt::format("tensor type '{}' has too many elements", to_string(type)));
    numel *= d.value();
    dims.push_back(d.value());
  }
  // Checked before anything is allocated: `[0; n]` is a few bytes of text.
  const auto limit = kMaxConstantBytes / static_cast<std::int64_t>(dtype_size(tensor->dtype));
  if (numel > limit)
    fail(type_token, fmt::format("constant '{}' has {} elements; a constant in IR text may hold "
                                 "at most {} bytes ({} elements of {})",
                                 to_string(type), numel, kMaxConstantBytes, limit,
                                 to_string(tensor->dtype)));
  const Token& open = expect(Tok::lbracket, "'['");
  std::vector<std::byte> bytes;
  std::int64_t count = 0;
  if (peek().kind != Tok::rbracket && peek(1).kind == Tok::semicolon) {
    // `[v; n]`: n copies of one value (a splat).
    append_element(bytes, tensor->dtype);
    next();
    const Token& count_token = peek();
    const auto copies = take_plain_number();
    if (!copies || !has_integer_syntax(*copies)) fail_expected_at(count_token, "a count");
    count = parse_integer(*copies, count_token);
    expect(Tok::rbracket, "']'");
    if (count == numel) {
      const std::vector<std::byte> one = bytes;
      for (std::int64_t i = 1; i < count; ++i) bytes.insert(bytes.end(), one.begin(), one.end());
    }
  } else {
    parse_list(Tok::rbracket, "']'", [&] {
      append_element(bytes, tensor->dtype);
      ++count;
    });
  }
  if (count != numel)
    fail(open, fmt::format("expected {} values for {}, got {}", numel, to_string(type), count));
  return constant(
      Tensor::from_bytes(Shape(std::span<const std::int64_t>(dims)), tensor->dtype, bytes),
      loc(keyword));
}

/// `1i64`, `-0.5f32`: a number with a dtype suffix.
Expr Parser::parse_scalar_literal(const Token& t) {
  const std::string_view number = t.text.substr(0, t.number_length);
  const std::string_view suffix = t.text.substr(t.number_length);
  if (suffix.empty()) fail_expected_at(t, "a literal with a dtype suffix (such as 1i64 or 0.5f32)");
  const auto dtype = parse_dtype(suffix);
  if (!dtype) fail(t, fmt::format("unknown type '{}'", printable(suffix)));
  if (*dtype == DType::boolean) fail_expected_at(t, "true or false");
  std::vector<std::byte> bytes;
  append_number(bytes, number, *dtype, t);
  return constant(Tensor::from_bytes(Shape{}, *dtype, bytes), loc(t));
}

/// `-inff32`, `-nanf64` (a '-' before a digit is part of the number token).
Expr Parser::parse_negative_literal() {
  const Token& minus = next();
  const Token& word = peek();
  const auto special = word.kind == Tok::name ? split_special_float(word.text) : std::nullopt;
  if (!special) fail_expected("inf or nan after '-'");
  next();
  std::vector<std::byte> bytes;
  append_number(bytes, special->first == "inf" ? "-inf" : "-nan", special->second, word);
  return constant(Tensor::from_bytes(Shape{}, special->second, bytes), loc(minus));
}

Pattern Parser::parse_pattern() {
  NestingGuard guard(*this);
  if (at(Tok::local)) return parse_pattern_var();
  if (at(Tok::lparen)) return parse_tuple_pattern();
  if (!at(Tok::name)) fail_expected("a pattern");
  if (accept_keyword("_")) return pattern_wildcard();
  return parse_constructor_pattern();
}

/// `()`, `(p,)`, `(p, q)`; `(p)` is p.
Pattern Parser::parse_tuple_pattern() {
  next();  // '('
  auto [fields, is_tuple] = parse_parenthesized<Pattern>([&] { return parse_pattern(); });
  return is_tuple ? pattern_tuple(std::move(fields)) : fields.front();
}

/// `%x` or `%x: T`: binds x in the clause.
Pattern Parser::parse_pattern_var() {
  const Token& t = next();
  Type annotation;
  if (accept(Tok::colon)) annotation = parse_type();
  Expr v = var(std::string(t.text.substr(1)), annotation, loc(t));
  bind(t.text.substr(1), v);
  return pattern_var(std::move(v));
}

/// `Nil`, `Cons(%h, _)`.
Pattern Parser::parse_constructor_pattern() {
  const Token& t = next();
  const auto [adt, tag] = module_.find_constructor(t.text);
  if (!adt) fail_unknown(t, "constructor");
  std::vector<Pattern> fields;
  if (accept(Tok::lparen))
    parse_list(Tok::rparen, "')'", [&] { fields.push_back(parse_pattern()); });
  return pattern_constructor(constructor(adt, t.text, loc(t)), std::move(fields));
}

// --- Literal values ------------------------------------------------------------------------

/// Consumes a number without a suffix, or [-]inf / [-]nan, and returns its
/// text; nullopt (consuming nothing) if the next tokens are not one.
std::optional<std::string> Parser::take_plain_number() {
  const Token& t = peek();
  if (t.kind == Tok::number && t.number_length == t.text.size()) {
    next();
    return std::string(t.text);
  }
  if (t.kind == Tok::name && (t.text == "inf" || t.text == "nan")) {
    next();
    return std::string(t.text);
  }
  if (t.kind == Tok::minus && peek(1).kind == Tok::name &&
      (peek(1).text == "inf" || peek(1).text == "nan")) {
    next();
    std::string text = "-";  // (not "-" + ...: GCC 12 -O3 warns falsely, -Wrestrict)
    text += next().text;
    return text;
  }
  return std::nullopt;
}

std::int64_t Parser::parse_integer(std::string_view number, const Token& at_token) {
  const auto value = parse_whole<std::int64_t>(number);
  if (!value) fail_expected_at(at_token, "an integer in the range of i64");
  return *value;
}

/// Appends `number` (decimal text, or [-]inf / [-]nan) as one element of
/// `dtype`; fails at `at_token` when it is not a value of that dtype.
void Parser::append_number(std::vector<std::byte>& out, std::string_view number, DType dtype,
                           const Token& at_token) {
  const std::string_view name = nimble::to_string(dtype);
  if (is_integer(dtype)) {
    const auto value =
        has_integer_syntax(number) ? parse_whole<std::int64_t>(number) : std::nullopt;
    const auto fits = [&](auto lowest, auto highest) {
      return *value >= lowest && *value <= highest;
    };
    bool ok = value.has_value();
    if (ok && dtype == DType::i8) ok = fits(INT8_MIN, INT8_MAX);
    if (ok && dtype == DType::i32) ok = fits(INT32_MIN, INT32_MAX);
    if (!ok) fail_expected_at(at_token, fmt::format("an integer in the range of {}", name));
    if (dtype == DType::i8) append_bytes(out, static_cast<std::int8_t>(*value));
    if (dtype == DType::i32) append_bytes(out, static_cast<std::int32_t>(*value));
    if (dtype == DType::i64) append_bytes(out, *value);
    return;
  }
  const bool negative = !number.empty() && number[0] == '-';
  double special = 0;
  if (is_special_float(number)) {
    special = number.ends_with("inf") ? std::numeric_limits<double>::infinity()
                                      : std::numeric_limits<double>::quiet_NaN();
    special = negative ? -special : special;
  }
  if (dtype == DType::f64) {
    const auto value =
        is_special_float(number) ? std::optional(special) : parse_whole<double>(number);
    if (!value) fail_expected_at(at_token, "a number in the range of f64");
    append_bytes(out, *value);
    return;
  }
  // f32, f16 and bf16 read the text as a float: the printer wrote the
  // shortest text of the value as a float, and the conversion to 16 bits of
  // a float that came from 16 bits is exact.
  const auto value = is_special_float(number) ? std::optional(static_cast<float>(special))
                                              : parse_whole<float>(number);
  bool ok = value.has_value();
  if (ok && dtype == DType::f16)
    ok = !std::isfinite(*value) || std::isfinite(static_cast<float>(Half(*value)));
  if (ok && dtype == DType::bf16)
    ok = !std::isfinite(*value) || std::isfinite(static_cast<float>(BFloat16(*value)));
  if (!ok) fail_expected_at(at_token, fmt::format("a number in the range of {}", name));
  if (dtype == DType::f32) append_bytes(out, *value);
  if (dtype == DType::f16) append_bytes(out, Half(*value));
  if (dtype == DType::bf16) append_bytes(out, BFloat16(*value));
}

/// One element of a `const` tensor of `dtype`.
void Parser::append_element(std::vector<std::byte>& out, DType dtype) {
  const Token& t = peek();
  if (dtype == DType::boolean) {
    if (!at_keyword("true") && !at_keyword("false")) fail_expected("true or false");
    next();
    append_bytes(out, t.text == "true");
    return;
  }
  const auto number = take_plain_number();
  if (!number) fail_expected("a number");
  append_number(out, *number, dtype, t);
}

}  // namespace

Module parse(std::string_view text, const char* file_name) {
  if (file_name == nullptr) file_name = "<text>";
  return with_memory_errors("parse", [&] { return Parser(Lexer(text).tokenize(), file_name).parse_module(); });
}

}  // namespace nimble::ir
