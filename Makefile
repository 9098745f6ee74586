# tally: a plain Makefile. `make` builds into build/; `make test` installs what
# is missing (scripts/setup.sh), builds and runs every suite; `make demo` runs
# the demo. See README.md.

BUILD ?= build
CC ?= cc
CXX ?= g++

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2
CFLAGS_BASE := -std=gnu11 -O2 -g $(WARN) -MMD -MP -D_GNU_SOURCE
# An allocator must not have its own malloc+memset turned into a call to calloc.
# No SLP vectorizing: it merges two 8-byte counter updates into one 16-byte
# load, which cannot be forwarded from the two stores of the previous call
# (a 15-cycle stall on every free).
ALLOC_CFLAGS := $(CFLAGS_BASE) -fPIC -fvisibility=hidden -fno-builtin-malloc \
	-fno-builtin-calloc -fno-builtin-realloc -fno-builtin-free -ftls-model=initial-exec \
	-fno-tree-slp-vectorize
SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer

ALLOC_SRCS := alloc/classes.c alloc/os.c alloc/segment.c alloc/span.c alloc/bin.c alloc/heap.c \
	alloc/large.c alloc/large_pool.c alloc/large_layout.c alloc/malloc.c alloc/free.c alloc/stats.c alloc/stats_identity.c alloc/events.c \
	alloc/common/ring.c alloc/common/probe_guard.c alloc/purge.c alloc/span_check.c alloc/sample.c alloc/common/sample_util.c alloc/ptr_table.c \
	alloc/mallinfo.c alloc/cut.c
SDK_SRCS := alloc/sdk/sdk.c alloc/common/probe_guard.c
# what `--inject` loads into a process on glibc's malloc
INTERPOSE_SRCS := alloc/interpose/interpose.c alloc/interpose/interpose_thread.c alloc/interpose/interpose_batch.c \
	alloc/interpose/interpose_table.c alloc/interpose/interpose_shadow.c alloc/interpose/interpose_got.c \
	alloc/interpose/interpose_sample.c alloc/common/sample_util.c alloc/common/ring.c alloc/common/probe_guard.c

# Four builds of the allocator: the product, the same without probe sites (for
# the probe-cost benchmark), one that hands every batch to a test sink (the
# stress tests, with real malloc names) and one under tally_p_ names with the
# sanitizers (the unit tests).
obj = $(patsubst %.c,$(BUILD)/$(1)/%.o,$(2))
ALLOC_OBJS := $(call obj,pic,$(ALLOC_SRCS))
ALLOC_NP_OBJS := $(call obj,noprobes,$(ALLOC_SRCS))
ALLOC_SINK_OBJS := $(call obj,sink,$(ALLOC_SRCS))
ALLOC_SAN_OBJS := $(call obj,san,$(ALLOC_SRCS))
SDK_OBJS := $(call obj,pic,$(SDK_SRCS))
INTERPOSE_OBJS := $(call obj,pic,$(INTERPOSE_SRCS))

PRODUCTS := $(BUILD)/libtally_alloc.so $(BUILD)/libtally_alloc.a $(BUILD)/libtally.so \
	$(BUILD)/libtally_interpose.so \
	$(BUILD)/libtally_alloc_noprobes.so $(BUILD)/tally

# (and libm, for the model's heap-profile weights, which most tests link)
CMOCKA_LIBS := $(shell pkg-config --libs cmocka 2>/dev/null || echo -lcmocka) -lm
TESTS := $(BUILD)/tests/test_alloc_unit $(BUILD)/tests/test_alloc_stress $(BUILD)/tests/test_replay \
	$(BUILD)/tests/test_alloc_fastpath $(BUILD)/tests/test_alloc_idle $(BUILD)/tests/test_span \
	$(BUILD)/tests/test_sdk $(BUILD)/tests/test_sdk_alloc $(BUILD)/tests/test_model $(BUILD)/tests/test_tree $(BUILD)/tests/test_figures \
	$(BUILD)/tests/test_json $(BUILD)/tests/test_text $(BUILD)/tests/test_cli $(BUILD)/tests/test_target $(BUILD)/tests/test_target_ns \
	$(BUILD)/tests/test_remote $(BUILD)/tests/test_cut $(BUILD)/tests/test_heap_rings $(BUILD)/tests/tracer_workload $(BUILD)/tests/test_glibc \
	$(BUILD)/tests/glibc_workload $(BUILD)/tests/gpu/.built $(BUILD)/tests/test_trace \
	$(BUILD)/tests/test_prom $(BUILD)/tests/test_top $(BUILD)/tests/fork_workload \
	$(BUILD)/tests/hostile_target $(BUILD)/tests/inject_workload $(BUILD)/tests/inject_workload_cxx \
	$(BUILD)/tests/libinject_lib.so $(BUILD)/tests/inject_groups $(BUILD)/tests/inject_chaos \
	$(BUILD)/tests/inject_chaos_kill $(BUILD)/tests/report_workload $(BUILD)/tests/test_report

.PHONY: all clean test test-build setup bench bench-alloc bench-trace bench-ring bench-loader bench-glibc bench-startup bench-inject-calls bench-record-calls bench-agent format-check layout-check demo stress cupti
all: $(PRODUCTS) $(BUILD)/demo_workload cupti $(BUILD)/tests/gpu/.built

# The CUPTI injection library and its unit test, when a CUDA toolkit with
# CUPTI is at /usr/local/cuda (CUDA=... elsewhere); skipped with a message
# otherwise. The script knows the toolkit's layouts.
cupti:
	@cupti/build.sh $(BUILD)

setup:
	@scripts/setup.sh

# The allocator's code in one section of its own, tally_text, however it is
# linked (a library, or an archive in a program): the linker then gives its
# bounds (__start_tally_text), and a sample's stack starts past them
# (alloc/sample.c).
ALLOC_TEXT = objcopy $(foreach s,.text .text.unlikely .text.startup .text.exit .text.hot,\
	--rename-section $(s)=tally_text) $@
