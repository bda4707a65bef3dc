# A small GPU model runner for an omni model with a talker code predictor ("talker MTP").
#
# Written for omni-npu-port's translator tour: it uses every pattern of the GPU->NPU translation card the way
# GPU runner code does, so `omni-npu-port translate` has something real to convert. It is not meant to run:
# vllm is not imported where the package is installed without it.

import torch
from vllm.compilation.cuda_graph import CUDAGraphWrapper
from vllm.config import CUDAGraphMode
from vllm.distributed.parallel_state import get_pp_group, graph_capture
from vllm.forward_context import set_forward_context
from vllm.v1.sample.sampler import Sampler
from vllm.v1.worker.gpu_input_batch import InputBatch
from vllm.v1.worker.gpu_model_runner import GPUModelRunner


class TalkerGPUModelRunner(GPUModelRunner):
    """Runs the thinker/talker model and, per decode step, the talker MTP in a FULL CUDA graph."""

    def __init__(self, vllm_config, device):
        super().__init__(vllm_config, device)
        self.sampler = Sampler()
        self.input_batch = InputBatch(
            max_num_reqs=self.max_num_reqs,
            max_model_len=self.max_model_len,
            max_num_batched_tokens=self.max_num_tokens,
            device=self.device,
            pin_memory=self.pin_memory,
            vocab_size=self.model_config.get_vocab_size(),
            block_sizes=[self.cache_config.block_size],
        )
        # Side stream for copying talker codes back to the host (torch.cuda.Stream in the GPU build).
        self.copy_stream = torch.cuda.Stream(device=device)

    def load_model(self, *args, **kwargs) -> None:
        super().load_model(*args, **kwargs)
        talker_mtp = getattr(self.model, "talker_mtp", None)
        if talker_mtp is None:
            return
        cudagraph_mode = self.compilation_config.cudagraph_mode
        if cudagraph_mode.has_full_cudagraphs():
            # One FULL graph per batch-size bucket: the predictor runs once per decode step.
            self.talker_mtp = CUDAGraphWrapper(talker_mtp, self.vllm_config, runtime_mode=CUDAGraphMode.FULL)
        else:
            self.talker_mtp = talker_mtp

    def _talker_mtp_forward(self, decode_req_ids, inputs_embeds):
        batch = len(decode_req_ids)
        mode, batch_desc, _, _, _ = self._determine_batch_execution_and_padding(
            num_tokens=batch,
            num_reqs=batch,
            max_num_scheduled_tokens=1,
            use_cascade_attn=False,
        )
        if not isinstance(self.talker_mtp, CUDAGraphWrapper):
            mode = CUDAGraphMode.NONE
        with set_forward_context(None, self.vllm_config, cudagraph_runtime_mode=mode, batch_descriptor=batch_desc):
            embeds, codes = self.talker_mtp(self.talker_mtp_input_ids[: batch_desc.num_tokens], inputs_embeds)
        with torch.cuda.stream(self.copy_stream):
            codes_cpu = codes.to("cpu", non_blocking=True)
        torch.cuda.current_stream().wait_stream(self.copy_stream)
        return embeds, codes_cpu

    @torch.inference_mode()
    def _dummy_run(
        self,
        num_tokens: int,
        cudagraph_runtime_mode: CUDAGraphMode | None = None,
        force_attention: bool = False,
        uniform_decode: bool = False,
        allow_microbatching: bool = True,
        skip_eplb: bool = False,
        is_profile: bool = False,
        create_mixed_batch: bool = False,
        remove_lora: bool = True,
        is_graph_capturing: bool = False,
        num_active_loras: int = 0,
    ):
        _mode, batch_desc, _, num_tokens_across_dp, _ = self._determine_batch_execution_and_padding(
            num_tokens=num_tokens,
            num_reqs=min(num_tokens, self.max_num_reqs),
            max_num_scheduled_tokens=1 if uniform_decode else num_tokens,
            use_cascade_attn=False,
            force_uniform_decode=uniform_decode,
        )
        if not cudagraph_runtime_mode:
            cudagraph_runtime_mode = _mode
        num_tokens_padded = batch_desc.num_tokens
        num_reqs = batch_desc.num_reqs or min(num_tokens, self.max_num_reqs)
        attn_metadata = None
        if force_attention or cudagraph_runtime_mode == CUDAGraphMode.FULL:
            seq_lens = 1 if uniform_decode else num_tokens
            self.seq_lens.np[:num_reqs] = seq_lens
            self.seq_lens.copy_to_gpu()
            attn_metadata, _ = self._build_attention_metadata(
                num_tokens=num_tokens,
                num_reqs=num_reqs,
                max_query_len=seq_lens,
                for_cudagraph_capture=is_graph_capturing,
                slot_mappings=None,
            )
        positions = self.positions.gpu[:num_tokens_padded]
        with set_forward_context(
            attn_metadata,
            self.vllm_config,
            num_tokens=num_tokens_padded,
            num_tokens_across_dp=num_tokens_across_dp,
            cudagraph_runtime_mode=cudagraph_runtime_mode,
            batch_descriptor=batch_desc,
            ubatch_slices=None,
            slot_mapping=None,
        ):
            hidden_states = self.model(input_ids=self.input_ids.gpu[:num_tokens_padded], positions=positions)
        return hidden_states

    def _model_forward(
        self, input_ids=None, positions=None, intermediate_tensors=None, inputs_embeds=None, **model_kwargs
    ):
        """Add the omni keywords, then run the model."""
        model_kwargs.update(self._omni_model_kwargs())
        output = super()._model_forward(
            input_ids=input_ids,
            positions=positions,
            intermediate_tensors=intermediate_tensors,
            inputs_embeds=inputs_embeds,
            **model_kwargs,
        )
        self._last_output = output
        return output

    def execute_model(self, scheduler_output, intermediate_tensors=None):
        num_tokens_padded, batch_desc, cudagraph_mode = self._pad_for_graphs(scheduler_output)
        attn_metadata, _ = self._build_attention_metadata(
            num_tokens=scheduler_output.total_num_scheduled_tokens,
            num_tokens_padded=num_tokens_padded,
            num_reqs=self.input_batch.num_reqs,
            max_query_len=max(scheduler_output.num_scheduled_tokens.values()),
        )
        input_ids, positions = self._prepare_inputs(scheduler_output, num_tokens_padded)
        with set_forward_context(
            attn_metadata,
            self.vllm_config,
            num_tokens=num_tokens_padded,
            cudagraph_runtime_mode=cudagraph_mode,
            batch_descriptor=batch_desc,
            slot_mapping=self.slot_mapping,
        ):
            hidden_states = self._model_forward(input_ids, positions, intermediate_tensors)
        if get_pp_group().is_last_rank:
            return self.sampler(self.model.compute_logits(hidden_states), self.input_batch.sampling_metadata)
        return hidden_states

    def capture_model(self) -> None:
        torch.accelerator.synchronize()
        with graph_capture(self.device):
            for num_tokens in reversed(self.cudagraph_batch_sizes):
                self._dummy_run(num_tokens, CUDAGraphMode.FULL, is_graph_capturing=True)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("graphs captured")  # "torch.cuda" in a comment and a string stays as is
        torch.cuda.nvtx.range_pop()

    def release_graphs(self) -> None:
        if isinstance(self.talker_mtp, CUDAGraphWrapper):
            self.talker_mtp.clear_graphs()
        torch.cuda.empty_cache()
