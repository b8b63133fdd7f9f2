"""The layer stacks the executor trains: greentrain's own llama (RMSNorm, rotary GQA attention through SDPA, SwiGLU)
and Hugging Face ``LlamaForCausalLM``, both seen as ``LayerStack(embed, layers, norm, head)``.

greentrain's llama splits each layer into ``pre_attention`` (norm, q/k/v, rotary), ``core`` (causal SDPA) and
``post_attention`` (output projection, residual, MLP): the executor's attention save level keeps the core's
inputs and outputs and recomputes the two others (design/offload.md section 5, step 4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from greentrain.errors import ConfigError
from greentrain.model.spec import TransformerSpec

# A 4-layer llama small enough to train on 2 CPU cores in CI (and for `greentrain offload train --model tiny`).
TINY_LLAMA: dict[str, Any] = {
    "name": "tiny-llama", "family": "llama", "num_layers": 4, "hidden_size": 64, "num_heads": 4, "num_kv_heads": 2,
    "head_dim": 16, "ffn_hidden_size": 128, "vocab_size": 256, "glu": True, "activation": "silu", "norm": "rmsnorm",
    "tied_embeddings": False, "source": "greentrain test model (offload/llama.py)"}


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotary(x: torch.Tensor, theta: float = 500000.0) -> torch.Tensor:
    """Rotary positions (Su et al. 2021) on (b, heads, s, head_dim), halves rotated (the Llama layout)."""
    s, dh = x.shape[-2], x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, dh, 2, device=x.device, dtype=torch.float32) / dh)
    ang = torch.outer(torch.arange(s, device=x.device, dtype=torch.float32), inv)
    cos, sin = torch.cat([ang, ang], -1).cos().to(x.dtype), torch.cat([ang, ang], -1).sin().to(x.dtype)
    x1, x2 = x[..., : dh // 2], x[..., dh // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


class Block(nn.Module):
    def __init__(self, spec: TransformerSpec) -> None:
        super().__init__()
        d, q, kv = spec.hidden_size, spec.q_width, spec.kv_width
        self.heads, self.kv_heads = spec.num_heads, spec.num_kv_heads or spec.num_heads
        self.head_dim = q // self.heads
        self.attn_norm, self.mlp_norm = RMSNorm(d), RMSNorm(d)
        self.q_proj, self.k_proj = nn.Linear(d, q, bias=False), nn.Linear(d, kv, bias=False)
        self.v_proj, self.o_proj = nn.Linear(d, kv, bias=False), nn.Linear(q, d, bias=False)
        f = spec.ffn_hidden_size
        self.gate, self.up = nn.Linear(d, f, bias=False), nn.Linear(d, f, bias=False)
        self.down = nn.Linear(f, d, bias=False)

    def pre_attention(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b, s, _ = x.shape
        h = self.attn_norm(x)
        q = self.q_proj(h).view(b, s, self.heads, self.head_dim).transpose(1, 2)  # (b, heads, s, dh)
        k = self.k_proj(h).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)  # (b, kv_heads, s, dh)
        v = self.v_proj(h).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        return rotary(q), rotary(k), v

    def core(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)  # (b, heads, s, dh)

    def post_attention(self, x: torch.Tensor, o: torch.Tensor) -> torch.Tensor:
        h = x + self.o_proj(o.transpose(1, 2).flatten(2))  # (b, s, q)
        m = self.mlp_norm(h)
        return h + self.down(F.silu(self.gate(m)) * self.up(m))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.post_attention(x, self.core(*self.pre_attention(x)))


class TinyLlama(nn.Module):
    def __init__(self, spec: TransformerSpec) -> None:
        super().__init__()
        self.embed = nn.Embedding(spec.vocab_size, spec.hidden_size)
        self.layers = nn.ModuleList(Block(spec) for _ in range(spec.num_layers))
        self.norm = RMSNorm(spec.hidden_size)
        self.head = nn.Linear(spec.hidden_size, spec.vocab_size, bias=False)

    def forward(self, tokens: torch.Tensor, loss_chunk_tokens: int = 4096) -> torch.Tensor:
        """Mean next-token loss of token ids (batch, seq_len + 1): the plain loop the executor must equal."""
        x = self.embed(tokens[:, :-1])
        for layer in self.layers:
            x = layer(x)
        return lm_loss(stack_of(self), x, tokens[:, 1:], loss_chunk_tokens)


@dataclass(slots=True)
class LayerStack:
    """What the executor needs of a model: embedding, the layer list, final norm and head."""

    embed: nn.Module
    layers: nn.ModuleList
    norm: nn.Module
    head: nn.Module
    split_attention: bool  # layers have pre_attention / core / post_attention

    def modules(self) -> list[nn.Module]:
        return [self.embed, *self.layers, self.norm, self.head]


def build_llama(spec: TransformerSpec, seed: int = 0, dtype: torch.dtype = torch.float32) -> TinyLlama:
    """greentrain's llama with a fixed random initialisation (normal, std 0.02; norms at 1)."""
    if spec.arch != "decoder" or spec.is_moe or not spec.glu:
        raise ConfigError("model", spec.name, "the executor's llama needs a dense decoder with a GLU MLP")
    g = torch.Generator().manual_seed(seed)
    model = TinyLlama(spec)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not name.endswith("norm.weight"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
    return model.to(dtype)


def stack_of(model: nn.Module) -> LayerStack:
    """The layer stack of greentrain's llama or of a Hugging Face LlamaForCausalLM."""
    if isinstance(model, TinyLlama):
        return LayerStack(embed=model.embed, layers=model.layers, norm=model.norm, head=model.head,
                          split_attention=True)
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if inner is None or not isinstance(layers, nn.ModuleList) or not hasattr(model, "lm_head"):
        raise ConfigError("model", type(model).__name__, "has no layer stack (model.layers as a ModuleList)")
    rot, head = inner.rotary_emb, model.lm_head
    assert isinstance(head, nn.Module)
    wrapped = nn.ModuleList(HFLayer(layer, rot) for layer in layers)
    return LayerStack(embed=inner.embed_tokens, layers=wrapped, norm=inner.norm, head=head, split_attention=False)


class HFLayer(nn.Module):
    """A Hugging Face decoder layer called the way LlamaModel calls it: rotary embeddings from the model's
    rotary module, no mask (SDPA then applies the causal mask itself)."""

    def __init__(self, layer: nn.Module, rotary_emb: nn.Module) -> None:
        super().__init__()
        self.layer = layer
        self._rotary = [rotary_emb]  # not a submodule: its buffers stay with the model's ends

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(x.shape[1], device=x.device).unsqueeze(0)
        pe = self._rotary[0](x, pos)
        out = self.layer(x, attention_mask=None, position_ids=pos, position_embeddings=pe)
        return out[0] if isinstance(out, tuple) else out


def lm_loss(stack: LayerStack, x: torch.Tensor, labels: torch.Tensor, chunk_tokens: int) -> torch.Tensor:
    """Mean next-token cross-entropy through the final norm and head, ``chunk_tokens`` rows at a time, each chunk
    checkpointed so its logits (tokens x vocabulary) never all live at once."""
    flat, lab = x.flatten(0, 1), labels.flatten()
    n = flat.shape[0]
    total = flat.new_zeros(())
    for i in range(0, n, chunk_tokens):
        total = total + checkpoint(_chunk_loss, stack.norm, stack.head, flat[i:i + chunk_tokens],
                                   lab[i:i + chunk_tokens], use_reentrant=False)
    return total / n


def _chunk_loss(norm: nn.Module, head: nn.Module, x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(head(norm(x)).float(), labels, reduction="sum")


def synthetic_batch(vocab: int, micro_batches: int, batch: int, seq_len: int, seed: int) -> list[torch.Tensor]:
    """Random token ids (no download): micro-batches of (batch, seq_len + 1), inputs and shifted labels."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (batch, seq_len + 1), generator=g) for _ in range(micro_batches)]


def param_count(stack: LayerStack) -> int:
    return sum(p.numel() for m in stack.modules() for p in m.parameters())

