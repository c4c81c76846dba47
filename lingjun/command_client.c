/* Lingjun's command client: sbatch, squeue, scancel, ... in about a millisecond.
 *
 * A Python command spends ~7 ms starting CPython and ~4 ms importing itself
 * before its first line; Slurm's sbatch is done in ~3 ms.  This program is
 * what `lingjun install-commands DIR` installs under each command's name.  It
 * connects to the command runner (lingjun/command_runner.py, a daemon that
 * has the commands imported already), hands it argv, the environment and the
 * umask, and passes its stdin, stdout, stderr and working directory as file
 * descriptors (SCM_RIGHTS).  The runner forks; the child becomes this
 * process's user and runs the same Python code the command would run here,
 * on these very descriptors; its exit status comes back and this program
 * exits with it (or dies of the same signal).
 *
 * Whenever the runner cannot be used (none serves, the config cannot be read
 * here, the runner refuses: another mount namespace, another uid on a runner
 * that is not root) it execs the Python command itself: always right, only
 * slower.  It never falls back once the command was handed over, so a
 * submission is never made twice.
 *
 * Where the runner is found: LINGJUN_RUNNER_SOCKET, else beside the
 * credential socket, found as lingjun/endpoints.py finds it
 * (LINGJUN_AUTH_SOCKET; [auth] socket in $LINGJUN_CONF or
 * /etc/lingjun/lingjun.toml; the local cluster's $LINGJUN_HOME/local.json;
 * /run/lingjun/auth.sock): auth.sock -> auth.runner.sock.  A setting this
 * small reader cannot be sure of (escapes, inline tables) sends the command
 * to Python, which reads it properly.
 *
 * Built with -DLJ_PYTHON='"/path/to/python"': the interpreter of the install
 * the Python commands live in.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#ifndef LJ_PYTHON
#error "build with -DLJ_PYTHON='\"/path/to/python\"' (lingjun install-commands does)"
#endif

/* Kept in step with lingjun/command_runner.py's COMMANDS. */
static const char *const SERVED[] = {"sbatch", "squeue", "scancel", "sinfo", "scontrol", "sacct",
                                     "sprio", "sshare", "sacctmgr", NULL};
static const char MAGIC[] = "LJRUN1";   /* then a 4-byte big-endian length, then the payload */
#define DEFAULT_AUTH_SOCKET "/run/lingjun/auth.sock"
#define SYSTEM_CONF "/etc/lingjun/lingjun.toml"
#define MAX_FILE (1 << 20)

extern char **environ;

static void run_python(const char *name, int argc, char **argv) __attribute__((noreturn));
static void run_python(const char *name, int argc, char **argv)
{
    char code[160];
    snprintf(code, sizeof code, "import sys\nfrom cli.%s import main\nsys.exit(main())", name);
    char **args = calloc((size_t)argc + 3, sizeof *args);
    if (args) {
        args[0] = LJ_PYTHON;
        args[1] = "-c";
        args[2] = code;
        for (int i = 1; i < argc; i++)
            args[i + 2] = argv[i];
        execv(LJ_PYTHON, args);
    }
    fprintf(stderr, "%s: error: cannot run %s: %s\n", name, LJ_PYTHON, strerror(errno));
    _exit(1);
}

/* The file's text (NUL-terminated, at most MAX_FILE bytes) or NULL. */
static char *slurp(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    char *buf = malloc(MAX_FILE + 1);
    size_t got = 0;
    ssize_t n;
    while (buf && got < MAX_FILE && (n = read(fd, buf + got, MAX_FILE - got)) > 0)
        got += (size_t)n;
    close(fd);
    if (buf)
        buf[got] = '\0';
    return buf;
}

static const char *skip_blanks(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    return p;
}

/* A TOML string value starting at p: 1 copied into out, -1 not one this
 * reader is sure of (escapes, multi-line strings, anything else). */
static int toml_string(const char *p, const char *end, char *out, size_t size)
{
    if (p >= end || (*p != '"' && *p != '\''))
        return -1;
    char quote = *p++;
    if (p + 1 < end && p[0] == quote && p[1] == quote)
        return -1;                          /* """multi-line""" */
    size_t n = 0;
    for (; p < end && *p != quote; p++) {
        if (*p == '\\' && quote == '"')
            return -1;
        if (n + 1 >= size)
            return -1;
        out[n++] = *p;
    }
    if (p >= end)
        return -1;
    out[n] = '\0';
    p = skip_blanks(p + 1, end);
    return (p == end || *p == '#' || *p == '\r') ? 1 : -1;
}