$(BUILD)/pic/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC $@"; $(CC) $(ALLOC_CFLAGS) -c $< -o $@ && $(ALLOC_TEXT)
$(BUILD)/noprobes/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC $@"; $(CC) $(ALLOC_CFLAGS) -DTALLY_NO_PROBES -c $< -o $@ && $(ALLOC_TEXT)
$(BUILD)/sink/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC $@"; $(CC) $(ALLOC_CFLAGS) -DTALLY_ALLOC_TEST_SINK -c $< -o $@ && $(ALLOC_TEXT)
$(BUILD)/san/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC $@"; $(CC) $(ALLOC_CFLAGS) $(SAN) -DTALLY_ALLOC_TEST_SINK -DTALLY_ALLOC_PREFIX \
		-DTALLY_DEBUG -c $< -o $@ && $(ALLOC_TEXT)

$(BUILD)/libtally_alloc.so: $(ALLOC_OBJS)
	$(CC) -shared -pthread -Wl,-z,now -o $@ $^
$(BUILD)/libtally_alloc_noprobes.so: $(ALLOC_NP_OBJS)
	$(CC) -shared -pthread -Wl,-z,now -o $@ $^
$(BUILD)/libtally_alloc.a: $(ALLOC_OBJS)
	rm -f $@ && ar rcs $@ $^
# otel_thread_ctx_v1 (alloc/sdk/sdk.c) through TLS descriptors, as OTEP 4947
# recommends for its readers and writers.
$(BUILD)/pic/alloc/sdk/sdk.o: ALLOC_CFLAGS += -mtls-dialect=gnu2
$(BUILD)/libtally.so: $(SDK_OBJS)
	$(CC) -shared -pthread -o $@ $^
$(BUILD)/libtally_interpose.so: $(INTERPOSE_OBJS)
	$(CC) -shared -pthread -Wl,-z,now -o $@ $^ -ldl

# The tracer: BPF objects and their skeletons (vmlinux.h from the running
# kernel's BTF), then the CLI.
ARCH := $(shell uname -m | sed 's/x86_64/x86/;s/aarch64/arm64/')
BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Wall -Werror -I$(BUILD)/bpf -Ibpf \
	-I/usr/include/$(shell uname -m)-linux-gnu
BPF_OBJS := tally glibc cuda
SKELS := $(patsubst %,$(BUILD)/bpf/%.skel.h,$(BPF_OBJS))
# user/ in layers (docs/ARCHITECTURE.md): cmd/ the commands, session/ one
# trace from start to end, probes/ the BPF objects' loaders and the shared
# rings, os/ the target as the OS shows it (/proc, ELF, its memory,
# injection, symbols), model/ the pure rebuild of the figures, views/ their
# renderings, util/ the clock and small helpers.
USER_LAYERS := cmd session probes os model views util
USER_SRCS := $(sort $(foreach d,$(USER_LAYERS),$(wildcard user/$(d)/*.c user/$(d)/*/*.c)))
USER_OBJS := $(call obj,user,$(USER_SRCS)) $(BUILD)/user/stats_identity.o
# -fwrapv: the model's figures are sums of 64-bit values a target hands over
# (untrusted); one that wraps is defined, and shows as unbalanced, not exact
USER_CFLAGS := $(CFLAGS_BASE) -fwrapv -I$(BUILD)/bpf -Ibpf
USER_LIBS := -lbpf -ldw -lelf -lz -lncursesw -ltinfo -lmicrohttpd -lstdc++ -lm

$(BUILD)/bpf/vmlinux.h:
	@mkdir -p $(dir $@)
	@if [ ! -r /sys/kernel/btf/vmlinux ]; then \
		echo "build: this kernel has no BTF (/sys/kernel/btf/vmlinux); the tracer needs it" >&2; \
		exit 1; fi
	@echo "  GEN $@"; bpftool btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp && mv $@.tmp $@
