"""Key mapping between the original Depth Anything V2 state dict and transformers' DepthAnythingForDepthEstimation.

transformers ships its converter (models/depth_anything/convert_depth_anything_to_hf.py) only in the source
repository, not in the wheel, so the inverse of its rename table is written out here. Forward direction of that
converter: original key -> HF key, plus `pretrained.blocks.i.attn.qkv.{weight,bias}` split into
`attention.attention.{query,key,value}` (rows [0,C), [C,2C), [2C,3C)). Fusion blocks are reversed:
refinenet1 <-> fusion_stage.layers.3, ..., refinenet4 <-> fusion_stage.layers.0.
"""

from collections import OrderedDict

import torch

# refinenet index (original) -> fusion_stage layer index (HF)
REFINENET_TO_FUSION = {1: 3, 2: 2, 3: 1, 4: 0}


def original_key_order(depth):
    """Original DA2 state-dict keys in the upstream `state_dict()` order.

    Inside each refinenet upstream's FeatureFusionBlock registers out_conv before resConfUnit1/2, so
    `state_dict()` lists out_conv first (a listing by module reading order would put it last).
    """
    keys = ["pretrained.cls_token", "pretrained.pos_embed", "pretrained.mask_token",
            "pretrained.patch_embed.proj.weight", "pretrained.patch_embed.proj.bias"]
    for i in range(depth):
        p = f"pretrained.blocks.{i}."
        keys += [p + "norm1.weight", p + "norm1.bias", p + "attn.qkv.weight", p + "attn.qkv.bias",
                 p + "attn.proj.weight", p + "attn.proj.bias", p + "ls1.gamma", p + "norm2.weight", p + "norm2.bias",
                 p + "mlp.fc1.weight", p + "mlp.fc1.bias", p + "mlp.fc2.weight", p + "mlp.fc2.bias", p + "ls2.gamma"]
    keys += ["pretrained.norm.weight", "pretrained.norm.bias"]
    for i in range(4):
        keys += [f"depth_head.projects.{i}.weight", f"depth_head.projects.{i}.bias"]
    for i in (0, 1, 3):
        keys += [f"depth_head.resize_layers.{i}.weight", f"depth_head.resize_layers.{i}.bias"]
    for i in range(1, 5):
        keys.append(f"depth_head.scratch.layer{i}_rn.weight")
    for i in range(1, 5):
        p = f"depth_head.scratch.refinenet{i}."
        keys += [p + "out_conv.weight", p + "out_conv.bias"]
        for u in (1, 2):
            for c in (1, 2):
                keys += [p + f"resConfUnit{u}.conv{c}.weight", p + f"resConfUnit{u}.conv{c}.bias"]
    keys += ["depth_head.scratch.output_conv1.weight", "depth_head.scratch.output_conv1.bias",
             "depth_head.scratch.output_conv2.0.weight", "depth_head.scratch.output_conv2.0.bias",
             "depth_head.scratch.output_conv2.2.weight", "depth_head.scratch.output_conv2.2.bias"]
    return keys


def original_to_hf_rename(depth):
    """Original key -> HF key for every tensor that is renamed 1:1 (everything except the fused qkv)."""
    m = OrderedDict()
    m["pretrained.cls_token"] = "backbone.embeddings.cls_token"
    m["pretrained.mask_token"] = "backbone.embeddings.mask_token"
    m["pretrained.pos_embed"] = "backbone.embeddings.position_embeddings"
    m["pretrained.patch_embed.proj.weight"] = "backbone.embeddings.patch_embeddings.projection.weight"
    m["pretrained.patch_embed.proj.bias"] = "backbone.embeddings.patch_embeddings.projection.bias"
    for i in range(depth):
        o, h = f"pretrained.blocks.{i}.", f"backbone.encoder.layer.{i}."
        m[o + "ls1.gamma"] = h + "layer_scale1.lambda1"
        m[o + "ls2.gamma"] = h + "layer_scale2.lambda1"
        for n in ("norm1", "norm2"):
            for s in ("weight", "bias"):
                m[o + f"{n}.{s}"] = h + f"{n}.{s}"
        for fc in ("fc1", "fc2"):
            for s in ("weight", "bias"):
                m[o + f"mlp.{fc}.{s}"] = h + f"mlp.{fc}.{s}"
        for s in ("weight", "bias"):
            m[o + f"attn.proj.{s}"] = h + f"attention.output.dense.{s}"
    m["pretrained.norm.weight"] = "backbone.layernorm.weight"
    m["pretrained.norm.bias"] = "backbone.layernorm.bias"
    for i in range(4):
        for s in ("weight", "bias"):
            m[f"depth_head.projects.{i}.{s}"] = f"neck.reassemble_stage.layers.{i}.projection.{s}"
            if i != 2:
                m[f"depth_head.resize_layers.{i}.{s}"] = f"neck.reassemble_stage.layers.{i}.resize.{s}"
    for i in range(1, 5):
        j = REFINENET_TO_FUSION[i]
        o, h = f"depth_head.scratch.refinenet{i}.", f"neck.fusion_stage.layers.{j}."
        for s in ("weight", "bias"):
            m[o + f"out_conv.{s}"] = h + f"projection.{s}"
            for u in (1, 2):
                for c in (1, 2):
                    m[o + f"resConfUnit{u}.conv{c}.{s}"] = h + f"residual_layer{u}.convolution{c}.{s}"
    for i in range(4):
        m[f"depth_head.scratch.layer{i + 1}_rn.weight"] = f"neck.convs.{i}.weight"
    for s in ("weight", "bias"):
        m[f"depth_head.scratch.output_conv1.{s}"] = f"head.conv1.{s}"
        m[f"depth_head.scratch.output_conv2.0.{s}"] = f"head.conv2.{s}"
        m[f"depth_head.scratch.output_conv2.2.{s}"] = f"head.conv3.{s}"
    return m


