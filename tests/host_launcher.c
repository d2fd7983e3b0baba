/* The host zygote's launcher (tests/host_zygote.py), in C: the same steps as its Python
 * launcher (_LAUNCHER), without an interpreter's start (about 10 ms of CPU a host).
 *
 * host_launcher SOCKET HOST-ARGS...: wait until the zygote listens on SOCKET, hand it
 * standard input, output and error and the --lifeline descriptor, with the request
 * (the folder, the judge's scratch folder, the host's arguments), then wait for its
 * answer and end as the host ended: its exit status, or its signal. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static char request[1 << 16];
static size_t used;

static int add(const char *text) /* one NUL-terminated field; 0: no room */
{
    size_t size = strlen(text) + 1;
    if (used + size > sizeof request)
        return 0;
    memcpy(request + used, text, size);
    used += size;
    return 1;
}

static int fail(const char *what)
{
    fprintf(stderr, "host launcher: %s: %s\n", what, strerror(errno));
    return 1;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN); /* as python starts: a write to a closed pipe is EPIPE */
    if (argc < 2) {
        fputs("usage: host_launcher SOCKET HOST-ARGS...\n", stderr);
        return 2;
    }
    struct stat seen;
    for (int i = 0; i < 6000 && stat(argv[1], &seen) != 0; i++) { /* up to 5 minutes */
        struct timespec pause = {0, 50000000};
        nanosleep(&pause, NULL);
    }
    int fds[4] = {0, 1, 2, -1};
    int count = 3;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--lifeline") == 0) {
            if (i + 1 >= argc) {
                fputs("host launcher: --lifeline without its descriptor\n", stderr);
                return 1;
            }
            fds[count++] = atoi(argv[i + 1]);
            break;
        }
    }
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd) == NULL)
        return fail("getcwd");
    int fits = add(cwd);
    static const char *const scratch[] = {"TMPDIR", "KVOFFLOAD_SCRATCH"};
    char entry[8192];
    for (size_t i = 0; i < sizeof scratch / sizeof *scratch; i++) {
        const char *value = getenv(scratch[i]);
        if (value != NULL) {
            snprintf(entry, sizeof entry, "%s=%s", scratch[i], value);
            fits = fits && add(entry);
        }
    }
    fits = fits && add("");
    for (int i = 2; i < argc; i++)
        fits = fits && add(argv[i]);
    if (!fits) {
        fputs("host launcher: the request is over 64 KiB\n", stderr);
        return 1;
    }

    int connection = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    if (strlen(argv[1]) >= sizeof address.sun_path) {
        fputs("host launcher: the socket's path is too long\n", stderr);
        return 1;
    }
    strcpy(address.sun_path, argv[1]);
    if (connection < 0 || connect(connection, (struct sockaddr *)&address, sizeof address) != 0)
        return fail("connect");
    union {
        char bytes[CMSG_SPACE(sizeof fds)];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof control);
    struct iovec part = {request, used};
    struct msghdr message = {.msg_iov = &part, .msg_iovlen = 1, .msg_control = control.bytes,
                             .msg_controllen = CMSG_SPACE(count * sizeof(int))};
    struct cmsghdr *rights = CMSG_FIRSTHDR(&message);
    rights->cmsg_level = SOL_SOCKET;
    rights->cmsg_type = SCM_RIGHTS;
    rights->cmsg_len = CMSG_LEN(count * sizeof(int));
    memcpy(CMSG_DATA(rights), fds, count * sizeof(int));
    if (sendmsg(connection, &message, MSG_NOSIGNAL) < 0)
        return fail("sendmsg");

    int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    if (count > 3)
        close(fds[3]);
    char answer[256];
    size_t got = 0;
    for (;;) {
        ssize_t n = read(connection, answer + got, sizeof answer - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
        if (got == sizeof answer - 1)
            break;
    }
    answer[got] = '\0';
    int status;
    if (sscanf(answer, "status %d", &status) != 1) {
        const char *why = strncmp(answer, "refused ", 8) == 0 ? answer + 8
                                                               : "the host zygote ended";
        fprintf(stderr, "host zygote refused the run (Python threads: %s)\n", why);
        return 1;
    }
    if (status < 0) {
        if (-status != SIGKILL && -status != SIGSTOP)
            signal(-status, SIG_DFL);
        kill(getpid(), -status);
    }
    return status & 0xFF;
}
