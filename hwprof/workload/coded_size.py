"""The frame size a video's packets state, read from their own headers, to find a size that changes mid-stream.

OpenCV's FFmpeg reader sizes its output once, from the container's first stream description, and converts every
later frame to that size: clips of different sizes joined into one file (`cat a.ts b.ts`, an MJPEG AVI joined
likewise, a recorded stream that switched resolution) read as one size, rescaled without a word, and no
VideoCapture property moves at the change. The packets do say it: their codec headers carry the coded size. This
reads them for the codecs whose headers are a few fields (MPEG-4 Part 2's VOL, MPEG-1/2's sequence header, each
JPEG's SOF); other codecs (H.264, HEVC, VP9, AV1) need a bitstream parser and are not checked, nor is a video
whose headers are in the container only (MP4's sample description holds one size).
"""

from __future__ import annotations

SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
"""JPEG start-of-frame markers (not DHT, JPG, DAC)."""
HEADER_BYTES = 4096
"""How much of a packet's start is searched: the headers come before the picture data."""
MPEG4_TAGS = frozenset({"fmp4", "mp4v", "xvid", "divx", "dx50", "m4s2", "mp4s"})
"""FOURCCs (as OpenCV reports them, lower-cased) of MPEG-4 Part 2."""
MPEG12_TAGS = frozenset({"mpg1", "mpg2", "pim1", "pim2", "mpeg", "mp1v", "mp2v", "mpgv"})
"""FOURCCs of MPEG-1 and MPEG-2 video. The two families share start codes with other meanings (0xB3 is MPEG-4's
group of VOPs, 0x20 to 0x2F are MPEG-1/2 slices): the codec picks the reading."""


def packet_size(data: bytes, fourcc: str) -> tuple[int, int] | None:
    """(width, height) stated by a packet's codec header, or None when it has none this module reads.
    fourcc: the stream's codec as OpenCV names it ("FMP4", "mpg1", "MJPG")."""
    if data[:2] == b"\xff\xd8":
        return _jpeg_size(data)
    codec = fourcc.lower()
    if codec not in MPEG4_TAGS and codec not in MPEG12_TAGS:
        return None
    at = data.find(b"\x00\x00\x01")
    while 0 <= at < len(data) - 4:
        code = data[at + 3]
        if codec in MPEG12_TAGS and code == 0xB3:  # sequence header: 12-bit width, 12-bit height
            b = data[at + 4 : at + 7]
            return ((b[0] << 4) | (b[1] >> 4), ((b[1] & 0xF) << 8) | b[2]) if len(b) == 3 else None
        if codec in MPEG4_TAGS and 0x20 <= code <= 0x2F:  # video object layer
            return _vol_size(data, at + 4)
        at = data.find(b"\x00\x00\x01", at + 3)
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 9 <= len(data) and data[at] == 0xFF:
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in SOF_MARKERS:
            return int.from_bytes(data[at + 7 : at + 9], "big"), int.from_bytes(data[at + 5 : at + 7], "big")
        at += 2 + int.from_bytes(data[at + 2 : at + 4], "big")
    return None


class _Bits:
    """Big-endian bits of `data` from byte `start`; past its end, reads raise IndexError."""

    def __init__(self, data: bytes, start: int) -> None:
        self.data = data
        self.pos = start * 8

    def read(self, n: int) -> int:
        value = 0
        for _ in range(n):
            byte = self.data[self.pos >> 3]
            value = (value << 1) | ((byte >> (7 - (self.pos & 7))) & 1)
            self.pos += 1
        return value


def _vol_size(data: bytes, start: int) -> tuple[int, int] | None:
    """video_object_layer_width and _height (ISO/IEC 14496-2, 6.2.3), or None for a non-rectangular layer."""
    bits = _Bits(data, start)
    try:
        bits.read(1 + 8)  # random_accessible_vol, video_object_type_indication
        verid = 1
        if bits.read(1):  # is_object_layer_identifier
            verid = bits.read(4)
            bits.read(3)
        if bits.read(4) == 0xF:  # aspect_ratio_info: an extended pixel aspect ratio follows
            bits.read(16)
        if bits.read(1):  # vol_control_parameters
            bits.read(3)  # chroma_format, low_delay
            if bits.read(1):  # vbv_parameters: bit rate, buffer size and occupancy with their markers
                bits.read(79)
        shape = bits.read(2)
        if shape == 3 and verid != 1:
            bits.read(4)
        bits.read(1)  # marker
        resolution = bits.read(16)
        bits.read(1)  # marker
        if bits.read(1):  # fixed_vop_rate
            bits.read(max(1, (resolution - 1).bit_length()))
        if shape != 0:
            return None
        bits.read(1)
        width = bits.read(13)
        bits.read(1)
        return width, bits.read(13)
    except IndexError:
        return None
