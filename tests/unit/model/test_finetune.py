"""Fine-tuning in the planner (issue 15 item 6): frozen parameters carry no gradient or optimizer state and skip
their weight-gradient GEMMs; LoRA adds rank-r adapters (Hu et al. 2021 §4.1).

FLOPs are checked exactly against ``torch.utils.flop_counter.FlopCounterMode`` on tiny transformers models built
from config (random initialisation), frozen as a fine-tuning script freezes them (``requires_grad_(False)`` on
Hugging Face's ``get_input_embeddings`` / ``get_encoder`` / ``get_decoder``) or with LoRA adapters written by hand
the way peft writes them (``base(x) + B(A(x)) * scale`` beside the frozen projection). Memory: the optimizer
and gradient bytes of one AdamW step counted on the same model.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from greentrain.errors import ConfigError
from greentrain.estimate.efficiency import efficiency_for
from greentrain.estimate.step import estimate_step
from greentrain.footprint.site import Site
from greentrain.hardware.catalog import get_chip
from greentrain.model.finetune import Finetune
from greentrain.model.hf import spec_from_hf_config
from greentrain.model.load import load_model
from greentrain.model.ops import OpKind, model_ops, trainable_params
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import Scenario, build_cluster
from greentrain.workload import Workload

HF_DIR = Path(__file__).resolve().parents[2] / "data" / "hf"
B, S = 2, 16
TINY_LLAMA: dict[str, Any] = {"num_hidden_layers": 3, "hidden_size": 64, "intermediate_size": 96,
                              "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256}
TINY_T5: dict[str, Any] = {"num_layers": 2, "num_decoder_layers": 2, "d_model": 64, "d_ff": 96, "d_kv": 16,
                           "num_heads": 4, "vocab_size": 256}
HF_NAMES = {"q": ("q_proj", "q"), "k": ("k_proj", "k"), "v": ("v_proj", "v"), "o": ("o_proj", "o"),
            "gate": ("gate_proj", "wi_0"), "up": ("up_proj", "wi_1", "wi"), "down": ("down_proj", "wo")}


def _config(name: str, tiny: dict[str, Any], **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HF_DIR / f"{name}.json").read_text())
    return {**data, **tiny, **extra}


def _add_lora(model: Any, targets: tuple[str, ...], rank: int) -> None:
    """peft's LoRA by hand: every base weight frozen, A (r x d_in) and B (d_out x r) beside each target."""
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class LoraLinear(nn.Module):
        def __init__(self, base: Any) -> None:
            super().__init__()
            self.base = base
            self.a = nn.Linear(base.in_features, rank, bias=False)
            self.b = nn.Linear(rank, base.out_features, bias=False)

        @property
        def weight(self) -> Any:  # transformers' T5 reads wo.weight.dtype
            return self.base.weight

        def forward(self, x: Any) -> Any:
            return self.base(x) + self.b(self.a(x)) * 2.0

    for p in model.parameters():
        p.requires_grad_(False)
    names = {n for t in targets for n in HF_NAMES[t]}
    for parent in list(model.modules()):
        for child_name, child in list(parent.named_children()):
            if child_name in names and isinstance(child, nn.Linear):
                setattr(parent, child_name, LoraLinear(child))


def _build(cfg: dict[str, Any], ft: Finetune) -> tuple[Any, Any]:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = transformers.AutoConfig.for_model(**cfg)
    config._attn_implementation = "eager"
    config.tie_word_embeddings = cfg.get("tie_word_embeddings", True)  # T5Config would tie flan-t5's head
    torch.manual_seed(0)
    auto = transformers.AutoModelForSeq2SeqLM if config.is_encoder_decoder else transformers.AutoModelForCausalLM
    model = auto.from_config(config).float()
    model.train()
    getters = {"embeddings": model.get_input_embeddings, "encoder": getattr(model, "get_encoder", None),
               "decoder": model.get_decoder}
    for part in ft.freeze:
        for p in getters[part]().parameters():
            p.requires_grad_(False)
    if ft.mode == "lora":
        _add_lora(model, ft.lora_targets, ft.lora_rank)
    return model, config


def _counted(cfg: dict[str, Any], ft: Finetune) -> int:
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    model, config = _build(cfg, ft)
    ids = torch.randint(0, cfg["vocab_size"], (B, S))
    kw = {"decoder_input_ids": ids} if config.is_encoder_decoder else {}
    with FlopCounterMode(display=False) as counter:
        model(input_ids=ids, labels=ids, **kw).loss.backward()
    return int(counter.get_total_flops())


