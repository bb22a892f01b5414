"""The protocol's I/O rules: load_image and fit_to_reference on files written in the test.

Each refusal is checked for its essential parts, in order, on one line: the file and its role,
what the file actually is, the protocol rule, and the fix.
"""

from __future__ import annotations

import io
import re
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageCms

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.paired.imageio import LoadedImage, fit_to_reference, load_image

PROTO = load_protocol()
IO = PROTO.section("io")
FIX = "fix: save it as an 8-bit RGB PNG (no alpha, no palette)"


def rgb(seed: int = 0, h: int = 12, w: int = 10) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def save(path: Path, img: Image.Image, fmt: str = "PNG", **kw) -> Path:
    img.save(path, format=fmt, **kw)
    return path


def refused(path: Path, *parts: str, role: str = "output", loader=None) -> str:
    """Load and expect a one-line UserError that starts with '<path> (<role>): ' and has `parts` in order."""
    with pytest.raises(UserError) as ei:
        (loader or (lambda: load_image(path, PROTO, role)))()
    msg = str(ei.value)
    assert "\n" not in msg, msg
    pattern = "^" + re.escape(f"{path} ({role}): ") + ".*".join(re.escape(p) for p in parts)
    assert re.search(pattern, msg), f"{msg!r} does not match {pattern!r}"
    return msg


# --- hand-built PNG files -------------------------------------------------------------------


def png_chunk(tag: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)


def png_bytes(arr: np.ndarray, depth: int, colour_type: int) -> bytes:
    """A PNG with filter type 0 on every row, written from the specification (big-endian samples)."""
    h, w = arr.shape[:2]
    dtype = ">u2" if depth == 16 else "u1"
    rows = b"".join(b"\x00" + np.ascontiguousarray(row).astype(dtype).tobytes() for row in arr)
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, colour_type, 0, 0, 0))
        + png_chunk(b"IDAT", zlib.compress(rows))
        + png_chunk(b"IEND", b"")
    )


def test_hand_built_png_helper_is_valid():
    # the helper is right: an 8-bit file loads back exactly, and Pillow reads the 16-bit one
    arr8 = rgb(1)
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(png_bytes(arr8, 8, 2)))), arr8)
    arr16 = np.random.default_rng(2).integers(0, 65536, (6, 5, 3), dtype=np.uint16)
    im = Image.open(io.BytesIO(png_bytes(arr16, 16, 2)))
    im.load()
    assert im.size == (5, 6)
    assert np.array_equal(np.asarray(im.convert("RGB")), (arr16 >> 8).astype(np.uint8))  # Pillow keeps the high byte


# --- hand-built ICC v2 matrix/TRC profile ---------------------------------------------------

D50 = (0.9642, 1.0, 0.8249)
# Adobe RGB (1998) primaries, Bradford-adapted to D50 (as in the published Adobe RGB profile)
ADOBE_D50 = {"r": (0.60974, 0.31111, 0.01947), "g": (0.20528, 0.62567, 0.06087), "b": (0.14919, 0.06322, 0.74457)}
GAMMA_U8F8 = 563  # gamma 2.2 as u8Fixed8Number (563/256 = 2.19921875), as in Adobe RGB (1998)
WIDE_DESC = "Test wide-gamut RGB (Adobe RGB 1998 primaries, gamma 2.2)"


def _s15f16(v: float) -> bytes:
    return struct.pack(">i", round(v * 65536))


def _xyz(v) -> bytes:
    return b"XYZ \0\0\0\0" + b"".join(_s15f16(c) for c in v)


def _curve(gamma_u8f8: int) -> bytes:
    return b"curv\0\0\0\0" + struct.pack(">IH", 1, gamma_u8f8)


def _desc(text: str) -> bytes:  # textDescriptionType (ICC v2): ASCII part, empty Unicode and ScriptCode parts
    ascii_ = text.encode("ascii") + b"\0"
    return b"desc\0\0\0\0" + struct.pack(">I", len(ascii_)) + ascii_ + b"\0" * 8 + b"\0" * 3 + b"\0" * 67


