# SPDX-License-Identifier: MIT
"""moe_models.py - two small mixture-of-experts models written with the real transformers'
save_pretrained (random weights, bf16): Qwen3-MoE's and Mixtral's architectures, in the
checkpoint layout transformers saves (one tensor per expert).

Usage: moe_models.py DIR   (writes DIR/qwen3moe and DIR/mixtral)
"""
import os
import sys


def main():
    import torch
    from transformers import AutoModelForCausalLM, MixtralConfig, Qwen3MoeConfig

    out = sys.argv[1]
    torch.manual_seed(0)
    common = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=16, vocab_size=256, num_experts_per_tok=2)
    for name, cfg in (
            ("qwen3moe", Qwen3MoeConfig(intermediate_size=96, moe_intermediate_size=48,
                                        num_experts=8, decoder_sparse_step=1, mlp_only_layers=[],
                                        **common)),
            ("mixtral", MixtralConfig(intermediate_size=48, num_local_experts=8, **common))):
        m = AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16)
        m.save_pretrained(os.path.join(out, name), max_shard_size="200KB")
        print(f"moe_models.py: {name}: {sum(p.numel() for p in m.parameters())} parameters",
              flush=True)


if __name__ == "__main__":
    main()
