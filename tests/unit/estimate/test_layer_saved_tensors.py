"""Activations as real layers keep them: dropout masks only where the model has dropout, a QK-norm's inputs where it
has one, ReLU's output alone, Hugging Face's gelu_new chain, Gemma's and OLMo 2's fp32 norms, the routed expert
outputs of transformers' MoE blocks. Whole transformers layers (Llama, Qwen3, Gemma, OLMo 2 and Qwen3-MoE decoder
layers, T5 blocks with and without dropout, GPT-2 blocks) keep what ``layer_activation`` counts, measured with
torch's saved-tensor hooks; PyTorch's dropout at p = 0 keeps nothing; the dropout fields are read from config.json
and refused out of range. (Megatron-Core's layer: benchmarks/check_megatron_activations.py, by hand.) Frozen
weights, with and without LoRA adapters: a frozen GEMM keeps no input, a frozen eager norm no normalised value."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from greentrain.errors import ConfigError
from greentrain.estimate.frozen import frozen_input_activation
from greentrain.estimate.memory import layer_activation
from greentrain.model.finetune import Finetune
from greentrain.model.hf import spec_from_hf_config
from greentrain.model.load import load_model
from greentrain.model.ops import model_ops
from greentrain.model.spec import TransformerSpec


def _saved_bytes(fn: Any, *inputs: Any, exclude: tuple[Any, ...] = ()) -> int:
    """Bytes of the distinct storages autograd saves for backward while ``fn(*inputs)`` runs, less ``exclude``'s
    (parameters, rotary tables)."""
    torch = pytest.importorskip("torch")
    saved: dict[int, int] = {}

    def pack(a: Any) -> Any:
        storage = a.untyped_storage()
        saved[storage.data_ptr()] = storage.nbytes()
        return a

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda a: a):
        fn(*inputs)
    skip = {t.untyped_storage().data_ptr() for t in exclude}
    return sum(n for ptr, n in saved.items() if ptr not in skip)


def test_dropout_at_zero_keeps_no_mask() -> None:
    torch = pytest.importorskip("torch")
    x = torch.randn(64, 32, requires_grad=True)
    residual = torch.randn(64, 32)
    assert _saved_bytes(lambda a: residual + torch.nn.functional.dropout(a, p=0.0, training=True), x) == 0
    assert _saved_bytes(lambda a: residual + torch.nn.functional.dropout(a, p=0.1, training=True), x) > 0


def _hf_layer_bytes(family: str, dtype_name: str, frozen: bool = False) -> tuple[float, TransformerSpec]:
    """(bytes a transformers decoder layer saves for backward, its TransformerSpec): GQA 4/2 heads of 64, SwiGLU
    as act(gate) x up, eager RMSNorms, SDPA's flash kernel, 2 x 128 tokens."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from torch.nn.attention import SDPBackend, sdpa_kernel

    module = pytest.importorskip(f"transformers.models.{family}.modeling_{family}")
    prefix = {"llama": "Llama", "qwen3": "Qwen3", "gemma": "Gemma", "olmo2": "Olmo2"}[family]
    config = getattr(transformers, f"{prefix}Config")(hidden_size=256, intermediate_size=768, num_attention_heads=4,
                                                      num_key_value_heads=2, head_dim=64, num_hidden_layers=1,
                                                      vocab_size=1000)
    config._attn_implementation = "sdpa"
    dtype = getattr(torch, dtype_name)
    layer = getattr(module, f"{prefix}DecoderLayer")(config, 0).to(dtype).requires_grad_(not frozen)
    b, s = 2, 128
    x = torch.randn(b, s, 256, dtype=dtype, requires_grad=True)
    positions = torch.arange(s)[None].expand(b, s)
    cos, sin = getattr(module, f"{prefix}RotaryEmbedding")(config)(x, positions)

    def forward(a: Any) -> Any:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return layer(a, attention_mask=None, position_ids=positions, position_embeddings=(cos, sin))

    measured = _saved_bytes(forward, x, exclude=(*layer.parameters(), cos, sin))
    return measured, spec_from_hf_config(config.to_dict(), f"tiny-{family}")


