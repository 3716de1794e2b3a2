"""models layer (torch, training only): identification, the model zoo, training, ONNX export.

- ``identification``: OLS/WLS on base parameters, physically consistent SDP / DiffBary / log-Cholesky.
- ``zoo``: ``ModelConfig`` + ``TorqueModel`` for every kind (rbd, rbd-friction, hybrid, hybrid-r,
  hybrid-j, mlp-hybrid, lstm, delan); ``training``: the shared loop; ``export``: one ONNX artifact per model;
  ``auto``: fit the candidates, keep the best on validation (``idyn train --model auto``);
  ``pipeline``: train -> evaluate -> export; ``metrics``: nMSE / RMSE / min-max NMSE (numpy only).
Importing this package does not import torch; its torch modules do.
"""
