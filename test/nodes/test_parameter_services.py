"""Every node's parameters through the ROS parameter services, as `ros2 param dump` / `ros2 param get` read them.

A parameter whose default is [] used to be declared by type with no value: `ros2 param get` said "Parameter not
set", and one such name in a get_parameters request emptied the whole reply (`ros2 param dump /controller` printed
`ros__parameters: {}`). Here every node of the suite, started on the parameter file a launch gives it, lists its
parameters and gets them all in one request; a dump of them (what `ros2 param dump` writes) loaded back with
--params-file gives a node with the same values.
"""

from __future__ import annotations

import math
import time

import pytest
import yaml

pytestmark = pytest.mark.ros

NODES = ("plant", "joint_state_buffer", "feedforward", "controller", "doomed", "wrench_observer", "reference",
         "payload_identifier", "gripper_compensation", "recorder")


def _make(name, context):
    """The node ``name`` runs, created in ``context`` (the context's --params-file reaches it)."""
    if name == "plant":
        from idyn_ros.nodes.plant import PlantNode

        return PlantNode(context=context)
    if name == "recorder":  # run_recorder declares its parameters on a plain node, like this
        from rclpy.node import Node

        from idyn_ros.nodes.ros_parameters import NodeParameters
        from idyn_ros.parameters import RecorderParams

        node = Node("recorder", context=context)
        NodeParameters(node, RecorderParams)
        return node
    return _classes()[name](context=context)


def _classes():
    from idyn_ros.nodes.controller import ControllerNode
    from idyn_ros.nodes.doomed import DoomedNode
    from idyn_ros.nodes.feedforward import FeedforwardNode
    from idyn_ros.nodes.gripper_compensation import GripperCompensationNode
    from idyn_ros.nodes.joint_state_buffer import JointStateBufferNode
    from idyn_ros.nodes.payload_identifier import PayloadIdentifierNode
    from idyn_ros.nodes.reference import ReferenceNode
    from idyn_ros.nodes.wrench_observer import WrenchObserverNode

    return {"controller": ControllerNode, "doomed": DoomedNode, "feedforward": FeedforwardNode,
            "gripper_compensation": GripperCompensationNode, "joint_state_buffer": JointStateBufferNode,
            "payload_identifier": PayloadIdentifierNode, "reference": ReferenceNode,
            "wrench_observer": WrenchObserverNode}


def _all_parameters(node, client, executor, call_service):
    """{name: value} of ``node`` read as `ros2 param dump` reads it: list_parameters, then one get_parameters
    request for every name."""
    from rcl_interfaces.srv import GetParameters, ListParameters
    from ros2param.api import get_value

    lister = client.create_client(ListParameters, f"/{node.get_name()}/list_parameters")
    getter = client.create_client(GetParameters, f"/{node.get_name()}/get_parameters")
    names = sorted(call_service(executor, lister, ListParameters.Request()).result.names)
    values = call_service(executor, getter, GetParameters.Request(names=names)).values
    assert len(values) == len(names), f"{node.get_name()}: {len(values)} values for {len(names)} names"
    got = dict(zip(names, (get_value(parameter_value=v) for v in values), strict=True))
    unset = [n for n, v in got.items() if v is None]
    assert not unset, f"{node.get_name()}: parameters without a value (`ros2 param get`: not set): {unset}"
    return got


def _dump(node_name, values):
    """The YAML `ros2 param dump` prints for these values (dotted names nested, as it writes them)."""
    body = {}
    for name, value in values.items():
        *path, leaf = name.split(".")
        level = body
        for key in path:
            level = level.setdefault(key, {})
        level[leaf] = value
    return yaml.dump({f"/{node_name}": {"ros__parameters": body}}, default_flow_style=False)


def _same(a, b):
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


@pytest.mark.parametrize("name", NODES)
def test_every_parameter_is_readable_in_one_request_and_a_dump_loads_back_the_same(name, tmp_path, call_service):
    pytest.importorskip("ros2param.api")
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor

    from idyn_ros.nodes import graph

    def launched(*user_files):
        """The --params-file of ``name`` in `ros2 launch ... mode:=mujoco params_file:=...` (which checks the files);
        the recorder is no node of the launch: the user's file as it is."""
        if name == "recorder":
            return [arg for f in user_files for arg in ("--params-file", str(f))]
        optional = [name] if name in graph.OPTIONAL_NODES else []
        settings = graph.GraphSettings("panda", mode="mujoco", nodes=graph.select_nodes(optional),
                                       params_files=tuple(str(f) for f in user_files))
        return ["--params-file", str(graph.parameter_file(settings, [name], tmp_path))]

    dumped = tmp_path / f"{name}_dump.yaml"
    read = []
    for first in (True, False):
        if not first:  # the dump of the first node, loaded back as the user's parameter file
            dumped.write_text(_dump(name, read[0]))
        files = launched() if first else launched(dumped)
        context = Context()
        rclpy.init(args=["node", "--ros-args", *files], context=context)
        node = client = None
        try:
            node = _make(name, context)
            client = rclpy.create_node("param_reader", context=context)
            executor = SingleThreadedExecutor(context=context)
            executor.add_node(node)
            executor.add_node(client)
            t0 = time.monotonic()
            read.append(_all_parameters(node, client, executor, call_service))
            assert time.monotonic() - t0 < 10
        finally:
            for n in (client, node):
                if n is not None:
                    n.destroy_node()
            rclpy.shutdown(context=context)
    first, loaded = read
    assert set(first) == set(loaded)
    differ = {k: (first[k], loaded[k]) for k in first if not _same(first[k], loaded[k])}
    assert not differ, f"{name}: the dump loaded back differs: {differ}"


