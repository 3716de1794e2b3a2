"""TorchRNEA: parity with pinocchio (float64), gradients = regressor, ONNX export parity and size."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

from idyn_ros.dynamics import RobotModel  # noqa: E402
from idyn_ros.dynamics.torch_rnea import TorchRNEA, export_onnx, onnx_node_count  # noqa: E402
from idyn_ros.errors import RobotDescriptionError  # noqa: E402

from .conftest import PANDA_JOINTS, PANDA_URDF, erd_model, presets_available  # noqa: E402

ROBOTS = ["panda", "iiwa14", "ur5"]


def _model(name: str) -> RobotModel:
    if presets_available():
        return RobotModel.from_robot(name)
    if name == "iiwa14":
        pytest.skip("iiwa14 preset needs idyn_ros.robots")
    return erd_model(name)


def _t(*arrays: np.ndarray, dtype: torch.dtype = torch.float64) -> list[torch.Tensor]:
    return [torch.as_tensor(a, dtype=dtype) for a in arrays]


@pytest.mark.parametrize("name", ROBOTS)
def test_float64_matches_pinocchio_1000_states(name: str) -> None:
    model = _model(name)
    q, dq, ddq = model.random_states(1000, rng=0)
    ref = model.rnea(q, dq, ddq)
    out = TorchRNEA(model)(*_t(q, dq, ddq)).numpy()
    assert out.shape == (1000, model.n)
    assert np.abs(out - ref).max() < 1e-9


@pytest.mark.realdata
def test_unaligned_axes_lwr4(shared_data) -> None:
    """The LWR4+ URDF has joints about tilted axes (pinocchio RevoluteUnaligned)."""
    model = RobotModel.from_urdf(shared_data / "kuka_lwr4" / "kuka_lwr4.urdf")
    q, dq, ddq = model.random_states(200, rng=1)
    out = TorchRNEA(model)(*_t(q, dq, ddq)).numpy()
    assert np.abs(out - model.rnea(q, dq, ddq)).max() < 1e-9


def test_prismatic_joint() -> None:
    xml = PANDA_URDF.read_text().replace('name="panda_joint4" type="revolute"', 'name="panda_joint4" type="prismatic"')
    model = RobotModel.from_urdf(xml, joints=PANDA_JOINTS)
    assert model.pin_model.joints[4].shortname().startswith("JointModelP")
    q, dq, ddq = model.random_states(200, rng=2)
    out = TorchRNEA(model)(*_t(q, dq, ddq)).numpy()
    assert np.abs(out - model.rnea(q, dq, ddq)).max() < 1e-9


def test_branching_tree_is_refused() -> None:
    fingers = RobotModel.from_urdf(PANDA_URDF)  # two finger joints both on joint 7
    with pytest.raises(RobotDescriptionError, match="serial chain"):
        TorchRNEA(fingers)


def test_gradient_in_parameters_is_the_regressor(panda: RobotModel) -> None:
    rnea = TorchRNEA(panda, learn_parameters=True)
    assert isinstance(rnea.pi, torch.nn.Parameter)
    q, dq, ddq = panda.random_states(3, rng=3)
    tau = rnea(*_t(q, dq, ddq))
    jac = np.stack([
        np.stack([torch.autograd.grad(tau[k, i], rnea.pi, retain_graph=True)[0].numpy().ravel() for i in range(7)])
        for k in range(3)
    ])
    np.testing.assert_allclose(jac, panda.regressor(q, dq, ddq), atol=1e-10)
    buffered = TorchRNEA(panda)
    assert "pi" in dict(buffered.named_buffers()) and not list(buffered.parameters())


def test_custom_parameters(panda: RobotModel) -> None:
    pi = panda.inertial_parameters() * 1.3
    q, dq, ddq = panda.random_states(10, rng=4)
    out = TorchRNEA(panda, pi=pi)(*_t(q, dq, ddq)).numpy()
    np.testing.assert_allclose(out, panda.with_inertial_parameters(pi).rnea(q, dq, ddq), atol=1e-9)


@pytest.mark.parametrize("name", ROBOTS)
def test_onnx_float32_matches_pinocchio(name: str) -> None:
    """ORT (CPU, 1 thread, batch 1, float32) vs pinocchio float64: error <= 1e-5 x max |tau| over the states."""
    model = _model(name)
    blob = export_onnx(TorchRNEA(model, dtype=torch.float32))
    # vectorised graph: ~60 compute nodes (+ constants); a per-joint loop would be ~3,400
    assert onnx_node_count(blob) < 200
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(blob, so, providers=["CPUExecutionProvider"])
    q, dq, ddq = model.random_states(200, rng=5)
    ref = model.rnea(q, dq, ddq)
    out = np.concatenate([
        sess.run(None, {"q": q[k : k + 1].astype(np.float32), "dq": dq[k : k + 1].astype(np.float32),
                        "ddq": ddq[k : k + 1].astype(np.float32)})[0]
        for k in range(len(q))
    ])
    assert np.abs(out - ref).max() <= 1e-5 * np.abs(ref).max()
    # dynamic batch works too
    batch = sess.run(None, {"q": q.astype(np.float32), "dq": dq.astype(np.float32), "ddq": ddq.astype(np.float32)})[0]
    np.testing.assert_allclose(batch, out, atol=1e-4)


def test_torch_regressor_matches_pinocchio(arm: RobotModel) -> None:
    rnea = TorchRNEA(arm)
    q, dq, ddq = arm.random_states(50, rng=6)
    Y = rnea.regressor(*_t(q, dq, ddq)).numpy()
    np.testing.assert_allclose(Y, arm.regressor(q, dq, ddq), atol=1e-10)


def test_pi_override_is_differentiable(panda: RobotModel) -> None:
    rnea = TorchRNEA(panda)
    pi = torch.as_tensor(panda.inertial_parameters() * 0.7, dtype=torch.float64).requires_grad_(True)
    q, dq, ddq = panda.random_states(5, rng=7)
    tau = rnea(*_t(q, dq, ddq), pi=pi)
    np.testing.assert_allclose(
        tau.detach().numpy(), panda.with_inertial_parameters(pi.detach().numpy()).rnea(q, dq, ddq), atol=1e-9
    )
    tau.sum().backward()
    assert pi.grad is not None and torch.isfinite(pi.grad).all()


def test_export_leaves_module_live(panda: RobotModel) -> None:
    """export_onnx folds the inertias into the graph only while exporting; the module stays trainable."""
    rnea = TorchRNEA(panda, dtype=torch.float32, learn_parameters=True)
    blob = export_onnx(rnea)
    assert rnea._export_inertia is None
    q, dq, ddq = _t(*panda.random_states(2, rng=8), dtype=torch.float32)
    before = rnea(q, dq, ddq).detach().clone()
    with torch.no_grad():
        rnea.pi.mul_(2.0)
    np.testing.assert_allclose(rnea(q, dq, ddq).detach().numpy(), 2.0 * before.numpy(), rtol=1e-5, atol=1e-4)
    sess = ort.InferenceSession(blob, providers=["CPUExecutionProvider"])
    out = sess.run(None, {"q": q.numpy(), "dq": dq.numpy(), "ddq": ddq.numpy()})[0]
    np.testing.assert_allclose(out, before.numpy(), rtol=1e-5, atol=1e-4)  # exported with the old pi