def icc_profile(desc: str, primaries: dict, gamma_u8f8: int) -> bytes:
    """A minimal ICC v2 display profile (RGB -> XYZ PCS): header, desc, cprt, wtpt, r/g/bXYZ, r/g/bTRC."""
    tags = [
        (b"desc", _desc(desc)),
        (b"cprt", b"text\0\0\0\0" + b"No copyright, test data\0"),
        (b"wtpt", _xyz(D50)),
        (b"rXYZ", _xyz(primaries["r"])),
        (b"gXYZ", _xyz(primaries["g"])),
        (b"bXYZ", _xyz(primaries["b"])),
        (b"rTRC", _curve(gamma_u8f8)),
        (b"gTRC", _curve(gamma_u8f8)),
        (b"bTRC", _curve(gamma_u8f8)),
    ]
    offset = 128 + 4 + 12 * len(tags)
    table, body = struct.pack(">I", len(tags)), b""
    for sig, data in tags:
        data += b"\0" * (-len(data) % 4)  # tags start on 4-byte boundaries
        table += sig + struct.pack(">II", offset + len(body), len(data))
        body += data
    size = offset + len(body)
    header = (
        struct.pack(">I", size)
        + b"\0" * 4  # preferred CMM
        + struct.pack(">I", 0x02100000)  # version 2.1
        + b"mntrRGB XYZ "  # display class, RGB data, XYZ PCS
        + struct.pack(">6H", 2024, 1, 1, 0, 0, 0)
        + b"acsp"
        + b"\0" * 24  # platform, flags, manufacturer, model, attributes
        + struct.pack(">I", 0)  # rendering intent: perceptual
        + b"".join(_s15f16(c) for c in D50)  # PCS illuminant
        + b"\0" * 4  # creator
        + b"\0" * 44  # profile id and reserved
    )
    assert len(header) == 128
    return header + table + body


WIDE_ICC = icc_profile(WIDE_DESC, ADOBE_D50, GAMMA_U8F8)
SRGB_ICC = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()


def test_hand_built_icc_profile_is_accepted_by_littlecms():
    prof = ImageCms.ImageCmsProfile(io.BytesIO(WIDE_ICC))
    assert ImageCms.getProfileDescription(prof).strip() == WIDE_DESC
    assert prof.profile.xcolor_space.strip() == "RGB"
    assert prof.profile.red_colorant[0] == pytest.approx(ADOBE_D50["r"], abs=1e-4)


# --- good input -----------------------------------------------------------------------------


def test_good_rgb_png_loads_exactly(tmp_path):
    arr = rgb(3, 17, 23)
    path = save(tmp_path / "good.png", Image.fromarray(arr))
    loaded = load_image(path, PROTO)
    assert isinstance(loaded, LoadedImage)
    assert loaded.array.dtype == np.uint8 and loaded.array.shape == (17, 23, 3)
    assert np.array_equal(loaded.array, arr)
    assert loaded.notes == {}


def test_hand_built_8bit_rgb_png_loads_exactly(tmp_path):
    arr = rgb(4)
    path = tmp_path / "by_hand.png"
    path.write_bytes(png_bytes(arr, 8, 2))
    assert np.array_equal(load_image(path, PROTO).array, arr)


def test_png_named_otherwise_is_accepted(tmp_path):
    # the container counts, not the name
    arr = rgb(5)
    path = save(tmp_path / "really_a_png.jpg", Image.fromarray(arr), "PNG")
    assert np.array_equal(load_image(path, PROTO).array, arr)


# --- refused modes --------------------------------------------------------------------------


def mode_parts(actual: str) -> tuple[str, ...]:
    return (
        f"is {actual}",
        f"protocol {PROTO.id} requires 8-bit {IO['mode']}",
        "io.mode",
        "no conversion of this mode is allowed",
        FIX,
    )


