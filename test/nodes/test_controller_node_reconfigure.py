"""Swapping the controller's model the documented way (deactivate, cleanup, set model_path, configure, activate):
what was set before survives it, and a file that would not load is refused when it is set, not discovered at
configure as a silent downgrade to the nominal RBD."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.ros


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    """A loadable panda artifact (untrained rbd-friction), the same for another arm, a truncated copy."""
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.models import export as ex
    from idyn_ros.models.artifact import load_artifact, write_artifact
    from idyn_ros.models.synthetic import fourier_recording, make_true_robot
    from idyn_ros.models.training import fit
    from idyn_ros.models.zoo import ModelConfig
    from idyn_ros.robots import get_robot

    robot = RobotModel.from_robot("panda")
    rec = fourier_recording(robot.pin_model, make_true_robot(robot.pin_model), duration=2.0)
    res = fit(ModelConfig(kind="rbd-friction", id_method="ols", epochs=0), robot, [rec], progress=False)
    out = tmp_path_factory.mktemp("swap")
    good = out / "panda.onnx"
    ex.export_onnx(res.model, robot, good, ex.build_metadata(res.model, robot))
    proto, meta = load_artifact(good)
    foreign = out / "iiwa14.onnx"
    write_artifact(proto, dict(meta, robot="iiwa14", joint_names=list(get_robot("iiwa14").joint_names)), foreign)
    truncated = out / "truncated.onnx"
    truncated.write_bytes(good.read_bytes()[:-3000])
    copy = out / "panda_copy.onnx"
    copy.write_bytes(good.read_bytes())
    return {"good": good, "copy": copy, "foreign": foreign, "truncated": truncated, "missing": out / "not_there.onnx"}


def _node(context, model_path):
    from rclpy.parameter import Parameter

    from idyn_ros.nodes.controller import ControllerNode

    return ControllerNode(context=context, parameter_overrides=[
        Parameter("model_path", value=str(model_path)), Parameter("max_stamp_age", value=0.0)])


def _cycle(node, set_first=()) -> list:
    """deactivate + cleanup, set parameters, configure + activate; the set results."""
    from rclpy.lifecycle import TransitionCallbackReturn

    node.trigger_deactivate()
    node.trigger_cleanup()
    assert node.core is None
    results = [node.set_parameters([p])[0] for p in set_first]
    assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
    node.trigger_activate()
    return results


def test_the_payload_is_kept_across_cleanup_and_configure(rclpy_context, artifacts):
    """After a swap (even to the same file) the controller had no payload, silently, while the feedforward and
    observer nodes still included it."""
    from idyn_ros.robots.spec import Payload

    node = _node(rclpy_context, artifacts["good"])
    try:
        tool = Payload(1.0, (0.0, 0.0, 0.05), (1e-3, 0.0, 0.0, 1e-3, 0.0, 1e-3))
        node._set_payload(tool)
        _cycle(node)
        assert node.core.payload == tool
        assert node.core._hold_model is not node.core.robot  # the safe hold's g(q) includes it too
        node._set_payload(None)  # removed: stays removed
        _cycle(node)
        assert node.core.payload is None
    finally:
        node.destroy_node()


@pytest.mark.parametrize(("bad", "reason"), [
    ("foreign", "was trained for robot 'iiwa14'"), ("truncated", "truncated ONNX file"), ("missing", "file not found")])
def test_a_model_path_that_would_not_load_is_refused_when_set_and_the_working_model_stays(
        rclpy_context, artifacts, bad, reason):
    """A file for another arm, a truncated one or one still being copied was accepted, and configure replaced the
    running learned model with the nominal RBD (one ERROR line)."""
    from rclpy.parameter import Parameter

    node = _node(rclpy_context, artifacts["good"])
    try:
        before = node.core.ff.model_id
        assert not node.core.ff.fallback
        (result,) = _cycle(node, [Parameter("model_path", value=str(artifacts[bad]))])
        assert not result.successful and reason in result.reason, result.reason
        assert node.get_parameter("model_path").value == str(artifacts["good"])
        assert node.core.ff.model_id == before and not node.core.ff.fallback
        (result,) = _cycle(node, [Parameter("model_path", value=str(artifacts["copy"]))])  # a good file: accepted
        assert result.successful and node.core.ff.model_id.startswith("panda_copy.onnx:")
        (result,) = _cycle(node, [Parameter("model_path", value="")])  # '' = the fallback on purpose: accepted
        assert result.successful and node.core.ff.fallback
    finally:
        node.destroy_node()
