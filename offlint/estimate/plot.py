"""`--plot out.png`: the what-if table as stacked bars (one bar per option, one colour per kind of memory),
with the device's usable capacity as a line. matplotlib is an optional extra (`pip install 'offlint[estimate]'`)."""

from __future__ import annotations

from pathlib import Path

from offlint.estimate.devices import GIB, Device
from offlint.estimate.whatif import Option

KINDS = (("weights", "weights"), ("grads", "gradients"), ("optimizer", "optimizer states"),
         ("activations", "activations"), ("allowance", "allowance"))


class PlotError(ValueError):
    pass


def plot(options: list[Option], device: Device, title: str, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotError("--plot needs matplotlib: pip install 'offlint[estimate]'") from None
    labels = [("* " if o.cheapest else "") + f"{o.group}: {o.label}" for o in options]
    figure, axes = plt.subplots(figsize=(max(8.0, 0.45 * len(options) + 3), 6.5))
    bottoms = [0.0] * len(options)
    for kind, name in KINDS:
        heights = [o.result.peak.of(kind) / GIB for o in options]
        axes.bar(range(len(options)), heights, bottom=bottoms, label=name)
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    axes.axhline(device.usable_bytes / GIB, color="black", linestyle="--", linewidth=1,
                 label=f"{device.name} usable ({device.usable_bytes / GIB:.1f} GiB)")
    axes.set_xticks(range(len(options)))
    axes.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
    axes.set_ylabel("peak GiB on one GPU")
    axes.set_title(title, fontsize=9)
    axes.legend(fontsize=7)
    figure.tight_layout()
    try:
        figure.savefig(path, dpi=110)
    except OSError as exc:
        raise PlotError(f"{path}: cannot write the plot ({exc.strerror or exc})") from None
    finally:
        plt.close(figure)
