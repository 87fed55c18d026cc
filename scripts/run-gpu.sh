#!/usr/bin/env bash
# The GPU script, in two halves, for a session lent the NVIDIA H200 machine (the device tool:
# CUDA 13, Python 3.12 with JAX + jax-cuda13-plugin, but no LLVM 19, no cmocka, no package
# registry, and only 64 MiB of files travel).
#
#   scripts/run-gpu.sh bundle [BUILD_DIR]   HERE: build (Release; default build-gpu) and pack
#       gpu-bundle/ (git-ignored): the stripped plugin, GPU tests, kiln-bench, kiln-run, the
#       GPU and command-buffer benchmarks and an FFI handler library (bin.tar.xz), the corpus
#       (corpus.tar.xz), the JAX script, and the Debian runtime packages they need
#       (libllvm19 and its libraries, libcmocka0: .debs from `apt-get download`).
#   scripts/run-gpu.sh run                  THERE (in the repository root, gpu-bundle carried):
#       unpack the .debs with `dpkg -x` into a private prefix, point LD_LIBRARY_PATH at it, and
#       run every step with its own timeout, all within one deadline (420 s); the log goes to
#       $OUT/gpu.log (or gpu-bundle/gpu.log) and one summary table with the goals ends it.
#       Without a GPU every step says SKIP with its reason, and the script exits 0.
#   scripts/run-gpu.sh dry                  HERE: the device half in a clean environment
#       (`env -i`, nothing but PATH, HOME, OUT and the LD_LIBRARY_PATH the run sets), which
#       proves the bundle needs nothing else; no GPU here, so each step reports SKIP.
#
# The device call: run(command="bash scripts/run-gpu.sh run", carry=["gpu-bundle"], timeout_s=480);
# $KILN_GPU_DEADLINE (default 420 s) bounds the whole device half, each step's timeout cut to
# what is left.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
bundle="$root/gpu-bundle"
mode="${1:-}"

# ---- here: the bundle --------------------------------------------------------------------
make_bundle() {
  local build="${1:-build-gpu}"
  local targets="kiln_pjrt test_gpu_runtime test_gpu_corpus kiln-bench kiln-run bench_gpu_heroes
                 bench_command_buffer bench_pjrt_execute bench_nccl kiln_example_gather_add
                 bench_steady_state bench_gelu"
  if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  fi
  # shellcheck disable=SC2086
  cmake --build "$build" -j"$(nproc)" --target $targets >/dev/null
  rm -rf "$bundle"
  mkdir -p "$bundle/stage/bin" "$bundle/debs"
  local f
  for f in libkiln_pjrt.so test_gpu_runtime test_gpu_corpus kiln-bench kiln-run bench_gpu_heroes \
           bench_command_buffer bench_pjrt_execute bench_nccl libkiln_example_gather_add.so \
           bench_steady_state bench_gelu; do
    strip --strip-unneeded -o "$bundle/stage/bin/$f" "$build/$f"
  done
  cp scripts/gpu/jax_kiln.py scripts/gpu/gemm_torch.py "$bundle/stage/bin/"
  tar -C "$bundle/stage" -cJf "$bundle/bin.tar.xz" bin
  local corpus="${KILN_CORPUS_DIR:-$root/../shared/hlo-corpus}"
  tar -C "$corpus/.." -cJf "$bundle/corpus.tar.xz" \
      "$(basename "$corpus")/xla" "$(basename "$corpus")/real" "$(basename "$corpus")/emitters"
  rm -rf "$bundle/stage"
  # libLLVM.so.19.1 and what it links (ldd), cmocka for the GPU tests.
  (cd "$bundle/debs" && apt-get download -q libllvm19 libz3-4 libicu72 libxml2 libffi8 libedit2 \
      libtinfo6 libbsd0 libmd0 liblzma5 zlib1g libzstd1 libcmocka0 2>&1 | grep -v "^W: Download is performed unsandboxed" || true)
  cp "$0" "$bundle/run-gpu.sh"
  git rev-parse HEAD >"$bundle/REVISION" 2>/dev/null || echo unknown >"$bundle/REVISION"
  du -sb "$bundle" | awk '{printf "gpu bundle: %s, %.1f MiB\n", $2, $1 / 1048576}'
}

