// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The command line every tally command shares (user/cmd/cli_parse.c): its
 * number and address parsers, and the target options' argp driven as a
 * command drives it. A usage error ends the process with status 2, so those
 * cases run in a child whose status and stderr are checked.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../user/cmd/cli.h"

#define UNTOUCHED 4242.0 /* what *out holds before a refused parse */

static void number__takes_decimals_and_exponents_in_range(void **state)
{
	double v;

	(void)state;
	assert_int_equal(cli_number("1.5", 0, 2, &v), 0);
	assert_true(v == 1.5);
	assert_int_equal(cli_number("2", 0, 2, &v), 0); /* the bounds are in */
	assert_true(v == 2);
	assert_int_equal(cli_number("0.001", 0.001, 1e7, &v), 0);
	assert_true(v == 0.001);
	assert_int_equal(cli_number("1e3", 0, 1e7, &v), 0);
	assert_true(v == 1000);
	assert_int_equal(cli_number("-0.5", -1, 0, &v), 0);
	assert_true(v == -0.5);
}

static void number__refuses_blanks_junk_and_out_of_range(void **state)
{
	static const char *const bad[] = { "",	  " 1", "\t1", "1 ",  "1x",    "x1", "abc",
					   "3",	  "-1", "nan", "inf", "1e999", "0x", "--1",
					   "2.1", ".",	"e3",  "0x1", "0x1p0", "0X1" };
	double v = UNTOUCHED;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (cli_number(bad[i], 0, 2, &v) != -EINVAL)
			fail_msg("cli_number took '%s'", bad[i]);
		assert_true(v == UNTOUCHED);
	}
}

static void uint__takes_decimal_digits_only(void **state)
{
	uint64_t v;

	(void)state;
	assert_int_equal(cli_uint("0", 0, 10, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(cli_uint("007", 0, 10, &v), 0);
	assert_int_equal(v, 7);
	assert_int_equal(cli_uint("65535", 1, 65535, &v), 0);
	assert_int_equal(v, 65535);
	/* 19 digits, the most it reads */
	assert_int_equal(cli_uint("9999999999999999999", 0, UINT64_MAX, &v), 0);
	assert_true(v == 9999999999999999999ULL);
}

static void uint__refuses_signs_bases_blanks_and_out_of_range(void **state)
{
	/* the last: a full-width 1 */
	static const char *const bad[] = { "",
					   "+1",
					   "-1",
					   " 1",
					   "1 ",
					   "0x10",
					   "1e3",
					   "1.0",
					   "10x",
					   "0",
					   "11",
					   "1,0",
					   "12345678901234567890",
					   "18446744073709551615",
					   "\xef\xbc\x91" };
	uint64_t v = 4242;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (cli_uint(bad[i], 1, 10, &v) != -EINVAL)
			fail_msg("cli_uint took '%s'", bad[i]);
		assert_int_equal(v, 4242);
	}
	/* 20 digits are refused even when the bound would take them */
	assert_int_equal(cli_uint("18446744073709551615", 0, UINT64_MAX, &v), -EINVAL);
}

static void listen__ipv4_host_and_port(void **state)
{
	struct sockaddr_storage ss;
	socklen_t len = 0;
	const struct sockaddr_in *a4 = (const struct sockaddr_in *)&ss;
	char host[INET_ADDRSTRLEN];

	(void)state;
	assert_int_equal(cli_parse_listen("127.0.0.1:9464", &ss, &len), 0);
	assert_int_equal(a4->sin_family, AF_INET);
	assert_int_equal(ntohs(a4->sin_port), 9464);
	assert_int_equal(len, sizeof(struct sockaddr_in));
	assert_non_null(inet_ntop(AF_INET, &a4->sin_addr, host, sizeof(host)));
	assert_string_equal(host, "127.0.0.1");

	assert_int_equal(cli_parse_listen("0.0.0.0:1", &ss, &len), 0);
	assert_int_equal(ntohs(a4->sin_port), 1);
	assert_int_equal(a4->sin_addr.s_addr, htonl(INADDR_ANY));
	assert_int_equal(cli_parse_listen("10.1.2.3:65535", &ss, &len), 0);
	assert_int_equal(ntohs(a4->sin_port), 65535);
}

static void listen__ipv6_in_brackets(void **state)
{
	struct sockaddr_storage ss;
	socklen_t len = 0;
	const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)&ss;
	char host[INET6_ADDRSTRLEN];

	(void)state;
	assert_int_equal(cli_parse_listen("[::1]:8080", &ss, &len), 0);
	assert_int_equal(a6->sin6_family, AF_INET6);
	assert_int_equal(ntohs(a6->sin6_port), 8080);
	assert_int_equal(len, sizeof(struct sockaddr_in6));
	assert_true(IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr));

	assert_int_equal(cli_parse_listen("[::]:1", &ss, &len), 0);
	assert_true(IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr));
	assert_int_equal(cli_parse_listen("[2001:db8::7:1]:443", &ss, &len), 0);
	assert_non_null(inet_ntop(AF_INET6, &a6->sin6_addr, host, sizeof(host)));
	assert_string_equal(host, "2001:db8::7:1");
	/* the longest form there is */
	assert_int_equal(
		cli_parse_listen("[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255]:9", &ss, &len),
		0);
	assert_int_equal(ntohs(a6->sin6_port), 9);
}

