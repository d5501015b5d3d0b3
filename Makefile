# make demo   set up a virtualenv, simulate the bundled ResNet-50 example (compute-bound) and compare
#             backends on a communication-bound all-reduce (examples/comm_bound_allreduce)
# make test   set up a virtualenv, lint, type-check, build the docs and run the test suite
# make docs   build the user guide (mkdocs, warnings are errors) into build/site
# make bench  the speed guard: every headline benchmark against its last accepted figure
#             (benchmarks/guard.py; fails on a regression beyond the noise band)
# make sanitize  the kernel's headers, the kernel and the compiled models under
#             AddressSanitizer and UndefinedBehaviorSanitizer: the C++ unit tests, then
#             the kernel's and the models' tests, the reference-leak check among them
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DEMO_STAMP := $(VENV)/.demo-stamp

.PHONY: setup demo test docs bench sanitize clean

# Each backend distribution's own tests, a subpackage of it (pytest --pyargs runs them
# against an installed astra-core).
BACKEND_TESTS := backends/analytical/astra_analytical/tests backends/flow/astra_flow/tests backends/garnetlike/astra_garnetlike/tests backends/ns3/astra_ns3/tests

$(STAMP): pyproject.toml backends/analytical/pyproject.toml examples/plugin_backend/pyproject.toml \
		backends/garnetlike/pyproject.toml backends/ns3/pyproject.toml \
		backends/flow/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,ray,docs,pytorch,jit]' -e backends/analytical \
		-e backends/garnetlike -e 'backends/flow[jit]' -e backends/ns3 -e examples/plugin_backend
	$(BIN)/python -c 'from astra_core.events import kernel; kernel()'
	touch $(STAMP) $(DEMO_STAMP)

# The demo needs only the core and the analytical and flow backends: about a minute to
# install on a fresh clone, where the full setup (torch, ray, ns-3, docs) takes several.
$(DEMO_STAMP): pyproject.toml backends/analytical/pyproject.toml backends/flow/pyproject.toml
	if [ ! -f $(STAMP) ]; then \
		$(PYTHON) -m venv $(VENV) && \
		$(BIN)/python -m pip install --quiet --upgrade pip && \
		$(BIN)/python -m pip install --quiet -e . -e backends/analytical -e backends/flow && \
		$(BIN)/python -c 'from astra_core.events import kernel; kernel()'; \
	fi
	touch $(DEMO_STAMP)

setup: $(STAMP)

# The ResNet-50 step is compute-bound: every backend gives it within 0.33 µs. The
# 64 MiB all-reduce on a k = 4 fat-tree is communication-bound: there they differ 3.3x.
demo: $(DEMO_STAMP)
	$(BIN)/astra run --workload examples/resnet50_dp/workload/Resnet50_DataParallel \
		--system examples/resnet50_dp/system.json \
		--network examples/resnet50_dp/network.yml \
		--memory examples/resnet50_dp/memory.json
	@echo "This step is compute-bound (30 µs of 1,082,480 µs is exposed communication): all six"
	@echo "backends give it within 0.33 µs. A communication-bound step, on three backends:"
	$(BIN)/python examples/comm_bound_allreduce/compare.py

test: setup docs
	$(BIN)/ruff check --quiet astra astra_core backends examples benchmarks scripts tests validation
	$(BIN)/ruff format --check --quiet astra astra_core backends examples benchmarks scripts tests validation
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -n 2 tests $(BACKEND_TESTS)
	# where no C++ compiler works, cppyy's JIT builds the native code: the same tests pass
	CXX=/nonexistent $(BIN)/python -m pytest -q -n 2 backends/flow/astra_flow/tests tests/test_native.py \
		tests/system/test_event_queue.py tests/system/test_kernel.py tests/system/test_floor_fold.py tests/system/test_reference_upstream.py tests/plugins/test_plugin_errors.py \
		tests/backends/test_native_backend.py tests/topology/test_routing.py tests/backends/test_link_changes.py \
		tests/backends/test_compiled_models.py

docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

bench: setup
	$(BIN)/python benchmarks/guard.py --against recorded

SANITIZE_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g
SANITIZE_CXX := $(or $(CXX),g++)
sanitize: setup
	mkdir -p build
	$(SANITIZE_CXX) -std=c++17 -O1 -ffp-contract=off $(SANITIZE_FLAGS) -Iastra_core/cpp/include \
		tests/cpp/units.cc -o build/units-sanitized
	build/units-sanitized
	# the kernel and the models built with the sanitizers into a cache of their own; Python
	# itself is not built with them, so ASan's runtime comes first and leaks are not counted
	ASTRA_NATIVE_CACHE=build/native-sanitized ASTRA_NATIVE_CXXFLAGS="$(SANITIZE_FLAGS)" \
		LD_PRELOAD="$$($(SANITIZE_CXX) -print-file-name=libasan.so) $$($(SANITIZE_CXX) -print-file-name=libubsan.so)" \
		ASAN_OPTIONS=detect_leaks=0 $(BIN)/python -m pytest -q -p no:cacheprovider \
		tests/system/test_event_queue.py tests/system/test_kernel.py tests/system/test_floor_fold.py tests/system/test_reference_upstream.py \
		tests/backends/test_compiled_models.py tests/backends/test_link_changes.py backends/flow/astra_flow/tests \
		tests/backends/test_native_backend.py tests/topology/test_routing.py

clean:
	rm -rf $(VENV) build *.egg-info
