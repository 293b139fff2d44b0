"""KL divergence KL(q || p) between two categorical distributions given as logits, batch-mean reduction (the loss
of knowledge distillation: student logits p, teacher logits q). The output is a 0-d scalar.

Both sides are normalised with log_softmax inside the forward, so any real-valued inputs are valid.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 1984
CLASSES = 4096

# Natively the sizes above are the benchmark shape; under Triton's interpreter (CPU) the evaluator uses these.
INTERPRETER_SHAPE = {"BATCH": 64}
SHAPES = [{"BATCH": 67, "CLASSES": 1000}, {"BATCH": 3, "CLASSES": 4099}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, student_logits: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
        log_p = F.log_softmax(student_logits, dim=-1)
        log_q = F.log_softmax(teacher_logits, dim=-1)
        return F.kl_div(log_p, log_q, reduction="batchmean", log_target=True)


def get_inputs():
    return [torch.randn(BATCH, CLASSES) * 2.0, torch.randn(BATCH, CLASSES) * 2.0]


def get_init_inputs():
    return []
