// RFC 3339 parsing for timestamp.h.
#include "timestamp.h"

// Reads exactly `digits` decimal digits at `text[*pos]`.
static bool read_number(const char *text, size_t len, size_t *pos, int digits, int *value) {
  if (len - *pos < (size_t)digits) return false;
  int result = 0;
  for (int i = 0; i < digits; i++) {
    char ch = text[*pos + (size_t)i];
    if (ch < '0' || ch > '9') return false;
    result = result * 10 + (ch - '0');
  }
  *pos += (size_t)digits;
  *value = result;
  return true;
}

// Consumes the separator `ch`; letters match in either case (RFC 3339 allows "t" and "z").
static bool expect(const char *text, size_t len, size_t *pos, char ch) {
  if (*pos >= len || (text[*pos] != ch && text[*pos] != (ch | 0x20))) return false;
  (*pos)++;
  return true;
}

static bool is_leap_year(int year) {
  return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
}

static int days_in_month(int year, int month) {
  static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return month == 2 && is_leap_year(year) ? 29 : days[month - 1];
}

// Days from 1970-01-01 to the given civil date (proleptic Gregorian calendar).
static int64_t days_from_civil(int year, int month, int day) {
  // Count years from March so the leap day is the last day of the (shifted) year.
  int64_t y = (int64_t)year - (month <= 2);
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  int64_t year_of_era = y - era * 400;                                      // [0, 399]
  int64_t day_of_year = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;
  int64_t day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
  return era * 146097 + day_of_era - 719468;
}

bool timestamp_parse(const char *text, size_t len, int64_t *unix_seconds) {
  size_t pos = 0;
  int year, month, day, hour, minute, second;
  if (!read_number(text, len, &pos, 4, &year) || !expect(text, len, &pos, '-') ||
      !read_number(text, len, &pos, 2, &month) || !expect(text, len, &pos, '-') ||
      !read_number(text, len, &pos, 2, &day) || !expect(text, len, &pos, 'T') ||
      !read_number(text, len, &pos, 2, &hour) || !expect(text, len, &pos, ':') ||
      !read_number(text, len, &pos, 2, &minute) || !expect(text, len, &pos, ':') ||
      !read_number(text, len, &pos, 2, &second)) {
    return false;
  }
  if (month < 1 || month > 12 || day < 1 || day > days_in_month(year, month) || hour > 23 ||
      minute > 59 || second > 60) {  // 60: a leap second
    return false;
  }
  if (pos < len && text[pos] == '.') {
    pos++;
    size_t first_digit = pos;
    while (pos < len && text[pos] >= '0' && text[pos] <= '9') pos++;
    if (pos == first_digit) return false;
  }
  int offset_seconds = 0;
  if (pos < len && (text[pos] == 'Z' || text[pos] == 'z')) {
    pos++;
  } else if (pos < len && (text[pos] == '+' || text[pos] == '-')) {
    int sign = text[pos] == '-' ? -1 : 1;
    int offset_hours, offset_minutes;
    pos++;
    if (!read_number(text, len, &pos, 2, &offset_hours) || !expect(text, len, &pos, ':') ||
        !read_number(text, len, &pos, 2, &offset_minutes) || offset_hours > 23 ||
        offset_minutes > 59) {
      return false;
    }
    offset_seconds = sign * (offset_hours * 3600 + offset_minutes * 60);
  } else {
    return false;
  }
  if (pos != len) return false;
  *unix_seconds = days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second -
                  offset_seconds;
  return true;
}
