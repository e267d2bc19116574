// A small read-only JSON scanner: finds values inside a JSON text without building a tree or
// allocating. Every function checks bounds against the span it is given and fails (returns
// false) on malformed input instead of reading past it.
//
// A reconciler reads a handful of fields from a Kubernetes object: this is all it needs.
#ifndef RECONCILE_GUEST_JSON_H
#define RECONCILE_GUEST_JSON_H

#include <stdbool.h>
#include <stddef.h>

// A JSON value as it appears in the text: `ptr` points at its first byte (`{`, `[`, `"`, a digit,
// `t`, `f`, `n` or `-`), `len` covers the whole value. Borrowed from the text it was found in.
typedef struct json_span {
  const char *ptr;
  size_t len;
} json_span;

typedef enum json_type {
  JSON_INVALID,
  JSON_OBJECT,
  JSON_ARRAY,
  JSON_STRING,
  JSON_NUMBER,
  JSON_BOOL,
  JSON_NULL,
} json_type;

// Nesting deeper than this is refused as malformed (bounded recursion).
#define JSON_MAX_DEPTH 64

// The whole text `text[0..len)` as one value, with surrounding whitespace trimmed. False when
// the text is not exactly one well-formed JSON value.
bool json_parse(const char *text, size_t len, json_span *value);

// The type of a value found by this scanner (by its first byte).
json_type json_type_of(json_span value);

// The member `key` of `object` (an object value). False when `object` is not an object, has no
// such member, or is malformed. Keys are compared after unescaping, so `"a\/b"` matches "a/b".
// With duplicate keys, the last one wins, as in most JSON libraries.
bool json_object_get(json_span object, const char *key, json_span *member);

// Follows `count` member names from `root`: json_path(o, (const char *[]){"a", "b"}, 2, &v)
// finds o.a.b.
bool json_path(json_span root, const char *const *keys, size_t count, json_span *value);

// Unescapes the string value `string` into `out` (capacity `cap` bytes, including the
// terminating NUL), as UTF-8. False when it is not a string, is malformed, contains a NUL
// character, or does not fit.
bool json_string_copy(json_span string, char *out, size_t cap);

// Whether the string value `string` unescapes to exactly `expected`.
bool json_string_equals(json_span string, const char *expected);

#endif
