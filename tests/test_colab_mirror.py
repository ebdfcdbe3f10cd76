"""scripts/colab_mirror.py's own logic, without building its venv (``make colab-mirror`` does).

The README's cell is taken verbatim but for the WORKBOOK_SOURCE string, the kept packages are
read from platforms/colab-gpu.txt, and a changed kept package is named with both versions.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def mirror():
    spec = importlib.util.spec_from_file_location("colab_mirror", ROOT / "scripts" / "colab_mirror.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["colab_mirror"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("colab_mirror", None)


README = '''# Title

Some text.

<!-- colab-setup-cell -->
```python
WORKBOOK_SOURCE = "git+https://github.com/OWNER/agents-workbook"  # your copy
%pip install --quiet "{WORKBOOK_SOURCE}"
!python -m course prepare
```

More text.
'''


def test_the_readme_cell_is_taken_verbatim_but_for_the_source(mirror, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(README)
    cell, address = mirror.readme_cell(readme, "/work/clone")
    assert address == "git+https://github.com/OWNER/agents-workbook"
    original = README.split("```python\n")[1].split("```")[0]
    assert cell == original.replace(address, "/work/clone")
    assert cell.splitlines()[0] == 'WORKBOOK_SOURCE = "/work/clone"  # your copy'


def test_the_real_readme_has_the_cell_the_mirror_runs(mirror):
    cell, address = mirror.readme_cell(ROOT / "README.md", str(ROOT))
    assert address and address != str(ROOT)
    assert cell.startswith(f'WORKBOOK_SOURCE = "{ROOT}"')
    assert "%pip install" in cell and "!python -m course prepare" in cell


@pytest.mark.parametrize("text,match", [
    ("no marker here\n```python\nx = 1\n```\n", "no ```python block"),
    ('<!-- colab-setup-cell -->\n```python\nSOURCE = "x"\n```\n', "starts with"),
])
def test_a_readme_without_the_cell_is_refused_with_the_fix(mirror, tmp_path, text, match):
    readme = tmp_path / "README.md"
    readme.write_text(text)
    with pytest.raises(mirror.MirrorError, match=match):
        mirror.readme_cell(readme, "/x")


def test_the_kept_packages_are_the_eight_the_file_marks(mirror):
    pins, kept = mirror.runtime_pins(ROOT / "platforms" / "colab-gpu.txt")
    assert sorted(kept) == sorted(["torch", "numpy", "ipython", "ipykernel", "jupyter-client",
                                   "traitlets", "tornado", "ipywidgets"])
    assert pins["torch"] == "2.11.0" and pins["ipywidgets"] == "7.7.1"
    assert pins["jupyter-client"] == "7.4.9"  # names compared as pip compares them


def test_a_changed_kept_package_is_named_with_both_versions(mirror):
    before = {"ipywidgets": ("ipywidgets", "7.7.1"), "torch": ("torch", "2.11.0"),
              "numpy": ("numpy", "2.1.3")}
    after = {"ipywidgets": ("ipywidgets", "8.1.9"), "torch": ("torch", "2.11.0")}
    assert mirror.check_kept(["ipywidgets", "torch", "numpy"], before, after) == [
        "ipywidgets 7.7.1 -> 8.1.9", "numpy 2.1.3 -> (absent)"]
    assert mirror.same_version("2.11.0+cu128", "2.11.0")
    assert not mirror.same_version("2.13.0", "2.11.0")


def test_a_python_that_is_not_313_is_refused(mirror):
    if sys.version_info[:2] == mirror.PYTHON_MINOR:
        pytest.skip("this interpreter is the runtime's Python")
    with pytest.raises(mirror.MirrorError, match=r"Colab's runtime is Python 3\.13"):
        mirror.find_python(sys.executable)
    with pytest.raises(mirror.MirrorError, match="not a Python that runs"):
        mirror.find_python("/nonexistent/python3.13")
