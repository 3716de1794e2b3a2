"""data layer: the dataset contract, recording import (rosbag2 / MCAP / CSV / NPZ), filters, excitation.

Import cost is kept low: only the Dataset dataclass (numpy) is loaded here; bags, scipy and the
trajectory optimiser load when used. Nothing in this package imports torch.
"""

from idyn_ros.data.dataset import EFFORT_KINDS, Dataset, load_dataset

__all__ = ["EFFORT_KINDS", "Dataset", "load_dataset"]
