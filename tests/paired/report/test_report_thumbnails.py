"""The report's thumbnails are made only from images whose size was checked first.

Found by issue #11 (a number the kit prints is right or absent): each test reproduces one case of the issue
(its number in the test's docstring) and checks the fixed behaviour."""

from __future__ import annotations

from helpers.pngs import write_png


def test_a_thumbnail_of_a_decompression_bomb_is_a_placeholder(tmp_path):
    """Issue #11 case 13."""
    from pytest_pstbench.paired.report.thumbnails import Thumbs

    (tmp_path / "stage" / "thumbs").mkdir(parents=True)
    bomb = write_png(tmp_path / "bomb.png", 12000, 12000, valid=False)
    img = Thumbs(tmp_path / "stage", 96).make(bomb)
    assert img.src is None
    assert img.missing == (
        f"{bomb}: cannot be read as an image (ValueError: header says 12000x12000 pixels, more than "
        "the kit decodes (64 MP; decompression-bomb guard))"
    )
