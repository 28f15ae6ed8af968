/*
 * test_toolutil.c - the tools' shared code (tools/common/toolutil.h): the
 * size parser's grammar, range and overflow errors, and the JSON string
 * writer's escapes, UTF-8 pass-through and replacement of invalid bytes.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "toolutil.h"

/* tool_parse_size over 0..UINT64_MAX; *out keeps 77 on failure. */
static int size_of(const char *s, uint64_t *out)
{
	*out = 77;
	return tool_parse_size(s, 0, UINT64_MAX, out);
}

static void test_size_accepts(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		uint64_t v;
	} ok[] = {
		{ "0", 0 },
		{ "1", 1 },
		{ "4096", 4096 },
		{ "007", 7 },
		{ "4K", 4096 },
		{ "4k", 4096 },
		{ "4KB", 4096 },
		{ "4KiB", 4096 },
		{ "4kib", 4096 },
		{ "64B", 64 },
		{ "3M", 3ULL << 20 },
		{ "1G", 1ULL << 30 },
		{ "1gb", 1ULL << 30 },
		{ "2T", 2ULL << 40 },
		{ "18446744073709551615", UINT64_MAX },
		{ "16777215T", 16777215ULL << 40 },
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		uint64_t v;
		assert_int_equal(size_of(ok[i].s, &v), 0);
		assert_true(v == ok[i].v);
	}
}

static void test_size_refuses_text(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"", "K", "-1", "+1", " 1", "1 ", "0x10", "1.5K", "1KK",
		"1P", "1E", "1iB", "1Ki", "1KiBB", "1BB", "12abc", "1\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t v;
		assert_int_equal(size_of(bad[i], &v), -EINVAL);
		assert_true(v == 77);
	}
	uint64_t v = 77;
	assert_int_equal(tool_parse_size(NULL, 0, 1, &v), -EINVAL);
	/* Bad text is reported as such even when its digits overflow. */
	assert_int_equal(size_of("99999999999999999999x", &v), -EINVAL);
}

static void test_size_range(void **state)
{
	(void)state;
	uint64_t v = 77;
	assert_int_equal(size_of("18446744073709551616", &v), -ERANGE);
	assert_int_equal(size_of("16777216T", &v), -ERANGE);
	assert_int_equal(size_of("99999999999999999999999", &v), -ERANGE);
	assert_true(v == 77);
	assert_int_equal(tool_parse_size("4095", 4096, 1 << 30, &v), -ERANGE);
	assert_int_equal(tool_parse_size("1025M", 4096, 1 << 30, &v), -ERANGE);
	assert_true(v == 77);
	assert_int_equal(tool_parse_size("4K", 4096, 1 << 30, &v), 0);
	assert_true(v == 4096);
	assert_int_equal(tool_parse_size("1G", 4096, 1 << 30, &v), 0);
	assert_true(v == 1 << 30);
	assert_string_equal(tool_size_why(-ERANGE), "out of range");
	assert_non_null(strstr(tool_size_why(-EINVAL), "K, M, G or T"));
}

/* tool_json_str(s) as a string (freed by the caller). */
static char *json_of(const char *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_non_null(f);
	tool_json_str(f, s);
	assert_int_equal(fclose(f), 0);
	return buf;
}

static void expect_json(const char *in, const char *want)
{
	char *got = json_of(in);
	assert_string_equal(got, want);
	free(got);
}

static void test_json_escapes(void **state)
{
	(void)state;
	expect_json("", "\"\"");
	expect_json(NULL, "\"\"");
	expect_json("plain text-1.2_x", "\"plain text-1.2_x\"");
	expect_json("a\"b\\c/d", "\"a\\\"b\\\\c/d\"");
	expect_json("\n\t\r\b\f", "\"\\u000a\\u0009\\u000d\\u0008\\u000c\"");
	expect_json("\x01\x1f\x7f ~", "\"\\u0001\\u001f\\u007f ~\"");
}

static void test_json_control_every_byte(void **state)
{
	(void)state;
	for (int c = 1; c < 0x20; c++) {
		char in[2] = { (char)c, 0 }, want[16];
		snprintf(want, sizeof(want), "\"\\u%04x\"", c);
		expect_json(in, want);
	}
}

static void test_json_utf8(void **state)
{
	(void)state;
	/* Valid sequences of each length pass through unchanged. */
	expect_json("\xc3\xa9", "\"\xc3\xa9\"");		 /* U+00E9 */
	expect_json("\xe2\x82\xac", "\"\xe2\x82\xac\"");	 /* U+20AC */
	expect_json("\xed\x9f\xbf", "\"\xed\x9f\xbf\"");	 /* U+D7FF */
	expect_json("\xf0\x9f\x98\x80", "\"\xf0\x9f\x98\x80\""); /* U+1F600 */
	expect_json("\xf4\x8f\xbf\xbf", "\"\xf4\x8f\xbf\xbf\""); /* U+10FFFF */
	/* Invalid bytes: one replacement each, the rest read again. */
	expect_json("\x80", "\"\\ufffd\"");
	expect_json("\xff", "\"\\ufffd\"");
	expect_json("\xe9t\xe9", "\"\\ufffdt\\ufffd\""); /* Latin-1 */
	expect_json("\xc0\xaf", "\"\\ufffd\\ufffd\"");	/* overlong '/' */
	expect_json("\xe0\x80\xaf", "\"\\ufffd\\ufffd\\ufffd\"");
	expect_json("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\""); /* U+D800 */
	expect_json("\xf4\x90\x80\x80",
		    "\"\\ufffd\\ufffd\\ufffd\\ufffd\""); /* U+110000 */
	expect_json("\xe2\x82", "\"\\ufffd\\ufffd\"");	  /* cut short */
	expect_json("\xe2\x82\"", "\"\\ufffd\\ufffd\\\"\""); /* cut by '"' */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_size_accepts),
		cmocka_unit_test(test_size_refuses_text),
		cmocka_unit_test(test_size_range),
		cmocka_unit_test(test_json_escapes),
		cmocka_unit_test(test_json_control_every_byte),
		cmocka_unit_test(test_json_utf8),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
