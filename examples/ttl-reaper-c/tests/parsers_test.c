// Native tests of the reconciler's parsers (json.c, timestamp.c, text.c), run under
// AddressSanitizer and UndefinedBehaviorSanitizer by test.sh: every input is copied into a heap
// block of exactly its length, so reading one byte past it fails the run.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "text.h"
#include "timestamp.h"

static int failures;

#define CHECK(condition)                                                    \
  do {                                                                      \
    if (!(condition)) {                                                     \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #condition); \
      failures++;                                                           \
    }                                                                       \
  } while (0)

// A heap copy of `text[0..len)` with nothing after it (no NUL).
static char *exact_copy(const char *text, size_t len) {
  char *copy = malloc(len ? len : 1);
  if (copy == NULL) abort();
  memcpy(copy, text, len);
  return copy;
}

static const char OBJECT[] =
    "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"short-lived\","
    "\"namespace\":\"ttl-demo\",\"creationTimestamp\":\"2024-05-01T12:30:00Z\","
    "\"labels\":{\"ttl.example.com/enabled\":\"true\"},"
    "\"annotations\":{\"ttl.example.com\\/after\":\"120\",\"other\":[1,-2.5e3,true,null,{}]}},"
    "\"data\":{\"note\":\"caf\\u00e9 \\ud83d\\ude00 \\\"quoted\\\"\"}}";

static void test_lookups(void) {
  json_span root, value;
  CHECK(json_parse(OBJECT, strlen(OBJECT), &root));
  CHECK(json_type_of(root) == JSON_OBJECT);
  static const char *const after[] = {"metadata", "annotations", "ttl.example.com/after"};
  CHECK(json_path(root, after, 3, &value));  // the key is written with an escaped slash
  CHECK(json_string_equals(value, "120"));
  static const char *const missing[] = {"metadata", "annotations", "absent"};
  CHECK(!json_path(root, missing, 3, &value));
  static const char *const through_string[] = {"kind", "x"};
  CHECK(!json_path(root, through_string, 2, &value));

  static const char *const note[] = {"data", "note"};
  char out[64];
  CHECK(json_path(root, note, 2, &value));
  CHECK(json_string_copy(value, out, sizeof out));
  CHECK(strcmp(out, "caf\xc3\xa9 \xf0\x9f\x98\x80 \"quoted\"") == 0);
  size_t needed = strlen(out) + 1;
  CHECK(json_string_copy(value, out, needed));   // exactly fits
  CHECK(!json_string_copy(value, out, needed - 1));  // one byte short

  // Duplicate keys: the last wins.
  const char duplicate[] = "{\"a\":1,\"a\":\"two\"}";
  CHECK(json_parse(duplicate, strlen(duplicate), &root));
  CHECK(json_object_get(root, "a", &value) && json_string_equals(value, "two"));
}

static void test_rejects(void) {
  static const char *const malformed[] = {
      "",          "{",          "{\"a\"}",        "{\"a\":}",      "{\"a\":1,}",
      "[1,]",      "01",         "1.",             "-",             "1e",
      "tru",       "\"abc",      "\"\\x\"",        "\"\\u12\"",     "\"\\ud800\"",
      "\"\\udc00\"", "\"a\tb\"",  "{} {}",          "{\"a\" 1}",     "nul",
  };
  for (size_t i = 0; i < sizeof malformed / sizeof *malformed; i++) {
    size_t len = strlen(malformed[i]);
    char *copy = exact_copy(malformed[i], len);
    json_span value;
    if (json_parse(copy, len, &value)) {
      fprintf(stderr, "accepted malformed JSON: %s\n", malformed[i]);
      failures++;
    }
    free(copy);
  }
  // A NUL character cannot be copied into a C string.
  const char nul[] = "\"a\\u0000b\"";
  json_span value;
  char out[8];
  CHECK(json_parse(nul, strlen(nul), &value) && !json_string_copy(value, out, sizeof out));
}

