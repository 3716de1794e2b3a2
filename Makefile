# idyn_ros developer entry points. Everything runs in .venv, built by `make setup` from pinned wheels.
# DDS stays on loopback for everything started here (users on a robot keep their own setting).
export ROS_AUTOMATIC_DISCOVERY_RANGE := LOCALHOST
export PYTHONUNBUFFERED := 1

VENV ?= .venv
# the venv is an ament prefix: ros2 launch / ros2 run find idyn_ros there (a ROS 2 install sets its own)
export AMENT_PREFIX_PATH := $(abspath $(VENV))$(if $(AMENT_PREFIX_PATH),:$(AMENT_PREFIX_PATH))
PY := $(VENV)/bin/python
ROBOT ?= panda

.PHONY: setup test test-all demo bench lint clean help

help:  ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/'

setup:  ## build .venv (pinned wheels, msg/ via rosidl, editable install); idempotent
	@bash scripts/setup_env.sh

test: setup  ## fast test suite + ruff (what CI runs)
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q

test-all: setup  ## every test including the slow ones
	$(PY) -m pytest -q -m ""

demo: setup  ## the whole loop on the embedded MuJoCo plant (ROBOT=panda|iiwa14|ur5)
	$(VENV)/bin/idyn demo --robot $(ROBOT)

bench: setup  ## benchmarks: prints tables, writes bench/results/*.json
	$(VENV)/bin/idyn bench

lint: setup  ## ruff
	$(VENV)/bin/ruff check .

clean:  ## remove build products (keeps .venv)
	rm -rf build *.egg-info .pytest_cache
