"""Records that show themselves to a person and say their values to a machine.

A record a lesson displays (a trim decision, a run's summary, a check's verdict) keeps its
readable text (``__str__`` / ``_repr_pretty_`` / ``_repr_html_``) for the student, and adds one
more output beside it: a JSON object under the vendor MIME type :data:`RECORD_MIME`. JupyterLab,
Colab and nbconvert do not render that type, so the student sees only the text; a test or a
grader reads the values from it instead of matching printed prose::

    @dataclass
    class Kept(Record):
        kept: int
        tokens: int

    Kept(4, 32)          # the cell's last expression: text for the student, JSON for the tests

It also holds the label of a result an earlier run committed (:func:`committed_label`): measured,
not here, and the file it lies in. This module does not decide what a record shows: :meth:`Record.record` is
:func:`dataclasses.asdict` made JSON-safe, and a class overrides it to choose its fields. A
record that is only ``print``-ed has no output bundle, so nothing machine-readable: display it
(the cell's last expression, or ``display(x)``). A loose line a cell prints can be one with
:func:`show`: ``print``'s text, and its value under a key (:class:`Shown`).
"""

from __future__ import annotations

import dataclasses
import json
import string
from pathlib import Path
from typing import Any

RECORD_MIME = "application/vnd.course.record+json"


def shown_path(path: Path) -> str:
    """``path`` as a reader finds it in the workbook: from the folder that holds ``course/``
    (``course/data/bfcl_bundled.json``), else as it is."""
    root = Path(__file__).resolve().parents[1]
    try:
        return Path(path).resolve().relative_to(root).as_posix()
    except ValueError:
        return str(path)


def committed_label(*paths: Path) -> str:
    """The provenance of a result an earlier run committed: measured, not here, and where."""
    return f"measured (committed result of an earlier run: {', '.join(map(shown_path, paths))})"


def json_safe(value: Any) -> Any:
    """``value`` with every part JSON can hold as it is, and ``str()`` of the rest."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [json_safe(v) for v in items]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


class Record:
    """Mixin for a dataclass a lesson displays: adds its values under :data:`RECORD_MIME`."""

    def record(self) -> dict[str, Any]:
        """The values a machine reads: the dataclass's fields, JSON-safe."""
        return json_safe(self)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        # IPython adds text/plain and text/html from the other _repr_ methods itself.
        data = self.record()
        json.dumps(data)  # a record that JSON cannot hold is a bug here, not in a test later
        return {RECORD_MIME: data}


class _LineFormatter(string.Formatter):
    def format_field(self, value: Any, format_spec: str) -> str:
        if format_spec == "lines":
            return "".join(f"\n   {item}" for item in value)
        if format_spec.startswith("join"):
            return format_spec[len("join"):].join(map(str, value))
        return super().format_field(value, format_spec)


_LINE_FORMATTER = _LineFormatter()


@dataclasses.dataclass(init=False)
class Line(Record):
    """A printed line that keeps its values: what the lesson shows instead of ``print(f"...")``.

    Displayed (the cell's last expression, or ``display(line)``), the student reads the text
    ``template.format(**values)``, as ``print`` would write it; the cell's output also holds
    ``values`` as a record (:mod:`course.records`), which a test reads by name instead of
    matching the words::

        Line("door: {status}; emails actually sent: {sent}", status=result.status, sent=len(sent))

    shows ``door: ok; emails actually sent: 1`` and records ``{"status": "ok", "sent": 1}``.
    Two more format specs for a list: ``{xs:lines}`` writes each item on a line of its own,
    indented three spaces (as ``print(head, *xs, sep="\n   ")``), and ``{xs:join | }`` joins
    the items with what follows ``join``. A value may stand behind what the line shows (the
    probabilities a shown text rounds); a ``print``-ed line has no record.
    """

    template: str
    values: dict[str, Any]

    def __init__(self, template: str, **values: Any) -> None:
        self.template, self.values = template, values
        str(self)  # a template that names a value it was not given fails here, not when shown

    def record(self) -> dict[str, Any]:
        return json_safe(self.values)

    def __str__(self) -> str:
        return _LINE_FORMATTER.format(self.template, **self.values)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


class Shown(Line):
    """One line a cell shows, and the value it stands for under ``key``: a :class:`Line` whose
    text is ``text`` as it is and whose record is ``{"shown": key, "value": value}``."""

    def __init__(self, key: str, text: str, value: Any = None) -> None:
        super().__init__(text.replace("{", "{{").replace("}", "}}"), shown=key, value=value)

    @property
    def key(self) -> str:
        return self.values["shown"]

    @property
    def text(self) -> str:
        return str(self)

    @property
    def value(self) -> Any:
        return self.values["value"]


_LAST = object()


def show(*parts: Any, key: str, value: Any = _LAST, sep: str = " ") -> None:
    """``print`` for a line that carries a value a lesson is about (a count, a verdict, a tool's
    reply): the student sees the line ``print`` would write; the cell's output holds ``value``
    (by default the last part) under ``key`` as a :class:`Shown` record, which a test or a grader
    reads instead of matching the words::

        show("allowed:", door.execute("get_weather", {"city": "Berlin"}), key="allowed")

    shows ``allowed: Berlin: 9 °C, rain`` and records ``{"shown": "allowed", "value": "Berlin:
    9 °C, rain"}``. Outside a notebook it prints the line. Returns nothing, like ``print`` (a cell
    that ends in ``show(...)`` shows the line once)."""
    if value is _LAST:
        value = parts[-1] if parts else None
    shown = Shown(key, sep.join(map(str, parts)), value)
    try:
        from IPython import get_ipython

        shell = get_ipython()
    except ImportError:  # pragma: no cover - IPython is installed with the course
        shell = None
    if shell is None:
        print(shown.text)
    else:
        from IPython.display import display

        display(shown)
