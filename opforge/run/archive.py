"""The archive: correct, measured kernels of earlier runs in this store, offered to a new run.

A new run on a task draws on it in two ways:
- seeds: the fastest earlier kernels of the *same* task (same reference source) join generation 0, so the tuner and
  the coder start where earlier runs stopped (re-measured here: a kernel's verdict on another device or from another
  store is no verdict here);
- inspirations: the fastest kernels of *related* tasks, ranked by the similarity of their references' compute ops
  (`evaluator.measure.task_work` records them) and op families, are shown to the coder beside the run's own elites.

Kernels imported from a dataset (`opforge dataset import`) have no verdict in this store: the task's own join
generation 0, where the evaluator measures them before anything builds on them, and related tasks' are shown to the
coder as inspirations without any claimed speed. Like measured kernels, they are offered only to runs of the backend
their record names (kept in their origin, `import:cpp`).

What was offered is written into the run's configuration, so `opforge show` can tell which candidate drew on which
archived kernel, and a run (or a leaderboard bench, `--no-archive`) can refuse the archive so its score is its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, replace
from typing import Any

from agents.proposal import Scored
from evaluator.candidate import Candidate
from agents.llm_coder import GPU_BACKENDS
from store import ArchiveEntry, CandidateRecord, Store, TaskRecord

MAX_SEEDS = 2
MAX_INSPIRATIONS = 3
MIN_SIMILARITY = 0.25
IMPORT_ORIGIN = "import"  # an imported kernel's origin is `import:<backend>` where its record names one, else this

# ATen op name fragments -> family; a task's families make e.g. relu and gelu related though their ops differ.
FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("attention", ("scaled_dot_product", "_flash_attention", "_efficient_attention")),
    ("conv", ("convolution", "conv1d", "conv2d", "conv3d", "conv_transpose")),
    ("matmul", ("mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "addmv", "mv", "dot", "einsum")),
    ("softmax", ("_softmax", "_log_softmax", "softmax", "log_softmax")),
    ("norm", ("native_layer_norm", "native_batch_norm", "native_group_norm", "_native_batch_norm_legit",
              "rms_norm", "_fused_rms_norm", "norm", "linalg_vector_norm", "rsqrt")),
    ("pool", ("max_pool", "avg_pool", "adaptive_avg_pool", "adaptive_max_pool")),
    ("loss", ("mse_loss", "nll_loss", "cross_entropy", "smooth_l1_loss", "huber_loss", "kl_div", "binary_cross")),
    ("reduction", ("sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "prod", "var", "std", "cumsum")),
    ("activation", ("relu", "gelu", "silu", "sigmoid", "tanh", "hardswish", "hardtanh", "leaky_relu", "elu", "mish",
                    "softplus", "clamp", "threshold", "erf", "exp", "log")),
    ("elementwise", ("add", "sub", "mul", "div", "pow", "where", "maximum", "minimum", "neg", "abs", "sqrt")),
)


def families(ops: Iterable[str]) -> frozenset[str]:
    found = set()
    for op in ops:
        for family, names in FAMILIES:
            if any(_matches(op, n) for n in names):
                found.add(family)
                break
    return frozenset(found)


def _matches(op: str, name: str) -> bool:
    """`addmm` is matmul and `max_pool2d_with_indices` pooling, but `mm` must not claim `mmul_x` nor `max` `maximum`."""
    return op.startswith(name) if len(name) >= 4 else op == name or op.startswith(name + "_")


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


def similarity(ops_a: Sequence[str], ops_b: Sequence[str]) -> float:
    """0..1: shared compute ops weigh most, shared op families (activation, norm, matmul...) the rest."""
    return 0.6 * _jaccard(frozenset(ops_a), frozenset(ops_b)) + 0.4 * _jaccard(families(ops_a), families(ops_b))


@dataclass(frozen=True, slots=True)
class Offer:
    seeds: tuple[ArchiveEntry, ...]
    inspirations: tuple[tuple[ArchiveEntry, float], ...]  # (entry, similarity), most similar first
    # Imported kernels no evaluator here has measured: this task's join generation 0 (and are measured there);
    # related tasks' are inspirations only, their claimed speed not shown.
    imported_seeds: tuple[tuple[TaskRecord, CandidateRecord], ...] = ()
    imported_inspirations: tuple[tuple[TaskRecord, CandidateRecord, float], ...] = ()

    def to_json(self) -> dict[str, Any]:
        def one(e: ArchiveEntry) -> dict[str, Any]:
            return {"candidate_id": e.candidate.id, "digest": e.candidate.digest, "task": e.task.name,
                    "run_id": e.evaluation.run_id, "speedup": e.speedup, "device": e.evaluation.result.device.name,
                    "verified": True}

        def imported(t: TaskRecord, c: CandidateRecord) -> dict[str, Any]:
            return {"candidate_id": c.id, "digest": c.digest, "task": t.name, "run_id": None, "speedup": None,
                    "device": None, "verified": False}
        return {"enabled": True,
                "seeds": [one(e) for e in self.seeds] + [imported(t, c) for t, c in self.imported_seeds],
                "inspirations": [{**one(e), "similarity": round(s, 3)} for e, s in self.inspirations]
                + [{**imported(t, c), "similarity": round(s, 3)} for t, c, s in self.imported_inspirations]}


def run_backend(config: Any) -> str | None:
    """The backend a run's kernels are written in, from its configuration (typed, or the stored mapping, where
    older versions named it in the LLM settings); None where it does not say."""
    if not isinstance(config, Mapping):
        return getattr(config, "backend", None)
    llm = config.get("llm")
    return config.get("backend") or (llm.get("backend") if isinstance(llm, Mapping) else None)


def find(store: Store, task: TaskRecord, device: str | None = None, backend: str | None = None) -> Offer:
    """What the archive holds for this task: its own earlier kernels, and kernels of the most related tasks (those on
    `device` preferred); only kernels of `backend` when given, so a native CPU run is not seeded with interpreted
    Triton kernels, nor a GPU run with C ones (`opforge.run.translation` offers those to the coder instead)."""
    entries = store.archive(backend=backend)
    seeds = sorted((e for e in entries if e.task.id == task.id), key=lambda e: -(e.speedup or 0.0))[:MAX_SEEDS]
    related: list[tuple[ArchiveEntry, float]] = []
    if task.ops:
        for e in entries:
            if e.task.id == task.id or not e.task.ops:
                continue
            score = similarity(task.ops, e.task.ops) + (0.05 if device and e.evaluation.result.device.name == device
                                                        else 0.0)
            if score >= MIN_SIMILARITY:
                related.append((e, score))
    related.sort(key=lambda pair: (-pair[1], -(pair[0].speedup or 0.0)))
    imports = [(t, c) for t, c in store.unverified(IMPORT_ORIGIN)
               if backend is None or _of_backend(imported_backend(c.origin), backend)]
    own = tuple((t, c) for t, c in imports if t.id == task.id)[:MAX_SEEDS]
    others: list[tuple[TaskRecord, CandidateRecord, float]] = []
    if task.ops:
        scored = [(t, c, similarity(task.ops, t.ops)) for t, c in imports if t.id != task.id and t.ops]
        others = sorted((x for x in scored if x[2] >= MIN_SIMILARITY), key=lambda x: -x[2])
    room = max(0, MAX_INSPIRATIONS - len(related))
    return Offer(tuple(seeds), tuple(related[:MAX_INSPIRATIONS]), own, tuple(others[:room]))


def import_origin(backend: str | None) -> str:
    """The origin an imported kernel is stored with (`opforge dataset import`): it keeps the backend its record
    claims, so that the archive offers it only to runs of that backend, as it does kernels measured here."""
    return f"{IMPORT_ORIGIN}:{backend}" if backend else IMPORT_ORIGIN


def imported_backend(origin: str) -> str | None:
    """The backend an imported kernel's record claimed (None: a version-1 record, which named none)."""
    return origin.partition(":")[2] or None


