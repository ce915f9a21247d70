"""What a training run reports: metrics.jsonl, loss.png and Weights & Biases.

    log = RunLog(run_dir, cfg_dict, resume_step=None, wandb_cfg=cfg.log)
    log.write({"step": 10, "loss": 3.2, "lr": 1e-3, "tokens_per_s": 5e3})
    log.close()                              # also draws loss.png and heads.png (training/plots.py)
    speed = Speedometer(flops_per_token, peak, devices)  # tokens/s and MFU of the training steps alone

metrics.jsonl has one JSON object per line: per logged step `{"step", "loss", "lr", "tokens_per_s", ...}`,
per evaluation `{"kind": "eval", "step", "train_loss", "val_loss", "heads", ...}` ("heads": every head's role
scores, inspection.views.roles.roles_record, and the "seconds" they took) and a last
`{"kind": "final", "val_loss", "val_bpc", "best_val_bpc", ...}`.
"""

import json
import os
import sys
import time
from pathlib import Path

from cli.messages import messages
from storage.atomic import DiskError, write_failure, write_text_atomic
from storage.checkpoint import read_metrics  # noqa: F401  (where the run's other readers import it from)
from training.hardware import mfu
from training.plots import plot_heads, plot_losses


class Speedometer:
    """Tokens per second of the training steps, and their MFU: evaluations and saves are `pause`d out."""

    def __init__(self, flops_per_token: float, peak: float, devices: int):
        """`peak`: one device's FLOP/s; `devices`: how many the ranks run on (ranks that share a GPU count it once)."""
        self.flops_per_token, self.peak, self.devices = flops_per_token, peak, devices
        self.t_lap, self.lap_tokens = time.perf_counter(), 0
        self.seconds, self.tokens = 0.0, 0  # every lap so far

    def add(self, tokens: int) -> None:
        """A step trained `tokens` tokens (all ranks together)."""
        self.lap_tokens += tokens

    def pause(self, seconds: float) -> None:
        """`seconds` just spent on something other than training (an evaluation and its save)."""
        self.t_lap += seconds

    def figures(self, tokens: int, seconds: float) -> dict:
        rate = round(tokens / seconds, 1) if seconds else None
        mfu_now = mfu(self.flops_per_token, rate / self.devices, self.peak) if rate else None
        return {"tokens_per_s": rate} | ({"mfu": mfu_now} if mfu_now is not None else {})

    def lap(self) -> dict:
        """{"tokens_per_s", "mfu"} since the last lap (mfu only when the peak is known); a new lap starts."""
        now = time.perf_counter()
        seconds, tokens = now - self.t_lap, self.lap_tokens
        self.seconds, self.tokens = self.seconds + seconds, self.tokens + tokens
        self.t_lap, self.lap_tokens = now, 0
        return self.figures(tokens, seconds)

    def overall(self) -> dict:
        """The same over every lap of this process."""
        return self.figures(self.tokens, self.seconds)


class RunLog:
    """Appends records to metrics.jsonl (and to wandb when enabled)."""

    def __init__(self, run_dir: Path, config: dict, resume_step: int | None, wandb_cfg):
        self.path, self.run_dir = run_dir / "metrics.jsonl", run_dir
        damaged = []
        kept = [] if resume_step is None else [
            r for r in read_metrics(self.path, damaged) if r.get("step", 0) <= resume_step and r.get("kind") != "final"
        ]  # fmt: skip
        if damaged:
            say = messages()
            text = say("train.damaged" if len(damaged) > 1 else "train.damaged_one", path=self.path, n=len(damaged))
            print(say("warning", text=text), file=sys.stderr)
        # a resumed run re-logs the steps after its checkpoint, so drop what the crashed run logged after it
        write_text_atomic(self.path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept))
        self.file = open(self.path, "a", encoding="utf-8")
        self.wandb = start_wandb(wandb_cfg, config, run_dir) if wandb_cfg.wandb else None

    def write(self, record: dict) -> None:
        try:
            self.file.write(json.dumps(record, ensure_ascii=False) + "\n")
            self.file.flush()
        except OSError as e:
            raise DiskError(f"cannot write {self.path} ({write_failure(e)}); free some disk space, then continue "
                            f"with --resume") from None
        if self.wandb is not None:
            self.wandb.log({k: v for k, v in record.items() if isinstance(v, (int, float))}, step=record.get("step"))

    def close(self, plot: bool = True) -> None:
        self.file.close()
        if plot:
            records = read_metrics(self.path)
            plot_losses(records, self.run_dir / "loss.png")  # in the run's language: the terminal's
            plot_heads(records, self.run_dir / "heads.png")
        if self.wandb is not None:
            self.wandb.finish()


def start_wandb(wandb_cfg, config: dict, run_dir: Path):
    """A wandb run; offline (synced later with `wandb sync`) when no API key is configured, so it never prompts."""
    import wandb

    netrc = Path.home() / ".netrc"
    logged_in = os.environ.get("WANDB_API_KEY") or (netrc.exists() and "api.wandb.ai" in netrc.read_text(errors="ignore"))
    if not logged_in:
        os.environ.setdefault("WANDB_MODE", "offline")
    return wandb.init(
        project=wandb_cfg.wandb_project, name=wandb_cfg.wandb_run_name or run_dir.name, config=config, dir=str(run_dir)
    )
