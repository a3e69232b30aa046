"""Read a PyTorch checkpoint's tensors as numpy arrays without torch and without running pickled code.

A `.pth` file is a pickle in which tensors are reduced to calls of a few functions in
`torch._utils` over "storages" stored beside the pickle. A plain `pickle.load` would
import and call whatever globals the file names, so a crafted file could run code.
`load_tensors` uses an Unpickler whose `find_class` resolves only:

- the tensor and parameter rebuilders (`torch._utils._rebuild_tensor`,
  `_rebuild_tensor_v2`, `_rebuild_parameter`), which here build a reference to
  a storage range, not a torch object;
- the typed storage classes (`torch.FloatStorage`, ...), used as dtype markers;
- `collections.OrderedDict`.

Any other global raises `CheckpointError` naming it. Both of torch's formats are read:
the legacy stream (`torch.save(..., _use_new_zipfile_serialization=False)`, what
torchvision's released ImageNet weights use: magic number, protocol version, system
info, the object pickle, the storage key list, then each storage as an int64 element
count followed by its little-endian bytes) and the zip archive (`archive/data.pkl`
with one `archive/data/<key>` file per storage).
"""

from __future__ import annotations

import collections
import io
import logging
import os
import pickle
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL = 1001

_STORAGE_DTYPES = {
    "FloatStorage": np.float32,
    "DoubleStorage": np.float64,
    "HalfStorage": np.float16,
    "BFloat16Storage": np.uint16,  # widened to float32 when the tensor is built
    "LongStorage": np.int64,
    "IntStorage": np.int32,
    "ShortStorage": np.int16,
    "CharStorage": np.int8,
    "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
}


class CheckpointError(ValueError):
    """The file is not a checkpoint this reader accepts (corrupt, truncated or naming other code)."""


@dataclass(frozen=True)
class _StorageType:
    name: str
    dtype: Any


class _Storage:
    """One storage: its dtype, element count and (once read) its flat array."""

    def __init__(self, kind: _StorageType, numel: int) -> None:
        self.kind = kind
        self.numel = int(numel)
        self.data: np.ndarray | None = None


@dataclass
class _View:
    root: _Storage
    offset: int  # in elements
    numel: int


@dataclass
class _TensorRef:
    storage: _Storage | _View
    offset: int
    size: tuple[int, ...]
    stride: tuple[int, ...]

    def to_numpy(self) -> np.ndarray:
        base, offset = self.storage, self.offset
        if isinstance(base, _View):
            offset += base.offset
            base = base.root
        if base.data is None:
            raise CheckpointError("a tensor refers to a storage whose bytes are missing from the file")
        flat = base.data
        if not self.size:
            out = flat[offset : offset + 1].reshape(())
        else:
            needed = offset + 1 + sum((n - 1) * s for n, s in zip(self.size, self.stride) if n > 0)
            if min(self.size) > 0 and needed > flat.size:
                raise CheckpointError(f"a tensor of shape {self.size} runs past the end of its storage")
            item = flat.itemsize
            out = np.lib.stride_tricks.as_strided(
                flat[offset:], shape=self.size, strides=tuple(s * item for s in self.stride), writeable=False
            )
        out = np.array(out)  # own the memory, contiguous
        if base.kind.name == "BFloat16Storage":
            out = (out.astype(np.uint32) << 16).view(np.float32)
        return out


def _rebuild_tensor(storage: Any, storage_offset: int, size: Any, stride: Any, *_: Any) -> _TensorRef:
    if not isinstance(storage, (_Storage, _View)):
        raise CheckpointError(f"a tensor's storage is a {type(storage).__name__}, not a storage")
    return _TensorRef(storage, int(storage_offset), tuple(int(v) for v in size), tuple(int(v) for v in stride))


def _rebuild_parameter(data: Any, *_: Any) -> Any:
    return data


_ALLOWED: dict[tuple[str, str], Any] = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
}


class _RestrictedUnpickler(pickle.Unpickler):
    """Resolves only the globals in _ALLOWED and the storage classes; storages come from `storages`."""

    def __init__(self, file: Any, storages: dict[str, _Storage], zip_reader: Any = None) -> None:
        super().__init__(file, encoding="latin1")
        self.storages = storages
        self.zip_reader = zip_reader

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return _ALLOWED[(module, name)]
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(name, _STORAGE_DTYPES[name])
        raise CheckpointError(
            f"the checkpoint names {module}.{name}, which this reader does not load (it rebuilds tensors and "
            "OrderedDicts only, so that no code in the file runs); save a plain state_dict of tensors"
        )

    def persistent_load(self, pid: Any) -> Any:
        if not isinstance(pid, tuple) or not pid:
            raise CheckpointError(f"unexpected persistent id {pid!r}")
        tag = pid[0].decode("ascii") if isinstance(pid[0], bytes) else pid[0]
        if tag != "storage":
            raise CheckpointError(f"the checkpoint holds a {tag!r} object; only tensor storages are read")
        kind, key, _location, numel = pid[1], str(pid[2]), pid[3], int(pid[4])
        if not isinstance(kind, _StorageType):
            raise CheckpointError(f"storage {key} has type {kind!r}, not a typed storage")
        storage = self.storages.get(key)
        if storage is None:
            storage = self.storages[key] = _Storage(kind, numel)
            if self.zip_reader is not None:
                storage.data = self.zip_reader(key, kind, numel)
        view = pid[5] if len(pid) > 5 else None
        if view is not None:  # legacy views: (view key, offset, size) into the root storage
            _view_key, offset, size = view
            return _View(storage, int(offset), int(size))
        return storage