def test_16bit_rgb_png_is_refused(tmp_path):
    # Pillow decodes 48-bit RGB to mode "RGB": only the PNG header tells the depth
    path = tmp_path / "deep.png"
    path.write_bytes(png_bytes(np.full((4, 4, 3), 40000, np.uint16), 16, 2))
    assert Image.open(path).mode == "RGB"
    refused(path, *mode_parts("16-bit RGB (Pillow mode RGB)"))


def test_16bit_grayscale_png_is_refused(tmp_path):
    img = Image.fromarray(np.arange(20, dtype=np.uint16).reshape(4, 5) * 3000)
    path = save(tmp_path / "gray16.png", img)
    mode = Image.open(path).mode
    assert mode.startswith("I")
    refused(path, *mode_parts(f"16-bit grayscale (Pillow mode {mode})"))


def test_16bit_grayscale_hand_built_is_refused(tmp_path):
    path = tmp_path / "gray16_hand.png"
    path.write_bytes(png_bytes(np.full((3, 3), 1234, np.uint16), 16, 0))
    mode = Image.open(path).mode
    refused(path, *mode_parts(f"16-bit grayscale (Pillow mode {mode})"))


@pytest.mark.parametrize(
    "make,actual",
    [
        (lambda a: Image.fromarray(a[..., 0]), "8-bit grayscale (Pillow mode L)"),
        (lambda a: Image.fromarray(a).convert("P"), "8-bit palette (Pillow mode P)"),
        (
            lambda a: Image.fromarray(np.dstack([a, np.full(a.shape[:2], 255, np.uint8)])),
            "8-bit RGBA (Pillow mode RGBA)",
        ),
        (lambda a: Image.fromarray(a).convert("LA"), "8-bit grayscale+alpha (Pillow mode LA)"),
    ],
    ids=["L", "P", "RGBA", "LA"],
)
def test_other_modes_are_refused(tmp_path, make, actual):
    path = save(tmp_path / "mode.png", make(rgb(6)))
    refused(path, *mode_parts(actual))


def test_refusal_names_the_role(tmp_path):
    path = save(tmp_path / "ref_gray.png", Image.fromarray(rgb(7)[..., 1]))
    refused(path, *mode_parts("8-bit grayscale (Pillow mode L)"), role="reference")


# --- wrong container, broken or missing files ------------------------------------------------


@pytest.mark.parametrize("fmt", ["JPEG", "BMP", "TIFF", "GIF"])
def test_other_container_named_png_is_refused(tmp_path, fmt):
    path = save(tmp_path / "photo.png", Image.fromarray(rgb(8)), fmt)
    refused(
        path,
        f"is a {fmt} file, not a {IO['format']}",
        f"protocol {PROTO.id}: io.format",
        "the extension does not count",
        FIX,
    )


def test_non_image_named_png_is_refused(tmp_path):
    path = tmp_path / "notes.png"
    path.write_text("this is not an image\n" * 10)
    refused(path, "not a readable image", f"protocol {PROTO.id}: io.format {IO['format']}", FIX)


def test_missing_file_is_refused(tmp_path):
    path = tmp_path / "nowhere" / "missing.png"
    refused(path, "file not found", "fix: write the output PNG at this path")


def test_directory_is_refused_as_missing(tmp_path):
    refused(tmp_path, "file not found", "fix: write the style PNG at this path", role="style")


@pytest.fixture
def good_png_bytes() -> bytes:
    buf = io.BytesIO()
    Image.fromarray(rgb(9, 40, 50)).save(buf, "PNG")
    return buf.getvalue()


@pytest.mark.parametrize("keep", [0.5, 0.9])
def test_truncated_png_is_refused(tmp_path, good_png_bytes, keep):
    raw = good_png_bytes
    idat = raw.index(b"IDAT")
    cut = int(len(raw) * keep)
    assert cut > idat + 8  # the cut is inside the image data
    path = tmp_path / "cut.png"
    path.write_bytes(raw[:cut])
    msg = refused(path, "truncated or corrupt PNG (", "); fix: write the file again completely")
    assert msg.endswith("fix: write the file again completely")


