"""Figures that show the same under any notebook backend, and LangGraph graphs drawn offline.

For: turning a matplotlib figure into PNG bytes (so a cell shows it whether the backend is
inline, Agg or a widget backend), and drawing a compiled LangGraph graph from its own
``get_graph()``: as Mermaid text, which JupyterLab renders itself (MIME type
``text/vnd.mermaid``, and a fenced ```` ```mermaid ```` block as Markdown), with a PNG drawn here
with matplotlib beside it for front ends that do not render Mermaid (nbconvert, GitHub, VS Code).

Not handled: calling a web service (LangGraph's ``draw_mermaid_png`` asks mermaid.ink; this
module never does), graphviz styling, subgraphs drawn as boxes (a nested graph is drawn as its
flat node list, as ``get_graph(xray=False)`` returns it), interactive figures.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

__all__ = ["GraphDrawing", "figure_png", "graph_png", "safe_text", "show_graph"]


def safe_text(text: Any) -> str:
    """``text`` with characters matplotlib cannot encode (lone surrogates) replaced by '?'."""
    return str(text).encode("utf-8", "replace").decode("utf-8")


def figure_png(fig: Any, dpi: int = 80) -> bytes:
    """A matplotlib figure as PNG bytes, closed afterwards (shows the same under any backend)."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=dpi)
    finally:
        plt.close(fig)
    return buf.getvalue()


def _layers(nodes: list[str], edges: list[tuple[str, str]]) -> dict[str, int]:
    """Depth of each node by breadth-first search from ``__start__`` (unreached nodes last)."""
    depth = {"__start__": 0} if "__start__" in nodes else {nodes[0]: 0} if nodes else {}
    frontier = list(depth)
    while frontier:
        nxt = []
        for node in frontier:
            for a, b in edges:
                if a == node and b not in depth:
                    depth[b] = depth[node] + 1
                    nxt.append(b)
        frontier = nxt
    last = max(depth.values(), default=0) + 1
    for node in nodes:
        depth.setdefault(node, last)
    if "__end__" in depth:  # the end node always alone at the bottom
        depth["__end__"] = max((d for n, d in depth.items() if n != "__end__"), default=0) + 1
    return depth


def graph_png(graph: Any, title: str = "", dpi: int = 80) -> bytes:
    """A PNG of a ``get_graph()`` result: nodes in layers from START, solid and dashed edges."""
    import matplotlib.pyplot as plt

    nodes = list(graph.nodes)
    edges = [(e.source, e.target, bool(e.conditional)) for e in graph.edges]
    labels = {(e.source, e.target): str(e.data) for e in graph.edges if e.data}
    depth = _layers(nodes, [(a, b) for a, b, _ in edges])
    rows: dict[int, list[str]] = {}
    for node in nodes:
        rows.setdefault(depth[node], []).append(node)
    pos = {}
    for level, names in rows.items():
        for i, name in enumerate(names):
            pos[name] = (i - (len(names) - 1) / 2, -level)
    width = max(len(v) for v in rows.values()) if rows else 1
    half = max(width / 2 + 0.4, 1.8)  # room for curved edges and their labels
    fig, ax = plt.subplots(figsize=(1.9 * 2 * half, 0.6 + 0.95 * len(rows)))
    for a, b, conditional in edges:
        (x1, y1), (x2, y2) = pos[a], pos[b]
        # back edges (loops) and edges that skip a layer are drawn curved, so none hides another
        bend = 0.35 if y2 >= y1 else (-0.45 if y1 - y2 > 1 and x1 == x2 else 0.0)
        if (a, b) in labels:
            mx, my = (x1 + x2) / 2 + (0.35 if bend < 0 else 0.0), (y1 + y2) / 2
            ax.text(mx, my, safe_text(labels[(a, b)]), fontsize=7, color="#555",
                    ha="center", va="center", bbox={"fc": "white", "ec": "none", "pad": 0.5})
        ax.annotate("", xy=(x2, y2), xytext=(x1, y1),
                    arrowprops={"arrowstyle": "-|>", "color": "#555",
                                "linestyle": "--" if conditional else "-",
                                "connectionstyle": f"arc3,rad={bend}",
                                "shrinkA": 14, "shrinkB": 14})
    for name, (x, y) in pos.items():
        special = name in ("__start__", "__end__")
        label = {"__start__": "START", "__end__": "END"}.get(name, name)
        ax.text(x, y, safe_text(label), ha="center", va="center", fontsize=9,
                bbox={"boxstyle": "round,pad=0.4", "fc": "#eeeeee" if special else "#dde8f7",
                      "ec": "#555"})
    ax.set_xlim(-half, half)
    ax.set_ylim(-len(rows) + 0.4, 0.6)
    ax.axis("off")
    if title:
        ax.set_title(safe_text(title), fontsize=10)
    fig.tight_layout()
    return figure_png(fig, dpi=dpi)


@dataclass
class GraphDrawing:
    """A LangGraph graph as Mermaid text and an offline PNG; displays itself in a notebook."""

    mermaid: str
    png: bytes
    nodes: list[str]
    edges: list[tuple[str, str, bool]]  # (source, target, conditional)
    title: str = ""

    def __str__(self) -> str:
        lines = [f"graph {self.title}".rstrip() + f": {len(self.nodes)} nodes, {len(self.edges)} edges"]
        lines += [f"  {a} {'-.->' if c else '-->'} {b}" for a, b, c in self.edges]
        return "\n".join(lines)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/vnd.mermaid": self.mermaid,
                "image/png": self.png,
                "text/markdown": f"```mermaid\n{self.mermaid}\n```",
                "text/plain": str(self)}


def show_graph(app: Any, title: str = "", dpi: int = 80) -> GraphDrawing:
    """Draw a compiled LangGraph graph (or anything with ``get_graph()``) without a web service.

    Make the result the cell's last expression: JupyterLab renders the Mermaid, other front
    ends show the PNG, and ``print()`` gives the edge list.
    """
    graph = app.get_graph() if hasattr(app, "get_graph") else app
    mermaid = graph.draw_mermaid()
    edges = [(e.source, e.target, bool(e.conditional)) for e in graph.edges]
    return GraphDrawing(mermaid, graph_png(graph, title=title, dpi=dpi), list(graph.nodes),
                        edges, title)
