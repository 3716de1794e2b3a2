"""runtime layer: what the 1 kHz path imports. NO torch here, ever (checked by a test).

``ModelRuntime`` runs an exported model artifact (one .onnx file) with ONNX Runtime.
"""

from idyn_ros.runtime.model_runtime import ModelRuntime, TorquePrediction, read_metadata

__all__ = ["ModelRuntime", "TorquePrediction", "read_metadata"]
