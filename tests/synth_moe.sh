#!/bin/bash
# Description: dmafs-synth-model's mixture-of-experts models, written at --scale 32 into a
# work directory (nothing mounted): qwen3-30b-a3b (16 shards) and mixtral-8x7b (19 shards)
# have every tensor of the hub's checkpoints, named and shaped as there (scaled, the
# router's rows, one per expert, kept), each in the shard the index names; config.json has
# model_type qwen3_moe / mixtral and sizes, head counts and expert counts that fit the
# shapes. qwen3-0.6b's config.json is still a dense qwen3 one. A --scale that leaves the
# attention rows no whole number of heads is warned about.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_python
t_workdir
SYNTH=$top_srcdir/tools/dmafs-synth-model

for m in qwen3-30b-a3b mixtral-8x7b qwen3-0.6b; do
	t_log "dmafs-synth-model --model $m --scale 32"
	t_py "$SYNTH" -q --model "$m" --scale 32 --seed 5 "$T_WORK/$m" 2>"$T_WORK/$m.err" ||
		t_fail "dmafs-synth-model --model $m failed: $(cat "$T_WORK/$m.err")"
	[ -s "$T_WORK/$m.err" ] && t_fail "dmafs-synth-model --model $m warned: $(cat "$T_WORK/$m.err")"
done

t_py - "$T_WORK" <<'PY' || t_fail "the written models do not have the expected layout (see above)"
import json, os, struct, sys

work = sys.argv[1]
bad = []


def sc(d, f=32):
    return max(1, int(d / f + 0.5)) if d > 64 else d


