// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * build/tally: the command line. `tally COMMAND [OPTIONS] (-p PID | -- CMD)`;
 * each command parses its own options with argp (defaults beside the flags,
 * examples in the help), the target's through cli.c.
 */
#include <argp.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

const char *argp_program_version = "tally 0.4";

/* Commands whose files are not linked in are absent (weak). */
#pragma weak cmd_top
#pragma weak cmd_record
#pragma weak cmd_serve
#pragma weak cmd_demo
#pragma weak cmd_report
static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
} commands[] = {
	{ "snapshot", cmd_snapshot }, { "top", cmd_top },   { "record", cmd_record },
	{ "serve", cmd_serve },	      { "demo", cmd_demo }, { "profile", cmd_profile },
	{ "report", cmd_report },     { "diff", cmd_diff },
};

static const char main_doc[] =
	"tally: where every byte is, how much CPU, per resource group.\v"
	"COMMANDS:\n"
	"  top        a live view: the byte identity, CPU, memory and GPU per group\n"
	"  snapshot   trace a process, print one JSON snapshot\n"
	"  record     write a Chrome/Perfetto trace (JSON) of a process\n"
	"  serve      serve Prometheus metrics of a process on /metrics\n"
	"  profile    write a heap profile by call site (pprof, or folded stacks)\n"
	"  demo       the built-in demo workload under the live view\n"
	"  diff       compare two snapshots (or profiles): groups, processes, sites\n"
	"\nRun `tally COMMAND --help` for a command's options.\n"
	"EXAMPLES:\n"
	"  tally demo\n"
	"  tally top -- ./myapp\n"
	"  tally snapshot -p $(pidof myapp) -d 2\n"
	"  tally record -o trace.json -- ./myapp\n"
	"  tally profile -o heap.pb.gz -- ./myapp\n"
	"  tally report -o report.html -- ./myapp\n"
	"  tally diff before.json after.json\n"
	"  tally serve --listen 127.0.0.1:9464 -p $(pidof myapp)";

int main(int argc, char **argv)
{
	struct argp main_argp = { NULL, NULL, "COMMAND [OPTIONS]", main_doc, NULL, NULL, NULL };

	argp_err_exit_status = TALLY_EXIT_USAGE;
	if (argc < 2 || argv[1][0] == '-') {
		/* --help, --version, or nothing */
		if (argc < 2) {
			argp_help(&main_argp, stderr, ARGP_HELP_STD_USAGE, "tally");
			return TALLY_EXIT_USAGE;
		}
		argp_parse(&main_argp, argc, argv, 0, NULL, NULL);
		return TALLY_EXIT_USAGE;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (commands[i].run && !strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "tally: unknown command '%s' (try tally --help)\n", argv[1]);
	return TALLY_EXIT_USAGE;
}
