"""What ml_dataflow's recording program reserves on the device, and how it chunks a sequence (the
``ml_dataflow`` framework's device layout).

Source: als244/ml_dataflow, ``bench/reproduce_results/transformer_record_throughput.c`` ``main`` at b5d6b6e3
(2025-07-19), the build that recorded the H100 sweeps (recorded_data/h100_8b_short_results.csv 2025-07-18..23,
h100_8b_medium 2025-07-20; their ``chunk_tokens`` column is 16,384, the H100 branch of that build). d6f941d0
(Sept. 2025) lowers the H100 chunk to 8,192 and splits the head into 1,024-token sub-chunks; it recorded none
of the shared sweeps. In that ``main``, before any layer:
- ``kernelWorkspaceBytes``: 200 MiB plus ``dataflow_get_attention_workspace_size`` (FlashAttention-3's backward
  workspace, ``flash_api.cpp`` ``set_flash3_bwd_workspace``);
- the K/V context of a whole sequence and its gradient (``context_buffer_size``, ``context_buffer_bwd_size``);
- the embedding table and the head (final norm + vocabulary x hidden) with gradient and both Adam moments;
- ``sticky_transitions_size`` (2 x chunks x chunk x d), ``sticky_dev_logits_size`` (chunk x vocabulary),
  ``sticky_dev_recomputed_buffer_size`` (2 x chunk x d), ``sticky_dev_working_grad_act_size`` (one chunk's
  activations), ``sticky_dev_head_act_size`` (chunk x (d + vocabulary) + fp32 per token),
  ``sticky_act_workspace_size`` (chunk x (d + ffn)), and 200 MiB of ``extra_padding``.
Then ``per_layer_full_size`` (weight block, gradient block, the layer's activation slots) decides the rest.
Everything is bf16 (2 bytes) in that build.
"""

from __future__ import annotations

from greentrain.model.spec import TransformerSpec

MIB = float(1 << 20)
KERNEL_WORKSPACE_BYTES = 200 * MIB  # baseKernelWorkspaceBytes ("ensure enough for rms bwd w and good matmul perf")
EXTRA_PADDING_BYTES = 200 * MIB  # extra_padding ("save 200 MB just in case")
MIN_DEVICE_SLOTS = 2  # "Requires 1 fwd block 1 bwd block and 2 chunk activations" (the staging slots)
# FlashAttention-3 backward tiles on sm90 at head dim 128, causal (set_flash3_bwd_workspace: kBlockM_sm90 64,
# kBlockN_sm90 128): token counts round up to them, plus one tile per sequence.
FA3_BLOCK_M, FA3_BLOCK_N = 64, 128


def dataflow_chunking(seq_len: int, min_chunk: int) -> tuple[int, int, int]:
    """(chunk tokens, chunks per sequence, sequences per chunk): ``main``'s rule. A sequence longer than the
    minimum chunk is split into chunks of its smallest divisor >= the minimum; a shorter one is packed into
    the minimum when it divides it, else into the next multiple of the sequence above the minimum."""
    if seq_len > min_chunk:
        chunk = next(c for c in range(min_chunk, seq_len + 1) if seq_len % c == 0)
        return chunk, seq_len // chunk, 1
    chunk = min_chunk if min_chunk % seq_len == 0 else (min_chunk // seq_len + 1) * seq_len
    return chunk, 1, chunk // seq_len


def chunk_activation_bytes(spec: TransformerSpec, tokens: int, e: float) -> float:
    """``get_chunk_activations_size``: one device activation slot of one layer and chunk: input, q, k, v,
    attention output, its projection, and the FFN's x1 and x3."""
    d, kv, f = spec.hidden_size, spec.kv_width, spec.ffn_hidden_size
    up = 2 if spec.glu else 1
    return tokens * e * (4 * d + 2 * kv + up * f)


def _round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m


def attention_workspace_bytes(spec: TransformerSpec, chunk: int, seq_len: int, seqs_in_chunk: int) -> float:
    """FlashAttention-3's backward workspace (``set_flash3_bwd_workspace``): softmax_d and softmax_lse_log2
    (fp32 per query head and query), dq_accum (fp32 per query head, query and head dim) and, under grouped
    queries, dk_accum and dv_accum (fp32 per K/V head, key and head dim). Queries: the chunk; keys: the
    sequence (``main`` passes max_tokens_per_chunk and max_seqlen)."""
    hd = _round_up(spec.head_dim, 8)
    tq = _round_up(chunk + seqs_in_chunk * FA3_BLOCK_M, FA3_BLOCK_M)
    tk = _round_up(max(chunk, seq_len) + seqs_in_chunk * FA3_BLOCK_N, FA3_BLOCK_N)
    q_side = spec.num_heads * tq * 4.0 * (2 + hd)
    kv_side = 2 * spec.num_kv_heads * tk * hd * 4.0 if spec.num_kv_heads != spec.num_heads else 0.0
    return q_side + kv_side


def sticky_parts(spec: TransformerSpec, seq_len: int, chunk: int, chunks_per_round: int, seqs_in_chunk: int,
                 e: float) -> dict[str, float]:
    """Device bytes ``main`` reserves before any layer, in greentrain's categories: "reserved" (kernel and
    attention workspace, padding), "ends" (embedding and head, each with gradient and two Adam moments: 4
    bf16 copies), "workspace" (context, transitions, logits, recompute, working gradient, head activations,
    activation workspace)."""
    d, v = spec.hidden_size, spec.vocab_size
    ctx = max(chunk, seq_len)
    workspace = (2 * ctx * spec.kv_width * e * 2  # context_buffer_size + context_buffer_bwd_size
                 + 2 * chunks_per_round * chunk * d * e  # sticky_transitions_size
                 + chunk * v * e  # sticky_dev_logits_size (block_bwd_dt: bf16)
                 + 2 * chunk * d * e  # sticky_dev_recomputed_buffer_size
                 + chunk_activation_bytes(spec, chunk, e)  # sticky_dev_working_grad_act_size
                 + chunk * ((d + v) * e + 4.0)  # sticky_dev_head_act_size
                 + chunk * (d + spec.ffn_hidden_size) * e)  # sticky_act_workspace_size
    return {"reserved": KERNEL_WORKSPACE_BYTES + attention_workspace_bytes(spec, chunk, seq_len, seqs_in_chunk)
            + EXTRA_PADDING_BYTES,
            "ends": 4 * e * (v * d + (d + v * d)),  # sticky_embedding_* + sticky_head_* (weight, grad, m, v)
            "workspace": workspace}


def host_sticky_parts(spec: TransformerSpec, chunk: int, chunks_per_round: int, e: float) -> dict[str, float]:
    """Host bytes ``main`` takes before the saved activations besides the layers' state (weight, gradient and
    two moments per layer): the embedding table and the head, weights only (``sys_embedding_table``,
    ``sys_head``: their gradients and moments live on the device; the host ``sys_opt_*_embedding_table`` and
    ``sys_grad_*`` blocks are commented out in that build), and the host copies of the transitions
    (``sys_block_transitions``: 2 x chunks x chunk x d)."""
    d, v = spec.hidden_size, spec.vocab_size
    return {"ends": e * (v * d + (d + v * d)), "transitions": 2 * chunks_per_round * chunk * d * e}
