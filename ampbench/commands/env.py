"""`ampbench env`: the environment fingerprint and whether AMP can be active here."""

from __future__ import annotations

from rich.console import Console


def print_env(console: Console) -> None:
    from ampbench.trackers import device

    fp = device.environment()
    for k, v in fp.model_dump().items():
        console.print(f"{k:14} {v}", markup=False)
    console.print(f"{'amp':14} {device.amp_support_summary()}", markup=False)


def has_gpu() -> bool:
    """`ampbench env --require-gpu`: whether Paddle sees a GPU here (nightly.sh refuses to run without)."""
    from ampbench.trackers import device

    return device.has_gpu()
