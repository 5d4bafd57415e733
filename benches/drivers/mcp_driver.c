// A minimal MCP client for measuring a stdio path with as little client-side cost as possible
// (the benches' own client is Rust and allocates per call; at a few µs a call that shows).
//
//   cc -O2 -o /tmp/mcp_driver benches/drivers/mcp_driver.c
//   /tmp/mcp_driver seq N TOOL COMMAND...    N sequential calls, each answer read before the next
//   /tmp/mcp_driver pipe N TOOL COMMAND...   N calls with 64 in flight
//
// It starts COMMAND with its stdin and stdout on pipes, sends `initialize` (2025-06-18) and, for a
// gateway's tool name (one with `__`), a `tools/list`, then calls TOOL with `{"KEY": "hello N"}`
// (KEY is `$ARGKEY`, else `text`). `seq` times 2,000 warm-up calls plus N and prints the p10, p50
// and p90 of the N; then, for every thread of COMMAND's process, the CPU time it used
// (`/proc/PID/task/*/schedstat`) and the process's voluntary and involuntary context switches
// (how often it slept, and how often it was preempted). `pipe` prints calls a second.
// docs/run.md ("One commit a call, and polling before sleeping") has figures taken with it.
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { WARM_UP = 2000, IN_FLIGHT = 64 };

static int to_child, from_child;
static char buffer[1 << 16], line[1 << 16];
static size_t buffered;

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void send_all(const char *text, size_t len) {
    while (len > 0) {
        ssize_t n = write(to_child, text, len);
        if (n <= 0) { perror("write"); exit(1); }
        text += n;
        len -= (size_t)n;
    }
}

/// The next line from the child into `line`.
static void read_line(void) {
    for (;;) {
        char *newline = memchr(buffer, '\n', buffered);
        if (newline) {
            size_t n = (size_t)(newline - buffer) + 1;
            memcpy(line, buffer, n);
            line[n] = 0;
            memmove(buffer, buffer + n, buffered - n);
            buffered -= n;
            return;
        }
        if (buffered == sizeof buffer) { fprintf(stderr, "line too long\n"); exit(1); }
        ssize_t n = read(from_child, buffer + buffered, sizeof buffer - buffered);
        if (n <= 0) { fprintf(stderr, "the command closed its output\n"); exit(1); }
        buffered += (size_t)n;
    }
}

/// The next answer (a line with an id), skipping notifications.
static void read_answer(void) {
    do read_line(); while (!strstr(line, "\"id\""));
}

static void call(int id, const char *tool) {
    const char *key = getenv("ARGKEY") ? getenv("ARGKEY") : "text";
    char message[512];
    int len = snprintf(message, sizeof message,
        "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{\"name\":\"%s\","
        "\"arguments\":{\"%s\":\"hello %d\"}}}\n", id, tool, key, id);
    send_all(message, (size_t)len);
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void print_process(pid_t pid) {
    char path[512], text[512];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *tasks = opendir(path);
    for (struct dirent *task; tasks && (task = readdir(tasks));) {
        if (task->d_name[0] == '.') continue;
        char name[64] = "?";
        unsigned long long ns = 0;
        snprintf(path, sizeof path, "/proc/%d/task/%s/comm", pid, task->d_name);
        FILE *f = fopen(path, "r");
        if (f) { if (fscanf(f, "%63s", name) != 1) strcpy(name, "?"); fclose(f); }
        snprintf(path, sizeof path, "/proc/%d/task/%s/schedstat", pid, task->d_name);
        f = fopen(path, "r");
        if (f) { if (fscanf(f, "%llu", &ns) != 1) ns = 0; fclose(f); }
        printf("  thread %s: %.1f ms of CPU\n", name, ns / 1e6);
    }
    if (tasks) closedir(tasks);
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *status = fopen(path, "r");
    while (status && fgets(text, sizeof text, status))
        if (strstr(text, "ctxt_switches")) printf("  %s", text);
    if (status) fclose(status);
}

int main(int argc, char **argv) {
    if (argc < 5 || (strcmp(argv[1], "seq") && strcmp(argv[1], "pipe"))) {
        fprintf(stderr, "usage: %s seq|pipe N TOOL COMMAND...\n", argv[0]);
        return 2;
    }
    int count = atoi(argv[2]);
    const char *tool = argv[3];
    int in[2], out[2];
    if (pipe(in) || pipe(out)) { perror("pipe"); return 1; }
    pid_t child = fork();
    if (child == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        execvp(argv[4], argv + 4);
        _exit(127);
    }
    to_child = in[1];
    from_child = out[0];
    close(in[0]);
    close(out[1]);
    const char *hello =
        "{\"jsonrpc\":\"2.0\",\"id\":\"init\",\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
        "\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"mcp_driver\",\"version\":\"1\"}}}\n"
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";
    send_all(hello, strlen(hello));
    read_answer();
    if (strstr(tool, "__")) {
        const char *list = "{\"jsonrpc\":\"2.0\",\"id\":\"list\",\"method\":\"tools/list\"}\n";
        send_all(list, strlen(list));
        read_answer();
    }
    if (!strcmp(argv[1], "pipe")) {
        int sent = 0, received = 0;
        double started = now_us();
        while (received < count) {
            while (sent < count && sent - received < IN_FLIGHT) call(sent++, tool);
            read_answer();
            received++;
        }
        printf("throughput %.0f calls/s\n", count / ((now_us() - started) / 1e6));
    } else {
        double *times = malloc(sizeof(double) * (size_t)count);
        for (int i = 0; i < count + WARM_UP; i++) {
            double started = now_us();
            call(i, tool);
            read_answer();
            if (i >= WARM_UP) times[i - WARM_UP] = now_us() - started;
        }
        print_process(child);
        qsort(times, (size_t)count, sizeof(double), by_value);
        printf("p50 %.1f us  p10 %.1f  p90 %.1f\n", times[count / 2], times[count / 10],
               times[count * 9 / 10]);
        free(times);
    }
    close(to_child);
    waitpid(child, NULL, 0);
    return 0;
}