@pytest.mark.parametrize("family", ["llama", "qwen3", "gemma", "olmo2"])
@pytest.mark.parametrize(("dtype", "e"), [("bfloat16", 2.0), ("float32", 4.0)])
def test_a_decoder_layer_keeps_what_layer_activation_counts(family: str, dtype: str, e: float) -> None:
    """transformers' LlamaDecoderLayer, Qwen3DecoderLayer (QK-norm), GemmaDecoderLayer (RMSNorm in fp32
    throughout, GELU-tanh GLU) and Olmo2DecoderLayer (norms after the blocks, full-width QK-norm, fp32 norm
    weights) keep layer_activation's count with a flash kernel, an unfused GLU and eager norms, within the
    float32 rsqrt columns of their norms (0.3 %). Counted with dropout masks the Llama layer was 2 bytes per
    token and hidden element over (4 % in bf16); without its QK-norm's inputs the Qwen3 layer was 9 bytes under
    (17 %), and with Llama's eager norm the Gemma and OLMo 2 layers 4 and 7 bytes under in bf16 (8 and 11 %)."""
    measured, spec = _hf_layer_bytes(family, dtype)
    b, s, h = 2, 128, 256
    assert spec.hidden_dropout == 0 and spec.attention_dropout == 0
    act = layer_activation(spec, b, s, e, moe=False, flash=True, fused_glu=False, eager_norm=True)
    counted = act.replicated_bytes + act.split_bytes + act.scores_bytes
    assert counted == pytest.approx(measured, rel=3e-3)
    with_masks = layer_activation(replace(spec, hidden_dropout=0.1), b, s, e, moe=False, flash=True,
                                  fused_glu=False, eager_norm=True)
    assert with_masks.replicated_bytes - act.replicated_bytes == 2 * b * s * h  # two 1-byte masks per layer


@pytest.mark.parametrize("feed_forward", ["relu", "gated-gelu"])
@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_a_t5_block_keeps_what_layer_activation_counts(dropout: float, feed_forward: str) -> None:
    """transformers' T5Block (encoder, eager attention, fp32), T5 v1.0's ReLU MLP and v1.1's (Flan-T5's) gated
    gelu_new: ReLU keeps its output only, which is also wo's input (PyTorch's relu saves its result); gelu_new is
    Hugging Face's chain of eager ops; with dropout_rate 0.1 the residual, attention-weight and activation
    masks. On the CPU a dropout mask is a tensor of the input's dtype (4 bytes here), on CUDA a bool (1 byte,
    MASK_BYTES): the test adds the difference per mask element."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    t5 = pytest.importorskip("transformers.models.t5.modeling_t5")
    config = transformers.T5Config(d_model=256, d_kv=64, d_ff=1024, num_heads=4, num_layers=1, vocab_size=1000,
                                   dropout_rate=dropout, feed_forward_proj=feed_forward)
    config._attn_implementation = "eager"
    block = t5.T5Block(config, has_relative_attention_bias=False, layer_idx=0).train()
    b, s, h, f, heads, e = 2, 128, 256, 1024, 4, 4.0
    bias = torch.zeros(1, heads, s, s)
    measured = _saved_bytes(lambda a: block(a, position_bias=bias), torch.randn(b, s, h, requires_grad=True),
                            exclude=(*block.parameters(), bias))
    spec = spec_from_hf_config({**config.to_dict(), "model_type": "t5"}, "tiny-t5")
    act = layer_activation(spec, b, s, e, moe=False, flash=False, fused_glu=False, eager_norm=True,
                           eager_gelu=True)
    masks = (2 * b * s * h + b * heads * s * s + b * s * f) if dropout else 0
    counted = act.replicated_bytes + act.split_bytes + act.scores_bytes + (e - 1) * masks
    assert counted == pytest.approx(measured, rel=1e-3)  # the rest: the norms' rsqrt columns


@pytest.mark.parametrize("activation", ["gelu_new", "gelu_pytorch_tanh"])
def test_a_gpt2_block_keeps_what_layer_activation_counts(activation: str) -> None:
    """transformers' GPT2Block (fp32, SDPA's flash kernel, no dropout): Hugging Face's gelu_new, a chain of eager
    ops, keeps three tensors of the MLP's width more than torch's GELU kernel (gelu_pytorch_tanh)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    gpt2 = pytest.importorskip("transformers.models.gpt2.modeling_gpt2")
    from torch.nn.attention import SDPBackend, sdpa_kernel

    config = transformers.GPT2Config(n_embd=256, n_head=4, n_layer=1, vocab_size=1000, resid_pdrop=0.0,
                                     attn_pdrop=0.0, embd_pdrop=0.0, activation_function=activation)
    config._attn_implementation = "sdpa"
    block = gpt2.GPT2Block(config, layer_idx=0).train()
    b, s, h = 2, 128, 256

    def forward(a: Any) -> Any:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return block(a)

    measured = _saved_bytes(forward, torch.randn(b, s, h, requires_grad=True), exclude=tuple(block.parameters()))
    spec = spec_from_hf_config({**config.to_dict(), "model_type": "gpt2"}, "tiny-gpt2")
    act = layer_activation(spec, b, s, 4.0, moe=False, flash=True, fused_glu=False, eager_norm=True,
                           eager_gelu=True)
    assert act.replicated_bytes + act.split_bytes + act.scores_bytes == pytest.approx(measured, rel=2e-3)