CASES = [
    ("llama3-8b", Finetune()),
    ("llama3-8b", Finetune(mode="lora", lora_rank=4)),
    ("llama3-8b", Finetune(mode="lora", lora_rank=8, lora_targets=("q", "k", "v", "o", "gate", "up", "down"))),
    ("llama3-8b", Finetune(mode="lora", lora_rank=4, lora_targets=("k", "o"))),
    ("llama3-8b", Finetune(mode="freeze", freeze=("embeddings",))),
    ("llama3-8b", Finetune(mode="freeze", freeze=("decoder",))),
    ("flan-t5-large", Finetune()),
    ("flan-t5-large", Finetune(mode="freeze", freeze=("encoder",))),
    ("flan-t5-large", Finetune(mode="freeze", freeze=("embeddings",))),
    ("flan-t5-large", Finetune(mode="lora", lora_rank=4)),
    ("flan-t5-large", Finetune(mode="lora", lora_rank=4, lora_targets=("k", "o"))),
    ("flan-t5-large", Finetune(mode="lora", lora_rank=4, lora_targets=("up", "down"))),
    ("t5-large", Finetune(mode="lora", lora_rank=4, lora_targets=("q", "v"))),
]


@pytest.mark.parametrize(("name", "ft"), CASES, ids=[f"{n}-{f.mode}-{'+'.join(f.freeze or f.lora_targets)}"
                                                     for n, f in CASES])
def test_train_flops_equal_the_counter(name: str, ft: Finetune) -> None:
    cfg = _config(name, TINY_T5 if "t5" in name else TINY_LLAMA)
    spec = spec_from_hf_config(cfg, name)
    ops = model_ops(spec, B, S, 4.0, 0, False, ft)
    assert ops.train_flop() == pytest.approx(_counted(cfg, ft), rel=1e-12)


@pytest.mark.parametrize("tied", [False, True])
def test_freeze_embeddings_with_a_tied_head(tied: bool) -> None:
    cfg = _config("llama3-8b", TINY_LLAMA, tie_word_embeddings=tied)
    spec = spec_from_hf_config(cfg, "llama3-8b")
    ft = Finetune(mode="freeze", freeze=("embeddings",))
    assert model_ops(spec, B, S, 4.0, 0, False, ft).train_flop() == pytest.approx(_counted(cfg, ft), rel=1e-12)


@pytest.mark.parametrize("ft", [Finetune(mode="lora", lora_rank=8), Finetune(mode="freeze", freeze=("embeddings",)),
                                Finetune()])
def test_state_bytes_equal_one_adamw_step(ft: Finetune) -> None:
    """fp32 AdamW on one device: gradients 4 and optimizer states 8 bytes per trainable parameter, weights 4
    per parameter, as counted on the model after one step."""
    torch = pytest.importorskip("torch")

    cfg = _config("llama3-8b", TINY_LLAMA, tie_word_embeddings=False)
    model, _ = _build(cfg, ft)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad])
    ids = torch.randint(0, cfg["vocab_size"], (B, S))
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    grads = sum(p.grad.numel() * p.grad.element_size() for p in model.parameters() if p.grad is not None)
    states = sum(t.numel() * t.element_size() for st in opt.state.values() for k, t in st.items() if k != "step")

    spec = spec_from_hf_config(cfg, "llama3-8b")
    sc = Scenario(model=spec, cluster=build_cluster(get_chip("a100-80gb"), 1),
                  workload=Workload(global_batch_size=B, seq_len=S, precision="fp32", finetune=ft), site=Site())
    # the gradients as the step ends (kept: the loop's zero_grad(set_to_none=True) would free them before the next
    # forward, and the plan's peak then counts only their excess over the activations, test_grads_freed)
    eff = dataclasses.replace(efficiency_for("a100-80gb", "ddp"), grads_set_to_none=False)
    mem = estimate_step(sc, Strategy(micro_batch_size=B), eff=eff).memory
    k = 1.0 + eff.fragmentation
    norms = spec.norm_params() * (2 * spec.num_layers + 1) * 4  # greentrain counts norms with the layers
    assert mem.weights_bytes / k == pytest.approx(weights, abs=norms + 1)
    assert mem.gradients_bytes / k == pytest.approx(grads, abs=norms + 1)
    assert mem.optimizer_bytes / k == pytest.approx(states, abs=2 * norms + 1)