@pytest.mark.parametrize("cut", [20, 30])
def test_png_cut_in_its_header_is_refused(tmp_path, good_png_bytes, cut):
    # 8-byte signature + IHDR chunk (4 length, 4 type, 13 data, 4 CRC) = 33 bytes; cut inside it / just after
    path = tmp_path / "cut_header.png"
    path.write_bytes(good_png_bytes[:cut])
    refused(path, "not a readable image", f"io.format {IO['format']}", FIX)


def test_corrupt_image_data_is_refused(tmp_path, good_png_bytes):
    raw = bytearray(good_png_bytes)
    start = raw.index(b"IDAT") + 4
    raw[start + 2 : start + 40] = b"\xff" * 38  # garbage inside the zlib stream
    path = tmp_path / "corrupt.png"
    path.write_bytes(bytes(raw))
    refused(path, "truncated or corrupt PNG (", "); fix: write the file again completely")


# --- EXIF orientation -----------------------------------------------------------------------


def with_orientation(path: Path, arr: np.ndarray, orientation: int) -> Path:
    exif = Image.Exif()
    exif[0x0112] = orientation
    return save(path, Image.fromarray(arr), exif=exif.tobytes())


@pytest.mark.parametrize(
    "orientation,expected",
    [
        (1, lambda a: a),
        (2, np.fliplr),  # mirrored horizontally
        (3, lambda a: np.rot90(a, 2)),  # upside down
        (6, lambda a: np.rot90(a, -1)),  # display needs 90 degrees clockwise
        (8, lambda a: np.rot90(a, 1)),  # display needs 90 degrees counter-clockwise
    ],
)
def test_exif_orientation_is_applied(tmp_path, orientation, expected):
    arr = rgb(10, 4, 6)
    path = with_orientation(tmp_path / f"o{orientation}.png", arr, orientation)
    loaded = load_image(path, PROTO)
    assert np.array_equal(loaded.array, expected(arr))
    if orientation == 1:
        assert "exif_orientation" not in loaded.notes
    else:
        assert loaded.notes["exif_orientation"] == orientation


def test_exif_orientation_6_pixel_positions(tmp_path):
    # stored 4 rows x 6 columns; orientation 6: the stored top row is the displayed right column
    arr = rgb(11, 4, 6)
    loaded = load_image(with_orientation(tmp_path / "o6.png", arr, 6), PROTO).array
    assert loaded.shape == (6, 4, 3)
    assert np.array_equal(loaded[0, 3], arr[0, 0])  # stored top-left -> displayed top-right
    assert np.array_equal(loaded[5, 3], arr[0, 5])  # stored top-right -> displayed bottom-right
    assert np.array_equal(loaded[0, 0], arr[3, 0])  # stored bottom-left -> displayed top-left
    assert np.array_equal(loaded[5, 0], arr[3, 5])  # stored bottom-right -> displayed bottom-left
    assert np.array_equal(loaded[:, 3], arr[0])  # the whole stored top row is the right column


# --- ICC profiles ---------------------------------------------------------------------------

# sRGB primaries Bradford-adapted to D50 (Lindbloom), rows X, Y, Z
SRGB_D50 = np.array(
    [[0.4360747, 0.3850649, 0.1430804], [0.2225045, 0.7168786, 0.0606169], [0.0139322, 0.0971045, 0.7141733]]
)


def wide_to_srgb_numpy(arr: np.ndarray) -> np.ndarray:
    """Independent conversion: gamma decode, wide RGB -> XYZ(D50) -> linear sRGB, clip, sRGB encode."""
    m_wide = np.array([ADOBE_D50["r"], ADOBE_D50["g"], ADOBE_D50["b"]]).T
    lin = (arr / 255.0) ** (GAMMA_U8F8 / 256)
    srgb_lin = np.clip(lin @ (np.linalg.inv(SRGB_D50) @ m_wide).T, 0.0, 1.0)
    enc = np.where(srgb_lin <= 0.0031308, 12.92 * srgb_lin, 1.055 * srgb_lin ** (1 / 2.4) - 0.055)
    return np.rint(enc * 255.0)


