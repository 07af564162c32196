"""torch.nn (stand-in): a Module base class and three layers."""

from __future__ import annotations

from typing import Any, Iterator

from torch._tensor import Tensor, _map


class Module:
    def __init__(self) -> None:
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "training", True)

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, Module):
            self._modules[name] = value
        elif isinstance(value, Tensor):
            self._parameters[name] = value
        object.__setattr__(self, name, value)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"Module [{type(self).__name__}] is missing the required \"forward\" function")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    def parameters(self) -> Iterator[Tensor]:
        yield from self._parameters.values()
        for m in self._modules.values():
            yield from m.parameters()

    def children(self) -> Iterator["Module"]:
        yield from self._modules.values()

    def train(self, mode: bool = True) -> "Module":
        object.__setattr__(self, "training", mode)
        for m in self._modules.values():
            m.train(mode)
        return self

    def eval(self) -> "Module":
        return self.train(False)


class Linear(Module):
    """y = x * weight + bias, elementwise (the stand-in has no matmul)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = Tensor([1.0] * in_features)
        self.bias = Tensor([0.0] * in_features) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        y = x * self.weight
        return y + self.bias if self.bias is not None else y


class ReLU(Module):
    def forward(self, x: Tensor) -> Tensor:
        return Tensor(_map(lambda a, _: a if a > 0 else a * 0, x.tolist(), 0))


class Identity(Module):
    def forward(self, x: Any) -> Any:
        return x


class Sequential(Module):
    def __init__(self, *modules: Module) -> None:
        super().__init__()
        for i, m in enumerate(modules):
            setattr(self, str(i), m)

    def forward(self, x: Any) -> Any:
        for m in self._modules.values():
            x = m(x)
        return x
