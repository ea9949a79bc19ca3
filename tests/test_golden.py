"""The golden-file helper itself: compare, fail with a diff and the refresh command, rewrite on request."""

from __future__ import annotations

import golden
import pytest
from golden import assert_matches_golden


@pytest.fixture
def golden_dir(tmp_path, monkeypatch):
    """A private golden folder, compared (not updated) whatever the session's option."""
    monkeypatch.setattr(golden, "GOLDEN_DIR", tmp_path)
    monkeypatch.setattr(golden, "UPDATE", False)
    return tmp_path


def test_matching_text_passes(golden_dir):
    (golden_dir / "a.txt").write_text("one\ntwo\n", encoding="utf-8")
    assert_matches_golden("a.txt", "one\ntwo")  # the trailing newline is the file's convention


def test_a_difference_fails_with_a_diff_and_the_refresh_command(golden_dir):
    (golden_dir / "a.txt").write_text("one\ntwo\n", encoding="utf-8")
    with pytest.raises(AssertionError) as info:
        assert_matches_golden("a.txt", "one\nthree\n", where="tests/x/test_y.py")
    message = str(info.value)
    assert "-two\n+three\n" in message
    assert "python -m pytest tests/x/test_y.py --update-goldens" in message


def test_a_missing_file_fails_and_is_not_created(golden_dir):
    with pytest.raises(AssertionError, match="does not exist.*--update-goldens"):
        assert_matches_golden("sub/new.txt", "text")
    assert not (golden_dir / "sub").exists()


def test_update_writes_the_file(golden_dir, monkeypatch):
    monkeypatch.setattr(golden, "UPDATE", True)
    assert_matches_golden("sub/new.txt", "text")
    assert (golden_dir / "sub" / "new.txt").read_text(encoding="utf-8") == "text\n"
    assert_matches_golden("sub/new.txt", "changed\n")
    assert (golden_dir / "sub" / "new.txt").read_text(encoding="utf-8") == "changed\n"