/* [auth] socket of a TOML text: 1 found, 0 not set (the default), -1 unsure. */
static int toml_auth_socket(const char *text, char *out, size_t size)
{
    int in_auth = 0, top = 1;
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        if (!end)
            end = line + strlen(line);
        const char *p = skip_blanks(line, end);
        if (p < end && *p == '[') {
            const char *q = skip_blanks(p + 1, end);
            top = 0;
            in_auth = 0;
            if (end - q >= 4 && strncmp(q, "auth", 4) == 0) {
                q = skip_blanks(q + 4, end);
                if (q < end && *q == ']') {
                    q = skip_blanks(q + 1, end);
                    in_auth = (q == end || *q == '#' || *q == '\r');
                } else if (q < end && *q != '.') {
                    return -1;
                }
            }
        } else if (top && end - p >= 4 && strncmp(p, "auth", 4) == 0 &&
                   (p[4] == '.' || p[4] == '=' || p[4] == ' ' || p[4] == '\t' || p[4] == '"')) {
            return -1;                      /* auth.socket = ... or auth = {...} at the top */
        } else if (in_auth && p < end && (*p == '"' || *p == '\'')) {
            return -1;                      /* a quoted key */
        } else if (in_auth && end - p >= 6 && strncmp(p, "socket", 6) == 0) {
            const char *q = skip_blanks(p + 6, end);
            if (q < end && *q == '=')
                return toml_string(skip_blanks(q + 1, end), end, out, size);
            if (q < end && *q == '.')
                return -1;
        }
        line = *end ? end + 1 : end;
    }
    return 0;
}

/* "auth_socket" of the local cluster's pointer (JSON): 1, 0 or -1 as above. */
static int pointer_auth_socket(const char *text, char *out, size_t size)
{
    const char *p = strstr(text, "\"auth_socket\"");
    if (!p)
        return 0;
    const char *end = text + strlen(text);
    p += strlen("\"auth_socket\"");
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r'))
        p++;
    if (p >= end || *p++ != ':')
        return -1;
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r'))
        p++;
    if (p >= end || *p++ != '"')
        return -1;
    size_t n = 0;
    for (; p < end && *p != '"'; p++) {
        if (*p == '\\' || n + 1 >= size)
            return -1;
        out[n++] = *p;
    }
    if (p >= end)
        return -1;
    out[n] = '\0';
    return 1;
}

/* The credential socket's path into out: 1, or 0 where Python must decide. */
static int auth_socket(char *out, size_t size)
{
    const char *env = getenv("LINGJUN_AUTH_SOCKET");
    if (env)
        return *env && snprintf(out, size, "%s", env) < (int)size;
    const char *conf = getenv("LINGJUN_CONF");
    int found;
    char *text;
    if ((conf && *conf) || access(SYSTEM_CONF, F_OK) == 0) {
        text = slurp(conf && *conf ? conf : SYSTEM_CONF);
        found = text ? toml_auth_socket(text, out, size) : 0;
    } else {
        const char *home = getenv("LINGJUN_HOME");
        char path[PATH_MAX];
        if (home && *home)
            snprintf(path, sizeof path, "%s/local.json", home);
        else if (getenv("HOME") && *getenv("HOME"))
            snprintf(path, sizeof path, "%s/.lingjun/local.json", getenv("HOME"));
        else
            return 0;                       /* ~ from the password file: Python's business */
        text = slurp(path);
        found = text ? pointer_auth_socket(text, out, size) : 0;
    }
    free(text);
    if (found == 0)
        found = snprintf(out, size, "%s", DEFAULT_AUTH_SOCKET) < (int)size;
    return found == 1 && *out;
}

/* auth.sock -> auth.runner.sock, as lingjun/command_socket.py's commands_path. */
static int runner_socket(char *out, size_t size)
{
    const char *env = getenv("LINGJUN_RUNNER_SOCKET");
    if (env)
        return *env && snprintf(out, size, "%s", env) < (int)size;
    char auth[PATH_MAX];
    if (!auth_socket(auth, sizeof auth))
        return 0;
    char *slash = strrchr(auth, '/');
    char *tail = slash ? slash + 1 : auth;
    char *dot = strrchr(tail, '.');
    int n;
    if (dot && dot != tail)
        n = snprintf(out, size, "%.*s.runner%s", (int)(dot - auth), auth, dot);
    else
        n = snprintf(out, size, "%s.runner", auth);
    return n > 0 && n < (int)size;
}