static void listen__refuses_names_bad_ports_and_broken_brackets(void **state)
{
	/* numeric only (what is bound is what was written), ports 1 to 65535,
	 * IPv6 only in brackets */
	static const char *const bad[] = { "localhost:9464",
					   "example.com:80",
					   "127.0.0.1",
					   "127.0.0.1:",
					   ":9464",
					   "127.0.0.1:0",
					   "127.0.0.1:65536",
					   "127.0.0.1:-1",
					   "127.0.0.1:+80",
					   "127.0.0.1: 80",
					   "127.0.0.1:80 ",
					   "127.0.0.1:0x50",
					   "256.0.0.1:80",
					   "1.2.3.4.5:80",
					   " 127.0.0.1:80",
					   "::1:8080",
					   "[::1]8080",
					   "[::1:8080",
					   "::1]:8080",
					   "[]:80",
					   "[::1]:",
					   "[::1]:99999",
					   "[127.0.0.1]:80",
					   "[localhost]:80",
					   "[fe80::1%lo]:80",
					   "[::1]]:80",
					   "[0000:0000:0000:0000:0000:0000:0000:0000:1]:80",
					   "" };
	struct sockaddr_storage ss;
	socklen_t len = 77;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (cli_parse_listen(bad[i], &ss, &len) != -EINVAL)
			fail_msg("cli_parse_listen took '%s'", bad[i]);
		assert_int_equal(len, 77);
	}
}

/* A command's argp around the shared target options, as cmd_snapshot has it. */
static error_t parse_cmd_opt(int key, char *arg, struct argp_state *state)
{
	(void)arg;
	if (key == ARGP_KEY_INIT) {
		state->child_inputs[0] = state->input;
		return 0;
	}
	return ARGP_ERR_UNKNOWN;
}

static int parse_target(struct cli_target *t, int argc, char **argv)
{
	static const struct argp_child children[] = { { &cli_target_argp, 0, NULL, 0 }, { 0 } };
	const struct argp argp = { NULL, parse_cmd_opt, "(-p PID | -- CMD [ARGS...])",
				   NULL, children,	NULL,
				   NULL };

	cli_target_init(t);
	return argp_parse(&argp, argc, argv, ARGP_IN_ORDER, NULL, t);
}

#define ARGV(...) ((char *[]){ "tally test", __VA_ARGS__, NULL })
#define ARGC(...) ((int)(sizeof((char *[]){ "tally test", __VA_ARGS__ }) / sizeof(char *)))
#define PARSE(t, ...) parse_target(t, ARGC(__VA_ARGS__), ARGV(__VA_ARGS__))

