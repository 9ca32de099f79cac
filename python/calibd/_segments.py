"""The rules of a segment key and value (calibd-protocol(7), "seg"), as
libcalib's calib_proto_seg_key_ok and calib_proto_seg_value_ok take them:
shared by the producer, which sends them, and the follower, which reads
them back in a params message's "segments"."""

NAME_MAX = 64  # bytes of a segment key or value
KEY_CHARS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def key_ok(key: object) -> bool:
    """1..64 bytes of [A-Za-z0-9_.-]."""
    if not isinstance(key, str):
        return False
    b = key.encode("utf-8", "surrogateescape")
    return 1 <= len(b) <= NAME_MAX and set(b) <= KEY_CHARS


def value_ok(value: object) -> bool:
    """1..64 bytes of UTF-8 without a control character (C0, DEL, C1)."""
    if not isinstance(value, str):
        return False
    try:
        b = value.encode("utf-8")  # a lone surrogate is no UTF-8
    except UnicodeEncodeError:
        return False
    return 1 <= len(b) <= NAME_MAX and not any(c < " " or "\x7f" <= c <= "\x9f" for c in value)
