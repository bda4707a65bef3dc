"""A literate nbdev package for porting vLLM-Omni model runners from NVIDIA GPUs (vllm) to Huawei Ascend NPUs (vllm-ascend + torch_npu)"""

__version__ = "0.1.0"