@pytest.mark.parametrize(("value", "reason"), [(float("nan"), "damping_ratio contains nan (values must be finite)"),
                                               ("high", "damping_ratio must be a number, got 'high'")])
def test_a_bad_start_up_value_is_refused_with_its_own_reason_and_no_integer_hint(value, reason, rclpy_context):
    """The hint "(write 0.0, not 0: YAML integers are not doubles)" ended every refused double, a nan or a string
    too; it belongs to an integer given for a double only (and plain integers are converted: 7 is taken as 7.0)."""
    from rclpy.exceptions import InvalidParameterTypeException
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    from idyn_ros.errors import ParameterError
    from idyn_ros.nodes.ros_parameters import NodeParameters, _integer_hint
    from idyn_ros.parameters import ControllerParams

    node = Node("controller", context=rclpy_context, parameter_overrides=[Parameter("damping_ratio", value=value)])
    try:
        with pytest.raises(ParameterError) as refused:
            NodeParameters(node, ControllerParams)
        assert str(refused.value) == f"parameter {reason}"
    finally:
        node.destroy_node()
    spec = {p.name: p for p in ControllerParams.table()}["presets.soft.kp"]
    wrong_type = InvalidParameterTypeException(Parameter("presets.soft.kp", value=[1, 2]), "DOUBLE_ARRAY")
    assert "YAML integers" in _integer_hint(spec, [0, 1.5], wrong_type)
    assert _integer_hint(spec, ["a"], wrong_type) == ""


def test_an_integer_set_at_run_time_for_a_double_is_taken_as_a_double(rclpy_context, call_service):
    """`ros2 param set /controller damping_ratio 2` was refused with rclpy's "Wrong parameter type, parameter
    {damping_ratio} is of type {double}, setting it to {integer} is not allowed": integers were converted in files
    and launch arguments only. The same set_parameters service `ros2 param set` calls."""
    import rclpy
    from rcl_interfaces.srv import SetParameters
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter

    from idyn_ros.nodes.ros_parameters import NodeParameters
    from idyn_ros.parameters import ControllerParams

    node = rclpy.create_node("controller", context=rclpy_context)
    client_node = rclpy.create_node("param_setter", context=rclpy_context)
    try:
        params = NodeParameters(node, ControllerParams, joints=lambda: 7)
        executor = SingleThreadedExecutor(context=rclpy_context)
        executor.add_node(node)
        executor.add_node(client_node)
        client = client_node.create_client(SetParameters, "/controller/set_parameters")

        def set_remotely(name, value):
            request = SetParameters.Request(parameters=[Parameter(name, value=value).to_parameter_msg()])
            return call_service(executor, client, request).results[0]

        assert set_remotely("damping_ratio", 2).successful
        assert node.get_parameter("damping_ratio").type_ == Parameter.Type.DOUBLE
        assert params.value.damping_ratio == 2.0
        assert set_remotely("presets.soft.kp", [100, 100, 100, 100, 30, 30, 10]).successful
        assert params.value.presets_soft_kp == (100.0, 100.0, 100.0, 100.0, 30.0, 30.0, 10.0)
        refused = set_remotely("damping_ratio", "high")
        assert not refused.successful and params.value.damping_ratio == 2.0
        refused = set_remotely("damping_ratio", 20)  # converted, then checked: out of range
        assert not refused.successful and "damping_ratio" in refused.reason, refused.reason
        # another type gets our reason, not rclpy's "Wrong parameter type, expected '3' got '4'"
        assert set_remotely("damping_ratio", "high").reason == "damping_ratio must be a number, got 'high'"
        assert set_remotely("gain_preset", 1).reason == "gain_preset must be a string, got 1"
        assert set_remotely("recovery_ticks", 12.0).successful  # a whole double for an integer: taken as 12
        assert node.get_parameter("recovery_ticks").type_ == Parameter.Type.INTEGER
        assert params.value.recovery_ticks == 12
        assert set_remotely("recovery_ticks", 2.5).reason == "recovery_ticks must be a whole number, got 2.5"
        assert node.get_parameter("damping_ratio").type_ == Parameter.Type.DOUBLE and params.value.damping_ratio == 2.0
    finally:
        client_node.destroy_node()
        node.destroy_node()


def test_a_run_time_value_a_fixed_setting_makes_inert_is_refused(rclpy_context):
    """`ros2 param set /controller feedforward_timeout 0.02` beside the embedded feedforward was accepted and acted
    nowhere; feedforward_source is fixed until a restart, so the set is refused with the reason."""
    import rclpy
    from rclpy.parameter import Parameter

    from idyn_ros.nodes.ros_parameters import NodeParameters
    from idyn_ros.parameters import ControllerParams

    node = rclpy.create_node("controller", context=rclpy_context)
    try:
        params = NodeParameters(node, ControllerParams, joints=lambda: 7)
        refused = node.set_parameters([Parameter("feedforward_timeout", value=0.02)])[0]
        assert not refused.successful and params.value.feedforward_timeout == 0.01
        assert refused.reason == ("feedforward_timeout is read only with feedforward_source 'topic', and "
                                  "feedforward_source is 'embedded' (read-only): the value would have no effect")
        assert node.set_parameters([Parameter("feedforward_timeout", value=0.01)])[0].successful  # unchanged: a dump
    finally:
        node.destroy_node()
    node = rclpy.create_node("controller", context=rclpy_context,
                             parameter_overrides=[Parameter("feedforward_source", value="topic")])
    try:
        params = NodeParameters(node, ControllerParams, joints=lambda: 7)
        assert node.set_parameters([Parameter("feedforward_timeout", value=0.02)])[0].successful
        assert params.value.feedforward_timeout == 0.02
    finally:
        node.destroy_node()
