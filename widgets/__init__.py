"""ipywidgets for the workbook: one module per widget; each renders records from ``course``.

The widgets work with ipywidgets 7 (Google Colab's runtime has 7.7.1) and 8.x. The one place the
two differ for us is how a widget is displayed: ipywidgets 8 gives IPython a
``_repr_mimebundle_``, ipywidgets 7 displays itself from ``_ipython_display_``.
:class:`Displayed` gives every widget here the same ``_repr_mimebundle_`` on both (the widget
view, and a ``text/plain`` a front end without widgets shows), and on ipywidgets 7 displays
exactly that bundle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import ipywidgets

__all__ = ["IPYWIDGETS_MAJOR", "VIEW_MIMETYPE", "Displayed"]

IPYWIDGETS_MAJOR = int(ipywidgets.__version__.split(".")[0])
VIEW_MIMETYPE = "application/vnd.jupyter.widget-view+json"
PLAIN_TEXT_CHARS = 110  # ipywidgets' own cut of a widget's repr


class Displayed:
    """Mix-in, before the ipywidgets base class: one display bundle on ipywidgets 7 and 8.

    A widget overrides :meth:`display_text` to choose its ``text/plain`` (default: its ``repr``,
    cut as ipywidgets cuts it).
    """

    if TYPE_CHECKING:  # what the ipywidgets base class after this mix-in provides (not set here)
        _view_name: str | None
        _model_id: str

        def _handle_displayed(self, **kwargs: Any) -> None: ...  # ipywidgets 7 only

    def display_text(self) -> str:
        """The ``text/plain`` of the widget's display bundle."""
        text = repr(self)
        return text if len(text) <= PLAIN_TEXT_CHARS else text[:PLAIN_TEXT_CHARS] + "…"

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        parent = getattr(super(), "_repr_mimebundle_", None)  # ipywidgets 8
        bundle = parent(**kwargs) if parent is not None else None
        if not isinstance(bundle, dict):
            bundle = {}
            if self._view_name is not None:
                bundle[VIEW_MIMETYPE] = {"version_major": 2, "version_minor": 0,
                                         "model_id": self._model_id}
        bundle["text/plain"] = self.display_text()
        return bundle

    if IPYWIDGETS_MAJOR < 8:

        def _ipython_display_(self, **kwargs: Any) -> None:
            """ipywidgets 7 displays a widget from here: show the same bundle as on 8."""
            from IPython.display import display

            display(self._repr_mimebundle_(), raw=True)
            if self._view_name is not None:
                self._handle_displayed(**kwargs)
