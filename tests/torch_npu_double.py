"""Double of torch_npu's five fused ops, for CPU tests: each is one custom op (so a dispatch-mode counter sees one op,
as an NPU launches one kernel), with the schema torch-npu 2.9.0's wheel states, computing the native math."""
import torch

from omni_npu_port.runtime.ops import add_rms_norm_native, attention_native, rms_norm_native, rotary_native, swiglu_native

_NS = "onp_torch_npu_double"


@torch.library.custom_op(f"{_NS}::npu_rms_norm", mutates_args=())
def npu_rms_norm(self: torch.Tensor, gamma: torch.Tensor, epsilon: float = 1e-06) -> tuple[torch.Tensor, torch.Tensor]:
    x = self.float()
    return rms_norm_native(self, gamma, epsilon), torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + epsilon)


@torch.library.custom_op(f"{_NS}::npu_add_rms_norm", mutates_args=())
def npu_add_rms_norm(x1: torch.Tensor, x2: torch.Tensor, gamma: torch.Tensor,
                     epsilon: float = 1e-06) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    y, s = add_rms_norm_native(x1, x2, gamma, epsilon)
    return y, torch.rsqrt(s.float().pow(2).mean(-1, keepdim=True) + epsilon), s


@torch.library.custom_op(f"{_NS}::npu_rotary_mul", mutates_args=())
def npu_rotary_mul(self: torch.Tensor, r1: torch.Tensor, r2: torch.Tensor, rotary_mode: str = "half") -> torch.Tensor:
    assert rotary_mode == "half"
    return rotary_native(self, r1, r2)


@torch.library.custom_op(f"{_NS}::npu_fusion_attention", mutates_args=())
def npu_fusion_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, head_num: int, input_layout: str,
                         atten_mask: torch.Tensor | None = None, scale: float = 1.0,
                         sparse_mode: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    "The real op has more (defaulted) parameters; these are the ones the port passes."
    assert input_layout == "BSND" and head_num == query.shape[2] and sparse_mode == 2
    assert atten_mask is not None and atten_mask.dtype == torch.bool and atten_mask.shape == (2048, 2048)
    o = attention_native(query, key, value, scale)
    return o.contiguous(), torch.empty(0)


@torch.library.custom_op(f"{_NS}::npu_swiglu", mutates_args=())
def npu_swiglu(self: torch.Tensor, dim: int = -1) -> torch.Tensor:
    assert dim == -1
    return swiglu_native(self)


RECORD_OPS = {"ops.rms-norm": npu_rms_norm, "ops.add-rms-norm": npu_add_rms_norm, "ops.rotary-mul": npu_rotary_mul,
              "ops.fusion-attention": npu_fusion_attention, "ops.swiglu": npu_swiglu}


def resolve(record_id: str):
    "What `NpuPlatform.op(record_id)` returns on an Ascend host, for the `ops` records."
    return RECORD_OPS[record_id]
