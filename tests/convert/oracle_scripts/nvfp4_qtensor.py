"""Oracle: quantize raw tensors with nvidia-modelopt's NVFP4QTensor (runs in the quant venv).

usage: python nvfp4_qtensor.py IN.npz GROUPS.json OUT.npz
IN.npz holds raw 16-bit patterns (uint16) per name; GROUPS.json = {"groups": [{"dtype":
"bf16"|"f16", "names": [name, ...]}, ...]}: members of a group share one global scale from their
joint amax, as ModelOpt's preprocess_linear_fusion does. OUT.npz gets NAME.weight (uint8 [N, K/2]),
NAME.weight_scale (uint8 e4m3 bytes [N, K/16]) and NAME.weight_scale_2 (float32 scalar).
"""

import json
import sys

import numpy as np
import torch
from modelopt.torch.quantization.qtensor import NVFP4QTensor

src, groups_file, dst = sys.argv[1:4]
spec = json.load(open(groups_file))
dtypes = {"bf16": torch.bfloat16, "f16": torch.float16}
data = np.load(src)
out = {}
for group in spec["groups"]:
    dtype = dtypes[group["dtype"]]
    ws = {n: torch.from_numpy(data[n].view(np.int16).copy()).view(dtype) for n in group["names"]}
    wsf2 = torch.stack([NVFP4QTensor.get_weights_scaling_factor_2(w) for w in ws.values()]).max()
    for name, w in ws.items():
        qt, scale, g = NVFP4QTensor.quantize(w, 16, weights_scaling_factor_2=wsf2)
        out[f"{name}.weight"] = qt._quantized_data.numpy()
        out[f"{name}.weight_scale"] = scale.view(torch.uint8).numpy()
        out[f"{name}.weight_scale_2"] = np.asarray(g.float().numpy(), np.float32)
np.savez(dst, **out)
print("ok", len(out))
