# task: relu
# expect: rejected
# beside: true
# reason: calls functions that no C or C++ runtime defines
# why: a load_c library that calls the CPython API of the process it is loaded into (PyGILState_Ensure,
#   PyRun_SimpleString, declared weak so that the link does not refuse them) to run Python from C, where no audit hook
#   or frame rule applies: the task's input generator, the harness's channel, its checks are all reachable. Ok before
#   the driver checked the library's undefined symbols (issue 33, class 7: reaching the harness from native code).
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
typedef int PyGILState_STATE;
extern PyGILState_STATE PyGILState_Ensure(void) __attribute__((weak));
extern void PyGILState_Release(PyGILState_STATE) __attribute__((weak));
extern int PyRun_SimpleString(const char*) __attribute__((weak));
static int patched = 0;
void relu(const float* restrict x, float* restrict out, int64_t n) {
    if (!patched && PyGILState_Ensure) {
        PyGILState_STATE g = PyGILState_Ensure();
        PyRun_SimpleString("import builtins; builtins._reached = True");
        PyGILState_Release(g);
        patched = 1;
    }
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""
lib = load_c("relu_cpython", SOURCE, functions=["relu"], flags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.relu(x, out, x.numel())
        return out
