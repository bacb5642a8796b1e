"""`CompileWatchCallback` for Lightning (`lightning.pytorch` or `pytorch_lightning`, whichever the
program uses): a bundle per `trainer.fit`, as `compilewatch.collect` writes it.

    trainer = Trainer(callbacks=[CompileWatchCallback(label="v2")])

The model name is the LightningModule's class unless given; the label, unless given, the logger's
name when it is not Lightning's default; the iteration period is marked at each of the trainer's
optimizer steps (`trainer.global_step`, so gradient accumulation counts as Lightning counts it).
Modules compiled before `fit` are timed too. On several ranks, rank 0 makes the bundle and
broadcasts its folder; each rank writes its own trace and timings, and rank 0 the manifest after a
barrier.
"""
from __future__ import annotations

import sys

from compilewatch.collectors.collect import DEFAULT_OUT
from compilewatch.collectors.in_process import Collection
from compilewatch.collectors.version import __version__


def _lightning():
    # A program that imported one of the two packages gets a callback of that one: the Trainer
    # accepts only callbacks of its own package.
    for name in ("lightning.pytorch", "pytorch_lightning"):
        if name in sys.modules:
            return sys.modules[name]
    try:
        import lightning.pytorch as pl
    except ImportError:
        import pytorch_lightning as pl
    return pl


_pl = _lightning()
TRAINER_NAME = f"{_pl.__name__.split('.')[0]}.Trainer"
_DEFAULT_LOGGER_NAMES = ("lightning_logs", "default", "", None)


class CompileWatchCallback(_pl.Callback):
    def __init__(self, model: str | None = None, label: str | None = None, out=DEFAULT_OUT, **collect_kwargs):
        """model, label: override what the trainer says; out: the bundles' folder; collect_kwargs:
        compilewatch.collect's (logs, trace, hooks, archive, inbox)."""
        super().__init__()
        self.model, self.label, self.out, self.collect_kwargs = model, label, out, collect_kwargs
        self.collection: Collection | None = None
        self.result = None
        self._step = 0

    def setup(self, trainer, pl_module, stage):
        if stage != "fit":
            return
        if self.collection is not None and self.collection.active:   # a fit that never tore down
            self.collection.finish(end_reason="crashed", exit_status=1)
        rank, world = trainer.global_rank, trainer.world_size
        collection = Collection(self.model or type(pl_module).__name__, self.label or _run_name(trainer), self.out,
                                collector=f"compilewatch lightning callback {__version__}",
                                manifest_extra={"trainer": TRAINER_NAME}, rank=rank, world_size=world,
                                **self.collect_kwargs)
        if world > 1:
            folder = trainer.strategy.broadcast(str(collection.start().bundle) if rank == 0 else None, src=0)
            if rank != 0:
                collection.join = folder
                collection.start()
        else:
            collection.start()
        self.collection, self._step = collection, trainer.global_step

    def on_fit_start(self, trainer, pl_module):
        if self.collection is not None:
            self.collection.time_modules(pl_module)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if self.collection is not None and trainer.global_step != self._step:
            self._step = trainer.global_step          # an optimizer step, not every batch
            self.collection.mark_step(TRAINER_NAME)

    def on_exception(self, trainer, pl_module, exception):
        self._finish(trainer, exception, barrier=False)

    def teardown(self, trainer, pl_module, stage):
        if stage == "fit":
            self._finish(trainer, None, barrier=trainer.world_size > 1)

    def _finish(self, trainer, exc, barrier):
        if self.collection is None or not self.collection.active:
            return
        wait = (lambda: trainer.strategy.barrier("compilewatch")) if barrier else None
        self.result = self.collection.finish(exc, before_manifest=wait)


def _run_name(trainer) -> str | None:
    logger = trainer.logger
    name = getattr(logger, "name", None) if logger is not None else None
    return None if name in _DEFAULT_LOGGER_NAMES else str(name)