# ---- there: every step -------------------------------------------------------------------
declare -a rows=()
row() { rows+=("$(printf '%-34s %-6s %-34s %s' "$1" "$2" "$3" "$4")"); }

# step NAME TIMEOUT CMD...: runs CMD with a timeout, cut to what is left of the whole run's
# deadline ($KILN_GPU_DEADLINE seconds, default 420: the device call's limit less the machine's
# start); rc 77 is SKIP (a missing GPU, where none is required); prints and records the status.
step_status=0
step() {
  local name="$1" limit="$2"
  shift 2
  local left=$((deadline - SECONDS))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 5 ]; then
    echo "== $name: out of time (the run's ${KILN_GPU_DEADLINE:-420} s deadline)"
    step_status=124
    return 1
  fi
  echo "== $name (timeout ${limit}s, $((SECONDS)) s into the run)"
  local rc=0
  timeout -k 5 "$limit" "$@" || rc=$?
  local st=PASS
  if [ "$rc" -eq 77 ] && [ "$have_gpu" = 0 ]; then st=SKIP
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then st=TIMEOUT
  elif [ "$rc" -ne 0 ]; then st=FAIL
  fi
  echo "== $name: $st (exit $rc)"
  step_status=$rc
  [ "$st" = PASS ] || [ "$st" = SKIP ]
}

# gpu_step NAME TIMEOUT GOAL FIGURE_CMD CMD...: a step that needs the GPU; its output is
# tee'd into $work/<first word of NAME>.txt and FIGURE_CMD (a shell snippet reading $txt) gives
# the figure of its row.
gpu_step() {
  local name="$1" limit="$2" goal="$3" figure="$4"
  shift 4
  local txt
  txt="$work/$(echo "$name" | tr -c 'a-zA-Z0-9\n' '_').txt"
  if [ -n "$skip_all" ]; then row "$name" SKIP "$goal" "$skip_all"; return; fi
  if ! selected "$name"; then row "$name" SKIP "$goal" "not in \$KILN_GPU_ONLY"; return; fi
  if step "$name" "$limit" "$@" > >(tee "$txt") 2>&1; then
    row "$name" PASS "$goal" "$(txt=$txt; eval "$figure" 2>/dev/null | head -1 | cut -c1-150)"
  else
    local st=FAIL
    [ "$step_status" -eq 124 ] || [ "$step_status" -eq 137 ] && st=TIMEOUT
    row "$name" "$st" "$goal" "exit $step_status: $(grep -m1 -E 'FAIL|[Ee]rror|ERROR|MISMATCH' "$txt" | cut -c1-160)"
    fail=1
  fi
  sleep 0.2 # the tee's last lines
}

# Whether step NAME runs: $KILN_GPU_ONLY (an extended regular expression over the step names,
# e.g. "JAX|gemm" for a rerun of what failed) selects; unset, every step runs.
selected() {
  [ -z "${KILN_GPU_ONLY:-}" ] || echo "$1" | grep -Eq -- "$KILN_GPU_ONLY"
}

