"""A tiny list-backed tensor (stand-in). Enough for smoke tests, nothing more."""

from __future__ import annotations

import contextlib
import random
from typing import Any, Iterable


def _shape(data: Any) -> tuple:
    if isinstance(data, (list, tuple)):
        return (len(data),) + (_shape(data[0]) if data else ())
    return ()


def _map(fn, a: Any, b: Any) -> Any:
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            raise RuntimeError(f"The size of tensor a ({len(a)}) must match the size of tensor b ({len(b)})")
        return [_map(fn, x, y) for x, y in zip(a, b)]
    if isinstance(a, list):
        return [_map(fn, x, b) for x in a]
    if isinstance(b, list):
        return [_map(fn, a, y) for y in b]
    return fn(a, b)


def _flat(data: Any) -> list:
    if isinstance(data, list):
        return [x for item in data for x in _flat(item)]
    return [data]


def _listify(data: Any) -> Any:
    if isinstance(data, Tensor):
        return data.tolist()
    if isinstance(data, (list, tuple)):
        return [_listify(x) for x in data]
    return data


class Tensor:
    def __init__(self, data: Any) -> None:
        self._data = _listify(data)

    @property
    def shape(self) -> tuple:
        return _shape(self._data)

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.shape[dim]

    def dim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        return len(_flat(self._data))

    def tolist(self) -> Any:
        return self._data

    def item(self):
        flat = _flat(self._data)
        if len(flat) != 1:
            raise RuntimeError(f"a Tensor with {len(flat)} elements cannot be converted to Scalar")
        return flat[0]

    def sum(self) -> "Tensor":
        return Tensor(sum(_flat(self._data)))

    def mean(self) -> "Tensor":
        flat = _flat(self._data)
        return Tensor(sum(flat) / len(flat))

    def max(self) -> "Tensor":
        return Tensor(max(_flat(self._data)))

    def min(self) -> "Tensor":
        return Tensor(min(_flat(self._data)))

    def abs(self) -> "Tensor":
        return Tensor(_map(lambda x, _: abs(x), self._data, 0))

    def clamp(self, min: float | None = None, max: float | None = None) -> "Tensor":  # noqa: A002
        def f(x, _):
            if min is not None and x < min:
                return min
            if max is not None and x > max:
                return max
            return x
        return Tensor(_map(f, self._data, 0))

    def to(self, *args: Any, **kwargs: Any) -> "Tensor":
        return self

    def detach(self) -> "Tensor":
        return self

    def _op(self, other: Any, fn) -> "Tensor":
        other = other._data if isinstance(other, Tensor) else other
        return Tensor(_map(fn, self._data, other))

    def __add__(self, other): return self._op(other, lambda a, b: a + b)
    __radd__ = __add__
    def __sub__(self, other): return self._op(other, lambda a, b: a - b)
    def __mul__(self, other): return self._op(other, lambda a, b: a * b)
    __rmul__ = __mul__
    def __truediv__(self, other): return self._op(other, lambda a, b: a / b)

    def __len__(self) -> int:
        return len(self._data) if isinstance(self._data, list) else 0

    def __getitem__(self, i) -> "Tensor":
        return Tensor(self._data[i])

    def __iter__(self):
        return (Tensor(x) for x in self._data)

    def __eq__(self, other: object) -> bool:  # whole-tensor equality (real torch is elementwise)
        return self._data == (other._data if isinstance(other, Tensor) else other)

    def __float__(self) -> float:
        return float(self.item())

    def __repr__(self) -> str:
        return f"tensor({self._data!r})"


def tensor(data: Any, dtype: Any = None) -> Tensor:
    return Tensor(data)


def zeros(*shape: int) -> Tensor:
    return Tensor(_full(list(shape), 0.0))


def ones(*shape: int) -> Tensor:
    return Tensor(_full(list(shape), 1.0))


def _full(shape: list, value: float) -> Any:
    if not shape:
        return value
    return [_full(shape[1:], value) for _ in range(shape[0])]


def arange(n: int) -> Tensor:
    return Tensor(list(range(n)))


def stack(tensors: Iterable[Tensor]) -> Tensor:
    return Tensor([t.tolist() for t in tensors])


def manual_seed(seed: int) -> None:
    random.seed(seed)


@contextlib.contextmanager
def no_grad():
    yield
