"""A small training job that reports its own clock: the seconds from its first line to the end of
its first optimizer step, as one JSON line on stdout ({"first_step_s": ...}). What
`compilewatch collect` measures (compile_time: forward + backward + runtime autotuning, and
time_to_first_step) is checked against it by check.py.

Usage: python train_clock.py [--mode default|max-autotune] [--steps N]"""
import time

T0 = time.time()   # the script's own clock starts here, before torch is imported

import argparse  # noqa: E402
import json  # noqa: E402

import torch  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--mode", default="default")
p.add_argument("--steps", type=int, default=20)
args = p.parse_args()
dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
layer = torch.nn.TransformerEncoderLayer(d_model=512, nhead=8, dim_feedforward=2048, batch_first=True)
model = torch.nn.TransformerEncoder(layer, num_layers=4).to(dev)
head = torch.nn.Linear(512, 1000).to(dev)
params = list(model.parameters()) + list(head.parameters())
opt = torch.optim.AdamW(params, lr=1e-4)


@torch.compile(mode=None if args.mode == "default" else args.mode)
def train_step(x, y):
    return torch.nn.functional.cross_entropy(head(model(x)).flatten(0, 1), y.flatten())


for i in range(args.steps):
    x = torch.randn(16, 256, 512, device=dev)
    y = torch.randint(0, 1000, (16, 256), device=dev)
    loss = train_step(x, y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if i == 0:
        if dev == "cuda":
            torch.cuda.synchronize()
        print(json.dumps({"first_step_s": time.time() - T0, "mode": args.mode}), flush=True)
