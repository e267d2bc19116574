// The JSON scanner of json.h: RFC 8259 syntax, checked as it is skipped.
#include "json.h"

#include <stdint.h>
#include <string.h>

// A cursor over `[pos, end)`.
typedef struct cursor {
  const char *pos;
  const char *end;
} cursor;

static void skip_whitespace(cursor *c) {
  while (c->pos < c->end &&
         (*c->pos == ' ' || *c->pos == '\t' || *c->pos == '\n' || *c->pos == '\r')) {
    c->pos++;
  }
}

// Consumes `literal` (true, false, null) if the text continues with it.
static bool skip_literal(cursor *c, const char *literal) {
  size_t len = strlen(literal);
  if ((size_t)(c->end - c->pos) < len || memcmp(c->pos, literal, len) != 0) {
    return false;
  }
  c->pos += len;
  return true;
}

static bool is_digit(char ch) { return ch >= '0' && ch <= '9'; }

static int hex_value(char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

static bool skip_number(cursor *c) {
  if (c->pos < c->end && *c->pos == '-') c->pos++;
  if (c->pos >= c->end || !is_digit(*c->pos)) return false;
  if (*c->pos == '0') {
    c->pos++;
  } else {
    while (c->pos < c->end && is_digit(*c->pos)) c->pos++;
  }
  if (c->pos < c->end && *c->pos == '.') {
    c->pos++;
    if (c->pos >= c->end || !is_digit(*c->pos)) return false;
    while (c->pos < c->end && is_digit(*c->pos)) c->pos++;
  }
  if (c->pos < c->end && (*c->pos == 'e' || *c->pos == 'E')) {
    c->pos++;
    if (c->pos < c->end && (*c->pos == '+' || *c->pos == '-')) c->pos++;
    if (c->pos >= c->end || !is_digit(*c->pos)) return false;
    while (c->pos < c->end && is_digit(*c->pos)) c->pos++;
  }
  return true;
}

// Reads four hex digits of a \u escape.
static bool read_hex4(cursor *c, uint32_t *unit) {
  if (c->end - c->pos < 4) return false;
  uint32_t value = 0;
  for (int i = 0; i < 4; i++) {
    int digit = hex_value(c->pos[i]);
    if (digit < 0) return false;
    value = value << 4 | (uint32_t)digit;
  }
  c->pos += 4;
  *unit = value;
  return true;
}

// Writes code point `cp` as UTF-8 into `bytes`; the number of bytes written.
static size_t encode_utf8(uint32_t cp, unsigned char bytes[4]) {
  if (cp < 0x80) {
    bytes[0] = (unsigned char)cp;
    return 1;
  }
  if (cp < 0x800) {
    bytes[0] = (unsigned char)(0xC0 | cp >> 6);
    bytes[1] = (unsigned char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    bytes[0] = (unsigned char)(0xE0 | cp >> 12);
    bytes[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
    bytes[2] = (unsigned char)(0x80 | (cp & 0x3F));
    return 3;
  }
  bytes[0] = (unsigned char)(0xF0 | cp >> 18);
  bytes[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
  bytes[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
  bytes[3] = (unsigned char)(0x80 | (cp & 0x3F));
  return 4;
}

// Reads the next character of a string body (the cursor is past the opening quote) with escapes
// resolved, as UTF-8 bytes in `bytes`; `*count` is how many, 0 at the closing quote (consumed).
// Unescaped bytes are passed through one at a time: the text is UTF-8 already. False on
// malformed input.
static bool next_char(cursor *c, unsigned char bytes[4], size_t *count) {
  if (c->pos >= c->end) return false;
  unsigned char ch = (unsigned char)*c->pos++;
  if (ch == '"') {
    *count = 0;
    return true;
  }
  if (ch < 0x20) return false;  // control characters must be escaped
  *count = 1;
  if (ch != '\\') {
    bytes[0] = ch;
    return true;
  }
  if (c->pos >= c->end) return false;
  switch (*c->pos++) {
    case '"': bytes[0] = '"'; return true;
    case '\\': bytes[0] = '\\'; return true;
    case '/': bytes[0] = '/'; return true;
    case 'b': bytes[0] = '\b'; return true;
    case 'f': bytes[0] = '\f'; return true;
    case 'n': bytes[0] = '\n'; return true;
    case 'r': bytes[0] = '\r'; return true;
    case 't': bytes[0] = '\t'; return true;
    case 'u': break;
    default: return false;
  }
  uint32_t unit;
  if (!read_hex4(c, &unit)) return false;
  if (unit >= 0xDC00 && unit <= 0xDFFF) return false;  // a lone low surrogate
  if (unit >= 0xD800 && unit <= 0xDBFF) {              // a high surrogate: its pair must follow
    uint32_t low;
    if (c->end - c->pos < 2 || c->pos[0] != '\\' || c->pos[1] != 'u') return false;
    c->pos += 2;
    if (!read_hex4(c, &low) || low < 0xDC00 || low > 0xDFFF) return false;
    unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
  }
  *count = encode_utf8(unit, bytes);
  return true;
}

static bool skip_string(cursor *c) {
  if (c->pos >= c->end || *c->pos != '"') return false;
  c->pos++;
  unsigned char bytes[4];
  size_t count;
  do {
    if (!next_char(c, bytes, &count)) return false;
  } while (count > 0);
  return true;
}

static bool skip_value(cursor *c, int depth);

static bool skip_container(cursor *c, int depth, char close, bool members) {
  if (depth >= JSON_MAX_DEPTH) return false;
  c->pos++;  // the opening bracket
  skip_whitespace(c);
  if (c->pos < c->end && *c->pos == close) {
    c->pos++;
    return true;
  }
  for (;;) {
    if (members) {
      if (!skip_string(c)) return false;
      skip_whitespace(c);
      if (c->pos >= c->end || *c->pos != ':') return false;
      c->pos++;
    }
    if (!skip_value(c, depth + 1)) return false;
    skip_whitespace(c);
    if (c->pos >= c->end) return false;
    char next = *c->pos++;
    if (next == close) return true;
    if (next != ',') return false;
    skip_whitespace(c);
  }
}

// Skips leading whitespace and one value; the cursor ends just after the value.
static bool skip_value(cursor *c, int depth) {
  skip_whitespace(c);
  if (c->pos >= c->end) return false;
  switch (*c->pos) {
    case '{': return skip_container(c, depth, '}', true);
    case '[': return skip_container(c, depth, ']', false);
    case '"': return skip_string(c);
    case 't': return skip_literal(c, "true");
    case 'f': return skip_literal(c, "false");
    case 'n': return skip_literal(c, "null");
    default: return skip_number(c);
  }
}

bool json_parse(const char *text, size_t len, json_span *value) {
  if (text == NULL) return false;
  cursor c = {text, text + len};
  skip_whitespace(&c);
  const char *start = c.pos;
  if (!skip_value(&c, 0)) return false;
  const char *stop = c.pos;
  skip_whitespace(&c);
  if (c.pos != c.end) return false;  // trailing garbage
  value->ptr = start;
  value->len = (size_t)(stop - start);
  return true;
}

json_type json_type_of(json_span value) {
  if (value.ptr == NULL || value.len == 0) return JSON_INVALID;
  switch (value.ptr[0]) {
    case '{': return JSON_OBJECT;
    case '[': return JSON_ARRAY;
    case '"': return JSON_STRING;
    case 't':
    case 'f': return JSON_BOOL;
    case 'n': return JSON_NULL;
    default: return (value.ptr[0] == '-' || is_digit(value.ptr[0])) ? JSON_NUMBER : JSON_INVALID;
  }
}

bool json_string_copy(json_span string, char *out, size_t cap) {
  if (json_type_of(string) != JSON_STRING || cap == 0) return false;
  cursor c = {string.ptr + 1, string.ptr + string.len};
  size_t len = 0;
  for (;;) {
    unsigned char bytes[4];
    size_t count;
    if (!next_char(&c, bytes, &count)) return false;
    if (count == 0) break;
    if (bytes[0] == 0 || cap - len <= count) return false;  // a NUL, or no room for the NUL
    memcpy(out + len, bytes, count);
    len += count;
  }
  out[len] = '\0';
  return true;
}

bool json_string_equals(json_span string, const char *expected) {
  if (json_type_of(string) != JSON_STRING) return false;
  cursor c = {string.ptr + 1, string.ptr + string.len};
  size_t expected_len = strlen(expected);
  size_t matched = 0;
  for (;;) {
    unsigned char bytes[4];
    size_t count;
    if (!next_char(&c, bytes, &count)) return false;
    if (count == 0) return matched == expected_len;
    if (expected_len - matched < count || memcmp(expected + matched, bytes, count) != 0) {
      return false;
    }
    matched += count;
  }
}

bool json_object_get(json_span object, const char *key, json_span *member) {
  if (json_type_of(object) != JSON_OBJECT) return false;
  cursor c = {object.ptr + 1, object.ptr + object.len};
  bool found = false;
  skip_whitespace(&c);
  if (c.pos < c.end && *c.pos == '}') return false;
  for (;;) {
    skip_whitespace(&c);
    const char *key_start = c.pos;
    if (!skip_string(&c)) return false;
    json_span name = {key_start, (size_t)(c.pos - key_start)};
    skip_whitespace(&c);
    if (c.pos >= c.end || *c.pos != ':') return false;
    c.pos++;
    skip_whitespace(&c);
    const char *value_start = c.pos;
    // Values are checked again as they are skipped: a span need not come from json_parse.
    if (!skip_value(&c, 0)) return false;
    if (json_string_equals(name, key)) {
      member->ptr = value_start;
      member->len = (size_t)(c.pos - value_start);
      found = true;
    }
    skip_whitespace(&c);
    if (c.pos >= c.end) return false;
    char next = *c.pos++;
    if (next == '}') return found;
    if (next != ',') return false;
  }
}

bool json_path(json_span root, const char *const *keys, size_t count, json_span *value) {
  json_span current = root;
  for (size_t i = 0; i < count; i++) {
    if (!json_object_get(current, keys[i], &current)) return false;
  }
  *value = current;
  return true;
}
