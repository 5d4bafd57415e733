// An experiment behind docs/network.md "Throughput" (not part of airlock, not built by cargo):
// a child in its own user and network namespace, under landlock with TCP connect and bind handled
// and nothing allowed, and a seccomp filter that turns `connect` into a user notification. The
// parent, as airlock would, connects to a loopback server from the host's network and swaps that
// socket into the child's fd (SECCOMP_IOCTL_NOTIF_ADDFD with SECCOMP_ADDFD_FLAG_SETFD). Then:
//   throughput  1 GiB read through the swapped socket, against the same read made directly;
//   unspec      the parent lets the child's next connect through (CONTINUE: a race airlock lost):
//               connect(AF_UNSPEC) on the swapped socket, then listen() on it, then a connection
//               to it from the host's network;
//   fastopen    the same disconnect, then sendto(MSG_FASTOPEN) to the host's loopback server.
// Build and run (root, then an ordinary user):
//   gcc -O2 -o /tmp/connect_handover docs/experiments/connect_handover.c
//   /tmp/connect_handover unspec; setpriv --reuid 65534 --regid 65534 --clear-groups /tmp/connect_handover unspec
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BYTES (1L << 30)
static int server_port;
static const char *mode;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void serve_bytes(int listener) {
    // Host-side server: for each connection, send BYTES then close.
    for (;;) {
        int c = accept(listener, NULL, NULL);
        if (c < 0) continue;
        if (fork() == 0) {
            static char buf[1 << 16];
            memset(buf, 'x', sizeof buf);
            long left = BYTES;
            while (left > 0) {
                ssize_t n = write(c, buf, left < (long)sizeof buf ? left : (long)sizeof buf);
                if (n <= 0) break;
                left -= n;
            }
            _exit(0);
        }
        close(c);
    }
}

static long drain(int fd) {
    static char buf[1 << 16];
    long total = 0;
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) total += n;
    return total;
}

static void send_fd(int sock, int fd) {
    char data = 'f';
    struct iovec iov = {&data, 1};
    char control[CMSG_SPACE(sizeof(int))] = {0};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    if (sendmsg(sock, &msg, 0) < 0) perror("sendmsg");
}

static int recv_fd(int sock) {
    char data;
    struct iovec iov = {&data, 1};
    char control[CMSG_SPACE(sizeof(int))] = {0};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
    if (recvmsg(sock, &msg, 0) < 0) { perror("recvmsg"); exit(1); }
    int fd;
    memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&msg)), sizeof fd);
    return fd;
}

static void child(int channel) {
    uid_t uid = getuid();
    gid_t gid = getgid();
    if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0) { perror("unshare"); exit(1); }
    char map[64];
    int f = open("/proc/self/setgroups", O_WRONLY); write(f, "deny", 4); close(f);
    snprintf(map, sizeof map, "0 %u 1", uid); f = open("/proc/self/uid_map", O_WRONLY); write(f, map, strlen(map)); close(f);
    snprintf(map, sizeof map, "0 %u 1", gid); f = open("/proc/self/gid_map", O_WRONLY); write(f, map, strlen(map)); close(f);
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    // landlock: handle TCP connect and bind, allow none.
    // The system headers predate landlock's network rules (ABI 4): the attr's layout by hand.
    struct { unsigned long long fs, net, scoped; } attr = {0, 3 /* BIND_TCP | CONNECT_TCP */, 0};
    int rs = syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
    if (rs < 0 || syscall(SYS_landlock_restrict_self, rs, 0) < 0) { perror("landlock"); exit(1); }
    // seccomp: connect -> user notification; sendto/sendmsg with MSG_FASTOPEN allowed (to test).
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_connect, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof filter / sizeof filter[0], .filter = filter};
    int listener = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
    if (listener < 0) { perror("seccomp"); exit(1); }
    send_fd(channel, listener);
    close(listener);

    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(server_port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int r = connect(s, (struct sockaddr *)&to, sizeof to);
    printf("child: connect through the supervisor: %d (%s)\n", r, r ? strerror(errno) : "ok");
    if (r) exit(1);
    if (!strcmp(mode, "throughput")) {
        double t = now();
        long got = drain(s);
        printf("child: swapped socket: %ld MiB in %.3f s: %.0f MiB/s\n", got >> 20, now() - t, (got >> 20) / (now() - t));
        exit(0);
    }
    // Not throughput: the race won. Disconnect, then try to reuse the host socket.
    struct sockaddr unspec = {.sa_family = AF_UNSPEC};
    r = connect(s, &unspec, sizeof unspec);
    printf("child: connect(AF_UNSPEC) on the host socket (let through): %d (%s)\n", r, r ? strerror(errno) : "ok");
    if (!strcmp(mode, "unspec")) {
        r = listen(s, 1);
        struct sockaddr_in me; socklen_t len = sizeof me;
        getsockname(s, (struct sockaddr *)&me, &len);
        printf("child: listen() on it: %d (%s), bound to %s:%d\n", r, r ? strerror(errno) : "ok", inet_ntoa(me.sin_addr), ntohs(me.sin_port));
        char port[16]; snprintf(port, sizeof port, "%d", ntohs(me.sin_port));
        write(channel, port, strlen(port) + 1);
        if (r == 0) {
            int c = accept(s, NULL, NULL);
            printf("child: accepted a connection from the host's network: %s\n", c >= 0 ? "YES (escape)" : strerror(errno));
        }
        exit(0);
    }
    if (!strcmp(mode, "fastopen")) {
        r = sendto(s, "x", 1, MSG_FASTOPEN, (struct sockaddr *)&to, sizeof to);
        printf("child: sendto(MSG_FASTOPEN) to the host's 127.0.0.1:%d on it: %d (%s)\n", server_port, r, r < 0 ? strerror(errno) : "sent: connected in the host's network (escape)");
        if (r > 0) { long got = drain(s); printf("child: read %ld bytes from the host server\n", got); }
        exit(0);
    }
}

