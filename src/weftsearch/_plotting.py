"""The one way the project's plots place a legend (below the panels) and label a log axis.

A legend inside the axes (``loc="best"`` included) covers data as soon as a
panel is busy: several targets and peers, each with p50 and p99 curves, fill
every corner. So every figure the project draws (eval reports, the load
ladder, the recall curve) gathers its panels' entries into one figure legend
under them, in space the constrained layout reserves for it. It can never
overlap a panel; ``tests/test_plotting.py`` checks that on rendered figures.

A log axis left to matplotlib labels minor ticks in ``3x10^2`` form once it
spans about a decade, and those labels collide (``3x10^2`` against
``4x10^2``), or it labels a single tick when the data span less than a
decade. :func:`log_ticks` labels only 1-2-5 steps (decades alone over many
decades; finer steps, then plain linear ones, over a narrow range), as plain
numbers, and never more than fit; ``tests/test_plotting.py`` checks on
rendered figures that no two tick labels of an axis meet.

matplotlib stays optional: this module imports it only for type checking,
and its callers import it when they draw.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # matplotlib is optional: only its types are needed at check time.
    from matplotlib.axis import Axis
    from matplotlib.figure import Figure
    from matplotlib.legend import Legend

__all__ = ["legend_below", "log_ticks", "png_bytes", "tick_text", "log_tick_values"]

#: The mantissas a log axis may label, coarse to fine: the finest set that fits is used.
_MANTISSAS: tuple[tuple[float, ...], ...] = (
    (1.0,),
    (1.0, 2.0, 5.0),
    (1.0, 2.0, 3.0, 5.0),
    (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0),
)

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


def log_tick_values(low: float, high: float, max_ticks: int) -> list[float]:
    """At least two and at most ``max_ticks`` (>= 2) round values from ``low`` to ``high`` for a log axis.

    The finest of decades, 1-2-5, 1-2-3-5 and 1-1.5-2-3-4-5-6-8 steps that
    gives at most ``max_ticks`` values in the range; over more decades than
    that, every n-th decade; over a range too narrow for two of the finest, the
    linear "nice" values a linear axis would label (1, 2, 2.5 or 5 steps).
    O(decades spanned + max_ticks).
    """
    low, high = sorted((float(low), float(high)))
    if not (math.isfinite(low) and math.isfinite(high)) or high <= 0:
        return []
    low = max(low, high * 1e-300)
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    slack = 1e-9  # a value printed at the edge of the range still counts as in it

    def within(values: list[float]) -> list[float]:
        return [v for v in values if low * (1 - slack) <= v <= high * (1 + slack)]

    best: list[float] = []
    for mantissas in _MANTISSAS:
        values = within([m * 10.0**e for e in range(first, last + 1) for m in mantissas])
        if len(values) > max_ticks:
            break
        best = values
    if not best:  # more decades than max_ticks: every n-th decade, on multiples of n
        decades = [e for e in range(first, last + 1) if low * (1 - slack) <= 10.0**e <= high * (1 + slack)]
        stride = math.ceil(len(decades) / max_ticks)
        best = [10.0**e for e in decades if e % stride == 0]
    if len(best) >= 2:
        return best
    # Narrower than one step of the finest set: the nice linear values (a log axis over so little
    # of a decade is nearly linear), never fewer than two.
    for count in range(max_ticks, 1, -1):
        step = _nice_step((high - low) / count)
        values = within([step * n for n in range(math.ceil(low / step), math.floor(high / step) + 1)])
        if 2 <= len(values) <= max_ticks:
            return values
    return [low, high]


def _nice_step(raw: float) -> float:
    """The smallest of 1, 2, 2.5 and 5 times a power of ten that is at least ``raw`` (> 0)."""
    power = 10.0 ** math.floor(math.log10(raw))
    for mantissa in (1.0, 2.0, 2.5, 5.0, 10.0):
        if mantissa * power >= raw * (1 - 1e-12):
            return mantissa * power
    return 10.0 * power


def tick_text(value: float) -> str:
    """A tick's label as a plain number: ``0.25``, ``40``, ``1,500``, ``20k``, ``3M`` (no ``3x10^2`` form)."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    magnitude = abs(value)
    if magnitude >= 1e6:
        return f"{value / 1e6:.4g}M"
    if magnitude >= 1e4:
        return f"{value / 1e3:.4g}k"
    if magnitude >= 1:
        return f"{value:,.6g}"
    return f"{value:.4g}"


def log_ticks(axis: Axis, *, max_ticks: int = 6) -> None:
    """Label the log-scaled ``axis`` with :func:`log_tick_values` as plain numbers; unlabelled minor ticks.

    The values are chosen when the axis is drawn, from its view limits, so
    they follow any later change of the limits. ``max_ticks`` bounds the
    labels (6 keeps labels like ``1,500`` or ``200k`` apart on a panel a few
    inches long); the minor ticks at 2 to 9 of each decade stay for the grid.
    """
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    class _RoundLogLocator(LogLocator):
        """A LogLocator (its log-aware limits and view) whose ticks are :func:`log_tick_values`."""

        def tick_values(self, vmin: float, vmax: float) -> Any:
            return log_tick_values(vmin, vmax, max_ticks)

    axis.set_major_locator(_RoundLogLocator(base=10.0))
    axis.set_major_formatter(FuncFormatter(lambda value, _position: tick_text(value)))
    axis.set_minor_locator(LogLocator(base=10.0, subs=tuple(range(2, 10)), numticks=100))
    axis.set_minor_formatter(NullFormatter())
