# Two commands on a fresh machine: `make run` (app on the demo corpus) and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PORT ?= 8501

.PHONY: run test test-all bench screenshots

$(STAMP): requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/streamlit run app.py --server.address localhost --server.port $(PORT) --server.headless true

test: $(STAMP)
	$(PY) -m pytest -q -m "not slow"

test-all: $(STAMP)
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) -m bench

screenshots: $(STAMP)  # the browser test, saving its page screenshots into docs/screenshots
	CONTRASTLAB_SCREENSHOTS=docs/screenshots $(PY) -m pytest -q tests/test_browser.py
