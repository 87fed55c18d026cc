#!/usr/bin/env bash
# Installs what kiln needs to build and test, from Debian 12 packages, and nothing that is
# already there. Idempotent; run as root (or with sudo available).
set -euo pipefail

packages=(cmake make gcc pkg-config llvm-19-dev clang-19 libclang-rt-19-dev libcmocka-dev clang-format
          zlib1g-dev libzstd-dev libedit-dev libxml2-dev libffi-dev libncurses-dev
          python3-numpy libllvm15 libopenblas0-pthread gnuplot-nox openmpi-bin libopenmpi3)
# python3-numpy: the Python package's tests (python/, run with /usr/bin/python3); libllvm15:
# a second LLVM for test_pjrt_other_llvm (the plugin loads RTLD_LOCAL beside it);
# libopenblas0-pthread: the host gemm's BLAS (dlopen'ed as libopenblas.so.0; without it dots
# run on a much slower built-in kernel); gnuplot-nox: kiln-bench --plot=FILE.svg;
# openmpi-bin, libopenmpi3: host devices across processes (mpirun; libmpi.so.40 dlopen'ed,
# runtime/mpi.h) and the tests that run under mpirun -np 2.
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages already installed"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
