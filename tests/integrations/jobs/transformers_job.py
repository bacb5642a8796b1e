"""A tiny Hugging Face Trainer run on the CPU: GPT-2 built from a config (one layer, nothing
downloaded), compiled by the Trainer (`torch_compile=True`), for the callback's tests:

    python transformers_job.py --version v1|v2 --out DIR [--no-callback]   (one process: --devices is not read)

Both versions break the graph where transformers' loss logs a warning; v2 adds a graph break in the
first block's MLP (a forward pre-hook, traced by dynamo). The label is
`run_name` (the version); two batches per optimizer step, so the trainer's step count (6) is not
the number of forward calls (12).
"""
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, GPT2Config, Trainer, TrainingArguments

from compilewatch.integrations.transformers import CompileWatchCallback
from job_args import job_args  # beside this script

STEPS, ACCUMULATE, BATCH, SEQ = 6, 2, 4, 16


def main():
    args = job_args()
    torch.manual_seed(0)
    config = GPT2Config(n_layer=1, n_embd=32, n_head=2, n_positions=SEQ, vocab_size=128, bos_token_id=0, eos_token_id=0)
    model = AutoModelForCausalLM.from_config(config)
    if args.version == "v2":
        model.transformer.h[0].mlp.register_forward_pre_hook(lambda module, inputs: torch._dynamo.graph_break())
    tokens = torch.randint(0, config.vocab_size, (STEPS * ACCUMULATE * BATCH, SEQ))
    data = [{"input_ids": t, "labels": t} for t in tokens]
    training = TrainingArguments(
        output_dir=str(Path(args.out) / "hf"), run_name=args.version, max_steps=STEPS,
        per_device_train_batch_size=BATCH, gradient_accumulation_steps=ACCUMULATE, use_cpu=True,
        torch_compile=True, torch_compile_backend="aot_eager", report_to=[], save_strategy="no",
        logging_strategy="no", disable_tqdm=True, dataloader_num_workers=0)
    callbacks = [] if args.no_callback else [CompileWatchCallback(out=args.out)]
    trainer = Trainer(model=model, args=training, train_dataset=data, callbacks=callbacks)
    trainer.train()
    print("global_step", trainer.state.global_step)


if __name__ == "__main__":
    main()
