/* toolutil.c - the tools' shared size parser and JSON string writer. */
#include "toolutil.h"

#include <errno.h>

int tool_parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	uint64_t v = 0;
	int big = 0;
	for (; *s >= '0' && *s <= '9'; s++) {
		unsigned d = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			big = 1; /* keep reading: bad text wins over range */
		else
			v = v * 10 + d;
	}
	unsigned shift = 0;
	switch (*s) {
	case 'k': case 'K': shift = 10; break;
	case 'm': case 'M': shift = 20; break;
	case 'g': case 'G': shift = 30; break;
	case 't': case 'T': shift = 40; break;
	}
	if (shift) {
		s++;
		if (*s == 'i' && (s[1] == 'B' || s[1] == 'b'))
			s++;
	}
	if (*s == 'B' || *s == 'b')
		s++;
	if (*s)
		return -EINVAL;
	if (big || v > UINT64_MAX >> shift)
		return -ERANGE;
	v <<= shift;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

const char *tool_size_why(int err)
{
	return err == -ERANGE ? "out of range"
			      : "not digits with an optional K, M, G or T";
}

/* Length of the valid UTF-8 sequence at p (1..4), or 0 if p does not start
 * one (RFC 3629: shortest form only, no surrogates, at most U+10FFFF). */
static int utf8_len(const unsigned char *p)
{
	unsigned char c = p[0];
	int n;
	unsigned lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		if (c == 0xe0)
			lo = 0xa0; /* overlong below U+0800 */
		else if (c == 0xed)
			hi = 0x9f; /* surrogates U+D800..U+DFFF */
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		if (c == 0xf0)
			lo = 0x90; /* overlong below U+10000 */
		else if (c == 0xf4)
			hi = 0x8f; /* beyond U+10FFFF */
	} else
		return 0;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (int i = 2; i < n; i++) /* a NUL ends the loop: not 0x80..0xbf */
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

void tool_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	while (*p) {
		int n = utf8_len(p);
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(f, "\\u%04x", *p);
		else if (n == 0)
			fputs("\\ufffd", f);
		else
			fwrite(p, 1, (size_t)n, f);
		p += n ? n : 1;
	}
	fputc('"', f);
}
