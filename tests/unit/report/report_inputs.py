"""Command lines of the report tests' inputs (a module of its own: test files cannot import a conftest)."""

# the seed README's examples (README.md, seed 001)
TRAFFIC = ["--cluster_flop_rate", "156e12", "--num_experts", "8", "--batch_size", "8192", "--seq_len", "8192",
           "--dataset_size", "13e12", "--num_layers", "120", "--d_model", "15360", "--p_pipe", "15", "--p_data", "16",
           "--p_exp", "8", "--p_tensor_int", "8"]
BATCH_TIME = ["--chip", "A100_40GB", "--n_layers", "120", "--d_model", "12288", "--batch_size", "30720",
              "--microbatch_size", "48", "--n_experts", "16", "--n_routed_experts", "2", "--pp", "15",
              "--pipeline_interleaving", "8", "--tp", "8", "--dp", "12"]