def _materialise(obj: Any) -> Any:
    if isinstance(obj, _TensorRef):
        return obj.to_numpy()
    if isinstance(obj, dict):
        return type(obj)((k, _materialise(v)) for k, v in obj.items()) if isinstance(obj, collections.OrderedDict) \
            else {k: _materialise(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_materialise(v) for v in obj)
    return obj


def _load_legacy(f: io.BufferedReader, path: Path) -> Any:
    def header() -> Any:
        return _RestrictedUnpickler(f, {}).load()

    magic = header()
    if magic != LEGACY_MAGIC:
        raise CheckpointError(f"{path} is not a PyTorch checkpoint (wrong magic number)")
    protocol = header()
    if protocol != LEGACY_PROTOCOL:
        raise CheckpointError(f"{path}: unsupported legacy protocol version {protocol!r}")
    sys_info = header()
    if isinstance(sys_info, dict) and sys_info.get("little_endian") is False:
        raise CheckpointError(f"{path} was written on a big-endian machine; re-save it on a little-endian one")
    storages: dict[str, _Storage] = {}
    result = _RestrictedUnpickler(f, storages).load()
    keys = _RestrictedUnpickler(f, storages).load()
    if not isinstance(keys, list):
        raise CheckpointError(f"{path}: the storage key list is missing")
    for key in keys:
        storage = storages.get(str(key))
        if storage is None:
            raise CheckpointError(f"{path}: storage {key} is listed but no tensor uses it")
        raw = f.read(8)
        if len(raw) != 8:
            raise CheckpointError(f"{path} is truncated (storage {key} has no header)")
        (count,) = struct.unpack("<q", raw)
        itemsize = np.dtype(storage.kind.dtype).itemsize
        data = f.read(count * itemsize)
        if count < 0 or len(data) != count * itemsize:
            raise CheckpointError(f"{path} is truncated (storage {key} needs {count * itemsize} bytes)")
        storage.data = np.frombuffer(data, dtype=np.dtype(storage.kind.dtype).newbyteorder("<"))
    return result


def _load_zip(path: Path) -> Any:
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        pkl = next((n for n in names if n.endswith("/data.pkl") or n == "data.pkl"), None)
        if pkl is None:
            raise CheckpointError(f"{path} is a zip file without data.pkl: not a PyTorch checkpoint")
        prefix = pkl[: -len("data.pkl")]

        def read(key: str, kind: _StorageType, numel: int) -> np.ndarray:
            name = f"{prefix}data/{key}"
            try:
                raw = archive.read(name)
            except KeyError:
                raise CheckpointError(f"{path}: storage file {name} is missing") from None
            itemsize = np.dtype(kind.dtype).itemsize
            if len(raw) < numel * itemsize:
                raise CheckpointError(f"{path}: storage {key} is truncated")
            return np.frombuffer(raw[: numel * itemsize], dtype=np.dtype(kind.dtype).newbyteorder("<"))

        with archive.open(pkl) as f:
            return _RestrictedUnpickler(io.BytesIO(f.read()), {}, zip_reader=read).load()


def load_tensors(path: str | os.PathLike) -> Any:
    """The object saved in a PyTorch checkpoint, with every tensor as a numpy array.

    Parameters: path, a `.pth`/`.pt` file in torch's legacy or zip format.
    Returns what was saved (typically an OrderedDict name -> np.ndarray), tensors copied
    into contiguous arrays of their dtype (bfloat16 widened to float32).
    Raises FileNotFoundError for a missing file, and CheckpointError (a ValueError) for a
    file that is truncated, corrupt, not a checkpoint, or that names any global other
    than torch's tensor rebuilders, storage classes and OrderedDict.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    try:
        if zipfile.is_zipfile(path):
            result = _load_zip(path)
        else:
            with open(path, "rb") as f:
                result = _load_legacy(f, path)
    except CheckpointError:
        raise
    except (pickle.UnpicklingError, EOFError, struct.error, ValueError, TypeError, IndexError,
            AttributeError, KeyError, zipfile.BadZipFile) as exc:
        raise CheckpointError(f"{path} is not a readable PyTorch checkpoint ({type(exc).__name__}: {exc})") from exc
    return _materialise(result)


def load_state_dict(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """A checkpoint's flat name -> array mapping (unwrapping a top-level 'state_dict' or 'model' entry).

    Raises CheckpointError when the file holds no mapping of names to arrays.
    """
    obj = load_tensors(path)
    for key in ("state_dict", "model"):
        if isinstance(obj, dict) and isinstance(obj.get(key), dict):
            obj = obj[key]
    if not isinstance(obj, dict):
        raise CheckpointError(f"{path} holds a {type(obj).__name__}, not a state dict of named tensors")
    out = {str(k): v for k, v in obj.items() if isinstance(v, np.ndarray)}
    if not out:
        raise CheckpointError(f"{path} holds no tensors")
    return out