def headers(d):
    """name -> (shape, file) over the safetensors files of @d, checking each header."""
    out = {}
    for fn in sorted(os.listdir(d)):
        if not fn.endswith(".safetensors"):
            continue
        with open(os.path.join(d, fn), "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            h = json.loads(f.read(n))
            size = os.fstat(f.fileno()).st_size
        end = 0
        for name, t in h.items():
            if name == "__metadata__":
                continue
            if t["dtype"] != "BF16":
                bad.append(f"{fn}: {name} is {t['dtype']}")
            k = 1
            for x in t["shape"]:
                k *= x
            a, b = t["data_offsets"]
            if b - a != 2 * k:
                bad.append(f"{fn}: {name}: {b - a} bytes for shape {t['shape']}")
            end = max(end, b)
            out[name] = (t["shape"], fn)
        if 8 + n + end != size:
            bad.append(f"{fn}: {size} bytes, header and data make {8 + n + end}")
    return out


def check(model, shards, want, cfg_want):
    d = os.path.join(work, model)
    got = headers(d)
    files = {f for _, f in got.values()}
    if len(files) != shards:
        bad.append(f"{model}: {len(files)} shards, want {shards}")
    idx = json.load(open(os.path.join(d, "model.safetensors.index.json")))["weight_map"]
    for name, shape in want.items():
        if name not in got:
            bad.append(f"{model}: no tensor {name}")
        elif got[name][0] != shape:
            bad.append(f"{model}: {name} is {got[name][0]}, want {shape}")
        elif idx.get(name) != got[name][1]:
            bad.append(f"{model}: the index puts {name} in {idx.get(name)}, it is in {got[name][1]}")
    for name in sorted(set(got) - set(want))[:5]:
        bad.append(f"{model}: unexpected tensor {name}")
    cfg = json.load(open(os.path.join(d, "config.json")))
    for k, v in cfg_want.items():
        if cfg.get(k) != v:
            bad.append(f"{model}: config.json {k} = {cfg.get(k)!r}, want {v!r}")
    # the config against the shapes, as transformers builds the model
    L0 = "model.layers.0.self_attn."
    h, hd = cfg["hidden_size"], cfg["head_dim"]
    if got["model.embed_tokens.weight"][0] != [cfg["vocab_size"], h]:
        bad.append(f"{model}: embed_tokens is not vocab_size x hidden_size")
    if got[L0 + "q_proj.weight"][0] != [cfg["num_attention_heads"] * hd, h]:
        bad.append(f"{model}: q_proj is not heads x head_dim by hidden")
    if got[L0 + "k_proj.weight"][0] != [cfg["num_key_value_heads"] * hd, h]:
        bad.append(f"{model}: k_proj is not kv heads x head_dim by hidden")
    if got[L0 + "o_proj.weight"][0] != [h, cfg["num_attention_heads"] * hd]:
        bad.append(f"{model}: o_proj is not hidden by heads x head_dim")
    layers = {int(n.split(".")[2]) for n in got if n.startswith("model.layers.")}
    if layers != set(range(cfg["num_hidden_layers"])):
        bad.append(f"{model}: layers {min(layers)}..{max(layers)}, config {cfg['num_hidden_layers']}")
    print(f"[synth_moe] {model}: {len(got)} tensors in {len(files)} shards; config "
          + ", ".join(f"{k} {cfg[k]}" for k in cfg if k != "dmafs_synthetic"))
    return got, cfg


# Qwen3-30B-A3B
want = {"model.embed_tokens.weight": [sc(151936), sc(2048)], "model.norm.weight": [sc(2048)],
        "lm_head.weight": [sc(151936), sc(2048)]}
for L in range(48):
    p = f"model.layers.{L}."
    want.update({p + "self_attn.q_proj.weight": [sc(4096), sc(2048)],
                 p + "self_attn.k_proj.weight": [sc(512), sc(2048)],
                 p + "self_attn.v_proj.weight": [sc(512), sc(2048)],
                 p + "self_attn.o_proj.weight": [sc(2048), sc(4096)],
                 p + "self_attn.q_norm.weight": [sc(128)], p + "self_attn.k_norm.weight": [sc(128)],
                 p + "input_layernorm.weight": [sc(2048)],
                 p + "post_attention_layernorm.weight": [sc(2048)],
                 p + "mlp.gate.weight": [128, sc(2048)]})
    for e in range(128):
        q = f"{p}mlp.experts.{e}."
        want.update({q + "gate_proj.weight": [sc(768), sc(2048)],
                     q + "up_proj.weight": [sc(768), sc(2048)],
                     q + "down_proj.weight": [sc(2048), sc(768)]})
assert len(want) == 18867
got, cfg = check("qwen3-30b-a3b", 16, want, {
    "model_type": "qwen3_moe", "num_experts": 128, "num_experts_per_tok": 8,
    "moe_intermediate_size": sc(768), "intermediate_size": sc(6144), "hidden_size": sc(2048),
    "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4,
    "head_dim": sc(128), "vocab_size": sc(151936), "decoder_sparse_step": 1,
    "mlp_only_layers": [], "norm_topk_prob": True, "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False})
if got["model.layers.0.self_attn.q_norm.weight"][0] != [cfg["head_dim"]]:
    bad.append("qwen3-30b-a3b: q_norm is not head_dim")
if got["model.layers.0.mlp.gate.weight"][0] != [cfg["num_experts"], cfg["hidden_size"]]:
    bad.append("qwen3-30b-a3b: the router is not num_experts x hidden_size")
if got["model.layers.0.mlp.experts.0.up_proj.weight"][0][0] != cfg["moe_intermediate_size"]:
    bad.append("qwen3-30b-a3b: an expert's up_proj rows are not moe_intermediate_size")

# Mixtral-8x7B
want = {"model.embed_tokens.weight": [sc(32000), sc(4096)], "model.norm.weight": [sc(4096)],
        "lm_head.weight": [sc(32000), sc(4096)]}
for L in range(32):
    p = f"model.layers.{L}."
    want.update({p + "self_attn.q_proj.weight": [sc(4096), sc(4096)],
                 p + "self_attn.k_proj.weight": [sc(1024), sc(4096)],
                 p + "self_attn.v_proj.weight": [sc(1024), sc(4096)],
                 p + "self_attn.o_proj.weight": [sc(4096), sc(4096)],
                 p + "input_layernorm.weight": [sc(4096)],
                 p + "post_attention_layernorm.weight": [sc(4096)],
                 p + "block_sparse_moe.gate.weight": [8, sc(4096)]})
    for e in range(8):
        q = f"{p}block_sparse_moe.experts.{e}."
        want.update({q + "w1.weight": [sc(14336), sc(4096)], q + "w2.weight": [sc(4096), sc(14336)],
                     q + "w3.weight": [sc(14336), sc(4096)]})
assert len(want) == 995
got, cfg = check("mixtral-8x7b", 19, want, {
    "model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 2,
    "intermediate_size": sc(14336), "hidden_size": sc(4096), "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": sc(128),
    "vocab_size": sc(32000), "rms_norm_eps": 1e-5, "tie_word_embeddings": False})
if got["model.layers.0.block_sparse_moe.gate.weight"][0] != [cfg["num_local_experts"], cfg["hidden_size"]]:
    bad.append("mixtral-8x7b: the router is not num_local_experts x hidden_size")
for k in ("num_experts", "moe_intermediate_size", "mlp_only_layers"):
    if k in cfg:
        bad.append(f"mixtral-8x7b: config.json has qwen3_moe's {k}")

# a dense model keeps its dense config
cfg = json.load(open(os.path.join(work, "qwen3-0.6b", "config.json")))
if cfg["model_type"] != "qwen3" or cfg.get("intermediate_size") != sc(3072):
    bad.append(f"qwen3-0.6b: config.json {cfg}")
for k in ("num_experts", "num_local_experts", "num_experts_per_tok", "moe_intermediate_size"):
    if k in cfg:
        bad.append(f"qwen3-0.6b: config.json has {k}")

for b in bad[:40]:
    print(f"[synth_moe] {b}")
sys.exit(1 if bad else 0)
PY

t_log "a --scale that splits heads is warned about"
t_py "$SYNTH" -q --model mixtral-8x7b --scale 48 "$T_WORK/m48" 2>"$T_WORK/m48.err" ||
	t_fail "dmafs-synth-model --scale 48 failed: $(cat "$T_WORK/m48.err")"
grep -q "warning: q_proj has 85 rows, not num_attention_heads 32 x head_dim 2" "$T_WORK/m48.err" ||
	t_fail "no warning for heads that do not divide: $(cat "$T_WORK/m48.err")"
