#!/bin/sh
# Program 2 of tests/programs: a shim (dash) that execs a bash script that
# execs the Python interpreter named by $1 (a path, or python3 from PATH).
exec "$(dirname "$0")/pyrun.sh" "$@"
