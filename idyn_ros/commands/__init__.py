"""Subcommands of the `idyn` CLI (see idyn_ros/cli.py for the contract)."""