$(BUILD)/bpf/%.bpf.o: bpf/%.bpf.c $(BUILD)/bpf/vmlinux.h
	@echo "  BPF $@"; clang $(BPF_CFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/bpf/%.skel.h: $(BUILD)/bpf/%.bpf.o
	@echo "  SKEL $@"; bpftool gen skeleton $< name $*_bpf > $@.tmp && mv $@.tmp $@
$(BUILD)/user/%.o: %.c | $(SKELS)
	@mkdir -p $(dir $@)
	@echo "  CC $@"; $(CC) $(USER_CFLAGS) -c $< -o $@
$(BUILD)/user/stats_identity.o: alloc/stats_identity.c
	@mkdir -p $(dir $@)
	@echo "  CC $@"; $(CC) $(USER_CFLAGS) -DTALLY_IDENTITY_API= -c $< -o $@
# tally report's page (user/views/report/assets.c): uPlot from npm
# (package.json, pinned by package-lock.json; scripts/setup.sh runs npm ci)
# and the page's own script and style, taken in by .incbin; an edit of any
# rebuilds tally.
REPORT_UPLOT_DIR := node_modules/uplot
REPORT_ASSETS := $(REPORT_UPLOT_DIR)/dist/uPlot.iife.min.js $(REPORT_UPLOT_DIR)/dist/uPlot.min.css \
	$(REPORT_UPLOT_DIR)/LICENSE user/views/report/page.js user/views/report/page.css
$(BUILD)/user/user/views/report/assets.o: USER_CFLAGS += -DREPORT_UPLOT_DIR=$(REPORT_UPLOT_DIR)
$(BUILD)/user/user/views/report/assets.o: $(REPORT_ASSETS)
$(REPORT_UPLOT_DIR)/%:
	@echo "build: $@ is missing: run scripts/setup.sh (its npm ci installs uPlot)" >&2; exit 1
$(BUILD)/tally: $(USER_OBJS)
	@echo "  LD $@"; $(CC) -o $@ $^ $(USER_LIBS)

# Tests
$(BUILD)/tests/%.o: tests/%.c
	@mkdir -p $(dir $@)
	@echo "  CC $@"; $(CC) $(CFLAGS_BASE) -c $< -o $@
$(BUILD)/tests/san/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC $@"; $(CC) $(CFLAGS_BASE) -fwrapv $(SAN) -DTALLY_IDENTITY_API= -DTALLY_ALLOC_PREFIX -c $< -o $@

$(BUILD)/tests/test_alloc_unit: $(BUILD)/tests/san/tests/test_alloc_unit.o \
		$(BUILD)/tests/san/tests/expect_abort.o $(BUILD)/tests/san/tests/alloc_oracle.o $(BUILD)/tests/san/tests/alloc_stress.o \
		$(BUILD)/tests/san/user/model/replay.o $(ALLOC_SAN_OBJS)
	@echo "  CC $@"; $(CC) $(SAN) -pthread -o $@ $^ $(CMOCKA_LIBS)
# Spans through their states, their bytes checked term by term (the debug
# build's byte map, alloc/span_check.c), under the sanitizers as the unit tests.
$(BUILD)/tests/test_span: $(BUILD)/tests/san/tests/test_span.o \
		$(BUILD)/tests/san/tests/expect_abort.o $(BUILD)/tests/san/tests/alloc_oracle.o $(BUILD)/tests/san/user/model/replay.o $(ALLOC_SAN_OBJS)
	@echo "  CC $@"; $(CC) $(SAN) -pthread -o $@ $^ $(CMOCKA_LIBS)
$(BUILD)/tests/test_replay: $(BUILD)/tests/san/tests/test_replay.o \
		$(BUILD)/tests/san/user/model/replay.o $(BUILD)/tests/san/alloc/stats_identity.o
	@echo "  CC $@"; $(CC) $(SAN) -o $@ $^ $(CMOCKA_LIBS)
# The stress test replaces malloc for the whole process (no sanitizer: ASan
# would bring its own), and replays every batch.
$(BUILD)/tests/test_alloc_stress: $(BUILD)/tests/test_alloc_stress.o $(BUILD)/tests/alloc_oracle.o \
		$(BUILD)/tests/alloc_stress.o \
		$(BUILD)/tests/replay_plain.o $(ALLOC_SINK_OBJS)
	@echo "  CC $@"; $(CC) -pthread -o $@ $^ $(CMOCKA_LIBS)
# The same stress suite against the product library, untraced, so that its
# fast paths (which record nothing) run: the identity and exact group figures.
$(BUILD)/tests/fast/%.o: tests/%.c
	@mkdir -p $(dir $@)
	@echo "  CC $@"; $(CC) $(CFLAGS_BASE) -DTALLY_ORACLE_NO_REPLAY -c $< -o $@
$(BUILD)/tests/test_alloc_fastpath: $(BUILD)/tests/fast/test_alloc_stress.o \
		$(BUILD)/tests/fast/alloc_oracle.o $(BUILD)/tests/fast/alloc_stress.o \
		$(BUILD)/tests/replay_plain.o $(BUILD)/libtally_alloc.so
	$(CC) -pthread -o $@ $(filter %.o,$^) -L$(BUILD) -l:libtally_alloc.so \
		-Wl,-rpath,'$$ORIGIN/..' $(CMOCKA_LIBS)
# Memory given back while the program idles (alloc/purge.c), against the product library.
$(BUILD)/tests/test_alloc_idle: $(BUILD)/tests/test_alloc_idle.o $(BUILD)/libtally_alloc.so
	$(CC) -pthread -o $@ $< -L$(BUILD) -l:libtally_alloc.so -Wl,-rpath,'$$ORIGIN/..' \
		$(CMOCKA_LIBS)

$(BUILD)/tests/replay_plain.o: user/model/replay.c
	@mkdir -p $(dir $@)
	@echo "  CC $@"; $(CC) $(CFLAGS_BASE) -c $< -o $@

# The SDK alone under the sanitizers (with any allocator: here ASan's), and
# with libtally_alloc, which charges allocations to the current group.
$(BUILD)/tests/san/alloc/sdk/sdk.o $(BUILD)/tests/san/alloc/common/probe_guard.o: \
		$(BUILD)/tests/san/alloc/%.o: alloc/%.c
	@mkdir -p $(dir $@)
	@echo "  CC $@"; $(CC) $(CFLAGS_BASE) $(SAN) -fvisibility=hidden -c $< -o $@
$(BUILD)/tests/test_sdk: $(BUILD)/tests/san/tests/test_sdk.o $(BUILD)/tests/san/alloc/sdk/sdk.o \
		$(BUILD)/tests/san/alloc/common/probe_guard.o
	$(CC) $(SAN) -pthread -o $@ $^ $(CMOCKA_LIBS)
$(BUILD)/tests/sdk_alloc/test_sdk.o: tests/test_sdk.c
	@mkdir -p $(dir $@)
	@echo "  CC $@"; $(CC) $(CFLAGS_BASE) -DWITH_TALLY_ALLOC -c $< -o $@
$(BUILD)/tests/test_sdk_alloc: $(BUILD)/tests/sdk_alloc/test_sdk.o $(BUILD)/libtally.so \
		$(BUILD)/libtally_alloc.so
	$(CC) -pthread -o $@ $< -L$(BUILD) -l:libtally_alloc.so -l:libtally.so \
		-Wl,-rpath,'$$ORIGIN/..' $(CMOCKA_LIBS)

# The tracer's pure parts under the sanitizers, and the integration tests' workload.
# The model layer (user/model/model.c and what it needs, and the figures built
# from it), as every view's test links it.
MODEL_SAN_OBJS := $(patsubst %,$(BUILD)/tests/san/user/model/%.o,model model_fork peak gpu replay figures figures_tree tree tree_peak sites injected) \
	$(BUILD)/tests/san/alloc/stats_identity.o
$(BUILD)/tests/test_tree: $(BUILD)/tests/san/tests/test_tree.o $(MODEL_SAN_OBJS)
	$(CC) $(SAN) -o $@ $^ $(CMOCKA_LIBS)
$(BUILD)/tests/test_model: $(BUILD)/tests/san/tests/test_model.o $(MODEL_SAN_OBJS)
	$(CC) $(SAN) -o $@ $^ $(CMOCKA_LIBS)
# The figures of a tick, and the snapshot document of docs/DESIGN.md §6 built from them.
$(BUILD)/tests/test_figures: $(BUILD)/tests/san/tests/test_figures.o \
		$(BUILD)/tests/san/user/views/snapshot_doc.o $(BUILD)/tests/san/user/views/snapshot_oom.o \
		$(BUILD)/tests/san/user/views/answers.o $(BUILD)/tests/san/user/views/json.o $(MODEL_SAN_OBJS) \
		$(BUILD)/tests/san/user/util/text.o
	$(CC) $(SAN) -o $@ $^ $(CMOCKA_LIBS)
# The reader against fakes, and against this test's own process, whose
# allocator (under tally_p_ names) it reads through process_vm_readv.
$(BUILD)/tests/test_remote: $(BUILD)/tests/san/tests/test_remote.o $(BUILD)/tests/san/user/os/remote.o \
		$(ALLOC_SAN_OBJS)
	$(CC) $(SAN) -pthread -o $@ $^ $(CMOCKA_LIBS)
# The cut's hand-over (alloc/cut.c) in this test's own process: its main
# thread the tracer, every batch kept and replayed up to each cut.
$(BUILD)/tests/test_cut: $(BUILD)/tests/san/tests/test_cut.o $(BUILD)/tests/san/user/os/remote.o \
		$(BUILD)/tests/san/user/model/replay.o $(ALLOC_SAN_OBJS)
	$(CC) $(SAN) -pthread -o $@ $^ $(CMOCKA_LIBS)
# The shared rings' reader against a ring this test maps and fills itself.
$(BUILD)/tests/test_heap_rings: $(BUILD)/tests/san/tests/test_heap_rings.o \
		$(BUILD)/tests/san/user/probes/heap_rings.o
	$(CC) $(SAN) -o $@ $^ $(CMOCKA_LIBS)
$(BUILD)/tests/test_json: $(BUILD)/tests/san/tests/test_json.o $(BUILD)/tests/san/user/views/json.o \
		$(BUILD)/tests/san/user/util/text.o
	$(CC) $(SAN) -o $@ $^ $(CMOCKA_LIBS)
# The JSON reader for untrusted input (tally diff's), at its edges.
$(BUILD)/tests/test_json_read: $(BUILD)/tests/san/tests/test_json_read.o \
		$(BUILD)/tests/san/user/util/json_read.o $(BUILD)/tests/san/user/util/text.o
	$(CC) $(SAN) -o $@ $^ $(CMOCKA_LIBS)
test-build: $(BUILD)/tests/test_json_read
# The UTF-8 check JSON and Prometheus share.
$(BUILD)/tests/test_text: $(BUILD)/tests/san/tests/test_text.o $(BUILD)/tests/san/user/util/text.o
	$(CC) $(SAN) -o $@ $^ $(CMOCKA_LIBS)
$(BUILD)/tests/test_cli: $(BUILD)/tests/san/tests/test_cli.o $(BUILD)/tests/san/user/cmd/cli_parse.o
	$(CC) $(SAN) -o $@ $^ $(CMOCKA_LIBS)
# /proc and ELF parsing, against this test's own process, its libc, and files it writes.
$(BUILD)/tests/test_target: $(BUILD)/tests/san/tests/test_target.o $(BUILD)/tests/san/user/os/target.o \
		$(BUILD)/tests/san/user/os/target_ns.o $(BUILD)/tests/san/user/os/target_cmdline.o \
		$(BUILD)/tests/san/user/util/proc_maps.o
	$(CC) $(SAN) -pthread -o $@ $^ -lelf $(CMOCKA_LIBS)
# Namespaces and cgroups: crafted files, and containers built with unshare.
$(BUILD)/tests/test_target_ns: $(BUILD)/tests/san/tests/test_target_ns.o \
		$(BUILD)/tests/san/user/os/target_ns.o $(BUILD)/tests/san/user/os/target.o \
		$(BUILD)/tests/san/user/os/cgroup_id.o $(BUILD)/tests/san/user/util/proc_maps.o
	$(CC) $(SAN) -o $@ $^ -lelf $(CMOCKA_LIBS)
$(BUILD)/tests/test_trace: $(BUILD)/tests/san/tests/test_trace.o $(BUILD)/tests/san/user/views/trace.o \
		$(BUILD)/tests/san/user/views/trace_threads.o \
		$(BUILD)/tests/san/user/views/json.o $(MODEL_SAN_OBJS) $(BUILD)/tests/san/user/util/text.o
	$(CC) $(SAN) -o $@ $^ $(CMOCKA_LIBS)
# tally report's series, escaping and data element (tests/test_report.c).
$(BUILD)/tests/test_report: $(BUILD)/tests/san/tests/test_report.o \
		$(patsubst %,$(BUILD)/tests/san/user/views/%.o,report/series report/report report/assets \
		snapshot_doc snapshot_oom answers json folded) $(MODEL_SAN_OBJS) \
		$(BUILD)/tests/san/user/util/text.o
	$(CC) $(SAN) -o $@ $^ $(CMOCKA_LIBS)
$(BUILD)/tests/san/user/views/report/assets.o: CFLAGS_BASE += -DREPORT_UPLOT_DIR=$(REPORT_UPLOT_DIR)
$(BUILD)/tests/san/user/views/report/assets.o: $(REPORT_ASSETS)
$(BUILD)/tests/test_top: $(BUILD)/tests/san/user/views/top/top_sites.o $(BUILD)/tests/san/tests/test_top.o $(BUILD)/tests/san/user/views/top/top_rows.o \
		$(BUILD)/tests/san/user/views/top/top_tree.o \
		$(BUILD)/tests/san/user/views/top/top_text.o $(MODEL_SAN_OBJS) $(BUILD)/tests/san/user/util/text.o
	$(CC) $(SAN) -o $@ $^ $(CMOCKA_LIBS)
$(BUILD)/tests/test_prom: $(BUILD)/tests/san/tests/test_prom.o $(BUILD)/tests/san/user/views/prom.o \
		$(MODEL_SAN_OBJS) $(BUILD)/tests/san/user/util/text.o
	$(CC) $(SAN) -o $@ $^ $(CMOCKA_LIBS)
$(BUILD)/tests/tracer_workload: tests/tracer/workload.c $(BUILD)/libtally.so
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -pthread -o $@ $< -L$(BUILD) -l:libtally.so -Wl,-rpath,'$$ORIGIN/..' -ldl

# tests/report's target: two groups that peak mid-run, a child.
$(BUILD)/tests/report_workload: tests/report/workload.c $(BUILD)/libtally.so
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -fno-builtin -fno-optimize-sibling-calls -o $@ $< -L$(BUILD) -l:libtally.so -Wl,-rpath,'$$ORIGIN/..'

# tally diff's workload (tests/diff/run.sh): a known amount more per run, its truth written.
$(BUILD)/tests/diff_workload: tests/diff/workload.c $(BUILD)/libtally.so
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -fomit-frame-pointer -o $@ $< -L$(BUILD) -l:libtally.so \
		-Wl,-rpath,'$$ORIGIN/..'
$(BUILD)/tests/diff_workload_stripped: $(BUILD)/tests/diff_workload
	strip -o $@ $<
test-build: $(BUILD)/tests/diff_workload $(BUILD)/tests/diff_workload_stripped

# A target that corrupts its own allocator state (tests/hostile).
$(BUILD)/tests/hostile_target: tests/hostile/target.c alloc/internal.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -o $@ $<

# libFuzzer targets for the readers of untrusted input (tests/fuzz): the
# remote state reader, the event decoder, the JSON reader, tally diff's
# pprof reader and its matching, under ASan and UBSan. libFuzzer is clang's (package libclang-rt-14-dev); without it
# they are not built and tests/fuzz/run.sh says so. Built as the product is, with -fwrapv: the
# sums of untrusted 64-bit figures wrap, defined (they overflowed at once
# without it: their inputs are in the corpus now). The fuzz build bounds
# the remote walk at 128 heaps and segments (65536 in the product), which a
# seed can reach: 65536 fully used segments would take two minutes here.
FUZZ_CC ?= clang
FUZZ_RT := $(wildcard $(shell $(FUZZ_CC) -print-runtime-dir 2>/dev/null)/libclang_rt.fuzzer-$(shell uname -m).a)
FUZZ_SAN := -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	-fno-omit-frame-pointer
FUZZ_CFLAGS := -std=gnu11 -O1 -g $(WARN) -MMD -MP -D_GNU_SOURCE -fwrapv $(FUZZ_SAN)
FUZZERS := $(BUILD)/tests/fuzz/fuzz_remote $(BUILD)/tests/fuzz/fuzz_decoder \
	$(BUILD)/tests/fuzz/fuzz_json_read $(BUILD)/tests/fuzz/fuzz_pprof_read \
	$(BUILD)/tests/fuzz/fuzz_diff
FUZZ_BOUNDS := -DREMOTE_MAX_HEAPS=128U -DREMOTE_MAX_SEGMENTS=128U
$(BUILD)/tests/fuzz/remote/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  FUZZCC $@"; $(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_BOUNDS) -c $< -o $@
# model.c's optimize("tree-vectorize") is gcc's
$(BUILD)/tests/fuzz/decoder/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  FUZZCC $@"; $(FUZZ_CC) $(FUZZ_CFLAGS) -Wno-unknown-attributes \
		-DTALLY_IDENTITY_API= -c $< -o $@
$(BUILD)/tests/fuzz/fuzz_remote: $(BUILD)/tests/fuzz/remote/tests/fuzz/fuzz_remote.o \
		$(BUILD)/tests/fuzz/remote/user/os/remote.o
	$(FUZZ_CC) $(FUZZ_SAN) -o $@ $^
FUZZ_MODEL_OBJS := $(patsubst %,$(BUILD)/tests/fuzz/decoder/user/model/%.o,model replay gpu \
	figures figures_tree tree tree_peak model_fork peak sites injected) \
	$(BUILD)/tests/fuzz/decoder/alloc/stats_identity.o
$(BUILD)/tests/fuzz/fuzz_decoder: $(BUILD)/tests/fuzz/decoder/tests/fuzz/fuzz_decoder.o \
		$(FUZZ_MODEL_OBJS)
	$(FUZZ_CC) $(FUZZ_SAN) -o $@ $^ -lm
# the JSON reader (tally diff's), its trees written back by the JSON writer
$(BUILD)/tests/fuzz/json/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  FUZZCC $@"; $(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@
$(BUILD)/tests/fuzz/fuzz_json_read: $(BUILD)/tests/fuzz/json/tests/fuzz/fuzz_json_read.o \
		$(BUILD)/tests/fuzz/json/user/util/json_read.o $(BUILD)/tests/fuzz/json/user/util/text.o \
		$(BUILD)/tests/fuzz/json/user/views/json.o
	$(FUZZ_CC) $(FUZZ_SAN) -o $@ $^ -lm
# tally diff's reader of pprof profiles, its documents read back by the JSON reader
$(BUILD)/tests/fuzz/fuzz_pprof_read: $(BUILD)/tests/fuzz/json/tests/fuzz/fuzz_pprof_read.o \
		$(BUILD)/tests/fuzz/json/user/cmd/diff_pprof.o $(BUILD)/tests/fuzz/json/user/util/json_read.o \
		$(BUILD)/tests/fuzz/json/user/util/text.o $(BUILD)/tests/fuzz/json/user/views/json.o
	$(FUZZ_CC) $(FUZZ_SAN) -o $@ $^ -lz -lm
# tally diff's matching and renderings on two documents (with the model,
# for the instance fields' names, as the decoder's target builds it)
$(BUILD)/tests/fuzz/fuzz_diff: $(BUILD)/tests/fuzz/json/tests/fuzz/fuzz_diff.o \
		$(patsubst %,$(BUILD)/tests/fuzz/json/user/cmd/%.o,diff_match diff_out) \
		$(BUILD)/tests/fuzz/json/user/util/json_read.o $(BUILD)/tests/fuzz/json/user/util/text.o \
		$(BUILD)/tests/fuzz/json/user/views/json.o $(FUZZ_MODEL_OBJS)
	$(FUZZ_CC) $(FUZZ_SAN) -o $@ $^ -lm
test-build: $(if $(FUZZ_RT),$(FUZZERS))
# The seed corpus, written from the real structures (tests/fuzz/seeds.c):
# after a change to their layout.
.PHONY: fuzz-seeds
fuzz-seeds: $(BUILD)/tests/fuzz/seeds
	$< tests/fuzz/corpus
$(BUILD)/tests/fuzz/seeds: tests/fuzz/seeds.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(FUZZ_BOUNDS) -o $@ $<

# Children made every way after the parent's probe site was hit (tests/fork).
$(BUILD)/tests/fork_workload: tests/fork/workload.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -fno-builtin -pthread -o $@ $<

# Grows under a memory cgroup until its OOM killer ends it (tests/oom).
$(BUILD)/tests/oom_grow: tests/oom/grow.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -fno-builtin -pthread -o $@ $<
test-build: $(BUILD)/tests/oom_grow

# Threads allocating flat out, blocks passed between them (tests/busy).
$(BUILD)/tests/busy: tests/busy/busy.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -fno-builtin -pthread -o $@ $<
test-build: $(BUILD)/tests/busy

# glibc mode against the real libc: -fno-builtin keeps every malloc/free pair,
# -z now keeps lazy binding out of the measured sequences.
$(BUILD)/tests/test_glibc: tests/glibc/test_glibc.c $(BUILD)/user/user/probes/glibc.o \
		$(BUILD)/user/user/probes/glibc_site.o $(BUILD)/user/user/probes/uprobe_multi.o \
		$(BUILD)/user/user/os/target.o \
		$(BUILD)/user/user/os/target_ns.o $(BUILD)/user/user/util/proc_maps.o | $(SKELS)
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -o $@ $< $(filter %.o,$^) $(USER_LIBS) $(CMOCKA_LIBS)
# Where glibc mode's probes go: the decoder alone, on byte sequences.
$(BUILD)/tests/test_glibc_site: $(BUILD)/tests/san/tests/test_glibc_site.o \
		$(BUILD)/tests/san/user/probes/glibc_site.o
	$(CC) $(SAN) -o $@ $^ $(CMOCKA_LIBS)
test-build: $(BUILD)/tests/test_glibc_site
$(BUILD)/tests/glibc_workload: tests/glibc/workload.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -fno-builtin -pthread -Wl,-z,now -o $@ $<

# --inject's workloads (tests/inject/run.sh): one source, as C and as C++
# (operator new), both PIE and lazily bound as Debian builds programs.
$(BUILD)/tests/inject_workload: tests/inject/workload.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -fno-builtin -o $@ $< -ldl
$(BUILD)/tests/inject_groups: tests/inject/groups.c $(BUILD)/libtally.so
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -fno-builtin -o $@ $< -L$(BUILD) -l:libtally.so -Wl,-rpath,'$$ORIGIN/..'
$(BUILD)/tests/libinject_lib.so: tests/inject/lib.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -fPIC -shared -fno-builtin -o $@ $<
# tests/inject/chaos.sh: a target that checks its own integrity, and what
# kills its injector at random points (inject_load itself, without BPF)
$(BUILD)/tests/inject_chaos: tests/inject/chaos.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -fno-builtin -pthread -o $@ $< -ldl
$(BUILD)/tests/inject_chaos_kill: tests/inject/chaos_kill.c $(BUILD)/user/user/os/inject.o \
		$(BUILD)/user/user/os/inject_call.o $(BUILD)/user/user/os/target.o \
		$(BUILD)/user/user/os/target_ns.o $(BUILD)/user/user/os/target_alloc.o \
		$(BUILD)/user/user/util/proc_maps.o
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -o $@ $< $(filter %.o,$^) -lelf -lz
$(BUILD)/tests/inject_workload_cxx: tests/inject/workload.c
	@mkdir -p $(dir $@)
	$(CXX) -O2 -g -Wall -Wextra -Werror -Wno-mismatched-new-delete -Wno-mismatched-dealloc -D_GNU_SOURCE -DCXX -fno-builtin -x c++ -o $@ $< -ldl

# The fake CUDA driver and the GPU workloads (tests/gpu/build.sh).
$(BUILD)/tests/gpu/.built: tests/gpu/build.sh tests/gpu/workload.c tests/gpu/dlopen_workload.c \
		tests/gpu/gpu_plugin.c tests/fake_cuda/libcuda.c tests/fake_cuda/cuda_abi.h \
		tests/fake_cuda/nvml.c $(BUILD)/libtally.so
	@tests/gpu/build.sh $(BUILD) && touch $@

# The benchmark's workloads, also the views' tests' (a producer/consumer pipeline).
$(BUILD)/alloc_bench: bench/alloc_bench.c bench/bench_util.h
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -pthread $(WARN) -o $@ $<

# mimalloc-bench's shapes (rptest, xmalloc, alloc-test, large, larson) for bench-alloc.
$(BUILD)/alloc_shapes: bench/alloc_shapes.c bench/bench_util.h
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -pthread $(WARN) -o $@ $<
test-build: $(BUILD)/alloc_shapes

# The interposer's cost per call, under callgrind (scripts/bench-inject-calls.sh).
$(BUILD)/inject_calls: bench/inject_calls.c bench/bench_util.h
	@mkdir -p $(dir $@)
	$(CC) -O2 -g $(WARN) -o $@ $< -ldl
test-build: $(BUILD)/inject_calls

# The allocator's recording counted without a tracer (scripts/bench-record-calls.sh).
$(BUILD)/raise_semaphore.so: bench/raise_semaphore.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -shared -fPIC $(WARN) -o $@ $< -ldl
test-build: $(BUILD)/raise_semaphore.so
$(BUILD)/pingpong: bench/pingpong.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g $(WARN) -o $@ $<
test-build: $(BUILD)/pingpong

# glibc mode's benchmark: every call kept (-fno-builtin), no lazy binding timed.
$(BUILD)/glibc_calls: bench/glibc_calls.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -fno-builtin -Wl,-z,now -o $@ $<

# The malloc family's contract, one binary run under glibc and under
# libtally_alloc (tests/conformance/run.sh); -fno-builtin keeps every call.
$(BUILD)/tests/conformance/malloc_contract: tests/conformance/malloc_contract.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -fno-builtin -o $@ $< -ldl
# A program that keeps nothing: the allocator's own blocks are not its live bytes.
$(BUILD)/tests/conformance/own_memory: tests/conformance/own_memory.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -fno-builtin -o $@ $< -ldl
test-build: $(BUILD)/tests/conformance/malloc_contract $(BUILD)/tests/conformance/own_memory

test-build: all $(TESTS) $(BUILD)/alloc_bench $(BUILD)/glibc_calls

test: setup
	@$(MAKE) --no-print-directory test-build
	@scripts/run-tests.sh

# The stress suites ten times in a row, with ten seeds.
stress: test-build
	@fails=0; for i in 1 2 3 4 5 6 7 8 9 10; do \
		$(BUILD)/tests/test_alloc_stress $$i >/dev/null 2>&1 && \
		$(BUILD)/tests/test_alloc_fastpath $$i >/dev/null 2>&1 && \
		$(BUILD)/tests/test_alloc_unit >/dev/null 2>&1 && echo "stress round $$i: passed" || \
		{ echo "stress round $$i: FAILED"; fails=$$((fails + 1)); }; \
	done; echo "$$((10 - fails)) passed, $$fails failed"; [ $$fails -eq 0 ]

bench-alloc: setup all
	@scripts/bench-alloc.sh
# The tracer's cost: churn traced vs untraced, beside memleak-bpfcc and heaptrack on glibc.
bench-trace: all
	@scripts/setup.sh --bench
	@scripts/bench-trace.sh
bench-ring: all test-build
	@scripts/bench-ring.sh
bench-loader: all
	@scripts/bench-loader.sh
# What tally's start and end cost a short command (tally snapshot -- /bin/true
# against /bin/true): wall, time to the target's first instruction, tally's phases.
bench-startup: all
	@BUILD=$(BUILD) scripts/bench-startup.sh
# glibc mode's cost per call of each malloc entry, and a python3 workload's slowdown.
bench-glibc: all $(BUILD)/glibc_calls
	@BUILD=$(BUILD) scripts/bench-glibc.sh

# --inject's interposer: instructions a malloc+free pair under callgrind, and its time.
bench-inject-calls: all $(BUILD)/inject_calls
	@BUILD=$(BUILD) scripts/bench-inject-calls.sh

# The traced fast paths' records and sampling: instructions a malloc+free pair under callgrind.
bench-record-calls: all $(BUILD)/alloc_bench $(BUILD)/raise_semaphore.so
	@BUILD=$(BUILD) scripts/bench-record-calls.sh

# What serve --all costs each context switch of the machine (scripts/bench-agent.sh).
bench-agent: all $(BUILD)/pingpong
	@BUILD=$(BUILD) scripts/bench-agent.sh

bench: bench-alloc bench-trace bench-ring bench-loader bench-glibc bench-startup

format-check:
	@clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h') && echo "format: clean"

# The layers' includes, file and function lengths (scripts/check-layout.sh;
# also a suite of make test).
layout-check:
	@scripts/check-layout.sh

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# The demo workload: threads in resource groups (demo/workload.c), run with
# the allocator and the SDK; `tally demo` runs it under `tally top`.
$(BUILD)/demo_workload: demo/workload.c $(BUILD)/libtally.so $(BUILD)/libtally_alloc.so
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -pthread -o $@ $< -L$(BUILD) -l:libtally_alloc.so -l:libtally.so \
		-Wl,-rpath,'$$ORIGIN' -ldl

# The demo under tally's live view (text frames and the snapshot without a
# terminal); tally needs root, or CAP_BPF and CAP_PERFMON.
demo: setup
	@$(MAKE) --no-print-directory all
	$(BUILD)/tally demo

# The image-size definition (bpf/image_size.h) on the image fixtures
# (tests/image_fixtures.c), through cupti/image_size.c built alone: no CUDA
# toolkit needed (run by tests/cupti/run.sh). The driver probes' side runs in
# tests/gpu/run.sh, on the same fixtures.
$(BUILD)/tests/test_image_size: $(BUILD)/tests/san/tests/test_image_size.o \
		$(BUILD)/tests/san/tests/image_fixtures.o $(BUILD)/tests/san/cupti/image_size.o
	$(CC) $(SAN) -o $@ $^ $(CMOCKA_LIBS)
test-build: $(BUILD)/tests/test_image_size
$(BUILD)/tests/gpu/.built: tests/gpu/image_workload.c tests/image_fixtures.c \
	tests/image_fixtures.h bpf/image_format.h

# Heap profiles: the symbolizer (user/os/symbols.c) and its fixtures, run by
# its test: a C program built as a release build with debug information, the
# same stripped, a C++ one (demangling); beside the first, the build ID
# readelf finds in it, for the test to compare with the symbolizer's.
SYM_FIXTURES := $(BUILD)/tests/symbols/fixture $(BUILD)/tests/symbols/fixture_stripped \
	$(BUILD)/tests/symbols/fixture_cxx
$(BUILD)/tests/symbols/fixture: tests/symbols/fixture.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g -fomit-frame-pointer $(WARN) -o $@ $<
	readelf -n $@ | sed -n 's/.*Build ID: *//p' > $@.build-id
$(BUILD)/tests/symbols/fixture_stripped: $(BUILD)/tests/symbols/fixture
	strip -o $@ $<
$(BUILD)/tests/symbols/fixture_cxx: tests/symbols/fixture_cxx.cc
	@mkdir -p $(dir $@)
	$(CXX) -O2 -g -fomit-frame-pointer -Wall -Wextra -Werror -o $@ $<
$(BUILD)/tests/test_symbols: $(BUILD)/tests/san/tests/test_symbols.o \
		$(BUILD)/tests/san/user/os/symbols.o $(BUILD)/tests/san/user/os/symbols_maps.o \
		$(BUILD)/tests/san/user/util/proc_maps.o \
		| $(SYM_FIXTURES)
	$(CC) $(SAN) -o $@ $^ -ldw -lelf -lstdc++ $(CMOCKA_LIBS)
test-build: $(BUILD)/tests/test_symbols $(SYM_FIXTURES)

# USDT sites read from ELF notes for uprobe_multi links (user/probes/usdt.c): the
# test's own probes and libtally_alloc.so's.
$(BUILD)/tests/test_usdt: $(BUILD)/tests/san/tests/test_usdt.o $(BUILD)/tests/san/user/probes/usdt.o \
		$(BUILD)/tests/san/user/os/target.o $(BUILD)/tests/san/user/os/target_ns.o \
		$(BUILD)/tests/san/user/util/proc_maps.o | $(BUILD)/libtally_alloc.so
	$(CC) $(SAN) -o $@ $^ -lelf $(CMOCKA_LIBS)
test-build: $(BUILD)/tests/test_usdt

# Heap profiles: the pprof and folded encoders (user/views/pprof.c, folded.c),
# and the real pprof, built offline from Debian's sources (golang-go,
# golang-github-google-pprof-dev) to read what they write (tests/pprof/run.sh).
# --wrap: the test fails the encoders' allocations one by one. GOCACHE
# explicit: HOME may be unset, and go has no default cache then.
$(BUILD)/tests/test_pprof: $(BUILD)/tests/san/tests/test_pprof.o $(BUILD)/tests/san/user/views/pprof.o \
		$(BUILD)/tests/san/user/views/folded.o
	$(CC) $(SAN) -o $@ $^ $(CMOCKA_LIBS) -lz \
		-Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=reallocarray
$(BUILD)/pprof:
	@mkdir -p $(dir $@)
	@echo "  GO $@"; GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE=$(abspath $(BUILD))/gocache \
		go build -o $@ github.com/google/pprof
test-build: $(BUILD)/tests/test_pprof $(BUILD)/pprof

# Heap profiles: sampling in the allocator (its test-sink build, under the
# sanitizers) into the model's sites, and the sites model alone.
$(BUILD)/tests/test_sample: $(BUILD)/tests/san/tests/test_sample.o \
		$(BUILD)/tests/san/user/model/replay.o $(BUILD)/tests/san/user/model/sites.o $(ALLOC_SAN_OBJS)
	$(CC) $(SAN) -pthread -o $@ $^ $(CMOCKA_LIBS)
test-build: $(BUILD)/tests/test_sample
$(BUILD)/tests/test_sites: $(BUILD)/tests/san/tests/test_sites.o \
		$(BUILD)/tests/san/user/model/replay.o $(BUILD)/tests/san/user/model/sites.o \
		$(BUILD)/tests/san/alloc/stats_identity.o
	$(CC) $(SAN) -o $@ $^ $(CMOCKA_LIBS)
test-build: $(BUILD)/tests/test_sites
# The heap profile's workload (tests/profile/run.sh): built as Debian builds,
# without frame pointers; and a copy without symbols.
$(BUILD)/tests/profile/sites_workload: tests/profile/sites_workload.c $(BUILD)/libtally.so
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -fomit-frame-pointer -o $@ $< -L$(BUILD) -l:libtally.so \
		-Wl,-rpath,'$$ORIGIN/../..'
$(BUILD)/tests/profile/sites_workload_stripped: $(BUILD)/tests/profile/sites_workload
	strip -o $@ $<
test-build: $(BUILD)/tests/profile/sites_workload $(BUILD)/tests/profile/sites_workload_stripped
# OpenTelemetry's memory probes and thread context read by bpftrace and gdb
# (tests/otel/run.sh).
$(BUILD)/tests/otel/otel_workload: tests/otel/workload.c $(BUILD)/libtally.so
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -o $@ $< -L$(BUILD) -l:libtally.so -Wl,-rpath,'$$ORIGIN/../..' -lm
test-build: $(BUILD)/tests/otel/otel_workload
# The peak's workload (tests/peak/run.sh), also without frame pointers.
$(BUILD)/tests/peak/peak_workload: tests/peak/peak_workload.c $(BUILD)/libtally.so
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -fomit-frame-pointer -o $@ $< -L$(BUILD) -l:libtally.so -lm \
		-Wl,-rpath,'$$ORIGIN/../..'
test-build: $(BUILD)/tests/peak/peak_workload
