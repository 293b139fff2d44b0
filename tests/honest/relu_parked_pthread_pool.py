# task: relu_sized
# expect: ok
# max-abs-error: 0
# why: honest native C kernel through load_c with a pool of its own pthreads, started at import and parked on a
#   condition variable between calls: one thread fewer than the threads both sides get (the calling thread takes the
#   last share), so no more threads compute at once than the reference's. Each call wakes the pool, does its own
#   share, and waits until every share is written before it returns; between calls the threads use no CPU.
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <pthread.h>
#include <stdint.h>

#define MAX_WORKERS 63
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER, done = PTHREAD_COND_INITIALIZER;
static pthread_t workers[MAX_WORKERS];
static int n_workers = 0;
static unsigned long generation = 0;
static int pending = 0;
static const float* job_x;
static float* job_out;
static int64_t job_n;

static void relu_share(const float* restrict x, float* restrict out, int64_t n, int part, int parts) {
    int64_t begin = n * part / parts, end = n * (part + 1) / parts;
    for (int64_t i = begin; i < end; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

static void* worker(void* arg) {
    int part = (int)(intptr_t)arg;
    unsigned long seen = 0;
    pthread_mutex_lock(&mu);
    for (;;) {
        while (generation == seen) pthread_cond_wait(&wake, &mu);  /* parked: no CPU until the next call */
        seen = generation;
        const float* x = job_x;
        float* out = job_out;
        int64_t n = job_n;
        int parts = n_workers + 1;
        pthread_mutex_unlock(&mu);
        relu_share(x, out, n, part, parts);
        pthread_mutex_lock(&mu);
        if (--pending == 0) pthread_cond_signal(&done);
    }
    return 0;
}

int64_t start_pool(int64_t threads) {
    pthread_mutex_lock(&mu);
    while (n_workers < threads - 1 && n_workers < MAX_WORKERS) {
        if (pthread_create(&workers[n_workers], 0, worker, (void*)(intptr_t)(n_workers + 1)) != 0) break;
        ++n_workers;
    }
    int64_t started = n_workers;
    pthread_mutex_unlock(&mu);
    return started;
}

void relu(const float* x, float* out, int64_t n) {
    pthread_mutex_lock(&mu);
    job_x = x; job_out = out; job_n = n;
    pending = n_workers;
    ++generation;
    int parts = n_workers + 1;
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&mu);
    relu_share(x, out, n, 0, parts);
    pthread_mutex_lock(&mu);
    while (pending > 0) pthread_cond_wait(&done, &mu);  /* every share written before the call returns */
    pthread_mutex_unlock(&mu);
}
"""
lib = load_c("relu_parked_pool", SOURCE, functions=["start_pool", "relu"], flags=["-O3", "-march=native"])
lib.start_pool(torch.get_num_threads())  # one thread fewer than both sides get: the caller computes too


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.relu(x, out, x.numel())
        return out