int main(int argc, char **argv) {
    mode = argc > 1 ? argv[1] : "throughput";
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bind(listener, (struct sockaddr *)&addr, sizeof addr);
    listen(listener, 16);
    socklen_t len = sizeof addr;
    getsockname(listener, (struct sockaddr *)&addr, &len);
    server_port = ntohs(addr.sin_port);
    if (fork() == 0) serve_bytes(listener);

    if (!strcmp(mode, "throughput")) {
        int d = socket(AF_INET, SOCK_STREAM, 0);
        connect(d, (struct sockaddr *)&addr, sizeof addr);
        double t = now();
        long got = drain(d);
        printf("direct: %ld MiB in %.3f s: %.0f MiB/s\n", got >> 20, now() - t, (got >> 20) / (now() - t));
        close(d);
    }
    fflush(stdout);  // the forks below must not print this buffer again
    int pair[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, pair);
    pid_t kid = fork();
    if (kid == 0) { close(pair[0]); child(pair[1]); exit(0); }
    close(pair[1]);
    int notify = recv_fd(pair[0]);
    int handled = 0;
    for (;;) {
        struct seccomp_notif req = {0};
        struct seccomp_notif_resp resp = {0};
        if (ioctl(notify, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0) break;  // child gone
        struct sockaddr_storage sa = {0};
        struct iovec local = {&sa, sizeof sa}, remote = {(void *)req.data.args[1], req.data.args[2] < sizeof sa ? req.data.args[2] : sizeof sa};
        ssize_t n = process_vm_readv(req.pid, &local, 1, &remote, 1, 0);
        resp.id = req.id;
        if (n < 0) { perror("process_vm_readv"); resp.error = -EPERM; ioctl(notify, SECCOMP_IOCTL_NOTIF_SEND, &resp); continue; }
        if (handled == 0 && sa.ss_family == AF_INET) {
            int out = socket(AF_INET, SOCK_STREAM, 0);
            if (connect(out, (struct sockaddr *)&sa, sizeof(struct sockaddr_in)) < 0) { resp.error = -errno; }
            else {
                struct seccomp_notif_addfd add = {.id = req.id, .flags = SECCOMP_ADDFD_FLAG_SETFD, .srcfd = out, .newfd = req.data.args[0]};
                int r = ioctl(notify, SECCOMP_IOCTL_NOTIF_ADDFD, &add);
                if (r < 0) { perror("ADDFD"); resp.error = -EPERM; }
                printf("supervisor: swapped a host socket into fd %llu (%d)\n", (unsigned long long)req.data.args[0], r);
            }
            close(out);
        } else {
            // Any later connect: let it through, as a lost race would.
            printf("supervisor: letting connect(family %d) through (CONTINUE)\n", sa.ss_family);
            resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
        }
        handled++;
        ioctl(notify, SECCOMP_IOCTL_NOTIF_SEND, &resp);
        fflush(stdout);
        if (!strcmp(mode, "unspec") && handled == 2) {
            char port[16] = {0};
            read(pair[0], port, sizeof port);
            if (atoi(port) > 0) {
                int probe = socket(AF_INET, SOCK_STREAM, 0);
                struct sockaddr_in p = {.sin_family = AF_INET, .sin_port = htons(atoi(port)), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
                int r = connect(probe, (struct sockaddr *)&p, sizeof p);
                printf("supervisor (host network): connect to 127.0.0.1:%s: %s\n", port, r ? strerror(errno) : "connected");
            }
        }
    }
    waitpid(kid, NULL, 0);
    kill(0, SIGTERM);
    return 0;
}
