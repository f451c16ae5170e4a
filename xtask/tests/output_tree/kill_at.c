/* Loaded with LD_PRELOAD into a regen by output_tree.rs: counts the calls that change the file
 * system under $KILL_UNDER (a file created, renamed into place or unlinked there) and, at the
 * $KILL_AT-th, right after it returns, dies of SIGKILL ($KILL_HOW unset) or fails it with EIO
 * instead of making it ($KILL_HOW=fail). Each counted call is appended to $KILL_LOG as
 * `<n> <call> <path>`. Counted are the C library's own entry points, which Rust's std calls. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long counted;

/* Whether `path` is counted; if so, logs it and says whether this call is the one to fail. */
static int step(const char *call, const char *path) {
    const char *under = getenv("KILL_UNDER");
    if (!under || strncmp(path, under, strlen(under)) != 0)
        return 0;
    long n = __atomic_add_fetch(&counted, 1, __ATOMIC_SEQ_CST);
    const char *log = getenv("KILL_LOG");
    FILE *f = log ? fopen(log, "a") : NULL;
    if (f) {
        fprintf(f, "%ld %s %s\n", n, call, path);
        fclose(f);
    }
    const char *at = getenv("KILL_AT");
    return at && atol(at) == n;
}

/* The call has been made: dies if it was the one. */
static void after(int chosen) {
    if (chosen)
        raise(SIGKILL);
}

static int fail(void) {
    const char *how = getenv("KILL_HOW");
    return how && strcmp(how, "fail") == 0;
}

#define REAL(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

static int opened(const char *call, int (*real)(const char *, int, ...), const char *path,
                  int flags, va_list ap) {
    mode_t mode = (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? va_arg(ap, int) : 0;
    int chosen = (flags & O_CREAT) && step(call, path);
    if (chosen && fail()) {
        errno = EIO;
        return -1;
    }
    int fd = real(path, flags, mode);
    after(chosen);
    return fd;
}

int open(const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    int fd = opened("open", REAL(open), path, flags, ap);
    va_end(ap);
    return fd;
}

int open64(const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    int fd = opened("open", REAL(open64), path, flags, ap);
    va_end(ap);
    return fd;
}

int rename(const char *from, const char *to) {
    int chosen = step("rename", to);
    if (chosen && fail()) {
        errno = EIO;
        return -1;
    }
    int r = REAL(rename)(from, to);
    after(chosen);
    return r;
}

int unlink(const char *path) {
    int chosen = step("unlink", path);
    if (chosen && fail()) {
        errno = EIO;
        return -1;
    }
    int r = REAL(unlink)(path);
    after(chosen);
    return r;
}
