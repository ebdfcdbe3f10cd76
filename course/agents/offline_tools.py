"""Offline stand-ins for the two tools of the code-agent runs: web search and image generation.

Both are real smolagents ``Tool`` subclasses with the same name, inputs and output type as the
tools the notes used, so a ``CodeAgent`` lists and calls them exactly as it would the real ones.

- :class:`OfflineWebSearchTool` (``web_search(query: str) -> str``) searches a small corpus of
  pages written for this course (``course/data/search_corpus.json``) and formats the results
  like smolagents' ``WebSearchTool``: ``## Search Results`` then ``[title](link)\\ndescription``.
  The engine is deliberately naive, like an early keyword engine: a page's score is how many
  times the query's words (lower-cased, a few stop words dropped, no stemming) occur in its
  title and description; ties keep corpus order; pages scoring 0 are never returned. With no
  result it raises, as the real tool does.
- :class:`OfflineImageTool` (``image_generator(prompt: str) -> image``) runs no image model: it
  draws a real PNG with Pillow that shows the prompt it received, saves it, and returns the
  PIL image. What the generator was asked for is what the lesson needs to show.

Every call is logged in the tool's ``calls`` list (``{"query": ...}`` or ``{"prompt": ...,
"path": ...}``), so a test can see what really ran.

API (stable; other chapters import it):

- ``load_corpus(path=None) -> list[SearchPage]``; ``SearchPage(title, link, description)``.
- ``OfflineWebSearchTool(max_results=3, corpus=None, misses=0)``: ``.search(query) -> list[SearchPage]``
  (scored, no exception), ``.forward(query) -> str``, ``.calls``.
- ``OfflineImageTool(name="image_generator", out_dir=None, size=(512, 320))``: ``.forward(prompt)``
  returns a ``PIL.Image.Image`` (the agent wraps it as ``AgentImage``); ``.calls``.
- ``make_tools(names, live=False) -> list[Tool]``: tools by name (``web_search``,
  ``image_generator`` or ``text_to_image``); ``live=True`` gives smolagents' real
  ``WebSearchTool`` and the Hub's ``m-ric/text-to-image`` (both need the network).

Not handled: real web pages, ranking quality, languages other than English, image content.
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
import textwrap
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from smolagents import Tool

__all__ = ["BM25WebSearchTool", "OfflineImageTool", "OfflineWebSearchTool", "SearchPage",
           "load_corpus", "make_tools"]

CORPUS_PATH = Path(__file__).resolve().parents[1] / "data" / "search_corpus.json"
STOP_WORDS = frozenset(
    "a an and are at by for from in is it me my of on or the to what which who with".split()
)
IMAGE_TOOL_NAMES = ("image_generator", "text_to_image")


@dataclass(frozen=True)
class SearchPage:
    """One page of the offline corpus (the fields a search result shows)."""

    title: str
    link: str
    description: str

    def as_result(self) -> str:
        """The page as smolagents' search tools format one result."""
        return f"[{self.title}]({self.link})\n{self.description}"


def load_corpus(path: str | Path | None = None) -> list[SearchPage]:
    """The pages of the corpus file; a bad file raises ValueError naming the entry and field."""
    path = Path(path) if path is not None else CORPUS_PATH
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"search corpus {path}: cannot read it ({err}).") from err
    pages = data.get("pages") if isinstance(data, dict) else None
    if not isinstance(pages, list):
        raise ValueError(f"search corpus {path}: field 'pages' must be a list of pages.")
    out = []
    for i, page in enumerate(pages):
        for key in ("title", "link", "description"):
            if not isinstance(page, dict) or not isinstance(page.get(key), str):
                raise ValueError(f"search corpus {path}: field 'pages[{i}].{key}' must be a string.")
        out.append(SearchPage(page["title"], page["link"], page["description"]))
    return out


def query_words(text: str) -> list[str]:
    """Lower-cased words of ``text`` without stop words (the engine's whole notion of meaning)."""
    return [w for w in re.findall(r"\w+", text.lower()) if w not in STOP_WORDS]


class OfflineWebSearchTool(Tool):
    """``web_search`` over the course corpus: same name, inputs and output format as smolagents'."""

    name = "web_search"
    description = (
        "Performs a web search for a query and returns a string of the top search results "
        "formatted as markdown with titles, links, and descriptions."
    )
    inputs: ClassVar[dict] = {
        "query": {"type": "string", "description": "The search query to perform."}
    }
    output_type = "string"

    def __init__(self, max_results: int = 3, corpus: list[SearchPage] | None = None,
                 misses: int = 0):
        super().__init__()
        if max_results < 1:
            raise ValueError(f"max_results must be at least 1, got {max_results}.")
        if misses < 0:
            raise ValueError(f"misses must be 0 or more, got {misses}.")
        self.max_results = max_results
        self.corpus = corpus if corpus is not None else load_corpus()
        self.misses = misses  # the first ``misses`` calls find nothing, whatever the query
        self.calls: list[dict[str, Any]] = []

    def score(self, query: str, page: SearchPage) -> int:
        """How many times the query's words occur in the page's title and description."""
        counts = Counter(query_words(f"{page.title} {page.description}"))
        return sum(counts[w] for w in set(query_words(query)))

    def search(self, query: str) -> list[SearchPage]:
        """The best ``max_results`` pages for ``query`` (score > 0; ties keep corpus order)."""
        scored = [(self.score(query, page), i, page) for i, page in enumerate(self.corpus)]
        ranked = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))
        return [page for _, _, page in ranked[: self.max_results]]

    def forward(self, query: str) -> str:
        if not isinstance(query, str) or not query.strip():
            raise ValueError("web_search needs a non-empty query string.")
        self.calls.append({"query": query})
        results = self.search(query) if len(self.calls) > self.misses else []
        if not results:
            raise Exception("No results found! Try a less restrictive/shorter query.")
        return "## Search Results\n\n" + "\n\n".join(page.as_result() for page in results)


