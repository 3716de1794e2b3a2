"""experiments: the evidence. Closed-loop runs on the embedded plant, the tracking table (Reuss et al.
2022 Table III analogue), the DOOMED sweep (Ratliff et al. 2016 Fig. 3-6 analogue), the wrench
observer evaluation, plots, and the ``idyn demo`` pipeline.

Why a layer of its own: it sits on top of everything (sim, control, models, nodes) and only composes
them; it re-implements no control law, plant, filter or trainer (closed-loop runs go through
``idyn_ros.sim.loop``, the controller node's ``Controller`` against the plant). Modules:

- ``models_cache`` excitation data on the plant -> identified / trained / exported models (cached)
- ``tracking``     the Table III analogue and its JSON (``tracking_<robot>.json`` keys are a contract)
- ``doomed_sweep`` learning rate x alpha x gamma with an unmodelled payload, heat maps
- ``wrench_eval``  direct vs momentum observer, learned model vs nominal RBD, false positives
- ``dds``          the real ROS 2 pipeline (plant node + controller node + recorder) for recording
- ``plots``        matplotlib (Agg) figures
- ``demo``         ``idyn demo``: record -> import -> identify/train -> export -> closed loop -> report
"""
