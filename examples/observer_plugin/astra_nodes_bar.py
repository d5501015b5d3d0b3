"""An observer plugin written against astra's documented observer API alone: a
progress bar of the ET nodes a run has done, and one summary line at the end.

It uses nothing but the three observer hooks of :mod:`astra_core.hookspecs`
and what they are given: a :class:`~astra_core.system.view.RunView` (the run,
read-only), :class:`~astra_core.system.view.ProgressSample` reports, and the
frozen :class:`~astra_core.results.RunResult`. The bar is rich's (a dependency
of astra already); any other library would do.

Load it by module name, without packaging::

    ASTRA_PLUGINS=astra_nodes_bar PYTHONPATH=examples/observer_plugin astra run ...

or register an instance on a plugin manager from Python::

    pm = make_plugin_manager()
    pm.register(NodesBar(console))
    astra.simulate(..., plugin_manager=pm)
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from astra.plugin import hookimpl


class NodesBar:
    """A bar of ET nodes done over the simulated ranks' ET nodes, on ``console``
    (default: stderr). ``samples`` keeps every progress report it was given."""

    def __init__(self, console: Console | None = None):
        self.console = console or Console(stderr=True)
        self.samples: list = []
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    @hookimpl
    def astra_run_started(self, run) -> None:
        self.samples = []
        self._bar = Progress(
            TextColumn(f"[bold]{run.npus_count} NPUs on {run.backend_name}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("ET nodes"),
            TimeElapsedColumn(),
            console=self.console,
        )
        self._bar.start()
        self._task = self._bar.add_task("nodes", total=None)

    @hookimpl
    def astra_run_progress(self, run, progress) -> None:
        self.samples.append(progress)
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=progress.nodes_done, total=progress.nodes_total)

    @hookimpl
    def astra_run_finished(self, run, report) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        simulated = len(run.simulated_ranks)
        self.console.print(
            f"step {report.step_ns / 1e6:,.3f} ms: {report.messages:,} messages, "
            f"{simulated} of {run.npus_count} ranks simulated"
        )


#: The instance that loading this module as a plugin registers (its bound methods
#: carry the hook markers).
BAR = NodesBar()
astra_run_started = BAR.astra_run_started
astra_run_progress = BAR.astra_run_progress
astra_run_finished = BAR.astra_run_finished
