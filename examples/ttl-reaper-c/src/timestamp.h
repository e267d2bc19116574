// Kubernetes timestamps (RFC 3339, as in `metadata.creationTimestamp`) to Unix time.
#ifndef TTL_REAPER_TIMESTAMP_H
#define TTL_REAPER_TIMESTAMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// Parses `text[0..len)`, an RFC 3339 date-time such as "2024-05-01T12:30:00Z" (fractional
// seconds and a numeric offset like "+02:00" are accepted too), into seconds since the Unix
// epoch, fractions dropped. False when the text is not such a timestamp or a field is out of
// range.
bool timestamp_parse(const char *text, size_t len, int64_t *unix_seconds);

#endif
