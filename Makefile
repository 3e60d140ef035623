# Set-up on a fresh machine: `make demo` and `make test` each create .venv and install on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint docs bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch and torchvision first, pinned to the builds available locally; the range in
	# pyproject.toml lets users elsewhere get what fits their platform.
	$(PY) -m pip install -q "torch==2.14.1" "torchvision==0.29.1"
	$(PY) -m pip install -q -e ".[test,lint,data]"
	touch $(STAMP)

demo: $(STAMP)
	@echo "make demo: two known-truth runs (a minute or two each on 2 cores), then Table 1's"
	@echo "CONV and F-FC+CONV rows, whose expected time is printed when they start"
	$(PY) examples/build_models.py
	# the method's point first: one seed of each known-truth task (about a minute each), the
	# FC share per layer beside the committed seeds' and whether it differs by task as the truth
	$(PY) -m studies.known_truth --seeds 0 --threads 2 --out runs/demo/known-truth \
		--compare studies/results/known-truth/balanced-adam
	# Table 1 at 20 epochs without MAP FC (the committed FC runs are shown; add fc to --models
	# to train it too); it prints first how long the committed runs of its experiments took
	$(PY) -m studies.paper_tables table1 --alpha 4 --models conv f-fc+conv --out runs/demo \
		--compare studies/results/table1-20ep

test: $(STAMP)
	$(PY) -m pytest -q

docs: $(STAMP)
	# the manual and the API reference (from the docstrings) into build/site, offline;
	# warnings are errors
	$(PY) -m mkdocs build --strict

lint: $(STAMP)
	$(PY) -m ruff check laplace_equivariance tests benchmarks studies pages examples
	$(PY) -m ruff format --check laplace_equivariance tests benchmarks studies pages examples
	# the library type-checks clean ([tool.mypy] in pyproject.toml names it)
	$(PY) -m mypy

bench: $(STAMP)
	# the headline ratios against the committed CPU report: exits 1 if one got slower
	# beyond the machine's noise (run on an idle machine)
	$(PY) -m benchmarks.speed_check
	$(PY) -m benchmarks.layer_speed
	$(PY) -m benchmarks.kfac_speed

clean:
	rm -rf $(VENV) build *.egg-info
