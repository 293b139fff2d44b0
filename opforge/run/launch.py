"""The one way to build the search for a stored run: `optimize` (new or resumed), a job worker and a bench all call
`search_for_run`, so a run is driven by the configuration it was started with and nothing else."""

from __future__ import annotations

from collections.abc import Callable

from agents.agent import AgentCall
from evaluator.driver.pool import Runner
from evaluator.task import Task
from opforge.run import archive
from opforge.run.config import RunConfig
from opforge.run.confirm import ConfirmPolicy
from opforge.run.proposers import make_proposer
from opforge.run.search import Progress, Search, SearchSettings
from opforge.run.start import Budget
from opforge.run.strategy import StrategyConfig
from store import RunRecord, Store


def confirm_policy(config: RunConfig) -> ConfirmPolicy:
    """How the run re-measures its fastest kernels before it reports its best (confirm.py), as it was started."""
    return ConfirmPolicy(config.confirm_top, config.confirm_repeats)


def run_config(run: RunRecord) -> RunConfig:
    """The run's stored configuration, typed (RunConfigError, one sentence, for one this version cannot read)."""
    return RunConfig.from_json(run.config, f"run {run.id}")


def search_for_run(store: Store, run: RunRecord, task: Task, runner: Runner, *, budget: Budget | None = None,
                   llm_base_url: str | None = None, on_progress: Callable[[Progress], None] | None = None,
                   should_stop: Callable[[], str | None] | None = None,
                   on_call: Callable[[AgentCall], None] | None = None) -> Search:
    """The search that continues `run` where the store left it. `budget` replaces the stored one for this invocation
    (`optimize --resume --time-limit-s`); `llm_base_url` points the LLM agents at another endpoint (a worker's own).
    The strategy's random seed moves on with each evaluation recorded, so a resumed run does not replay its draws.
    Once the search is over, the run's fastest kernels are re-measured (`confirm_policy`) and the best it reports is
    the best confirmed figure."""
    config = run_config(run)
    proposing = make_proposer(store, run, config, llm_base_url=llm_base_url, on_call=on_call)
    settings = SearchSettings(
        eval_cfg=config.eval,
        budget=budget or Budget.from_json(run.budget),
        strategy=StrategyConfig(n_islands=config.islands, seed=config.seed + run.evaluated),
        archive_inspirations=tuple(archive.inspirations_of(store, config.archive)),
        confirm=confirm_policy(config),
    )
    return Search(store, run.id, task, proposing, runner, settings, on_progress=on_progress, should_stop=should_stop)
