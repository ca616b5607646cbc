# Sourced by scripts/test.sh (phase 5, aarch64) and scripts/test_windows.sh: the C test
# programs (tests/c/<program>.c) and the flags they are cross-compiled with.
c_test_flags=(-std=c11 -Wall -Wextra -Werror -I zig/include)
c_test_programs=(abi_round_trip writer_lock remote_fetch)
