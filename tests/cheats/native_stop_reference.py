# task: poly_sized
# expect: crashed
# beside: true
# config: sandbox="process"
# why: without bubblewrap's PID namespace the reference's worker is visible to the candidate's and runs as the same
#   user, whom the kernel lets signal it: on its first call, native code finds the reference's zygote in /proc (its
#   command line, or as the sibling of its own zygote where `opforge eval` forked it from the driver) and its workers
#   (the zygote's children), then a 1 ms SIGALRM timer stops them (SIGSTOP) on one tick
#   and lets them go on (SIGCONT) on the next, once the candidate has made no call for 20 ms (the other side's
#   blocks): the reference's timed calls take about twice their time. A few microseconds of CPU a tick: the idle
#   checks see nothing. The kernel itself is honest. Before the worker's seccomp filter killed a process signalling
#   another (evaluator/sandbox/syscall_filter.py): ok at 8.74-9.46x, where the same kernel without the signals read 5.31-6.21x
#   (3 pairs, alternated). Under bubblewrap the reference's worker is outside the candidate's PID namespace.
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#define _GNU_SOURCE
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static pid_t workers[16];
static int n_workers, started, stopped;
static volatile int64_t last_call_ns;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int is_reference_zygote(const char* pid) {
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%s/cmdline", pid);
    FILE* f = fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    int zygote = 0, reference = 0;
    for (size_t i = 0; i < n; i += strlen(line + i) + 1) {
        zygote |= strcmp(line + i, "evaluator.worker.zygote") == 0;
        reference |= strcmp(line + i, "reference") == 0;
    }
    return zygote && reference;
}

static long parent_of(long pid) {
    char path[64];
    long ppid = 0;
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE* f = fopen(path, "r");
    if (!f) return 0;
    if (fscanf(f, "%*d (%*[^)]) %*c %ld", &ppid) != 1) ppid = 0;
    fclose(f);
    return ppid;
}

static void add_children(long pid) {
    char path[96];
    snprintf(path, sizeof path, "/proc/%ld/task/%ld/children", pid, pid);
    FILE* f = fopen(path, "r");
    if (!f) return;
    for (long child; n_workers < 16 && fscanf(f, "%ld", &child) == 1;) workers[n_workers++] = (pid_t)child;
    fclose(f);
}

/* the reference's zygote is the driver's other child: found by its command line where it was exec'd, and as a
   sibling of this worker's zygote where the driver forked it (`opforge eval`: its command line is the driver's) */
static void find_reference(void) {
    DIR* d = opendir("/proc");
    if (!d) return;
    long zygote = (long)getppid(), driver = parent_of(zygote);
    for (struct dirent* e; (e = readdir(d));) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        long pid = atol(e->d_name);
        int sibling = driver > 1 && pid != zygote && parent_of(pid) == driver;
        if (sibling || is_reference_zygote(e->d_name)) add_children(pid);
    }
    closedir(d);
}

static void tick(int sig) {
    (void)sig;
    int stop = !stopped && now_ns() - last_call_ns > 20000000;
    for (int i = 0; i < n_workers; ++i) kill(workers[i], stop ? SIGSTOP : SIGCONT);
    stopped = stop;
}

void poly(const float* restrict x, float* restrict out, int64_t n) {
    last_call_ns = now_ns();
    if (!started) {  /* the first call is a correctness trial: the reference's worker runs already */
        started = 1;
        find_reference();
        struct sigaction sa = {0};
        sa.sa_handler = tick;
        sa.sa_flags = SA_RESTART;
        sigaction(SIGALRM, &sa, 0);
        struct itimerval every = {{0, 1000}, {0, 1000}};
        setitimer(ITIMER_REAL, &every, 0);
    }
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) out[i] = (x[i] > 0.0f ? x[i] : 0.0f) * 2.0f + x[i] * x[i] - 1.0f;
    last_call_ns = now_ns();
}
"""
lib = load_c("stop_reference", SOURCE, functions=["poly"], flags=["-O3", "-march=native", "-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.poly(x, out, x.numel())
        return out
