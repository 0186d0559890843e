/* pred (or pred-extract) as the agent's sandbox has it, compiled: the same protocol as
 * predbench_gateway_client.py (the fallback where no C compiler is found), without Python's
 * start-up, which every pred call would pay. The call -- its tool, its working directory and its
 * arguments, NUL-separated, with its stdin, stdout and stderr themselves (SCM_RIGHTS) -- goes to
 * the harness's gateway, which books it, runs the real binary on the files under /scratch and
 * answers "EXIT\nMESSAGE". */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#ifndef TOOL
#define TOOL "pred"
#endif
#define SOCKET_PATH "/predbench/gateway/socket"
#define MAX_REQUEST (64 * 1024)

static char request[MAX_REQUEST + 1];
static size_t used;

static void append(const char *text, int separator) {
    if (separator && used < sizeof request) request[used++] = '\0';
    size_t len = strlen(text);
    if (len > sizeof request - used) len = sizeof request - used; /* too long: the gateway refuses it */
    memcpy(request + used, text, len);
    used += len;
}

static int unanswered(const char *what) {
    fprintf(stderr, TOOL ": the harness's pred gateway did not answer: %s: %s\n", what, strerror(errno));
    return 125;
}

int main(int argc, char **argv) {
    char cwd[4096];
    append(TOOL, 0);
    append(getcwd(cwd, sizeof cwd) ? cwd : "", 1);
    for (int i = 1; i < argc; i++) append(argv[i], 1);

    int conn = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    strcpy(addr.sun_path, SOCKET_PATH);
    if (conn < 0 || connect(conn, (struct sockaddr *)&addr, sizeof addr) < 0) return unanswered("connect");

    int fds[3] = {0, 1, 2};
    union {
        char buf[CMSG_SPACE(sizeof fds)];
        struct cmsghdr align;
    } control;
    struct iovec iov = {.iov_base = request, .iov_len = used};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                         .msg_controllen = sizeof control.buf};
    struct cmsghdr *header = CMSG_FIRSTHDR(&msg);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(header), fds, sizeof fds);
    if (sendmsg(conn, &msg, 0) < 0) return unanswered("send");

    static char reply[65537];
    ssize_t got;
    while ((got = recv(conn, reply, sizeof reply - 1, 0)) < 0 && errno == EINTR) {
    }
    if (got <= 0) {
        errno = got == 0 ? ECONNRESET : errno;
        return unanswered("receive");
    }
    reply[got] = '\0';
    char *message = strchr(reply, '\n');
    if (message) *message++ = '\0';
    if (message && *message) fprintf(stderr, TOOL ": %s\n", message);
    char *end;
    long code = strtol(reply, &end, 10);
    return (*reply && !*end && code >= 0 && code < 256) ? (int)code : 125;
}
