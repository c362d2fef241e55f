# EdgeSync tasks. `make quickstart` and `make test` set everything up first (scripts/setup.sh).
.PHONY: setup quickstart test test-fast bench clean

export FLWR_TELEMETRY_ENABLED := 0
PY := .venv/bin/python

setup:
	@bash scripts/setup.sh

quickstart: setup
	$(PY) -m edgesync.cli run scenarios/quickstart.yaml

test: setup
	@bash scripts/setup_browser.sh
	@bash scripts/test.sh

test-fast: setup
	@bash scripts/test.sh -m "not slow"

clean:
	rm -rf runs .pytest_cache