@pytest.mark.parametrize("frozen", [False, True])
def test_a_transformers_moe_layer_keeps_the_routed_expert_outputs(frozen: bool) -> None:
    """transformers' Qwen3MoeDecoderLayer with its default grouped_mm experts (bf16, 4 experts, top 2): the routing
    weights multiply the experts' outputs, which the backward keeps (moe_weights_outputs, the Hugging Face
    frameworks' knob); without them greentrain's count is 5 % under. Frozen (every weight, as a frozen decoder):
    the router's and the experts' GEMM inputs go (estimate/frozen.py: 69 % of the trained layer's)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from torch.nn.attention import SDPBackend, sdpa_kernel

    config = transformers.Qwen3MoeConfig(hidden_size=256, intermediate_size=768, moe_intermediate_size=768,
                                         num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                                         num_hidden_layers=1, vocab_size=1000, num_experts=4, num_experts_per_tok=2,
                                         decoder_sparse_step=1, mlp_only_layers=[])
    config._attn_implementation = "sdpa"
    try:
        model = transformers.Qwen3MoeForCausalLM._from_config(config, experts_implementation="grouped_mm",
                                                               dtype=torch.bfloat16)
    except (ValueError, ImportError, TypeError) as exc:  # a transformers without its grouped_mm experts
        pytest.skip(f"no grouped_mm experts here: {exc}")
    layer = model.model.layers[0].requires_grad_(not frozen)
    b, s, h = 2, 128, 256
    x = torch.randn(b, s, h, dtype=torch.bfloat16, requires_grad=True)
    positions = torch.arange(s)[None].expand(b, s)
    cos, sin = model.model.rotary_emb(x, positions)

    def forward(a: Any) -> Any:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return layer(a, attention_mask=None, position_ids=positions, position_embeddings=(cos, sin))

    measured = _saved_bytes(forward, x, exclude=(*layer.parameters(), cos, sin))
    spec = spec_from_hf_config(config.to_dict(), "tiny-qwen3-moe")
    act = layer_activation(spec, b, s, 2.0, moe=True, flash=True, fused_glu=False, eager_norm=True,
                           moe_outputs=True, kind=spec.layer_kind(0))
    if frozen:
        group = model_ops(spec, b, s, 2.0, 0, True, Finetune(mode="freeze", freeze=("decoder",))).layers[-1]
        act = frozen_input_activation(act, spec, group.ops, b * s, 2.0, 2.0, moe=True, flash=True,
                                      norm_value_bytes=2.0)
    # the rest (0.5-0.8 %): the router's fp32 scores, the top-k indices and weights, the grouped GEMM's offsets
    assert act.replicated_bytes + act.split_bytes + act.scores_bytes == pytest.approx(measured, rel=1e-2)


def test_korthikanti_gpt_keeps_its_masks_and_llama_none() -> None:
    """Korthikanti et al. 2022 §4.1 (Megatron's GPT, dropout 0.1): 34 sbh + 5 a s^2 b per layer without flash;
    the same layer without dropout keeps 32 sbh + 2 a s^2 b (the softmax output only)."""
    gpt = load_model("megatron-22b")
    b, s, h, a = 1, 2048, gpt.hidden_size, gpt.num_heads
    act = layer_activation(gpt, b, s, 2.0, moe=False, flash=False)
    assert act.replicated_bytes + act.split_bytes + act.scores_bytes == pytest.approx(
        s * b * h * (34 + 5 * a * s / h), rel=1e-12)
    plain = layer_activation(replace(gpt, hidden_dropout=0.0, attention_dropout=0.0), b, s, 2.0, moe=False,
                             flash=False)
    assert plain.replicated_bytes + plain.split_bytes + plain.scores_bytes == pytest.approx(
        s * b * h * (32 + 2 * a * s / h), rel=1e-12)
    llama = load_model("llama3-8b")
    assert (llama.hidden_dropout, llama.attention_dropout) == (0.0, 0.0)


def test_dropout_is_read_from_config_json() -> None:
    gpt2 = spec_from_hf_config({"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 100},
                               "g")
    assert (gpt2.hidden_dropout, gpt2.attention_dropout) == (0.1, 0.1)  # GPT2Config's defaults
    llama = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
             "num_attention_heads": 4, "vocab_size": 100, "attention_dropout": 0.2}
    assert spec_from_hf_config(llama, "l").attention_dropout == 0.2
    with pytest.raises(ConfigError, match=r"config\.json\.attention_dropout.*1\.5.*probability"):
        spec_from_hf_config({**llama, "attention_dropout": 1.5}, "l")


@pytest.mark.parametrize("value", [1.0, -0.1])
def test_a_model_yaml_dropout_out_of_range_is_one_line(value: float) -> None:
    base = {"num_layers": 2, "hidden_size": 64, "num_heads": 4, "ffn_hidden_size": 128, "vocab_size": 100}
    with pytest.raises(ConfigError, match=r"model\.hidden_dropout|model\(custom\)\.hidden_dropout"):
        TransformerSpec.from_dict({**base, "hidden_dropout": value})


def test_gelu_new_is_priced_as_its_eager_chain() -> None:
    """The time side of gelu_new (model/ops.py): eight eager ops, 18 e bytes per element where one GELU kernel
    moves 2 e; inside a GLU (T5 v1.1) that chain replaces act(gate) of the GLU's 5 e."""
    from greentrain.model.ops import mlp_ops

    gpt2 = spec_from_hf_config({"model_type": "gpt2", "n_embd": 64, "n_layer": 1, "n_head": 4, "vocab_size": 100},
                               "g")
    (act,) = [op for op in mlp_ops(gpt2, 10, 2.0, "mlp", moe=False) if op.name == "mlp.act"]
    assert (act.eager_kind, act.eager_bytes, act.eager_kernels) == ("gelu", 10 * 256 * 18 * 2.0, (8.0, 16.0))
    flan = spec_from_hf_config({"model_type": "t5", "d_model": 64, "d_kv": 16, "d_ff": 128, "num_layers": 1,
                                "num_heads": 4, "vocab_size": 100, "feed_forward_proj": "gated-gelu"}, "t")
    (act,) = [op for op in mlp_ops(flan, 10, 2.0, "mlp", moe=False) if op.name == "mlp.act"]
    assert (act.eager_kind, act.eager_bytes, act.eager_kernels) == ("glu", 10 * 128 * 21 * 2.0, (9.0, 18.0))


# Fine-tuning keeps less: a frozen GEMM keeps no input, a frozen eager norm no normalised value (estimate/frozen.py)

def test_a_frozen_linear_keeps_no_input() -> None:
    torch = pytest.importorskip("torch")
    x = torch.randn(64, 128, requires_grad=True)
    frozen = torch.nn.Linear(128, 256, bias=False).requires_grad_(False)
    trainable = torch.nn.Linear(128, 256, bias=False)
    assert _saved_bytes(frozen, x, exclude=tuple(frozen.parameters())) == 0
    assert _saved_bytes(trainable, x, exclude=tuple(trainable.parameters())) == 64 * 128 * 4


def _lora(torch: Any, base: Any, rank: int, dtype: Any) -> Any:
    """peft's LoRA forward beside a frozen base linear: base(x) + B(A(x)) (lora_dropout 0, scaling folded)."""

    class Lora(torch.nn.Module):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.base = base
            self.a = torch.nn.Linear(base.in_features, rank, bias=False).to(dtype)
            self.b = torch.nn.Linear(rank, base.out_features, bias=False).to(dtype)

        def forward(self, x: Any) -> Any:
            return self.base(x) + self.b(self.a(x))

    return Lora()


@pytest.mark.parametrize("targets", [(), ("q", "v", "o")])
@pytest.mark.parametrize(("dtype_name", "e"), [("bfloat16", 2.0), ("float32", 4.0)])
def test_a_frozen_llama_layer_keeps_what_frozen_input_activation_counts(targets: tuple[str, ...],
                                                                       dtype_name: str, e: float) -> None:
    """Frozen weights (freeze: no adapter) keep the layer's norm inputs, Q, K, V, the attention output, the
    GLU's gate and up and the eager norms' fp32 upcasts; adapters on q, v (A reads the norm's output, which is
    kept again) and o (the attention output, kept by flash anyway) add their rank-wide A outputs only. Within
    the norms' float32 rsqrt columns and the adapters' rank-wide outputs (1 %)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from transformers.models.llama import modeling_llama as llama

    config = transformers.LlamaConfig(hidden_size=256, intermediate_size=768, num_attention_heads=4,
                                      num_key_value_heads=2, head_dim=64, num_hidden_layers=1, vocab_size=1000)
    config._attn_implementation = "sdpa"
    dtype = getattr(torch, dtype_name)
    layer = llama.LlamaDecoderLayer(config, 0).to(dtype).requires_grad_(False)
    adapters = []
    for target in targets:
        name = {"q": "q_proj", "v": "v_proj", "o": "o_proj"}[target]
        wrapped = _lora(torch, getattr(layer.self_attn, name), 8, dtype)
        setattr(layer.self_attn, name, wrapped)
        adapters += [*wrapped.a.parameters(), *wrapped.b.parameters()]
    b, s = 2, 128
    x = torch.randn(b, s, 256, dtype=dtype, requires_grad=True)
    positions = torch.arange(s)[None].expand(b, s)
    cos, sin = llama.LlamaRotaryEmbedding(config)(x, positions)

    def forward(a: Any) -> Any:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return layer(a, attention_mask=None, position_ids=positions, position_embeddings=(cos, sin))

    measured = _saved_bytes(forward, x, exclude=(*layer.parameters(), *adapters, cos, sin))
    spec = spec_from_hf_config(config.to_dict(), "tiny-llama")
    ft = Finetune(mode="lora", lora_rank=8, lora_targets=targets) if targets else \
        Finetune(mode="freeze", freeze=("decoder",))
    group = model_ops(spec, b, s, e, 0, True, ft).layers[-1]
    full = layer_activation(spec, b, s, e, moe=False, flash=True, fused_glu=False, eager_norm=True)
    act = frozen_input_activation(full, spec, group.ops, b * s, e, e, moe=False, flash=True, norm_value_bytes=e)
    counted = act.replicated_bytes + act.split_bytes + act.scores_bytes
    assert counted == pytest.approx(measured, rel=0.01)
    assert counted < 0.8 * (full.replicated_bytes + full.split_bytes + full.scores_bytes)


def test_a_lora_run_keeps_less_than_full_training_without_recomputation() -> None:
    """Llama 3 8B, LoRA on q and v, no recomputation: the MLP's two GEMM inputs go (0.74 of full training's
    activations); with full recomputation both keep the layer inputs alone."""
    import dataclasses

    from greentrain.estimate.step import estimate_step
    from greentrain.parallel.strategy import Strategy
    from greentrain.scenario import scenario_from_dict

    base = scenario_from_dict({"model": "llama3-8b", "cluster": {"chip": "h100-sxm", "num_chips": 8},
                               "workload": {"global_batch_size": 8, "seq_len": 4096, "num_steps": 10}})
    lora = dataclasses.replace(base, workload=dataclasses.replace(base.workload, finetune=Finetune(mode="lora")))
    for recompute, low, high in [("none", 0.7, 0.78), ("full", 0.99, 1.01)]:
        s = Strategy(dp=8, micro_batch_size=1, recompute=recompute)
        a, b = (estimate_step(sc, s, check_fit=False).memory.activations_bytes for sc in (base, lora))
        assert low < b / a < high, (recompute, b / a)


@pytest.mark.parametrize("family", ["llama", "qwen3", "gemma", "olmo2"])
def test_a_frozen_decoder_layer_keeps_what_frozen_input_activation_counts(family: str) -> None:
    """The four families' layers with every weight frozen (bf16): the GEMM inputs go, and the normalised values
    their eager norms keep for the scales' gradients: Llama's and Qwen3's 16-bit ones (its QK-norm's too), Gemma's
    and OLMo 2's fp32 ones. Within their norms' rsqrt columns (1 %)."""
    measured, spec = _hf_layer_bytes(family, "bfloat16", frozen=True)
    b, s, e = 2, 128, 2.0
    full = layer_activation(spec, b, s, e, moe=False, flash=True, fused_glu=False, eager_norm=True)
    untied = replace(spec, tied_embeddings=False)  # Gemma's: a frozen decoder with a tied head trains nothing
    group = model_ops(untied, b, s, e, 0, True, Finetune(mode="freeze", freeze=("decoder",))).layers[-1]
    value = 4.0 if family in ("gemma", "olmo2") else e
    act = frozen_input_activation(full, spec, group.ops, b * s, e, e, moe=False, flash=True, norm_value_bytes=value)
    assert act.replicated_bytes + act.split_bytes + act.scores_bytes == pytest.approx(measured, rel=0.01)
