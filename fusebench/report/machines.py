"""One section of the report per machine and environment, and the selector that shows one at a time.

Results from a fleet (several machines, or one machine measured on CPU and on CUDA) are never
overlaid: each (machine, env) gets its own scoreboard and suite charts, wrapped in an element
tagged `data-machine="<index>"`. With more than one, a drop-down at the top of the page (sticky
while scrolling) shows the chosen one and hides the others; the page's inline script
`fusebenchShowMachine` (templates/report.html) does the switching and resizes the charts it
reveals. With a single machine the sections are plain and there is no selector.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import pandas as pd


@dataclass(frozen=True)
class MachineSection:
    """The results of one (machine, env), and its position among the page's sections."""

    index: int
    machine: str
    env: str
    frame: pd.DataFrame
    several: bool  # whether the page has more than one section (and so a selector)

    @property
    def label(self) -> str:
        """'machine / env', as the selector lists it."""
        return f"{self.machine} / {self.env}"

    def anchor(self, name: str) -> str:
        """A page-unique element id for `name` ('scoreboard', 'suite-x') within this section."""
        return f"{name}-{self.index}" if self.several else name

    def wrap(self, body: str) -> str:
        """`body` as this section's part of the page (hidden until selected, unless it is the first)."""
        if not self.several:
            return body
        hidden = " hidden" if self.index else ""
        return f'<div class="machine-section" data-machine="{self.index}"{hidden}>\n{body}\n</div>'


def machine_sections(frame: pd.DataFrame) -> list[MachineSection]:
    """A section per (machine, env) of `frame`, sorted by name; none for an empty frame."""
    if frame.empty:
        return []
    keys = sorted({(str(m), str(e)) for m, e in zip(frame.machine, frame.env)})
    groups = {key: rows for key, rows in frame.groupby([frame.machine.astype(str), frame.env.astype(str)])}
    return [
        MachineSection(index, machine, env, groups[(machine, env)], len(keys) > 1)
        for index, (machine, env) in enumerate(keys)
    ]


def selector_html(sections: list[MachineSection]) -> str:
    """The drop-down that picks the section shown; '' with fewer than two sections."""
    if len(sections) < 2:
        return ""
    options = "".join(f'<option value="{s.index}">{html.escape(s.label)}</option>' for s in sections)
    return (
        '<div class="machine-select"><label for="machine-select">Machine / environment:</label> '
        f'<select id="machine-select" onchange="fusebenchShowMachine(this.value)">{options}</select> '
        f"<span>{len(sections)} machines and environments; each has its own scoreboard and charts.</span></div>"
    )
