"""Benchmarks of the dynamics layer: what RBD evaluation costs on each path, per robot.

Why: the artifact's RBD part can run in pinocchio (from the metadata parameters) or inside the ONNX
graph (TorchRNEA export); the 1 kHz budget decides which, so both are measured here together with
the torch eager cost that training pays. Numbers are wall-clock on this machine, single thread.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from idyn_ros.bench import times_us

ROBOTS: tuple[str, ...] = ("panda", "iiwa14", "ur5")


def bench_robot(name: str, ort_repeat: int = 3000) -> dict[str, float]:
    """All dynamics timings and parity errors for one robot preset."""
    import onnxruntime as ort
    import pinocchio as pin
    import torch

    from idyn_ros.dynamics import RobotModel
    from idyn_ros.dynamics.torch_rnea import TorchRNEA, export_onnx

    model = RobotModel.from_robot(name)
    q, dq, ddq = model.random_states(1000, rng=0)
    res: dict[str, float] = {"dof": model.n}

    pm, pd = model.pin_model, model.pin_model.createData()
    t = times_us(lambda: pin.rnea(pm, pd, q[0], dq[0], ddq[0]), 20000)
    res["pinocchio_rnea_us_min"] = float(t.min())
    res["pinocchio_rnea_us_p50"] = float(np.percentile(t, 50))
    res["pinocchio_rnea_us_p99"] = float(np.percentile(t, 99))
    t = times_us(lambda: model.rnea(q[0], dq[0], ddq[0]), 20000)
    res["robotmodel_rnea_us_p50"] = float(np.percentile(t, 50))  # incl. the wrapper's input checks

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        m64 = TorchRNEA(model, dtype=torch.float64)
        q64, dq64, ddq64 = (torch.from_numpy(x) for x in (q, dq, ddq))
        ref = model.rnea(q, dq, ddq)
        with torch.no_grad():
            res["torch_f64_max_abs_err_1000"] = float(np.abs(m64(q64, dq64, ddq64).numpy() - ref).max())
            one = (q64[:1], dq64[:1], ddq64[:1])
            res["torch_eager_f64_b1_us_p50"] = float(np.percentile(times_us(lambda: m64(*one), 1000), 50))
            tb = times_us(lambda: m64(q64, dq64, ddq64), 30, warmup=3)
            res["torch_eager_f64_b1000_us_per_sample"] = float(np.percentile(tb, 50) / 1000)

        blob = export_onnx(TorchRNEA(model, dtype=torch.float32))
    finally:
        torch.set_num_threads(threads)
    import onnx

    graph = onnx.load_from_string(blob).graph
    res["onnx_nodes"] = len(graph.node)
    res["onnx_compute_nodes"] = sum(nd.op_type != "Constant" for nd in graph.node)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(blob, so, providers=["CPUExecutionProvider"])
    f32 = [x.astype(np.float32) for x in (q, dq, ddq)]
    out = np.concatenate([
        sess.run(None, {"q": f32[0][k : k + 1], "dq": f32[1][k : k + 1], "ddq": f32[2][k : k + 1]})[0]
        for k in range(len(q))
    ])
    err = float(np.abs(out - ref).max())
    res["onnx_f32_max_abs_err_1000"] = err
    res["onnx_f32_rel_err_1000"] = err / float(np.abs(ref).max())  # relative to max |tau| over the states
    feeds = {"q": f32[0][:1], "dq": f32[1][:1], "ddq": f32[2][:1]}
    t = times_us(lambda: sess.run(None, feeds), ort_repeat, warmup=200)
    res["onnx_ort_b1_us_min"] = float(t.min())  # floor: what the graph costs when the CPU is not shared
    res["onnx_ort_b1_us_p50"] = float(np.percentile(t, 50))
    res["onnx_ort_b1_us_p99"] = float(np.percentile(t, 99))
    res["base_parameters"] = model.base_parameters(n_samples=150).n_base
    return res


def format_table(results: dict[str, dict[str, float]]) -> str:
    """Robots as columns, metrics as rows."""
    names = list(results)
    keys: list[str] = []
    for r in results.values():
        keys += [k for k in r if k not in keys]
    width = max(len(k) for k in keys) + 2
    lines = ["metric".ljust(width) + "".join(n.rjust(12) for n in names)]
    for k in keys:
        cells = []
        for n in names:
            v = results[n].get(k, float("nan"))
            cells.append(f"{v:12.3g}" if isinstance(v, float) else f"{v:12d}")
        lines.append(k.ljust(width) + "".join(cells))
    return "\n".join(lines)


def run_benchmarks(robots: Sequence[str] = ROBOTS) -> dict:
    """Benchmark every robot; print a table and return ``{robot: {metric: number}}`` (JSON-serialisable).

    Runs in well under a minute on 2 cores (ONNX export dominates).
    """
    results = {name: bench_robot(name) for name in robots}
    print(format_table(results))
    return results


if __name__ == "__main__":
    run_benchmarks()
