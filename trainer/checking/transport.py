"""The one message framing between the trainer's processes (no torch here).

A frame is a JSON header plus raw byte blobs (tensor data), never a pickle:

    !II  header length, number of blobs
    header (JSON, UTF-8)
    per blob: !Q length, then the bytes

Frames travel on byte streams (pipes, stream sockets: :func:`send` and
:func:`receive`) and, when file descriptors go with them, as single datagrams
on ``SOCK_SEQPACKET`` sockets (:func:`send_with_fds`, :func:`receive_with_fds`).
The bytes are the same either way.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
from typing import Any

MAX_MESSAGE = 512 * 1024 * 1024  # a frame larger than this is refused, not read
MAX_DATAGRAM = 64 * 1024  # control frames (with descriptors) are small

_HEAD = struct.Struct("!II")  # header length, number of blobs
_BLOB = struct.Struct("!Q")

Header = dict[str, Any]


class WireError(Exception):
    """The other side sent something that is not a valid frame, or went away."""


class PeerGone(WireError):
    """End of file: the other process ended or closed its end."""


def pack(header: Header, blobs: list[bytes] | None = None) -> bytes:
    blobs = blobs or []
    head = json.dumps(header).encode()
    parts = [_HEAD.pack(len(head), len(blobs)), head]
    for blob in blobs:
        parts += [_BLOB.pack(len(blob)), blob]
    return b"".join(parts)


def _header(data: bytes) -> Header:
    try:
        header = json.loads(data)
    except ValueError as error:
        raise WireError(f"a frame header is not JSON: {error}") from None
    if not isinstance(header, dict):
        raise WireError("a frame header is not an object")
    return header


def unpack(data: bytes) -> tuple[Header, list[bytes]]:
    """A whole frame held in memory (a datagram)."""
    if len(data) < _HEAD.size:
        raise PeerGone("the other process ended") if not data else WireError("a frame is cut")
    head_size, count = _HEAD.unpack_from(data)
    offset = _HEAD.size + head_size
    header = _header(data[_HEAD.size : offset])
    blobs = []
    for _ in range(count):
        if offset + _BLOB.size > len(data):
            raise WireError("a frame is cut")
        (size,) = _BLOB.unpack_from(data, offset)
        offset += _BLOB.size
        blobs.append(data[offset : offset + size])
        offset += size
    if offset != len(data):
        raise WireError("a frame has trailing bytes")
    return header, blobs


def send(fd: int, header: Header, blobs: list[bytes] | None = None) -> None:
    write_all(fd, pack(header, blobs))


def write_all(fd: int, data: bytes) -> None:
    """All of ``data`` to ``fd``, however many writes it takes (a pipe takes 64 KiB)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def read_exact(fd: int, size: int) -> bytes:
    chunks = []
    remaining = size
    while remaining:
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise PeerGone("the other process ended")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def receive(fd: int) -> tuple[Header, list[bytes]]:
    head_size, count = _HEAD.unpack(read_exact(fd, _HEAD.size))
    if head_size > MAX_MESSAGE or count > 100_000:
        raise WireError("a frame is too large")
    header = _header(read_exact(fd, head_size))
    blobs = []
    total = head_size
    for _ in range(count):
        (size,) = _BLOB.unpack(read_exact(fd, _BLOB.size))
        total += size
        if total > MAX_MESSAGE:
            raise WireError("a frame is too large")
        blobs.append(read_exact(fd, size))
    return header, blobs


def send_with_fds(sock: socket.socket, header: Header, fds: list[int] | None = None) -> None:
    """One frame as one datagram, with descriptors attached (``SOCK_SEQPACKET``)."""
    socket.send_fds(sock, [pack(header)], fds or [])


def receive_with_fds(sock: socket.socket, max_fds: int = 4) -> tuple[Header, list[int]]:
    """One datagram frame and the descriptors that came with it; PeerGone at end of file."""
    data, fds, _, _ = socket.recv_fds(sock, MAX_DATAGRAM, max_fds)
    try:
        header, _ = unpack(data)
    except WireError:
        for fd in fds:
            os.close(fd)
        raise
    return header, list(fds)


class FrameReader:
    """Frames from a byte stream read in arbitrary chunks (headers only; no blobs expected)."""

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, chunk: bytes) -> list[Header]:
        self._pending += chunk
        headers = []
        while len(self._pending) >= _HEAD.size:
            head_size, count = _HEAD.unpack_from(self._pending)
            end = _HEAD.size + head_size
            if count or head_size > MAX_MESSAGE:
                self._pending = b""  # not a frame of ours: drop it all
                break
            if len(self._pending) < end:
                break
            with contextlib.suppress(WireError):
                headers.append(_header(self._pending[_HEAD.size : end]))
            self._pending = self._pending[end:]
        return headers
