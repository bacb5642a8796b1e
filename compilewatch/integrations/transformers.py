"""`CompileWatchCallback` for the Hugging Face `Trainer`: a bundle per `trainer.train()`, as
`compilewatch.collect` writes it.

    Trainer(model, args, train_dataset=ds, callbacks=[CompileWatchCallback()])

The model name is the config's name or path, else its model type (`gpt2`), unless given; the label
is `TrainingArguments.run_name` unless given; the iteration period is marked at each of the
trainer's optimizer steps (`on_step_end`, once per `gradient_accumulation_steps` batches). On
several processes each writes its own trace and timings; the main process makes the bundle,
broadcasts its folder (through accelerate) and writes the manifest after the others.
"""
from __future__ import annotations

from transformers import TrainerCallback

from compilewatch.collectors.collect import DEFAULT_OUT
from compilewatch.collectors.in_process import Collection
from compilewatch.collectors.version import __version__

TRAINER_NAME = "transformers.Trainer"


class CompileWatchCallback(TrainerCallback):
    def __init__(self, model: str | None = None, label: str | None = None, out=DEFAULT_OUT, **collect_kwargs):
        """model, label: override what the trainer says; out: the bundles' folder; collect_kwargs:
        compilewatch.collect's (logs, trace, hooks, archive, inbox)."""
        self.model, self.label, self.out, self.collect_kwargs = model, label, out, collect_kwargs
        self.collection: Collection | None = None
        self.result = None

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if self.collection is not None and self.collection.active:   # a train() that raised
            self.collection.finish(end_reason="crashed", exit_status=1)
        rank, world = args.process_index, args.world_size
        collection = Collection(self.model or _model_name(model), self.label or args.run_name or None, self.out,
                                collector=f"compilewatch transformers callback {__version__}",
                                manifest_extra={"trainer": TRAINER_NAME}, rank=rank, world_size=world,
                                **self.collect_kwargs)
        if world > 1:
            from accelerate.utils import broadcast_object_list
            folder = [str(collection.start().bundle) if rank == 0 else None]
            broadcast_object_list(folder, from_process=0)
            if rank != 0:
                collection.join = folder[0]
                collection.start()
        else:
            collection.start()
        if model is not None:
            collection.time_modules(model)
        self.collection = collection

    def on_step_end(self, args, state, control, **kwargs):
        if self.collection is not None:
            self.collection.mark_step(TRAINER_NAME)

    def on_train_end(self, args, state, control, **kwargs):
        if self.collection is None or not self.collection.active:
            return
        wait = None
        if args.world_size > 1:
            from accelerate.utils import wait_for_everyone
            wait = wait_for_everyone
        self.result = self.collection.finish(before_manifest=wait)


def _model_name(model) -> str | None:
    config = getattr(model, "config", None)
    name = getattr(config, "name_or_path", None) or getattr(config, "model_type", None)
    return name or (type(model).__name__ if model is not None else None)
