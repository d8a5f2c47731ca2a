# Two commands do all set-up on a fresh machine:  `make serve`  and  `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: serve demo test lint bench-quick bench-smoke clean

$(BIN)/changji: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $@

serve: $(BIN)/changji  ## run the HTTP API on the embedded SQLite store (data in ./.changji)
	$(BIN)/changji serve

demo: $(BIN)/changji  ## play the sample story through the API and print the tree and the context
	$(BIN)/changji demo

lint: $(BIN)/changji
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

test: lint  ## lint, type-check, layering contracts, then the whole test suite
	$(BIN)/python -m pytest

bench-quick: $(BIN)/changji
	for f in ops/bench/*.py; do case $$f in */_*) ;; *) $(BIN)/python $$f --quick ;; esac; done

bench-smoke: $(BIN)/changji  ## every benchmark and probe at its smoke size, each last line checked against its FIGURES
	$(BIN)/python -m pytest tests/ops --durations=0

clean:
	rm -rf $(VENV) .changji .pytest_cache .mypy_cache .ruff_cache