def _of_backend(claimed: str | None, backend: str) -> bool:
    """An imported kernel is offered to runs of the backend its record claims; a version-1 record claims none, and
    its kernels were GPU ones (Triton or CUDA: native kernels came later), as for verdicts stored without one."""
    return claimed == backend if claimed is not None else backend in GPU_BACKENDS


def only_seeds(offer: Offer, digests: Set[str]) -> Offer:
    """The offer with only the seeds whose sources are among `digests` (those the run's budget had room for)."""
    return replace(offer, seeds=tuple(e for e in offer.seeds if e.candidate.digest in digests),
                   imported_seeds=tuple((t, c) for t, c in offer.imported_seeds if c.digest in digests))


def seed_candidates(offer: Offer) -> list[Candidate]:
    """The offer's seeds as generation-0 candidates of the new run (imported ones are measured there first)."""
    return [Candidate(e.candidate.source, e.candidate.digest, origin="archive", parents=(),
                      note=f"archived: run {e.evaluation.run_id} #{e.candidate.id}, "
                           f"{e.speedup or 0:.2f}x on {e.evaluation.result.device.name}")
            for e in offer.seeds] + [c.candidate for _, c in offer.imported_seeds]


def inspirations_of(store: Store, archive_config: Mapping[str, Any] | None) -> list[Scored]:
    """The related-task kernels a run was offered (from its configuration), ready for the coder."""
    if not archive_config or not archive_config.get("enabled"):
        return []
    out = []
    for item in archive_config.get("inspirations", []):
        record = store.get_candidate(int(item["candidate_id"]))
        if not item.get("verified", True):  # imported, not measured here: its claimed speed is not shown
            out.append(Scored(record.candidate, None, task_name=str(item["task"])))
            continue
        verdicts = [ev.result for ev in store.evaluations_of(record.id) if ev.result.device.name == item.get("device")]
        out.append(Scored(record.candidate, verdicts[0] if verdicts else None, task_name=str(item["task"])))
    return out