static void test_depth_limit(void) {
  enum { DEPTH = JSON_MAX_DEPTH + 10 };
  char deep[2 * DEPTH];
  memset(deep, '[', DEPTH);
  memset(deep + DEPTH, ']', DEPTH);
  json_span value;
  CHECK(!json_parse(deep, sizeof deep, &value));
  size_t ok_depth = JSON_MAX_DEPTH;
  memset(deep, '[', ok_depth);
  memset(deep + ok_depth, ']', ok_depth);
  CHECK(json_parse(deep, 2 * ok_depth, &value));
}

// Every prefix of the object is malformed and must be refused without reading past it; every
// lookup on a span cut short must fail the same way.
static void test_truncations(void) {
  size_t len = strlen(OBJECT);
  for (size_t cut = 0; cut < len; cut++) {
    char *copy = exact_copy(OBJECT, cut);
    json_span value, member;
    CHECK(!json_parse(copy, cut, &value));
    json_span cut_span = {copy, cut};
    static const char *const after[] = {"metadata", "annotations", "ttl.example.com/after"};
    if (cut > 0 && json_path(cut_span, after, 3, &member)) {
      // Found before the cut: the member must lie inside it.
      CHECK(member.ptr >= copy && member.ptr + member.len <= copy + cut);
    }
    free(copy);
  }
}

static void test_timestamps(void) {
  struct {
    const char *text;
    int64_t seconds;
  } valid[] = {
      {"1970-01-01T00:00:00Z", 0},
      {"2024-02-29T12:00:00Z", 1709208000},
      {"2024-05-01T12:30:00Z", 1714566600},
      {"2024-05-01T14:30:00+02:00", 1714566600},
      {"2024-05-01t12:30:00.123456z", 1714566600},
      {"1969-12-31T23:59:59Z", -1},
      {"2000-03-01T00:00:00Z", 951868800},
  };
  for (size_t i = 0; i < sizeof valid / sizeof *valid; i++) {
    size_t len = strlen(valid[i].text);
    int64_t seconds = 0;
    char *copy = exact_copy(valid[i].text, len);
    if (!timestamp_parse(copy, len, &seconds) || seconds != valid[i].seconds) {
      fprintf(stderr, "timestamp %s: got %lld, want %lld\n", valid[i].text, (long long)seconds,
              (long long)valid[i].seconds);
      failures++;
    }
    for (size_t cut = 0; cut < len; cut++) {
      if (timestamp_parse(copy, cut, &seconds) && valid[i].text[cut] != '.') {
        fprintf(stderr, "accepted truncated timestamp %.*s\n", (int)cut, valid[i].text);
        failures++;
      }
    }
    free(copy);
  }
  static const char *const invalid[] = {
      "2023-02-29T00:00:00Z", "2024-13-01T00:00:00Z", "2024-01-01T24:00:00Z",
      "2024-01-01 00:00:00Z", "2024-01-01T00:00:00",  "2024-01-01T00:00:00.Z",
      "2024-01-01T00:00:00+0200", "2024-01-01T00:00:00Zjunk",
  };
  for (size_t i = 0; i < sizeof invalid / sizeof *invalid; i++) {
    int64_t seconds;
    if (timestamp_parse(invalid[i], strlen(invalid[i]), &seconds)) {
      fprintf(stderr, "accepted invalid timestamp %s\n", invalid[i]);
      failures++;
    }
  }
}

static void test_text(void) {
  char buffer[8];
  text t = text_in(buffer, sizeof buffer);
  text_add(&t, "ab");
  text_add_u64(&t, 12345);
  CHECK(strcmp(buffer, "ab12345") == 0);
  text_add(&t, "cut");  // no room left: unchanged, still terminated
  CHECK(strcmp(buffer, "ab12345") == 0 && t.len == 7);
  char wide[32];
  t = text_in(wide, sizeof wide);
  text_add_i64(&t, INT64_MIN);
  CHECK(strcmp(wide, "-9223372036854775808") == 0);
  t = text_in(wide, sizeof wide);
  text_add_u64(&t, 0);
  CHECK(strcmp(wide, "0") == 0);
}

int main(void) {
  test_lookups();
  test_rejects();
  test_depth_limit();
  test_truncations();
  test_timestamps();
  test_text();
  if (failures > 0) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("parsers: all checks passed\n");
  return 0;
}