def test_finetuning_is_cheaper_and_plans() -> None:
    """Llama 3 8B: LoRA keeps the weights and drops most gradient and optimizer memory; its step costs about
    2/3 of full training's FLOPs (forward + input gradients)."""
    spec = load_model("llama3-8b")
    full = model_ops(spec, 1, 4096, 2.0, 0, True)
    lora = model_ops(spec, 1, 4096, 2.0, 0, True, Finetune(mode="lora"))
    assert 0.66 < lora.train_flop() / full.train_flop() < 0.72
    assert sum(g.frozen_params * g.count for g in lora.layers) == sum(g.params * g.count for g in full.layers)


@pytest.mark.parametrize(("data", "field"), [
    ({"finetune": "partial"}, "workload.finetune"),
    ({"finetune": "freeze"}, "workload.freeze"),
    ({"finetune": "freeze", "freeze": ["lm_head"]}, "workload.freeze"),
    ({"finetune": "full", "freeze": ["embeddings"]}, "workload.freeze"),
    ({"finetune": "lora", "lora_rank": 0}, "workload.lora_rank"),
    ({"finetune": "lora", "lora_targets": ["qkv"]}, "workload.lora_targets"),
    ({"finetune": "lora", "lora_targets": []}, "workload.lora_targets"),
    ({"finetune": "full", "lora_rank": 8}, "workload.lora_rank"),
])
def test_bad_finetune_fields(data: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as e:
        Workload.from_dict({"global_batch_size": 8, "seq_len": 128, **data})
    assert e.value.field == field


def test_model_rules() -> None:
    """What a model cannot do is refused with the field named (checked when the scenario is built)."""
    llama, moe = load_model("llama3-8b"), load_model("mixtral-8x7b")
    with pytest.raises(ConfigError, match="encoder-decoder"):
        Finetune(mode="freeze", freeze=("encoder",)).check(llama)
    Finetune(mode="lora", lora_targets=("up",)).check(moe)  # each expert's own adapters (below)
    tied = dataclasses.replace(llama, tied_embeddings=True)
    with pytest.raises(ConfigError, match="nothing"):
        Finetune(mode="freeze", freeze=("decoder",)).check(tied)


def test_workload_round_trip() -> None:
    for ft in (Finetune(), Finetune(mode="lora", lora_rank=32, lora_targets=("q", "k")),
               Finetune(mode="freeze", freeze=("embeddings", "encoder"))):
        w = Workload(global_batch_size=8, seq_len=128, finetune=ft)
        assert Workload.from_dict(w.to_dict()) == w


def test_lora_on_moe_experts_gives_each_expert_its_adapters() -> None:
    """Mixtral 8x7B, rank 16 on every projection: each of the 8 experts of each of the 32 layers has its own
    gate, up and down adapters, r (d + f) each (peft on each expert's Linear; Megatron Bridge's LoRA on
    TEGroupedLinear), beside the attention's; the experts' adapters count as expert parameters (split over expert
    parallelism as the experts are) and run on each expert's tokens."""
    moe = load_model("mixtral-8x7b")
    d, f, kv, r = moe.hidden_size, moe.expert_ffn_hidden_size, moe.kv_width, 16
    ft = Finetune(mode="lora", lora_rank=r, lora_targets=("q", "k", "v", "o", "gate", "up", "down"))
    experts = moe.num_experts * 3 * r * (d + f)
    attention = r * ((d + moe.q_width) + 2 * (d + kv) + (moe.attn_out_width + d))
    assert trainable_params(moe, ft) == moe.num_layers * (experts + attention)
    mo = model_ops(moe, 1, 1024, 2.0, 0, True, ft)
    base = model_ops(moe, 1, 1024, 2.0, 0, True)
    expert_params = [sum(g.count * g.expert_params for g in ops.layers) for ops in (mo, base)]
    assert expert_params[0] - expert_params[1] == moe.num_layers * experts
    adapters = [op for op in mo.layers[-1].ops if op.expert and op.kind is OpKind.MATMUL and ".lora_" in op.name]
    assert len(adapters) == 6 and all(op.count == moe.num_experts for op in adapters)
    up = next(op for op in mo.layers[-1].ops if op.name.endswith("experts.up"))
    assert all(op.m == up.m for op in adapters)  # each expert's tokens
