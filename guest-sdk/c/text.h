// Building messages in fixed buffers without stdio: snprintf would link libc's stdio, which
// brings WASI stdout, stdin and filesystem imports into the component.
#ifndef RECONCILE_GUEST_TEXT_H
#define RECONCILE_GUEST_TEXT_H

#include <stddef.h>
#include <stdint.h>

// A NUL-terminated text in a caller's buffer. Appends that do not fit are cut at the buffer's
// end (never past it), so a message is at worst truncated.
typedef struct text {
  char *buffer;
  size_t cap;  // bytes in `buffer`, including the terminating NUL; at least 1
  size_t len;
} text;

// An empty text in `buffer[0..cap)`, cap >= 1.
text text_in(char *buffer, size_t cap);

void text_add(text *t, const char *string);
void text_add_n(text *t, const char *bytes, size_t len);
void text_add_u64(text *t, uint64_t value);
void text_add_i64(text *t, int64_t value);

#endif