static void target__pid_and_defaults(void **state)
{
	struct cli_target t;

	(void)state;
	assert_int_equal(PARSE(&t, "-p", "1234"), 0);
	assert_int_equal(t.o.pid, 1234);
	assert_null(t.o.cmd);
	assert_true(t.secs == 0);
	assert_int_equal(t.o.ring_bytes, (uint64_t)CLI_RING_MB_DEFAULT << 20);
	assert_int_equal(t.o.nrules, 0);
	assert_ptr_equal(t.o.rules, t.rules);
	assert_false(t.o.no_preload);
	assert_false(t.o.verbose);

	assert_int_equal(PARSE(&t, "--pid=2147483647"), 0);
	assert_int_equal(t.o.pid, 2147483647);
}

static void target__every_option(void **state)
{
	struct cli_target t;

	(void)state;
	assert_int_equal(PARSE(&t, "-p", "7", "-d", "2.5", "--group", "io=io-*",
			       "--group=web=nginx*", "--ring-mb", "0.5", "--no-preload", "-v"),
			 0);
	assert_int_equal(t.o.pid, 7);
	assert_true(t.secs == 2.5);
	assert_int_equal(t.o.nrules, 2);
	assert_string_equal(t.rules[0], "io=io-*");
	assert_string_equal(t.rules[1], "web=nginx*");
	assert_int_equal(t.o.ring_bytes, 512 * 1024);
	assert_true(t.o.no_preload);
	assert_true(t.o.verbose);

	/* the largest ring the kernel takes, and the smallest size said */
	assert_int_equal(PARSE(&t, "-p", "7", "--ring-mb=2048"), 0);
	assert_int_equal(t.o.ring_bytes, 2048ULL << 20);
	assert_int_equal(PARSE(&t, "-p", "7", "--ring-mb", "0.000001"), 0);
	assert_int_equal(t.o.ring_bytes, 1);
}

static void target__command_after_dashes(void **state)
{
	struct cli_target t;

	(void)state;
	assert_int_equal(PARSE(&t, "-d", "1", "--", "sleep", "-p", "10"), 0);
	assert_int_equal(t.o.pid, 0);
	assert_non_null(t.o.cmd);
	assert_string_equal(t.o.cmd[0], "sleep");
	assert_string_equal(t.o.cmd[1], "-p"); /* the command's, not tally's */
	assert_string_equal(t.o.cmd[2], "10");
	assert_null(t.o.cmd[3]);
	assert_true(t.secs == 1);
}

static void target__as_many_groups_as_there_is_room_for(void **state)
{
	char *argv[2 + 2 * CLI_MAX_RULES + 1] = { "tally test", "-p1" };
	struct cli_target t;
	int argc = 2;

	(void)state;
	for (int i = 0; i < CLI_MAX_RULES; i++) {
		argv[argc++] = "--group";
		argv[argc++] = "g=*";
	}
	argv[argc] = NULL;
	assert_int_equal(parse_target(&t, argc, argv), 0);
	assert_int_equal(t.o.nrules, CLI_MAX_RULES);
}

/* Runs the parse in a child: its exit status, and its stderr in err. */
static int parse_in_child(char **argv, int argc, char *err, size_t len)
{
	int fds[2], status;
	ssize_t n, got = 0;
	pid_t pid;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct cli_target t;
		dup2(fds[1], 2);
		close(fds[0]);
		_exit(parse_target(&t, argc, argv) ? 100 : 0);
	}
	close(fds[1]);
	while ((n = read(fds[0], err + got, len - 1 - (size_t)got)) > 0)
		got += n;
	err[got] = 0;
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

#define REFUSED(msg, ...)                                                                          \
	do {                                                                                       \
		char err_[512];                                                                    \
		int rc_ =                                                                          \
			parse_in_child(ARGV(__VA_ARGS__), ARGC(__VA_ARGS__), err_, sizeof(err_));  \
		if (rc_ != TALLY_EXIT_USAGE || !strstr(err_, msg) ||                               \
		    !strstr(err_, "tally test: ") || !strstr(err_, "(see tally test --help)"))     \
			fail_msg("status %d, stderr '%s'; wanted %d and '%s'", rc_, err_,          \
				 TALLY_EXIT_USAGE, msg);                                           \
	} while (0)

