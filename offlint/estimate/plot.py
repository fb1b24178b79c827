"""`--plot out.png`: the what-if table as stacked bars (one bar per option, one colour per kind of memory),
with the device's usable capacity as a line. matplotlib is an optional extra (`pip install 'offlint[estimate]'`)."""

from __future__ import annotations

from pathlib import Path

from offlint.estimate.devices import GIB, Device
from offlint.estimate.whatif import Option

KINDS = (("weights", "weights"), ("grads", "gradients"), ("optimizer", "optimizer states"),
         ("activations", "activations"), ("transient", "FSDP buffers"), ("allowance", "allowance"))


class PlotError(ValueError):
    pass


def figure(options: list[Option], device: Device, title: str):
    """The stacked-bar figure (matplotlib imported here only). The legend sits right of the axes and the option
    labels below them, so neither covers a bar."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotError("--plot needs matplotlib: pip install 'offlint[estimate]'") from None
    import textwrap

    labels = [("* " if o.cheapest else "") + f"{o.group}: {o.label}" for o in options]
    labels = [label if len(label) <= 48 else label[:45] + "..." for label in labels]
    fig, axes = plt.subplots(figsize=(max(9.0, 0.45 * len(options) + 5), 7.0))
    bottoms = [0.0] * len(options)
    for kind, name in KINDS:
        heights = [o.result.peak.of(kind) / GIB for o in options]
        axes.bar(range(len(options)), heights, bottom=bottoms, label=name)
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    axes.axhline(device.usable_bytes / GIB, color="black", linestyle="--", linewidth=1,
                 label=f"{device.name} usable ({device.usable_bytes / GIB:.1f} GiB)")
    axes.set_xticks(range(len(options)))
    axes.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
    axes.set_xlim(-0.6, len(options) - 0.4)
    axes.set_ylabel("peak GiB on one GPU")
    axes.set_title("\n".join(textwrap.wrap(title, 90)), fontsize=9)
    axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    fig.tight_layout()
    return fig


def plot(options: list[Option], device: Device, title: str, path: Path) -> None:
    fig = figure(options, device, title)  # raises PlotError without matplotlib
    import matplotlib.pyplot as plt

    try:
        path.parent.mkdir(parents=True, exist_ok=True)  # (as replay's sweep plot and ruff's --output-file do)
        fig.savefig(path, dpi=110, bbox_inches="tight")
    except OSError as exc:
        raise PlotError(f"{path}: cannot write the plot ({exc.strerror or exc})") from None
    finally:
        plt.close(fig)