run_device_half() {
  local out="${OUT:-$bundle}"
  work="${KILN_GPU_WORK:-/tmp/kiln-gpu}"
  deadline=$((SECONDS + ${KILN_GPU_DEADLINE:-420}))
  rm -rf "$work" && mkdir -p "$work/prefix" "$work/syslib"
  local d
  for d in "$bundle"/debs/*.deb; do dpkg -x "$d" "$work/prefix"; done
  tar -C "$work" -xJf "$bundle/bin.tar.xz"
  tar -C "$work" -xJf "$bundle/corpus.tar.xz"
  local bin="$work/bin"
  # The CUDA libraries kiln opens with dlopen (cuBLAS, cuBLASLt, nvJitLink, NCCL) live in the
  # toolkit and in Python's nvidia-* wheels there; the driver in the system's folders.
  local extra="" pyd
  for pyd in /usr/local/cuda/lib64 /usr/local/nvidia/lib64 \
             $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
    [ -d "$pyd" ] || continue
    for d in $(find "$pyd" -maxdepth 5 \( -name 'libcublasLt.so*' -o -name 'libnccl.so*' \
                 -o -name 'libnvJitLink.so*' -o -name 'libcublas.so*' \) -printf '%h\n' 2>/dev/null | sort -u); do
      case ":$extra:" in *":$d:"*) ;; *) extra="$extra${extra:+:}$d" ;; esac
    done
  done
  export LD_LIBRARY_PATH="$bin:$work/prefix/usr/lib/x86_64-linux-gnu:$work/prefix/lib/x86_64-linux-gnu:$work/prefix/usr/lib/llvm-19/lib${extra:+:$extra}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # Python there is the system's (Ubuntu's) with its own zlib, libffi, lzma: a process of it
  # gets only the prefix's libraries the system lacks (libLLVM and the ones it alone needs).
  for d in "$work"/prefix/usr/lib/x86_64-linux-gnu/*.so* "$work"/prefix/lib/x86_64-linux-gnu/*.so* \
           "$work"/prefix/usr/lib/llvm-19/lib/*.so*; do
    [ -e "$d" ] || continue
    ldconfig -p 2>/dev/null | grep -q " $(basename "$d") " || ln -sf "$d" "$work/syslib/"
  done
  local py_ld="$bin:$work/syslib${extra:+:$extra}"
  export KILN_CORPUS_DIR="$work/hlo-corpus" KILN_PJRT_PLUGIN="$bin/libkiln_pjrt.so"
  export KILN_CACHE_DIR="$work/cache"

  have_gpu=0
  local why="no NVIDIA driver (nvidia-smi not found)"
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    have_gpu=1
    why=""
    nvidia-smi -L
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader || true
    echo "CUDA libraries on LD_LIBRARY_PATH: ${extra:-none found}"
    echo "python: $(command -v python3) $(python3 --version 2>&1); nvcc: $(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || echo none)"
    echo "libdevice: $(ls /usr/local/cuda/nvvm/libdevice/libdevice.10.bc 2>/dev/null || echo 'not in /usr/local/cuda')"
  elif command -v nvidia-smi >/dev/null 2>&1; then
    why="nvidia-smi finds no GPU"
  fi
  echo "bundle $(cat "$bundle/REVISION" 2>/dev/null), GPU: ${have_gpu/0/none ($why)}"
  # Every library each binary needs resolves, into the bundle's prefix or to the C and C++
  # runtimes every Linux machine has (LD_LIBRARY_PATH comes before the system's folders, so a
  # library found elsewhere is one the bundle lacks).
  local missing
  missing=$(for f in "$bin"/*; do [ -x "$f" ] && ldd "$f" 2>/dev/null; done | awk '
      /not found/ {print $1 " not found"; next}
      $2 == "=>" && index($3, "'"$work"'") != 1 && $1 !~ /^(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s)\.so/ {print $1 " from " $3}' | sort -u || true)
  if [ -n "$missing" ]; then
    echo "missing libraries:"; echo "$missing"
    row "bundle libraries resolve" FAIL "all found" "$(echo "$missing" | head -1)"
    fail=1
  else
    row "bundle libraries resolve" PASS "all found" "LD_LIBRARY_PATH only"
  fi

  if [ "$have_gpu" = 1 ]; then export KILN_REQUIRE_GPU=1; fi
  skip_all=""
  [ "$have_gpu" = 1 ] || skip_all="$why"
  local jax_skip=""
  LD_LIBRARY_PATH="$py_ld" python3 -c "import jax" >/dev/null 2>&1 || jax_skip="no jax in python3"
  local torch_skip=""
  LD_LIBRARY_PATH="$py_ld" python3 -c "import torch, jax" >/dev/null 2>&1 || torch_skip="no torch or jax in python3"

  # 1. The GPU test suite (KILN_REQUIRE_GPU=1 there: a missing driver or library fails).
  gpu_step "GPU runtime tests" 60 "all pass" 'grep -E "PASSED|FAILED" "$txt" | tr "\n" " "' \
    "$bin/test_gpu_runtime"
  # 2. The corpus on the GPU against the evaluator (each module's name printed before it runs).
  gpu_step "corpus on GPU vs evaluator" 110 ">= 90% pass" \
    'grep -o "passed [0-9]* / eligible [0-9]* ([0-9.]*%)" "$txt"; tail -1 "$txt"' \
    env KILN_TEST_VERBOSE=1 "$bin/test_gpu_corpus"
  # 2b. The merge sort (stable rows past 12,288 elements; no corpus module has one): JAX's
  # argsort form over 3 x 20,000 keys with ties, through the plugin, against the evaluator.
  gpu_step "long stable sort on GPU vs evaluator" 30 "matches" \
    'grep -o "compare with reference: .*" "$txt"' \
    "$bin/kiln-run" --backend=cuda --compare=reference --repeat=2 \
    "$root/tests/kiln_run/long_stable_argsort.hlo"
  # 3 + 4. JAX loads kiln; the same programs on JAX's CPU backend and on XLA:GPU.
  if [ -z "$skip_all" ] && [ -n "$jax_skip" ]; then row "JAX programs on kiln vs JAX CPU" SKIP "all match" "$jax_skip"
  else
    gpu_step "JAX programs on kiln vs JAX CPU" 90 "all match" 'grep -o "^jax: [0-9]* of [0-9]* match.*" "$txt"' \
      env LD_LIBRARY_PATH="$py_ld" KILN_JAX_DUMP="$work" KILN_FFI_HANDLERS="kiln_gather_add=$bin/libkiln_example_gather_add.so:kiln_gather_add" \
      python3 "$bin/jax_kiln.py" "$bin/libkiln_pjrt.so"
  fi
  # Issue 21's row: bf16 / f16 / f32 gemm through the plugin vs torch.matmul, same shapes.
  if [ -z "$skip_all" ] && [ -n "$torch_skip" ]; then row "gemm vs torch.matmul" SKIP ">= 0.9x" "$torch_skip"
  else
    gpu_step "gemm vs torch.matmul" 60 ">= 0.9x" 'grep -o "geomean.*" "$txt"' \
      env LD_LIBRARY_PATH="$py_ld" python3 "$bin/gemm_torch.py" "$bin/libkiln_pjrt.so"
  fi
  # Issue 20's row: steady-state executes vs the same kernels alone, on CUDA.
  local c="$KILN_CORPUS_DIR/xla/xla__backends__cpu__benchmarks__hlo__"
  gpu_step "steady state vs kernels (CUDA)" 30 "<= 1.1x" 'grep -o "^[a-z_0-9]* .*ratio [0-9.]*" "$txt" | sed "s/ .*ratio/ ratio/" | tr "\n" " "' \
    "$bin/bench_steady_state" --backend cuda --reps 20 "$root/examples/gelu.hlo" \
    "${c}layer_norm_1x4096x768_bf16.hlo" "${c}sum_axis_1x4096x1024_bf16.hlo" \
    "$root/benchmarks/hlo/transpose_2048.hlo"
  # 5. Hero kernels' bandwidth.
  gpu_step "hero bandwidth vs memcpy" 30 ">= 80% of memcpy" 'tail -1 "$txt"' "$bin/bench_gpu_heroes"
  # 6. GPU compile latency: GELU to a cubin vs nvcc -cubin.
  gpu_step "GELU compile vs nvcc -cubin" 30 ">= 25x faster" 'grep -o "kiln is [0-9.]*x faster.*" "$txt"' \
    "$bin/bench_gelu" --reps 3 --compile-reps 9 --nvcc-reps 3
  # 7. kiln-bench on the GPU (graphs on and off) over the corpus's benchmark modules (XLA's
  # backends/cpu/benchmarks; the whole corpus takes minutes, more than the run's deadline).
  gpu_step "kiln-bench corpus on GPU" 75 "no errors" 'tail -1 "$txt"' \
    "$bin/kiln-bench" --platform=cuda --corpus --filter=benchmarks__hlo --runs=10 --time=0.05 --warmup=1 \
    --json="$out/bench-gpu.json"
  # Host command buffers run everywhere: replay of 50 kernels vs one by one.
  if ! selected "command buffer vs one by one"; then row "command buffer vs one by one" SKIP ">= 3x cheaper" "not in \$KILN_GPU_ONLY"
  elif step "command buffer vs one by one" 15 "$bin/bench_command_buffer" | tee "$work/cmdbuf.txt"; then
    row "command buffer vs one by one" PASS ">= 3x cheaper" "$(grep -o 'ratio [0-9.]*x' "$work/cmdbuf.txt" | head -1)"
  else row "command buffer vs one by one" FAIL ">= 3x cheaper" "exit $step_status"; fail=1; fi
  if ! selected "plugin execute overhead (host)"; then row "plugin execute overhead (host)" SKIP "<= 5 us per execute" "not in \$KILN_GPU_ONLY"
  elif step "plugin execute overhead (host)" 15 "$bin/bench_pjrt_execute" 20000 | tee "$work/pexec.txt"; then
    row "plugin execute overhead (host)" PASS "<= 5 us per execute" "$(grep -o 'PJRT table *[0-9.]* us' "$work/pexec.txt" | head -1)"
  else row "plugin execute overhead (host)" FAIL "<= 5 us per execute" "exit $step_status"; fail=1; fi
  # 8. Collectives through NCCL (bench_nccl): all-reduce, all-gather, reduce-scatter from 1 KiB
  # to 64 MiB on every GPU, nccl-tests' algbw / busbw next to memcpy of the same size. NCCL is
  # not in the bundle (libnccl.so.2 is ~200 MiB): a machine without it (or without
  # $KILN_NCCL_LIBRARY pointing at one) reports SKIP naming libnccl.so.2. On one GPU busbw is 0
  # by definition; algbw is the figure then.
  if [ -n "$skip_all" ]; then row "collectives (NCCL) bus bandwidth" SKIP "runs; busbw vs memcpy" "$skip_all"
  elif ! selected "collectives (NCCL) bus bandwidth"; then row "collectives (NCCL) bus bandwidth" SKIP "runs; busbw vs memcpy" "not in \$KILN_GPU_ONLY"
  else
    local nrc=0
    if step "collectives (NCCL) bus bandwidth" 30 "$bin/bench_nccl" --max-bytes 67108864 >"$work/nccl.txt" 2>&1; then :; fi
    nrc=$step_status
    cat "$work/nccl.txt"
    if [ "$nrc" -eq 0 ]; then
      row "collectives (NCCL) bus bandwidth" PASS "runs; busbw vs memcpy" "$(tail -1 "$work/nccl.txt" | cut -c1-160)"
    elif [ "$nrc" -eq 77 ]; then
      row "collectives (NCCL) bus bandwidth" SKIP "runs; busbw vs memcpy" "$(grep -o 'SKIP: [^;]*' "$work/nccl.txt" | head -1 | cut -c1-160)"
    elif [ "$nrc" -eq 124 ] || [ "$nrc" -eq 137 ]; then
      row "collectives (NCCL) bus bandwidth" TIMEOUT "runs; busbw vs memcpy" "out of time"; fail=1
    else
      row "collectives (NCCL) bus bandwidth" FAIL "runs; busbw vs memcpy" "exit $nrc: $(tail -1 "$work/nccl.txt" | cut -c1-120)"; fail=1
    fi
  fi
  # The step logs travel back too (at most 8 files from $OUT).
  [ "$out" = "$bundle" ] || tar -C "$work" -czf "$out/steps.tar.gz" $(cd "$work" && ls ./*.txt 2>/dev/null) 2>/dev/null || true

  echo
  printf '%-34s %-6s %-34s %s\n' "step" "status" "goal" "figure / reason"
  local r
  for r in "${rows[@]}"; do echo "$r"; done
  [ "$have_gpu" = 1 ] || echo "no GPU here ($why): every GPU step skipped, exit 0"
}

case "$mode" in
  bundle)
    make_bundle "${2:-build-gpu}"
    ;;
  run)
    fail=0
    out="${OUT:-$bundle}"
    mkdir -p "$out"
    set -o pipefail
    run_device_half 2>&1 | tee "$out/gpu.log"
    if grep -qE '^.{34} (FAIL|TIMEOUT) ' "$out/gpu.log"; then exit 1; fi
    exit 0
    ;;
  dry)
    [ -d "$bundle" ] || { echo "no gpu-bundle/: run scripts/run-gpu.sh bundle first" >&2; exit 1; }
    tmp="$(mktemp -d)"
    rc=0
    env -i PATH=/usr/bin:/bin HOME="$tmp" OUT="$tmp/out" KILN_GPU_WORK="$tmp/work" \
        bash "$root/scripts/run-gpu.sh" run || rc=$?
    echo "dry run: exit $rc; log in $tmp/out/gpu.log"
    exit $rc
    ;;
  *)
    sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
