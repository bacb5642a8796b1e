"""The command line both jobs take: --version v1|v2, --out DIR (the callback's bundles),
--no-callback, and --devices N (CPU processes; the Lightning job runs DDP on gloo when N > 1)."""
import argparse


def job_args():
    p = argparse.ArgumentParser()
    p.add_argument("--version", default="v1")
    p.add_argument("--out", required=True)
    p.add_argument("--no-callback", action="store_true")
    p.add_argument("--devices", type=int, default=1)
    return p.parse_args()