static void target__usage_errors_exit_2_and_say_why(void **state)
{
	(void)state;
	REFUSED("bad PID '0'", "-p", "0");
	REFUSED("bad PID 'abc'", "-p", "abc");
	REFUSED("bad PID '2147483648'", "-p", "2147483648");
	REFUSED("bad PID '-1'", "-p", "-1");
	REFUSED("bad PID ' 1'", "-p", " 1");
	REFUSED("bad duration '0'", "-p", "1", "-d", "0");
	REFUSED("bad duration '-1'", "-p", "1", "-d", "-1");
	REFUSED("bad duration 'x'", "-p", "1", "-d", "x");
	REFUSED("bad duration '1e8'", "-p", "1", "-d", "1e8");
	REFUSED("bad --group 'web': want NAME=GLOB", "-p", "1", "--group", "web");
	REFUSED("bad --group '=x'", "-p", "1", "--group", "=x");
	REFUSED("bad --group 'web='", "-p", "1", "--group", "web=");
	REFUSED("bad --ring-mb '0'", "-p", "1", "--ring-mb", "0");
	REFUSED("bad --ring-mb '2049': want a size in MiB, up to 2048", "-p", "1", "--ring-mb",
		"2049");
	REFUSED("bad --ring-mb '1 '", "-p", "1", "--ring-mb", "1 ");
	REFUSED("say which process: -p PID or -- CMD [ARGS...]", "-v");
	REFUSED("bad PID '0x'", "-p1", "-p0x");
	REFUSED("-p PID and -- CMD exclude each other", "-p", "1", "--", "true");
}

static void target__one_group_too_many_is_refused(void **state)
{
	char *argv[2 + 2 * (CLI_MAX_RULES + 1) + 1] = { "tally test", "-p1" };
	char err[512];
	int argc = 2;

	(void)state;
	for (int i = 0; i <= CLI_MAX_RULES; i++) {
		argv[argc++] = "--group";
		argv[argc++] = "g=*";
	}
	argv[argc] = NULL;
	assert_int_equal(parse_in_child(argv, argc, err, sizeof(err)), TALLY_EXIT_USAGE);
	assert_non_null(strstr(err, "at most " CLI_STR(CLI_MAX_RULES) " --group rules"));
}

/* -i MS of the views: whole milliseconds in range, else a usage error. */
static void interval__whole_milliseconds_in_range(void **state)
{
	struct argp_state st = { .name = "tally test" };
	static const char *const bad[] = { "0", "99", "100.5", "10001", "x", " 200", "" };

	(void)state;
	assert_int_equal(cli_interval_ms(&st, "100", 100, 10000), 100);
	assert_int_equal(cli_interval_ms(&st, "2500", 100, 10000), 2500);
	assert_int_equal(cli_interval_ms(&st, "1e3", 100, 10000), 1000);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int status;
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			if (!freopen("/dev/null", "w", stderr))
				_exit(99);
			cli_interval_ms(&st, bad[i], 100, 10000);
			_exit(0);
		}
		assert_int_equal(waitpid(pid, &status, 0), pid);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != TALLY_EXIT_USAGE)
			fail_msg("-i '%s' was taken", bad[i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(number__takes_decimals_and_exponents_in_range),
		cmocka_unit_test(number__refuses_blanks_junk_and_out_of_range),
		cmocka_unit_test(uint__takes_decimal_digits_only),
		cmocka_unit_test(uint__refuses_signs_bases_blanks_and_out_of_range),
		cmocka_unit_test(listen__ipv4_host_and_port),
		cmocka_unit_test(listen__ipv6_in_brackets),
		cmocka_unit_test(listen__refuses_names_bad_ports_and_broken_brackets),
		cmocka_unit_test(target__pid_and_defaults),
		cmocka_unit_test(target__every_option),
		cmocka_unit_test(target__command_after_dashes),
		cmocka_unit_test(target__as_many_groups_as_there_is_room_for),
		cmocka_unit_test(target__usage_errors_exit_2_and_say_why),
		cmocka_unit_test(target__one_group_too_many_is_refused),
		cmocka_unit_test(interval__whole_milliseconds_in_range),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
