# posenc — build, test, demo.
#   make              ./run, optimised for this CPU (-O3 -march=native -fopenmp)
#   make PORTABLE=1   the same without -march=native
#   make test         Check suites, plain and under ASan/UBSan
#   make demo         generate text with a small model
#   make fuzz         libFuzzer targets (clang), FUZZ_SECONDS each (docs/testing.md: Fuzzing)
# make's built-in CC is cc; gcc unless the user names another compiler
ifeq ($(origin CC),default)
CC      := gcc
endif
PYTHON  ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)
PORTABLE ?= 0

ARCH_FLAGS := $(if $(filter 1,$(PORTABLE)),,-march=native)
WARN    := -Wall -Wextra -Wshadow -Wno-unused-parameter
# -m serve's HTTP library, an optional dependency: without libmicrohttpd
# (Debian's libmicrohttpd-dev) everything else builds and -m serve says how
# to get it.
MHD_CFLAGS := $(shell pkg-config --exists libmicrohttpd 2>/dev/null && \
                echo -DPOSENC_HAVE_MHD $$(pkg-config --cflags libmicrohttpd))
MHD_LIBS   := $(shell pkg-config --exists libmicrohttpd 2>/dev/null && pkg-config --libs libmicrohttpd)
BASE    := -std=c11 -D_GNU_SOURCE -fopenmp $(WARN) -I. $(MHD_CFLAGS)
REL_FLAGS  := $(BASE) -O3 $(ARCH_FLAGS)
ASAN_FLAGS := $(BASE) -O1 -g $(ARCH_FLAGS) -fno-omit-frame-pointer \
              -fsanitize=address,undefined -fno-sanitize-recover=undefined
LDLIBS  := -lm -fopenmp $(MHD_LIBS)