def colour_grid() -> np.ndarray:
    v = np.array([0, 40, 100, 160, 220, 255])
    grid = np.stack(np.meshgrid(v, v, v, indexing="ij"), axis=-1).reshape(12, 18, 3)
    return grid.astype(np.uint8)


def test_non_srgb_profile_is_converted(tmp_path):
    arr = colour_grid()
    path = save(tmp_path / "wide.png", Image.fromarray(arr), icc_profile=WIDE_ICC)
    loaded = load_image(path, PROTO)
    assert loaded.notes["icc_converted"] == {
        "from": WIDE_DESC,
        "to": "sRGB",
        "intent": IO["icc"]["rendering_intent"],
    }
    out = loaded.array.astype(int)
    assert out.shape == arr.shape and not np.array_equal(out, arr)

    # 1. the same conversion called here through littlecms
    intent = getattr(ImageCms.Intent, IO["icc"]["rendering_intent"].upper())
    direct = ImageCms.profileToProfile(
        Image.fromarray(arr),
        ImageCms.ImageCmsProfile(io.BytesIO(WIDE_ICC)),
        ImageCms.createProfile("sRGB"),
        renderingIntent=intent,
        outputMode="RGB",
    )
    assert np.array_equal(loaded.array, np.asarray(direct))

    # 2. an independent computation from the primaries and curves (lcms works in fixed point: +-2 levels)
    expected = wide_to_srgb_numpy(arr.astype(np.float64))
    diff = np.abs(out - expected)
    assert diff.max() <= 2, diff.max()
    assert diff.mean() < 0.5

    # 3. the direction, hand-derived: linear sRGB = M rgb with M ~ [[1.398, -0.398, 0], [0, 1, 0],
    #    [0, -0.043, 1.043]]: red' > red iff red > green, blue' < blue iff blue < green. So colours
    #    with r > g > b get more red and less blue (more saturated), b > g > r the other way round
    #    (values not already at 0 or 255). Greys stay neutral; only the curve changes them: grey 40 ->
    #    (40/255)^2.2 = 0.0170 linear -> 1.055 * 0.0170^(1/2.4) - 0.055 = 0.1383 -> 35 in sRGB, while
    #    from about 100 up the two curves agree within a level.
    src = arr.astype(int)
    r, g, b = src[..., 0], src[..., 1], src[..., 2]
    warm = (r > g) & (g > b) & (r < 255) & (b > 0)
    cool = (b > g) & (g > r) & (b < 255) & (r > 0)
    assert warm.sum() >= 4 and cool.sum() >= 4
    assert np.all(out[warm][:, 0] > r[warm]) and np.all(out[warm][:, 2] < b[warm])
    assert np.all(out[cool][:, 2] > b[cool]) and np.all(out[cool][:, 0] < r[cool])
    grey = (src[..., 0] == src[..., 1]) & (src[..., 1] == src[..., 2])
    assert np.all(np.ptp(out[grey], axis=1) == 0)
    grey_map = dict(zip(src[grey][:, 0].tolist(), out[grey][:, 0].tolist()))
    assert grey_map[0] == 0 and grey_map[255] == 255 and grey_map[40] == 35
    assert all(abs(grey_map[v] - v) <= 1 for v in (100, 160, 220))


def test_non_srgb_profile_with_exif_orientation(tmp_path):
    arr = colour_grid()
    exif = Image.Exif()
    exif[0x0112] = 6
    path = save(tmp_path / "wide_rot.png", Image.fromarray(arr), icc_profile=WIDE_ICC, exif=exif.tobytes())
    loaded = load_image(path, PROTO)
    assert loaded.notes["exif_orientation"] == 6
    assert loaded.notes["icc_converted"]["from"] == WIDE_DESC
    plain = load_image(save(tmp_path / "wide.png", Image.fromarray(arr), icc_profile=WIDE_ICC), PROTO).array
    assert np.array_equal(loaded.array, np.rot90(plain, -1))


