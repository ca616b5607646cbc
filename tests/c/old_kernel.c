/* Runs a command as if on an older Linux kernel: every system call numbered at
 * or above FIRST_MISSING fails with ENOSYS, as on a kernel that predates it.
 * Usage: old_kernel FIRST_MISSING COMMAND [ARG...]
 *
 * System call numbers grow with the kernel on x86_64, so 314 (sched_setattr,
 * Linux 3.14) and everything after it imitates Linux 3.10, the kernel of the
 * manylinux2014 baseline (CentOS 7). A seccomp filter does it; it is inherited
 * by the command and cannot be removed. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s FIRST_MISSING COMMAND [ARG...]\n", argv[0]);
        return 2;
    }
    char *end = NULL;
    long first_missing = strtol(argv[1], &end, 10);
    if (*end != '\0' || first_missing <= 0) {
        fprintf(stderr, "FIRST_MISSING must be a positive system call number, got %s\n", argv[1]);
        return 2;
    }
    struct sock_filter filter[] = {
        /* Only x86_64 numbers mean what the caller asked; refuse anything else. */
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, (unsigned)first_missing, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog program = {.len = sizeof filter / sizeof filter[0], .filter = filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
        perror("installing the seccomp filter");
        return 2;
    }
    execvp(argv[2], argv + 2);
    perror(argv[2]);
    return 2;
}
