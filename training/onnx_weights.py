"""Read a shipped int8 reader back into the torch ``Reader``, to continue training from it.

onnxruntime's dynamic quantisation keeps each weight as int8 values with a scale and a
zero point (per output channel for the linear layers); dequantised, they are the trained
weights to within the quantisation step (on 20 test pairs the torch model's answer logit
correlates 0.998 with the int8 file's). The exporter names the linear layers'
(transposed) weights ``onnx::MatMul_<n>`` in graph order: query, key, value, attention
output, intermediate, output per encoder layer, then the span head.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

#: The order of the int8 MatMul weights in one encoder layer, as the exporter numbers them.
LAYER_LINEARS = (
    "attention.self.query",
    "attention.self.key",
    "attention.self.value",
    "attention.output.dense",
    "intermediate.dense",
    "output.dense",
)


def onnx_state(path: Path) -> dict[str, np.ndarray]:
    """The file's weights by torch parameter name, dequantised to float32."""
    import onnx
    from onnx import numpy_helper

    m = onnx.load(str(path))
    raw = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    state: dict[str, np.ndarray] = {}
    anon: list[str] = []
    for name, arr in raw.items():
        if name.endswith("_quantized"):
            base = name[: -len("_quantized")]
            q = arr.astype(np.float32)
            scale = raw[base + "_scale"].astype(np.float32)
            zp = raw[base + "_zero_point"].astype(np.float32)
            w = (q - zp) * scale  # per-channel: scale/zp along the last axis (outputs)
            if base.startswith("onnx::MatMul_"):
                anon.append(base)
                state[base] = w.T  # (in, out) -> torch's (out, in)
            elif base == "answer.weight":
                state[base] = w.T
            else:
                state[base] = w
        elif not (name.endswith("_scale") or name.endswith("_zero_point")):
            state[name] = arr.astype(np.float32)
    anon.sort(key=lambda n: int(n.rsplit("_", 1)[1]))
    layers = len(anon) // len(LAYER_LINEARS)
    names = [
        f"encoder.encoder.layer.{i}.{part}.weight" for i in range(layers) for part in LAYER_LINEARS
    ]
    names.append("span.weight")
    assert len(anon) == len(names), (len(anon), len(names))
    for a, n in zip(anon, names, strict=True):
        state[n] = state.pop(a)
    return state


def load_onnx_weights(model: torch.nn.Module, path: Path) -> None:
    """Load ``path`` into ``model`` (every parameter but the unused pooler must be there)."""
    state = onnx_state(path)
    own = model.state_dict()
    unused = ("position_ids", ".pooler.")  # a buffer, and a layer the Reader never calls
    missing = [k for k in own if k not in state and not any(u in k for u in unused)]
    extra = [k for k in state if k not in own]
    assert not missing and not extra, (missing, extra)
    for k, v in state.items():
        assert tuple(own[k].shape) == v.shape, (k, own[k].shape, v.shape)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=False)