def test_srgb_profile_is_not_converted(tmp_path):
    assert "srgb" in ImageCms.getProfileDescription(ImageCms.ImageCmsProfile(io.BytesIO(SRGB_ICC))).lower()
    arr = colour_grid()
    path = save(tmp_path / "srgb.png", Image.fromarray(arr), icc_profile=SRGB_ICC)
    assert Image.open(path).info.get("icc_profile")  # the profile is embedded
    loaded = load_image(path, PROTO)
    assert np.array_equal(loaded.array, arr)
    assert "icc_converted" not in loaded.notes


def test_unreadable_profile_is_refused(tmp_path):
    path = save(tmp_path / "bad_icc.png", Image.fromarray(rgb(12)), icc_profile=b"not an ICC profile" * 8)
    refused(
        path,
        "its embedded ICC profile 'unreadable ICC profile' cannot be converted to sRGB",
        "fix: save the file in sRGB",
    )


# --- fit_to_reference -----------------------------------------------------------------------


def test_same_size_is_unchanged(tmp_path):
    loaded = LoadedImage(rgb(13, 8, 9), {"exif_orientation": 3})
    assert fit_to_reference(loaded, (8, 9, 3), tmp_path / "o.png", PROTO, allow_resize=False) is loaded


def test_size_mismatch_is_refused(tmp_path):
    path = tmp_path / "small.png"
    loaded = LoadedImage(rgb(14, 30, 40))  # 40 wide, 30 high
    refused(
        path,
        "size 40x30 differs from the reference's 64x48",
        f"protocol {PROTO.id}: resolution.size = reference",
        "fix: write the output at 64x48, or pass --allow-resize",
        loader=lambda: fit_to_reference(loaded, (48, 64, 3), path, PROTO, allow_resize=False),
    )


def test_allow_resize_is_bicubic_and_noted(tmp_path):
    assert PROTO.section("resolution")["allow_resize_filter"] == "bicubic"
    arr = rgb(15, 30, 40)
    loaded = LoadedImage(arr.copy(), {"exif_orientation": 6})
    fitted = fit_to_reference(loaded, (48, 64, 3), tmp_path / "small.png", PROTO, allow_resize=True)
    expected = np.asarray(Image.fromarray(arr).resize((64, 48), resample=Image.Resampling.BICUBIC))
    assert fitted.array.shape == (48, 64, 3) and fitted.array.dtype == np.uint8
    assert np.array_equal(fitted.array, expected)
    # not some other filter
    bilinear = np.asarray(Image.fromarray(arr).resize((64, 48), resample=Image.Resampling.BILINEAR))
    assert not np.array_equal(fitted.array, bilinear)
    assert fitted.notes == {
        "exif_orientation": 6,
        "resized": {"from": [40, 30], "to": [64, 48], "filter": "bicubic"},
    }
    assert loaded.notes == {"exif_orientation": 6} and np.array_equal(loaded.array, arr)  # input untouched


def test_a_protocol_with_io_icc_null_converts_with_the_documented_defaults(tmp_path):
    # `io.icc: null` passes validation (the section is optional): the defaults (target sRGB, intent
    # perceptual) apply; it once crashed with AttributeError on the first non-sRGB image
    import copy

    import yaml

    data = copy.deepcopy(PROTO.data)
    data["io"]["icc"] = None
    proto_path = tmp_path / "noicc.yaml"
    proto_path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    proto = load_protocol(proto_path)
    path = save(tmp_path / "wide.png", Image.fromarray(colour_grid()), icc_profile=WIDE_ICC)
    loaded = load_image(path, proto)
    assert loaded.notes["icc_converted"]["intent"] == "perceptual"
    assert np.array_equal(loaded.array, load_image(path, PROTO).array)  # pstbench names perceptual too
