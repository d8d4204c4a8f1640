# The two commands of the README. Each creates (or reuses) .venv and installs everything first.
#   make demo   - the main job: yolodoctor demo on the embedded default
#   make test   - lint (ruff), type checks (mypy), then the test suite (what CI runs)
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
# Where torch is missing, this is the build installed (it installs from this machine's local copy). Users with
# their own torch keep it: the line runs only when `import torch` fails.
TORCH_SPEC ?= torch==2.14.1 torchvision==0.29.1
STAMP  := $(VENV)/.yolodoctor-installed

.PHONY: demo test install clean-venv
install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch, torchvision" 2>/dev/null || $(BIN)/python -m pip install -q $(TORCH_SPEC)
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/yolodoctor demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest

clean-venv:
	rm -rf $(VENV)