struct buf {
    char *data;
    size_t len, cap;
};

static int put(struct buf *b, const char *s, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 8192;
        while (cap < b->len + n)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d)
            return 0;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    return 1;
}

static int put_string(struct buf *b, const char *s)
{
    return put(b, s, strlen(s) + 1);
}

/* Everything the runner needs, after MAGIC and the length: NUL-terminated
 * strings: the command, the umask (octal), argc, the arguments, then the
 * environment's entries to the end. */
static int request(struct buf *b, const char *name, int argc, char **argv)
{
    char num[32];
    mode_t mask = umask(0);
    umask(mask);
    int ok = put(b, MAGIC, sizeof MAGIC - 1) && put(b, "\0\0\0\0", 4) && put_string(b, name);
    snprintf(num, sizeof num, "%o", (unsigned)mask);
    ok = ok && put_string(b, num);
    snprintf(num, sizeof num, "%d", argc - 1);
    ok = ok && put_string(b, num);
    for (int i = 1; ok && i < argc; i++)
        ok = put_string(b, argv[i]);
    for (char **e = environ; ok && *e; e++)
        ok = put_string(b, *e);
    if (!ok)
        return 0;
    uint32_t len = (uint32_t)(b->len - (sizeof MAGIC - 1) - 4);
    unsigned char *l = (unsigned char *)b->data + sizeof MAGIC - 1;
    l[0] = (unsigned char)(len >> 24);
    l[1] = (unsigned char)(len >> 16);
    l[2] = (unsigned char)(len >> 8);
    l[3] = (unsigned char)len;
    return 1;
}

/* Send the request, fds 0, 1, 2 and the working directory riding on its
 * first bytes. 1 sent, 0 not (nothing ran). */
static int hand_over(int s, struct buf *b, int cwd)
{
    int fds[4] = {0, 1, 2, cwd};
    char control[CMSG_SPACE(sizeof fds)];
    memset(control, 0, sizeof control);
    struct iovec iov = {b->data, b->len};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                         .msg_controllen = sizeof control};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(c), fds, sizeof fds);
    ssize_t n;
    do
        n = sendmsg(s, &msg, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n <= 0)
        return 0;
    for (size_t sent = (size_t)n; sent < b->len; sent += (size_t)n) {
        do
            n = send(s, b->data + sent, b->len - sent, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        if (n <= 0)
            return 0;
    }
    return 1;
}

int main(int argc, char **argv)
{
    const char *name = strrchr(argv[0], '/');
    name = name ? name + 1 : argv[0];
    int known = 0;
    for (const char *const *c = SERVED; *c; c++)
        known |= strcmp(*c, name) == 0;
    if (!known) {
        fprintf(stderr, "%s: this is Lingjun's command client; install it under a command's "
                        "name (lingjun install-commands DIR)\n", name);
        return 2;
    }
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0)
            run_python(name, argc, argv);   /* a closed stdin/out/err cannot be passed */
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    if (!runner_socket(path, sizeof path))
        run_python(name, argc, argv);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    memcpy(addr.sun_path, path, strlen(path) + 1);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&addr, sizeof addr) < 0)
        run_python(name, argc, argv);
    int cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct buf b = {0};
    if (cwd < 0 || !request(&b, name, argc, argv) || !hand_over(s, &b, cwd))
        run_python(name, argc, argv);
    free(b.data);
    close(cwd);
    /* One line back: "exit N", "signal N", or "refused WHY" (nothing ran). */
    char line[256];
    size_t got = 0;
    ssize_t n = 0;
    while (got < sizeof line - 1) {
        n = read(s, line + got, sizeof line - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
        if (memchr(line, '\n', got))
            break;
    }
    line[got] = '\0';
    int code;
    if (sscanf(line, "exit %d", &code) == 1)
        return code;
    if (sscanf(line, "signal %d", &code) == 1) {
        signal(code, SIG_DFL);
        raise(code);
        return 128 + code;
    }
    if (strncmp(line, "refused", 7) == 0) {
        close(s);
        run_python(name, argc, argv);
    }
    fprintf(stderr, "%s: error: the command runner ended before the command did\n", name);
    return 1;
}
