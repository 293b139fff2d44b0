"""Framed messages over a private socket: a JSON header plus raw tensor bytes.

The driver reads what an untrusted process sends, so nothing here unpickles: a frame is a length, a JSON header and
raw buffers whose dtype and shape the header names. Every header carries the evaluation's nonce; a frame without it
is refused. Tensors are rebuilt with `torch.frombuffer`, which cannot run code.
"""

from __future__ import annotations

import json
import select
import socket
import struct
import time
from collections.abc import Sequence
from typing import Any

import torch

_LEN = struct.Struct("!Q")
MAX_FRAME_BYTES = 8 * 2**30
FIRST_BUFFER_BYTES = 2**28

_DTYPES = {str(d): d for d in (
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int16, torch.int32,
    torch.int64, torch.bool, torch.complex64, torch.complex128,
)}


class ChannelClosed(Exception):
    """The other side went away (exited, crashed or was killed)."""


class ChannelTimeout(Exception):
    """No complete frame arrived before the deadline."""


class ProtocolError(Exception):
    """A frame that is malformed, too large, or lacks this evaluation's nonce."""


def encode_tensors(tensors: list[torch.Tensor]) -> tuple[list[dict[str, Any]], list[memoryview]]:
    """Each tensor's bytes as a view of its (CPU, contiguous) memory: sent without another copy."""
    metas, blobs = [], []
    for t in tensors:
        t = t.detach().to("cpu").contiguous()
        raw = t.reshape(-1).view(torch.uint8).numpy().data if t.numel() else memoryview(b"")  # 0-d: reshape first
        metas.append({"dtype": str(t.dtype), "shape": list(t.shape), "nbytes": raw.nbytes})
        blobs.append(raw)
    return metas, blobs


def decode_tensors(metas: list[dict[str, Any]], blobs: Sequence[bytes | bytearray]) -> list[torch.Tensor]:
    out = []
    for meta, raw in zip(metas, blobs, strict=True):
        dtype = _DTYPES.get(str(meta.get("dtype")))
        if dtype is None:
            raise ProtocolError(f"unsupported tensor dtype {meta.get('dtype')!r}")
        shape = [int(s) for s in meta["shape"]]
        numel = 1
        for s in shape:
            if s < 0:
                raise ProtocolError("negative tensor dimension")
            numel *= s
        elem = torch.empty((), dtype=dtype).element_size()
        if numel * elem != len(raw):
            raise ProtocolError("tensor byte count does not match its shape")
        writable = raw if isinstance(raw, bytearray) else bytearray(raw)  # received frames are bytearrays already
        t = torch.frombuffer(writable, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
        out.append(t.reshape(shape))
    return out


class Channel:
    """One end of a socket pair; `send` and `recv` frames of (header, tensors)."""

    def __init__(self, sock: socket.socket, nonce: str):
        self.sock = sock
        self.nonce = nonce

    def send(self, header: dict[str, Any], tensors: list[torch.Tensor] | None = None) -> None:
        metas, blobs = encode_tensors(tensors or [])
        head = json.dumps({**header, "nonce": self.nonce, "tensors": metas}).encode()
        self.sock.sendall(_LEN.pack(len(head)) + head)
        for blob in blobs:
            if blob.nbytes:
                self.sock.sendall(blob)

    def recv(self, timeout_s: float | None = None) -> tuple[dict[str, Any], list[torch.Tensor]]:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        (n,) = _LEN.unpack(self._read(_LEN.size, deadline))
        if n > 2**24:
            raise ProtocolError("header too large")
        try:
            header = json.loads(self._read(n, deadline))
        except ValueError:
            raise ProtocolError("header is not JSON") from None
        if not isinstance(header, dict) or header.get("nonce") != self.nonce:
            raise ProtocolError("frame without this evaluation's nonce")
        metas = header.pop("tensors", [])
        if not isinstance(metas, list) or sum(int(m.get("nbytes", 0)) for m in metas) > MAX_FRAME_BYTES:
            raise ProtocolError("tensor payload too large")
        blobs = [self._read(int(m["nbytes"]), deadline) for m in metas]
        return header, decode_tensors(metas, blobs)

    def _read(self, n: int, deadline: float | None) -> bytearray:
        """Exactly `n` bytes, received into one buffer (a tensor's bytes are not copied again). The buffer grows
        with what arrives, from at most `FIRST_BUFFER_BYTES`: a header may promise far more than is ever sent."""
        buf = bytearray(min(n, FIRST_BUFFER_BYTES))
        view, got = memoryview(buf), 0
        while got < n:
            if got == len(buf):
                view.release()
                buf.extend(bytes(min(len(buf), n - len(buf))))  # doubling: a few copies at most
                view = memoryview(buf)
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ChannelTimeout()
                ready, _, _ = select.select([self.sock], [], [], left)
                if not ready:
                    raise ChannelTimeout()
            try:
                k = self.sock.recv_into(view[got:], min(len(buf) - got, 2**22))
            except (ConnectionResetError, BrokenPipeError, OSError):
                raise ChannelClosed() from None
            if not k:
                raise ChannelClosed()
            got += k
        view.release()
        return buf

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
