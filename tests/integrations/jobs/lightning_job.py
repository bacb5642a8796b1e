"""A tiny Lightning run on the CPU with a compiled module, for the callback's tests:

    python lightning_job.py --version v1|v2 --out DIR [--no-callback] [--devices 2]

v2 adds a graph break in the compiled module's forward (the regression the review must find). The
label is the logger's name (the version); two batches per optimizer step, so the trainer's step
count (8) is not the number of compiled calls (16).
"""
from pathlib import Path

import pytorch_lightning as pl
import torch
from pytorch_lightning.loggers import CSVLogger
from torch.utils.data import DataLoader, TensorDataset

from compilewatch.integrations.lightning import CompileWatchCallback
from job_args import job_args  # beside this script

STEPS, ACCUMULATE = 8, 2


class Net(torch.nn.Module):
    def __init__(self, version):
        super().__init__()
        self.version = version
        self.inp, self.out = torch.nn.Linear(16, 32), torch.nn.Linear(32, 1)

    def forward(self, x):
        h = torch.relu(self.inp(x))
        if self.version == "v2":
            torch._dynamo.graph_break()
        return self.out(h)


class TinyRegressor(pl.LightningModule):
    def __init__(self, version):
        super().__init__()
        self.net = torch.compile(Net(version), backend="aot_eager")

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main():
    args = job_args()
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(STEPS * ACCUMULATE * 4, 16), torch.randn(STEPS * ACCUMULATE * 4, 1))
    callbacks = [] if args.no_callback else [CompileWatchCallback(out=args.out)]
    ddp = {"strategy": "ddp", "devices": args.devices} if args.devices > 1 else {"devices": 1}
    trainer = pl.Trainer(max_steps=STEPS, accumulate_grad_batches=ACCUMULATE, accelerator="cpu", **ddp,
                         logger=CSVLogger(Path(args.out) / "logs", name=args.version), callbacks=callbacks,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(TinyRegressor(args.version), DataLoader(data, batch_size=4))
    print("global_step", trainer.global_step)


if __name__ == "__main__":
    main()
