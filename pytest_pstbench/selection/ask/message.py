"""What a model is asked for one request of a selection track, in the official VAB toolkit's layout: the
header text (the protocol's template for the prompt type), the user message's parts (the header, then per
image a caption and the image), and the bytes sent for each candidate image (the protocol's re-encoding).
"""

from __future__ import annotations

from pathlib import Path

from pytest_pstbench.core.errors import UserError

_ORIENTATION = 0x0112  # the EXIF Orientation tag


def label_list(labels: list[str]) -> str:
    """'A and B', 'A, B and C', ..."""
    return labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]


def prompt_text(params, prompt_type: str, k: int) -> str:
    """The header text of a request: the protocol's template with {n} (= {k}), {labels}, {label_list}, {options}."""
    labels = params.labels[:k]
    option_line = (params.message or {}).get("option_line", "{label}. Image {label}")
    options = "\n".join(option_line.format(label=la) for la in labels)
    return params.template(prompt_type).format(
        n=k, k=k, labels=", ".join(labels), label_list=label_list(labels), options=options
    )


def message_content(params, prompt_type: str, labels: list[str], images: list[str]) -> list[dict]:
    """The user message's parts as the official toolkit lays them out: the header text, then per image
    a text part (message.image_caption, "\\nImage X:") followed by the image (here its path in the export)."""
    caption = (params.message or {}).get("image_caption", "\nImage {label}:")
    content = [{"type": "text", "text": prompt_text(params, prompt_type, len(labels))}]
    for label, rel in zip(labels, images):
        content.append({"type": "text", "text": caption.format(label=label)})
        content.append({"type": "image", "path": rel})
    return content


def encode_image(src: Path, image_spec: dict | None) -> tuple[bytes, str]:
    """The bytes sent for one candidate image and their file suffix. With the protocol's
    `message.image` (official: Pillow open, the EXIF orientation applied when the image carries the tag
    (`exif_orientation: when_tagged`, as `datasets` decodes it), convert("RGB"), JPEG at quality 85, no
    resizing); without it, the file's own bytes."""
    if not image_spec:
        return Path(src).read_bytes(), Path(src).suffix.lower()
    import io

    from PIL import Image, ImageOps

    from pytest_pstbench.core.files.images import check_header_size

    try:
        with Image.open(src) as im:
            check_header_size(str(src), *im.size)  # the kit's bound, from the header, before anything is decoded
            im.load()
            if (
                image_spec.get("exif_orientation", "none") == "when_tagged"
                and im.getexif().get(_ORIENTATION) is not None
            ):
                im = ImageOps.exif_transpose(im)  # as `datasets` decodes a tagged image (the official pipeline)
            buf = io.BytesIO()
            im.convert(image_spec["mode"]).save(buf, format=image_spec["format"], quality=int(image_spec["quality"]))
    except Image.DecompressionBombError as exc:  # not an OSError
        raise UserError(
            f"{src}: refused by Pillow's decompression-bomb check ({' '.join(str(exc).split())}); "
            "fix: replace the candidate file with a smaller image"
        ) from None
    except (OSError, ValueError, SyntaxError) as exc:  # Pillow raises all three for files it cannot read
        raise UserError(
            f"{src}: cannot read the image ({' '.join(str(exc).split())}); "
            "fix: replace the candidate file with a readable image"
        ) from None
    return buf.getvalue(), ".jpg"
