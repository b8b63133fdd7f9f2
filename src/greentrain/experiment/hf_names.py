"""Names transformers accepts in an experiment file, checked when the file is read (issue 24: ``train.optim: foo``
failed only at run time, ``model.config: {d_modle: 64}`` was silently ignored).

Copied from transformers 5.24 so that reading a file does not import it (its import takes 5-15 s):
``OptimizerNames`` (transformers/training_args.py) and, per architecture, ``AutoConfig.for_model(arch).to_dict()``
plus the config class's ``attribute_map``; a few keys of transformers 4.x configs are kept so that older files still
read. tests/unit/experiment/test_experiment_names.py keeps these lists a superset of the installed transformers'.
"""

from __future__ import annotations

OPTIM_NAMES = (
    "adamw_torch", "adamw_torch_fused", "adamw_torch_xla", "adamw_torch_npu_fused", "adafactor",
    "adamw_anyprecision", "adamw_torch_4bit", "adamw_torch_8bit", "ademamix", "sgd", "adagrad", "adamw_bnb_8bit",
    "adamw_8bit", "ademamix_8bit", "lion_8bit", "lion_32bit", "paged_adamw_32bit", "paged_adamw_8bit",
    "paged_ademamix_32bit", "paged_ademamix_8bit", "paged_lion_32bit", "paged_lion_8bit", "rmsprop", "rmsprop_bnb",
    "rmsprop_bnb_8bit", "rmsprop_bnb_32bit", "galore_adamw", "galore_adamw_8bit", "galore_adafactor",
    "galore_adamw_layerwise", "galore_adamw_8bit_layerwise", "galore_adafactor_layerwise", "lomo", "adalomo",
    "grokadamw", "schedule_free_radam", "schedule_free_adamw", "schedule_free_sgd", "apollo_adamw",
    "apollo_adamw_layerwise", "stable_adamw",
)

_COMMON = frozenset({
    "_name_or_path", "architectures", "chunk_size_feed_forward", "dtype", "id2label", "is_encoder_decoder",
    "label2id", "model_type", "output_attentions", "output_hidden_states", "problem_type", "return_dict",
    "transformers_version",
})
_LEGACY = {"llama": frozenset({"rope_theta", "rope_scaling"})}  # transformers 4.x LlamaConfig

CONFIG_KEYS: dict[str, frozenset[str]] = {
    "t5": _COMMON | _LEGACY.get("t5", frozenset()) | frozenset({
        "classifier_dropout", "d_ff", "d_kv", "d_model", "dense_act_fn", "dropout_rate", "eos_token_id",
        "feed_forward_proj", "head_dim", "hidden_size", "initializer_factor", "is_decoder", "is_gated_act",
        "layer_norm_epsilon", "num_attention_heads", "num_decoder_layers", "num_heads", "num_hidden_layers",
        "num_layers", "pad_token_id", "relative_attention_max_distance", "relative_attention_num_buckets",
        "scale_decoder_outputs", "tie_word_embeddings", "use_cache", "vocab_size",
    }),
    "bart": _COMMON | _LEGACY.get("bart", frozenset()) | frozenset({
        "activation_dropout", "activation_function", "attention_dropout", "bos_token_id", "classifier_dropout",
        "d_model", "decoder_attention_heads", "decoder_ffn_dim", "decoder_layerdrop", "decoder_layers",
        "decoder_start_token_id", "dropout", "encoder_attention_heads", "encoder_ffn_dim", "encoder_layerdrop",
        "encoder_layers", "eos_token_id", "forced_eos_token_id", "hidden_size", "init_std", "is_decoder",
        "max_position_embeddings", "num_attention_heads", "num_hidden_layers", "pad_token_id", "scale_embedding",
        "tie_word_embeddings", "use_cache", "vocab_size",
    }),
    "pegasus": _COMMON | _LEGACY.get("pegasus", frozenset()) | frozenset({
        "activation_dropout", "activation_function", "attention_dropout", "d_model", "decoder_attention_heads",
        "decoder_ffn_dim", "decoder_layerdrop", "decoder_layers", "decoder_start_token_id", "dropout",
        "encoder_attention_heads", "encoder_ffn_dim", "encoder_layerdrop", "encoder_layers", "eos_token_id",
        "forced_eos_token_id", "hidden_size", "init_std", "is_decoder", "max_position_embeddings",
        "num_attention_heads", "num_hidden_layers", "pad_token_id", "scale_embedding", "tie_word_embeddings",
        "use_cache", "vocab_size",
    }),
    "llama": _COMMON | _LEGACY.get("llama", frozenset()) | frozenset({
        "attention_bias", "attention_dropout", "bos_token_id", "eos_token_id", "head_dim", "hidden_act",
        "hidden_size", "initializer_range", "intermediate_size", "max_position_embeddings", "mlp_bias",
        "num_attention_heads", "num_hidden_layers", "num_key_value_heads", "pad_token_id", "pretraining_tp",
        "rms_norm_eps", "rope_parameters", "tie_word_embeddings", "use_cache", "vocab_size",
    }),
    "gpt2": _COMMON | _LEGACY.get("gpt2", frozenset()) | frozenset({
        "activation_function", "add_cross_attention", "attn_pdrop", "bos_token_id", "embd_pdrop", "eos_token_id",
        "hidden_size", "initializer_range", "layer_norm_epsilon", "max_position_embeddings", "n_embd", "n_head",
        "n_inner", "n_layer", "n_positions", "num_attention_heads", "num_hidden_layers", "pad_token_id",
        "reorder_and_upcast_attn", "resid_pdrop", "scale_attn_by_inverse_layer_idx", "scale_attn_weights",
        "summary_activation", "summary_first_dropout", "summary_proj_to_labels", "summary_type", "summary_use_proj",
        "tie_word_embeddings", "use_cache", "vocab_size",
    }),
}