class OfflineImageTool(Tool):
    """An image tool that runs no model: it draws a PNG showing the prompt it received."""

    name = "image_generator"
    description = (
        "This is a tool that creates an image according to a prompt, which is a text description."
    )
    inputs: ClassVar[dict] = {"prompt": {"type": "string", "description": (
        "The image generator prompt. Don't hesitate to add details in the prompt to make the "
        "image look better, like 'high-res, photorealistic', etc.")}}
    output_type = "image"

    def __init__(self, name: str = "image_generator", out_dir: str | Path | None = None,
                 size: tuple[int, int] = (512, 320)):
        if name not in IMAGE_TOOL_NAMES:
            raise ValueError(f"image tool name {name!r}: use one of {list(IMAGE_TOOL_NAMES)}.")
        self.name = name
        super().__init__()
        self.out_dir = Path(out_dir) if out_dir is not None else Path(
            tempfile.gettempdir()) / "course_images"
        self.size = size
        self.calls: list[dict[str, Any]] = []

    def draw(self, prompt: str):
        """A PIL image: a header saying no image model ran, then the prompt, word-wrapped."""
        from PIL import Image, ImageDraw, ImageFont

        width, height = self.size
        image = Image.new("RGB", self.size, (238, 242, 247))
        draw = ImageDraw.Draw(image)
        try:
            font = ImageFont.load_default(size=18)
            small = ImageFont.load_default(size=13)
        except TypeError:  # pragma: no cover - Pillow < 10.1 has no sized default font
            font = small = ImageFont.load_default()
        draw.rectangle([0, 0, width, 34], fill=(40, 60, 90))
        draw.text((12, 9), "offline image tool - no image model ran", fill="white", font=small)
        draw.text((12, 46), "prompt received:", fill=(90, 90, 90), font=small)
        y = 68
        for line in textwrap.wrap(prompt, width=max(20, width // 10), break_on_hyphens=False)[:10]:
            draw.text((12, y), line, fill=(20, 20, 20), font=font)
            y += 24
        draw.rectangle([0, 0, width - 1, height - 1], outline=(40, 60, 90), width=2)
        return image

    def forward(self, prompt: str):
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError(f"{self.name} needs a non-empty prompt string.")
        image = self.draw(prompt)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha1(prompt.encode("utf-8")).hexdigest()[:10]
        path = self.out_dir / f"{self.name}_{digest}.png"
        image.save(path, format="PNG")
        self.calls.append({"prompt": prompt, "path": str(path)})
        return image


class BM25WebSearchTool(OfflineWebSearchTool):
    """The same ``web_search`` over the same corpus, ranked with BM25 (``rank-bm25``) instead.

    BM25 discounts a word that occurs on many pages and a page that repeats a word; pages whose
    BM25 score is not positive are never returned. Used to show that an agent's trajectory
    depends on the tool's implementation, not only on the model.
    """

    def __init__(self, max_results: int = 3, corpus: list[SearchPage] | None = None):
        super().__init__(max_results, corpus)
        from rank_bm25 import BM25Okapi

        self._bm25 = BM25Okapi([query_words(f"{p.title} {p.description}") or ["-"]
                                for p in self.corpus])
        self._scores: dict[str, list[float]] = {}

    def score(self, query: str, page: SearchPage) -> float:  # type: ignore[override]
        """The page's BM25 score for the query's words."""
        if query not in self._scores:
            self._scores[query] = list(self._bm25.get_scores(query_words(query)))
        return self._scores[query][self.corpus.index(page)]


def make_tools(names: list[str] | tuple[str, ...], live: bool = False) -> list[Tool]:
    """Tools by name, offline by default; ``live=True`` uses the real ones (network needed)."""
    tools: list[Tool] = []
    for name in names:
        if name == "web_search":
            if live:
                from smolagents import WebSearchTool

                tools.append(WebSearchTool())
            else:
                tools.append(OfflineWebSearchTool())
        elif name in IMAGE_TOOL_NAMES:
            if live:
                from smolagents import load_tool

                tool = load_tool("m-ric/text-to-image", trust_remote_code=True)
                tool.name = name
                tools.append(tool)
            else:
                tools.append(OfflineImageTool(name=name))
        else:
            raise ValueError(f"no tool named {name!r}: known tools are "
                             f"{['web_search', *IMAGE_TOOL_NAMES]}.")
    return tools
