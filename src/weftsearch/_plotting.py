"""The one way the project's plots place a legend: below the panels, outside every axes.

A legend inside the axes (``loc="best"`` included) covers data as soon as a
panel is busy: several targets and peers, each with p50 and p99 curves, fill
every corner. So every figure the project draws (eval reports, the load
ladder, the recall curve) gathers its panels' entries into one figure legend
under them, in space the constrained layout reserves for it. It can never
overlap a panel; ``tests/test_plotting.py`` checks that on rendered figures.

matplotlib stays optional: this module imports it only for type checking,
and its callers import it when they draw.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # matplotlib is optional: only its types are needed at check time.
    from matplotlib.figure import Figure
    from matplotlib.legend import Legend

__all__ = ["legend_below", "png_bytes"]

#: Width of one character of legend text, in units of the font size (a generous average).
_CHAR_EM = 0.6
#: Width of an entry's marker and padding, in units of the font size.
_HANDLE_EM = 4.0


def legend_below(figure: Figure, *, fontsize: float = 8.0) -> Legend | None:
    """One legend for every panel of ``figure``, centred below them; ``None`` when nothing is labelled.

    The entries are those of all axes, in order, each label once (panels that
    plot the same target in the same colour share its entry). The figure is
    switched to the constrained layout, which keeps the legend's strip free of
    axes. The legend gets as many columns as fit the figure's width (estimated
    from the longest label), so a busy figure grows rows, not off-page columns.
    Cost: O(entries).
    """
    handles: list[Any] = []
    labels: list[str] = []
    for axes in figure.axes:
        for handle, label in zip(*axes.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    if not labels:
        return None
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    if not isinstance(figure.get_layout_engine(), ConstrainedLayoutEngine):
        figure.set_layout_engine("constrained")  # only it reserves room for an "outside" legend
    entry_inches = (max(len(label) for label in labels) * _CHAR_EM + _HANDLE_EM) * fontsize / 72.0
    width_inches = float(figure.get_size_inches()[0])
    columns = max(1, min(len(labels), int(width_inches / entry_inches)))
    return figure.legend(handles, labels, loc="outside lower center", ncols=columns, fontsize=fontsize)


def png_bytes(figure: Figure, metadata: dict[str, str | None] | None = None) -> bytes:
    """``figure`` as PNG bytes at 100 dpi, drawn on an Agg canvas of its own (no global backend).

    No ``Software`` entry (it names the matplotlib version), so the same inputs give the same
    bytes; ``metadata`` adds text chunks (``{"Title": ...}``).
    """
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, metadata={"Software": None, **(metadata or {})})
    return buffer.getvalue()
