#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""moe-json.py - write the model JSON files of the mixture-of-experts models
(qwen3-30b-a3b.json, mixtral-8x7b.json) for dmafs-synth-model: the tensor names and
shapes of the Hugging Face checkpoints, in the order of their modules.

    python3 tools/models/moe-json.py [DIR]     (default: the directory of this script)
"""

import json
import os
import sys


def tensors(h, layers, heads, kv, hd, vocab, qk_norm, moe, experts, expert):
    """{name: shape} of a decoder whose every layer has attention (q_norm and k_norm with
    @qk_norm), a router and @experts experts under the module @moe, each expert the
    tensors @expert ([(name, shape), ...]), in the checkpoint's order."""
    t = {"model.embed_tokens.weight": [vocab, h], "model.norm.weight": [h],
         "lm_head.weight": [vocab, h]}
    for L in range(layers):
        p = "model.layers.%d." % L
        t[p + "self_attn.q_proj.weight"] = [heads * hd, h]
        t[p + "self_attn.k_proj.weight"] = [kv * hd, h]
        t[p + "self_attn.v_proj.weight"] = [kv * hd, h]
        t[p + "self_attn.o_proj.weight"] = [h, heads * hd]
        if qk_norm:
            t[p + "self_attn.q_norm.weight"] = [hd]
            t[p + "self_attn.k_norm.weight"] = [hd]
        t[p + moe + ".gate.weight"] = [experts, h]
        for e in range(experts):
            for name, shape in expert:
                t[p + moe + ".experts.%d.%s.weight" % (e, name)] = shape
        t[p + "input_layernorm.weight"] = [h]
        t[p + "post_attention_layernorm.weight"] = [h]
    return t


def qwen3_30b_a3b():
    h, layers, heads, kv, hd, vocab = 2048, 48, 32, 4, 128, 151936
    experts, per_tok, moe_inter, inter = 128, 8, 768, 6144
    t = tensors(h, layers, heads, kv, hd, vocab, True, "mlp", experts,
                [("gate_proj", [moe_inter, h]), ("up_proj", [moe_inter, h]),
                 ("down_proj", [h, moe_inter])])
    config = ("hidden %d, intermediate %d, moe_intermediate %d, %d layers, %d heads, "
              "%d kv heads, head_dim %d, vocab %d, %d experts, %d experts per token, "
              "rms_norm_eps 1e-6; lm_head present"
              % (h, inter, moe_inter, layers, heads, kv, hd, vocab, experts, per_tok))
    return "qwen3-30b-a3b", "qwen3_moe", 16, config, t


def mixtral_8x7b():
    h, layers, heads, kv, hd, vocab = 4096, 32, 32, 8, 128, 32000
    experts, per_tok, inter = 8, 2, 14336
    t = tensors(h, layers, heads, kv, hd, vocab, False, "block_sparse_moe", experts,
                [("w1", [inter, h]), ("w2", [h, inter]), ("w3", [inter, h])])
    config = ("hidden %d, intermediate %d, %d layers, %d heads, %d kv heads, head_dim %d, "
              "vocab %d, %d experts, %d experts per token, rms_norm_eps 1e-5; lm_head present"
              % (h, inter, layers, heads, kv, hd, vocab, experts, per_tok))
    return "mixtral-8x7b", "mixtral", 19, config, t


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for make in (qwen3_30b_a3b, mixtral_8x7b):
        name, mtype, shards, config, t = make()
        total = 0
        for shape in t.values():
            n = 2  # BF16
            for d in shape:
                n *= d
            total += n
        d = {"model": name, "model_type": mtype, "dtype": "BF16", "shards": shards,
             "config": config,
             # the router's rows are the experts: a count, kept under --scale
             "unscaled": {r"\.gate\.weight$": [0]},
             "tensor_count": len(t), "total_bytes": total, "tensors": t}
        path = os.path.join(out, name + ".json")
        # one tensor a line: thousands of experts' tensors stay readable and diff well
        head = json.dumps({k: v for k, v in d.items() if k != "tensors"}, indent=0)
        body = ",\n".join("%s: %s" % (json.dumps(k), json.dumps(v)) for k, v in t.items())
        with open(path, "w") as f:
            f.write(head[:-2] + ',\n"tensors": {\n' + body + "\n}\n}\n")
        with open(path) as f:
            assert json.load(f) == d
        print("%s  %d tensors  %d bytes" % (path, len(t), total))


if __name__ == "__main__":
    main()
