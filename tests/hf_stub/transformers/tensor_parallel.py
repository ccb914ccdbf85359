# SPDX-License-Identifier: MIT
"""Stand-in for transformers.integrations.tensor_parallel (transformers 5): the styles'
shard_tensor(), called by the loader on the object safe_open().get_slice() returned, with
the same calls on it and the same index arithmetic as transformers 5's get_tensor_shard
and get_packed_weights (written for these tests, in the shape of the transformers 5 line
where each rank reads its own slice: spawn_tp_materialize -> shard_tensor(slice,
tensor_idx=, device=, dtype=)):

  - get_tensor_shard(dim): size = the parameter's size along dim (its empty meta tensor),
    step = ceil(size / world), start = rank * step, end = min(start + step, size); when
    start < slice.get_shape()[dim] the slice is indexed with a tuple of slice(None) but
    slice(start, end) at dim; otherwise nothing is read and an empty int64 tensor of the
    shape with 0 at dim is returned.
  - get_packed_weights(dim): two equal blocks along dim, each rank takes range(b*B + r*B//W,
    b*B + (r+1)*B//W) of every block b (floor division), as one list, indexed as
    [list, ...] for dim 0, [:, list, ...] for dim 1 or -2, [..., list] for dim 2 or -1.
  - colwise: dim -2 (a 1-d bias: -1); rowwise: dim -1, a 1-d bias whole (slice[...]);
    packed_colwise: packed along -2 (a 1-d bias: get_tensor_shard -1); packed_rowwise:
    packed along -1 (a 1-d bias whole); embedding_rowwise: dim 0; grouped_gemm: the rank's
    experts [r*E/W:(r+1)*E/W] (E divisible by W); anything else: slice[...].
"""
import math

import torch

DT = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64,
      "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
      "U8": torch.uint8, "BOOL": torch.bool}


def get_tensor_shard(param, empty_param, world, rank, dim):
    nd = empty_param.dim()
    dim = dim + nd if dim < 0 else dim
    size = empty_param.size(dim)
    step = math.ceil(size / world)
    start = rank * step
    end = min(start + step, size)
    shape = param.get_shape()
    if start < shape[dim]:
        idx = [slice(None)] * len(shape)
        idx[dim] = slice(start, end)
        return param[tuple(idx)]
    shape[dim] = 0
    return torch.empty(tuple(shape), dtype=torch.int64)


def get_packed_weights(param, empty_param, world, rank, dim):
    total = empty_param.shape[dim]
    block = total // 2
    rows = []
    for b in range(2):
        per = block // world
        rows += range(b * block + rank * per, b * block + (rank + 1) * per)
    if dim == 0:
        t = param[rows, ...]
    elif dim in (1, -2):
        t = param[:, rows, ...]
    elif dim in (2, -1):
        t = param[..., rows]
    else:
        raise ValueError(f"dim {dim}")
    return t.to(DT[param.get_dtype()])


class Layer:
    def __init__(self, world, rank, empty_param):
        self.world, self.rank, self.empty_param = world, rank, empty_param

    def bias(self):
        return self.empty_param.dim() == 1

    def finish(self, t, device, dtype):
        return t.to(device=device, dtype=dtype) if dtype is not None else t.to(device=device)


class Colwise(Layer):
    def shard_tensor(self, param, tensor_idx=None, device=None, dtype=None):
        t = get_tensor_shard(param, self.empty_param, self.world, self.rank, -1 if self.bias() else -2)
        return self.finish(t, device, dtype)


class Rowwise(Layer):
    def shard_tensor(self, param, tensor_idx=None, device=None, dtype=None):
        t = param[...] if self.bias() else get_tensor_shard(param, self.empty_param, self.world,
                                                            self.rank, -1)
        return self.finish(t, device, dtype)


class PackedColwise(Layer):
    def shard_tensor(self, param, tensor_idx=None, device=None, dtype=None):
        if self.bias():
            t = get_tensor_shard(param, self.empty_param, self.world, self.rank, -1)
        else:
            t = get_packed_weights(param, self.empty_param, self.world, self.rank, -2)
        return self.finish(t, device, dtype)


class PackedRowwise(Layer):
    def shard_tensor(self, param, tensor_idx=None, device=None, dtype=None):
        t = param[...] if self.bias() else get_packed_weights(param, self.empty_param, self.world,
                                                              self.rank, -1)
        return self.finish(t, device, dtype)


class Embedding(Layer):
    def shard_tensor(self, param, tensor_idx=None, device=None, dtype=None):
        t = get_tensor_shard(param, self.empty_param, self.world, self.rank, -1 if self.bias() else 0)
        return self.finish(t, device, dtype)


class GroupedGemm(Layer):
    def shard_tensor(self, param, tensor_idx=None, device=None, dtype=None):
        n = self.empty_param.shape[0] // self.world
        return self.finish(param[self.rank * n:(self.rank + 1) * n], device, dtype)


class Replicate(Layer):
    def shard_tensor(self, param, tensor_idx=None, device=None, dtype=None):
        return self.finish(param[...], device, dtype)


class ColwiseNext(Colwise):
    """Test-only style: the next rank's colwise slice (a request dmafs did not place)."""

    def shard_tensor(self, param, tensor_idx=None, device=None, dtype=None):
        t = get_tensor_shard(param, self.empty_param, self.world, (self.rank + 1) % self.world, -2)
        return self.finish(t, device, dtype)


ALL_PARALLEL_STYLES = {
    "colwise": Colwise, "colwise_gather_output": Colwise, "rowwise": Rowwise,
    "rowwise_split_input": Rowwise, "packed_colwise": PackedColwise,
    "packed_rowwise": PackedRowwise, "embedding_rowwise": Embedding,
    "grouped_gemm": GroupedGemm, "sequence_parallel": Replicate, "ep_router": Replicate,
    "colwise_next": ColwiseNext,
}