def hf_to_original(hf_sd, depth):
    """Builds the original DA2 state dict (upstream `state_dict()` key order) from an HF DepthAnything state dict.

    Every tensor is a fresh contiguous float32 copy with its own storage (offset 0), which keeps the
    torch.save zip simple for the Go reader. Raises KeyError/ValueError when an HF key is missing or unused.
    """
    rename = original_to_hf_rename(depth)
    used = set()
    out = OrderedDict()
    for key in original_key_order(depth):
        if key.endswith("attn.qkv.weight") or key.endswith("attn.qkv.bias"):
            i = int(key.split(".")[2])
            s = key.rsplit(".", 1)[1]
            parts = []
            for n in ("query", "key", "value"):
                hk = f"backbone.encoder.layer.{i}.attention.attention.{n}.{s}"
                parts.append(hf_sd[hk])
                used.add(hk)
            t = torch.cat(parts, dim=0)
        else:
            hk = rename[key]
            t = hf_sd[hk]
            used.add(hk)
        out[key] = t.detach().to(torch.float32).contiguous().clone()
    unused = sorted(set(hf_sd.keys()) - used)
    if unused:
        raise ValueError(f"HF tensors without an original key: {unused}")
    return out


def expected_original_shapes(embed_dim, depth, features, out_channels, pos_grid, mlp_ratio=4):
    """Torch shapes of every original DA2 tensor, derived from the architecture (vits: 239 keys)."""
    C, f, oc = embed_dim, features, out_channels
    s = OrderedDict()
    s["pretrained.cls_token"] = (1, 1, C)
    s["pretrained.pos_embed"] = (1, pos_grid * pos_grid + 1, C)
    s["pretrained.mask_token"] = (1, C)
    s["pretrained.patch_embed.proj.weight"] = (C, 3, 14, 14)
    s["pretrained.patch_embed.proj.bias"] = (C,)
    for i in range(depth):
        p = f"pretrained.blocks.{i}."
        s[p + "norm1.weight"] = (C,)
        s[p + "norm1.bias"] = (C,)
        s[p + "attn.qkv.weight"] = (3 * C, C)
        s[p + "attn.qkv.bias"] = (3 * C,)
        s[p + "attn.proj.weight"] = (C, C)
        s[p + "attn.proj.bias"] = (C,)
        s[p + "ls1.gamma"] = (C,)
        s[p + "norm2.weight"] = (C,)
        s[p + "norm2.bias"] = (C,)
        s[p + "mlp.fc1.weight"] = (mlp_ratio * C, C)
        s[p + "mlp.fc1.bias"] = (mlp_ratio * C,)
        s[p + "mlp.fc2.weight"] = (C, mlp_ratio * C)
        s[p + "mlp.fc2.bias"] = (C,)
        s[p + "ls2.gamma"] = (C,)
    s["pretrained.norm.weight"] = (C,)
    s["pretrained.norm.bias"] = (C,)
    for i in range(4):
        s[f"depth_head.projects.{i}.weight"] = (oc[i], C, 1, 1)
        s[f"depth_head.projects.{i}.bias"] = (oc[i],)
    s["depth_head.resize_layers.0.weight"] = (oc[0], oc[0], 4, 4)
    s["depth_head.resize_layers.0.bias"] = (oc[0],)
    s["depth_head.resize_layers.1.weight"] = (oc[1], oc[1], 2, 2)
    s["depth_head.resize_layers.1.bias"] = (oc[1],)
    s["depth_head.resize_layers.3.weight"] = (oc[3], oc[3], 3, 3)
    s["depth_head.resize_layers.3.bias"] = (oc[3],)
    for i in range(4):
        s[f"depth_head.scratch.layer{i + 1}_rn.weight"] = (f, oc[i], 3, 3)
    for i in range(1, 5):
        p = f"depth_head.scratch.refinenet{i}."
        s[p + "out_conv.weight"] = (f, f, 1, 1)
        s[p + "out_conv.bias"] = (f,)
        for u in (1, 2):
            for c in (1, 2):
                s[p + f"resConfUnit{u}.conv{c}.weight"] = (f, f, 3, 3)
                s[p + f"resConfUnit{u}.conv{c}.bias"] = (f,)
    s["depth_head.scratch.output_conv1.weight"] = (f // 2, f, 3, 3)
    s["depth_head.scratch.output_conv1.bias"] = (f // 2,)
    s["depth_head.scratch.output_conv2.0.weight"] = (32, f // 2, 3, 3)
    s["depth_head.scratch.output_conv2.0.bias"] = (32,)
    s["depth_head.scratch.output_conv2.2.weight"] = (1, 32, 1, 1)
    s["depth_head.scratch.output_conv2.2.bias"] = (1,)
    return s
