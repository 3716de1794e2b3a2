"""Artifacts from another exporter (a metadata key missing, friction of the wrong shape) and unwritable outputs:
a ModelArtifactError naming the problem, never a KeyError or IndexError from deep inside the runtime."""

from __future__ import annotations

import pytest

from idyn_ros.errors import ModelArtifactError
from idyn_ros.models.artifact import load_artifact, write_artifact
from idyn_ros.runtime import ModelRuntime


@pytest.fixture(scope="module")
def robot():
    from idyn_ros.dynamics import RobotModel

    return RobotModel.from_robot("iiwa14")


@pytest.fixture(scope="module")
def artifact(robot, tmp_path_factory):
    """An untrained (epochs=0) rbd-friction model: its metadata has friction coefficients."""
    from idyn_ros.models import export as ex
    from idyn_ros.models.synthetic import fourier_recording, make_true_robot
    from idyn_ros.models.training import fit
    from idyn_ros.models.zoo import ModelConfig

    rec = fourier_recording(robot.pin_model, make_true_robot(robot.pin_model), duration=2.0)
    res = fit(ModelConfig(kind="rbd-friction", id_method="ols", epochs=0), robot, [rec], progress=False)
    path = tmp_path_factory.mktemp("review_rt") / "model.onnx"
    ex.export_onnx(res.model, robot, path, ex.build_metadata(res.model, robot))
    return path


def _rewritten(artifact, tmp_path, change):
    proto, meta = load_artifact(artifact)
    path = tmp_path / "changed.onnx"
    write_artifact(proto, change(dict(meta, parameters=dict(meta["parameters"]))), path)
    return path


@pytest.mark.parametrize("key", ["joint_names", "robot", "model_kind", "state", "parameters"])
def test_a_missing_metadata_key_is_named(artifact, robot, tmp_path, key):
    path = _rewritten(artifact, tmp_path, lambda meta: {k: v for k, v in meta.items() if k != key})
    with pytest.raises(ModelArtifactError, match=rf"lacks \['{key}'\]"):
        ModelRuntime(path, robot)


def test_without_a_robot_a_missing_urdf_is_named(artifact, tmp_path):
    path = _rewritten(artifact, tmp_path, lambda meta: {k: v for k, v in meta.items() if k != "urdf"})
    with pytest.raises(ModelArtifactError, match=r"lacks \['urdf'\]"):
        ModelRuntime(path)


def test_friction_coefficients_that_do_not_fit_their_kinds_are_refused(artifact, robot, tmp_path):
    def drop_friction(meta):
        meta["parameters"]["friction"] = None
        return meta

    with pytest.raises(ModelArtifactError, match="friction"):
        ModelRuntime(_rewritten(artifact, tmp_path, drop_friction), robot)


def test_metadata_that_is_not_a_json_object_is_refused(artifact, tmp_path):
    import json

    proto, meta = load_artifact(artifact)
    path = tmp_path / "list.onnx"
    write_artifact(proto, meta, path)
    proto, _ = load_artifact(path)
    for entry in proto.metadata_props:
        if entry.key == "idyn":
            entry.value = json.dumps([1, 2])
    from idyn_ros.models.artifact import _checksum

    check = next(e for e in proto.metadata_props if e.key == "idyn_sha256")
    check.value = _checksum(proto, check)
    path.write_bytes(proto.SerializeToString())
    with pytest.raises(ModelArtifactError, match="not an object"):
        ModelRuntime(path)


def test_writing_an_artifact_where_it_cannot_go_is_one_error(artifact, tmp_path):
    proto, meta = load_artifact(artifact)
    (tmp_path / "folder.onnx").mkdir()
    (tmp_path / "afile").write_text("")
    for target in (tmp_path / "folder.onnx", tmp_path / "afile" / "x.onnx"):
        with pytest.raises(ModelArtifactError, match="cannot write"):
            write_artifact(proto, meta, target)
