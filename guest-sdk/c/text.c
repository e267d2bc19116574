// Bounded message building for text.h.
#include "text.h"

#include <string.h>

text text_in(char *buffer, size_t cap) {
  buffer[0] = '\0';
  return (text){buffer, cap, 0};
}

void text_add_n(text *t, const char *bytes, size_t len) {
  size_t room = t->cap - 1 - t->len;
  if (len > room) len = room;
  memcpy(t->buffer + t->len, bytes, len);
  t->len += len;
  t->buffer[t->len] = '\0';
}

void text_add(text *t, const char *string) { text_add_n(t, string, strlen(string)); }

void text_add_u64(text *t, uint64_t value) {
  char digits[20];  // UINT64_MAX has 20 digits
  size_t count = 0;
  do {
    digits[sizeof digits - 1 - count++] = (char)('0' + value % 10);
    value /= 10;
  } while (value != 0);
  text_add_n(t, digits + sizeof digits - count, count);
}

void text_add_i64(text *t, int64_t value) {
  if (value < 0) {
    text_add(t, "-");
    text_add_u64(t, (uint64_t)0 - (uint64_t)value);  // no overflow for INT64_MIN
  } else {
    text_add_u64(t, (uint64_t)value);
  }
}
