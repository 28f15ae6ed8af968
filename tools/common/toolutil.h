/* toolutil.h - what the command-line tools (crs-cat, crs-top, crs-bridge,
 * crs-bench) share: one reading of a size argument and one JSON string
 * writer, so that the tools agree on both. Not part of libcrs. */
#ifndef CRS_TOOLUTIL_H
#define CRS_TOOLUTIL_H

#include <stdint.h>
#include <stdio.h>

/* A size or count argument: decimal digits, then optionally one of the
 * suffixes K, M, G, T (powers of 1024, any case), which may be followed
 * by "iB" or "B" (so 4K, 4k, 4KB and 4KiB are all 4096), or "B" alone
 * after the digits (bytes). Nothing else: no sign, no blanks, no hex, no
 * fraction. Stores the value in *out and returns 0 if it lies within
 * min..max; returns -EINVAL for text that is not a size, -ERANGE for a
 * value outside min..max or beyond 64 bits; *out is then untouched. */
int tool_parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* Why tool_parse_size() failed, for a usage message. */
const char *tool_size_why(int err);

/* Writes s as a JSON string (RFC 8259), quotes included: '"' and '\'
 * escaped with a backslash, every control character (U+0000..U+001F and
 * DEL) as \u00XX, valid UTF-8 as is, and each byte that does not start a
 * valid UTF-8 sequence (stray continuation byte, overlong form, surrogate,
 * beyond U+10FFFF, cut short) as \ufffd, so the output is always valid
 * JSON whatever bytes s holds (a command name, an error message). A null
 * s writes "". */
void tool_json_str(FILE *f, const char *s);

#endif
