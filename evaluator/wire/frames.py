"""Framed messages over a private socket: a JSON header plus raw tensor bytes.

The driver reads what an untrusted process sends, so nothing here unpickles: a frame is a length, a JSON header and
raw buffers whose dtype and shape the header names. Every header carries the evaluation's nonce; a frame without it
is refused. Tensors are raw bytes received into a uint8 tensor and viewed as the header's dtype and shape, which
cannot run code.
"""

from __future__ import annotations

import json
import select
import socket
import struct
import time
from collections.abc import Callable, Sequence
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


def decode_tensors(metas: list[dict[str, Any]], blobs: Sequence[bytes | bytearray | torch.Tensor]) -> list[torch.Tensor]:
    """The tensors a frame's header names, from their received bytes (a uint8 tensor each, as `Channel.recv` reads
    them, or bytes)."""
    out = []
    for meta, raw in zip(metas, blobs, strict=True):
        dtype = _DTYPES.get(str(meta.get("dtype")))
        if dtype is None:
            raise ProtocolError(f"unsupported tensor dtype {meta.get('dtype')!r}")
        shape = meta.get("shape")
        if not isinstance(shape, list) or not all(isinstance(s, int) for s in shape):
            raise ProtocolError("tensor shape must be a list of ints")
        numel = 1
        for s in shape:
            if s < 0:
                raise ProtocolError("negative tensor dimension")
            numel *= s
        elem = torch.empty((), dtype=dtype).element_size()
        size = raw.numel() if isinstance(raw, torch.Tensor) else len(raw)
        if numel * elem != size:
            raise ProtocolError("tensor byte count does not match its shape")
        if not size:
            out.append(torch.empty(0, dtype=dtype).reshape(shape))
            continue
        if not isinstance(raw, torch.Tensor):
            raw = torch.frombuffer(raw if isinstance(raw, bytearray) else bytearray(raw), dtype=torch.uint8)
        out.append(raw.view(dtype).reshape(shape))
    return out


def uninitialised_bytes(n: int) -> torch.Tensor:
    """PyTorch's own uninitialised uint8 buffer of `n` bytes: what a channel receives a tensor into by default."""
    return torch.empty(n, dtype=torch.uint8)


class Channel:
    """One end of a socket pair; `send` and `recv` frames of (header, tensors). `buffer(n)`: an uninitialised uint8
    tensor of n bytes, which a received tensor's bytes are read into (the driver's come from `heap.malloc_bytes`)."""

    def __init__(self, sock: socket.socket, nonce: str,
                 buffer: Callable[[int], torch.Tensor] = uninitialised_bytes):
        self.sock = sock
        self.nonce = nonce
        self._buffer = buffer

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
        blobs = [self._read_blob(int(m["nbytes"]), deadline) for m in metas]
        return header, decode_tensors(metas, blobs)

    def _read(self, n: int, deadline: float | None) -> bytearray:
        """Exactly `n` bytes (a header)."""
        buf = bytearray(n)
        self._fill(memoryview(buf), deadline)
        return buf

    def _read_blob(self, n: int, deadline: float | None) -> torch.Tensor:
        """Exactly `n` bytes of a tensor, received into one uint8 tensor (not zeroed first, nor copied again: a
        bytearray's zeroing was a tenth of the driver's time in a cold evaluation's trials). The buffer grows with
        what arrives, from at most `FIRST_BUFFER_BYTES`: a header may promise far more than is ever sent."""
        buf = self._buffer(min(n, FIRST_BUFFER_BYTES))
        got = self._fill(buf.numpy().data, deadline)
        while got < n:  # doubling: a few copies at most
            grown = self._buffer(min(2 * buf.numel(), n))
            grown[:got] = buf
            buf = grown
            got += self._fill(buf.numpy().data[got:], deadline)
        return buf

    def _fill(self, view: memoryview, deadline: float | None) -> int:
        """`view` filled from the socket; returns its length."""
        got, n = 0, len(view)
        try:
            while got < n:
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise ChannelTimeout()
                    ready, _, _ = select.select([self.sock], [], [], left)
                    if not ready:
                        raise ChannelTimeout()
                try:
                    k = self.sock.recv_into(view[got:], min(n - got, 2**22))
                except (ConnectionResetError, BrokenPipeError, OSError):
                    raise ChannelClosed() from None
                if not k:
                    raise ChannelClosed()
                got += k
        finally:
            view.release()
        return n

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
