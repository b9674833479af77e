// A small, strict JSON reader (RFC 8259) for the `rates` documents petdaqd publishes: no
// comments, no trailing commas, no NaN, nesting limited. Debian 12's Boost (1.74) has no
// Boost.JSON, and the documents are small and read once a second.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace petdaq::json {

class ParseError : public std::runtime_error {
 public:
  ParseError(const std::string& what, std::size_t offset)
      : std::runtime_error(what + " at byte " + std::to_string(offset)), offset_(offset) {}
  std::size_t offset() const { return offset_; }

 private:
  std::size_t offset_;
};

class Value {
 public:
  enum class Type { null, boolean, number, string, array, object };

  Value() = default;
  static Value make_bool(bool b);
  static Value make_number(double d);
  static Value make_string(std::string s);
  static Value make_array(std::vector<Value> a);
  static Value make_object(std::map<std::string, Value, std::less<>> o);

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::null; }
  bool is_number() const { return type_ == Type::number; }
  bool is_string() const { return type_ == Type::string; }
  bool is_array() const { return type_ == Type::array; }
  bool is_object() const { return type_ == Type::object; }

  bool as_bool() const { return bool_; }
  double as_number() const { return number_; }
  const std::string& as_string() const { return string_; }
  const std::vector<Value>& as_array() const { return array_; }
  const std::map<std::string, Value, std::less<>>& as_object() const { return object_; }

  // Member of an object, or nullptr (also when this is not an object).
  const Value* find(std::string_view key) const;

 private:
  Type type_ = Type::null;
  bool bool_ = false;
  double number_ = 0;
  std::string string_;
  std::vector<Value> array_;
  std::map<std::string, Value, std::less<>> object_;
};

// Parses exactly one JSON value (surrounding white space allowed). Throws ParseError.
Value parse(std::string_view text);

}  // namespace petdaq::json