# The layers, bottom up: base, then positional, tokenizer and chat (templates),
# then the model (the engine), then the modes that drive it; cli/ is the
# command line (the option and mode tables and one driver per mode), which
# run.c parses and dispatches.
LAYERS   := base positional tokenizer chat model modes
LIB_SRC  := $(sort $(foreach d,$(LAYERS),$(wildcard $(d)/*.c)))
LIB_HDR  := $(foreach d,$(LAYERS),$(wildcard $(d)/*.h)) $(wildcard cli/*.h)
CLI_SRC  := $(sort $(wildcard cli/*.c))
# Every tests/**/test_*.c is a suite, named by its path under tests/
# (model/test_sampler): a file dropped into any directory there is built
# and run by make test.
TEST_SRC := $(sort $(shell find tests -name 'test_*.c'))
TEST_NAMES := $(patsubst tests/%.c,%,$(TEST_SRC))

.PHONY: all test test-rel test-asan check-layers deps clean demo bench fuzz fuzz-build \
        fuzz-corpus FORCE
all: run

# ---- engine ---------------------------------------------------------------
# The flags are a prerequisite, so `make PORTABLE=1` after `make` (or the
# reverse) rebuilds everything instead of linking the other build's objects.
build/rel/flags: FORCE
	@mkdir -p $(dir $@)
	@echo '$(CC) $(REL_FLAGS)' | cmp -s - $@ || echo '$(CC) $(REL_FLAGS)' > $@
FORCE:

build/rel/%.o: %.c $(LIB_HDR) build/rel/flags
	@mkdir -p $(dir $@)
	$(CC) $(REL_FLAGS) -c $< -o $@
build/asan/%.o: %.c $(LIB_HDR) tests/common.h
	@mkdir -p $(dir $@)
	$(CC) $(ASAN_FLAGS) $(CHECK_CFLAGS) -c $< -o $@

build/rel/libposenc.a: $(patsubst %.c,build/rel/%.o,$(LIB_SRC))
	ar rcs $@ $^
build/asan/libposenc.a: $(patsubst %.c,build/asan/%.o,$(LIB_SRC))
	ar rcs $@ $^
build/rel/libposenc_cli.a: $(patsubst %.c,build/rel/%.o,$(CLI_SRC))
	ar rcs $@ $^
build/asan/libposenc_cli.a: $(patsubst %.c,build/asan/%.o,$(CLI_SRC))
	ar rcs $@ $^

run: build/rel/run.o build/rel/libposenc_cli.a build/rel/libposenc.a
	$(CC) $(REL_FLAGS) $^ -o $@ $(LDLIBS)
build/asan/run: build/asan/run.o build/asan/libposenc_cli.a build/asan/libposenc.a
	$(CC) $(ASAN_FLAGS) $^ -o $@ $(LDLIBS)

# The command-line reference, made from cli/options.c's tables; make test
# (tests/cli/test_cli_reference) fails while it is out of date.
build/rel/tools/cli_reference: build/rel/tools/cli_reference.o build/rel/libposenc_cli.a \
        build/rel/libposenc.a
	$(CC) $(REL_FLAGS) $^ -o $@ $(LDLIBS)
docs/cli.md: build/rel/tools/cli_reference
	$< > $@

# ---- tests ----------------------------------------------------------------
# Check's flags are looked up only when a test target runs, so `make` alone
# needs nothing but a C compiler.
CHECK_CFLAGS = $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   = $(shell pkg-config --libs check 2>/dev/null)

build/rel/tests/%: build/rel/tests/%.o build/rel/tests/common.o build/rel/libposenc_cli.a \
        build/rel/libposenc.a
	$(CC) $(REL_FLAGS) $^ -o $@ $(CHECK_LIBS) $(LDLIBS)
build/asan/tests/%: build/asan/tests/%.o build/asan/tests/common.o build/asan/libposenc_cli.a \
        build/asan/libposenc.a
	$(CC) $(ASAN_FLAGS) $^ -o $@ $(CHECK_LIBS) $(LDLIBS)
build/rel/tests/%.o: tests/%.c tests/common.h $(LIB_HDR) build/rel/flags
	@mkdir -p $(dir $@)
	$(CC) $(REL_FLAGS) $(CHECK_CFLAGS) -c $< -o $@
# The fuzz regression suite replays its inputs through the fuzz targets
# themselves (fuzz/, built here without libFuzzer's entry points).
FUZZ_C := $(wildcard fuzz/*.c)
build/rel/tests/fuzz/test_fuzz_regressions: build/rel/tests/fuzz/test_fuzz_regressions.o \
        build/rel/tests/common.o $(patsubst %.c,build/rel/%.o,$(FUZZ_C)) build/rel/libposenc.a
	$(CC) $(REL_FLAGS) $^ -o $@ $(CHECK_LIBS) $(LDLIBS)
build/asan/tests/fuzz/test_fuzz_regressions: build/asan/tests/fuzz/test_fuzz_regressions.o \
        build/asan/tests/common.o $(patsubst %.c,build/asan/%.o,$(FUZZ_C)) build/asan/libposenc.a
	$(CC) $(ASAN_FLAGS) $^ -o $@ $(CHECK_LIBS) $(LDLIBS)
$(patsubst %.c,build/rel/%.o,$(FUZZ_C)) $(patsubst %.c,build/asan/%.o,$(FUZZ_C)): $(wildcard fuzz/*.h)
.SECONDARY:

deps:
	@sh tools/ensure_deps.sh

# Includes point down the layers (tools/check_layers.sh draws them).  The
# control: a copy of the tree with one include pointing up must fail.
check-layers:
	@sh tools/check_layers.sh . && echo "check-layers: every include points down"
	@tmp=$$(mktemp -d) && cp -r $(LAYERS) cli $$tmp/ && \
	  echo '#include "model/model.h"' >> $$tmp/positional/pe.c && \
	  if sh tools/check_layers.sh $$tmp > $$tmp/out; then rm -rf $$tmp; \
	    echo "check-layers: an upward include was not caught" >&2; exit 1; fi; \
	  grep -q 'positional/pe.c: includes model/model.h' $$tmp/out && rm -rf $$tmp && \
	  echo "check-layers: control (positional/pe.c including model/model.h) fails as it must"

# Each suite gets the engine binary of its own build, so CLI tests run the
# sanitized ./run under ASan too; each prints its time, for keeping CI short.
test: deps check-layers
	@$(MAKE) --no-print-directory test-rel
	@$(MAKE) --no-print-directory test-asan
	@echo "make test: all suites passed (plain and ASan/UBSan)"

test-rel: run $(addprefix build/rel/tests/,$(TEST_NAMES))
	@set -e; for t in $(TEST_NAMES); do \
	  echo "== $$t (plain)"; start=$$(date +%s); POSENC_RUN=./run PYTHON=$(PYTHON) build/rel/tests/$$t; \
	  echo "== $$t (plain): $$(( $$(date +%s) - start )) s"; done

test-asan: build/asan/run $(addprefix build/asan/tests/,$(TEST_NAMES))
	@set -e; for t in $(TEST_NAMES); do \
	  echo "== $$t (asan)"; start=$$(date +%s); POSENC_RUN=build/asan/run PYTHON=$(PYTHON) \
	  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 build/asan/tests/$$t; \
	  echo "== $$t (asan): $$(( $$(date +%s) - start )) s"; done

# ---- demo -----------------------------------------------------------------
MODELS_DIR ?= $(if $(POSENC_MODELS),$(POSENC_MODELS),../shared/models)
demo: run
	@sh tools/demo.sh "$(MODELS_DIR)"

# ---- benchmarks ---------------------------------------------------------------
# make bench [LLAMA2C=/path/to/llama2.c/run] [LLAMACPP_BENCH="/path/to/llama-bench ..."]
#            [LLAMACPP_PPL=/path/to/llama-perplexity] [LLAMACPP_BATCHED=/path/to/llama-batched-bench]
#            [LLAMA_SERVER=/path/to/llama-server] [BENCH_THREADS=1,2,...] [BENCH_REPS=3]
# Random-weight models at real shapes go to build/bench (made once).
# 1, 2 and all cores (each once), as the tables compare them
NPROC := $(shell nproc 2>/dev/null || echo 2)
BENCH_THREADS ?= $(shell echo 1 2 $(NPROC) | tr ' ' '\n' | sort -un | paste -sd, -)
BENCH_REPS ?= 3
# (several llama-bench builds, e.g. c392e50's and today's: one column each;
# llama-perplexity and llama-batched-bench are taken beside the first)
LLAMACPP_PPL ?= $(if $(LLAMACPP_BENCH),$(dir $(firstword $(LLAMACPP_BENCH)))llama-perplexity)
LLAMACPP_BATCHED ?= $(if $(LLAMACPP_BENCH),$(wildcard $(dir $(firstword $(LLAMACPP_BENCH)))llama-batched-bench))
bench: run
	@$(PYTHON) tools/bench.py --run ./run --models build/bench --threads $(BENCH_THREADS) \
	  --reps $(BENCH_REPS) --tokenizer $(MODELS_DIR)/llama2-tokenizer/tokenizer.bin \
	  --ppl-text $(MODELS_DIR)/../text/wikitext-2-raw-test.txt \
	  $(if $(LLAMA2C),--llama2c $(LLAMA2C)) $(foreach b,$(LLAMACPP_BENCH),--llamacpp-bench $(b)) \
	  $(if $(LLAMACPP_PPL),--llamacpp-ppl $(LLAMACPP_PPL)) \
	  $(if $(LLAMACPP_BATCHED),--llamacpp-batched $(LLAMACPP_BATCHED))
	@if [ -f tools/bench_tokenizer.sh ]; then echo; sh tools/bench_tokenizer.sh $(MODELS_DIR); fi
	@echo; echo "-m serve, stories260K: generated tokens/s by slots and concurrent clients (tools/serve_bench.py)"
	@$(if $(LLAMA_SERVER),$(PYTHON) tools/convert.py $(MODELS_DIR)/stories260K/stories260K.bin \
	  build/bench/stories260K.gguf --tokenizer $(MODELS_DIR)/stories260K/tok512.bin &&) \
	$(PYTHON) tools/serve_bench.py ./run $(MODELS_DIR)/stories260K/stories260K.bin \
	  $(MODELS_DIR)/stories260K/tok512.bin --slots 1,2 --clients 1,4,8 --requests 10 --max-tokens 200 \
	  $(if $(LLAMA_SERVER),--llama-server $(LLAMA_SERVER) --gguf build/bench/stories260K.gguf)

# ---- fuzzing ----------------------------------------------------------------
# One libFuzzer target per kind of input (fuzz/fuzz_*.c), built with clang
# under ASan and UBSan into build/fuzz/.  `make fuzz` makes the seed corpora
# from the shared models (tools/fuzz_seeds.py) and runs every target for
# FUZZ_SECONDS (FUZZ_TARGETS: a subset); tools/fuzz_run.sh says what each
# run reached and fails on any finding (its input is left in
# build/fuzz/artifacts/).
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_SRC     := $(sort $(wildcard fuzz/fuzz_*.c))
FUZZ_NAMES   := $(patsubst fuzz/%.c,%,$(FUZZ_SRC))
FUZZ_TARGETS ?= $(FUZZ_NAMES)
FUZZ_HELPERS := $(filter-out $(FUZZ_SRC),$(FUZZ_C))
FUZZ_FLAGS   := $(BASE) -DPOSENC_LIBFUZZER -O1 -g $(ARCH_FLAGS) -fno-omit-frame-pointer \
                -fsanitize=address,undefined -fno-sanitize-recover=undefined

build/fuzz/%.o: %.c $(LIB_HDR) $(wildcard fuzz/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -c $< -o $@
build/fuzz/libposenc.a: $(patsubst %.c,build/fuzz/%.o,$(LIB_SRC))
	ar rcs $@ $^
build/fuzz/fuzz_%: build/fuzz/fuzz/fuzz_%.o $(patsubst %.c,build/fuzz/%.o,$(FUZZ_HELPERS)) \
                   build/fuzz/libposenc.a
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer $^ -o $@ $(LDLIBS)

fuzz-build: $(addprefix build/fuzz/,$(FUZZ_NAMES))
fuzz-corpus:
	@$(PYTHON) tools/fuzz_seeds.py --models $(MODELS_DIR) --out build/fuzz/corpus
fuzz: $(addprefix build/fuzz/,$(FUZZ_TARGETS)) fuzz-corpus
	@set -e; for t in $(FUZZ_TARGETS); do \
	  POSENC_MODELS=$(MODELS_DIR) sh tools/fuzz_run.sh $$t $(FUZZ_SECONDS); done
	@echo "make fuzz: $(words $(FUZZ_TARGETS)) targets, $(FUZZ_SECONDS) s each, no findings"
	@echo "fuzz: $(words $(FUZZ_TARGETS)) passed, 0 failed"

clean:
	rm -rf build run
