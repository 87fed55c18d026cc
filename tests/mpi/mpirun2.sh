#!/bin/sh
# Runs "$@" as two MPI processes on this machine: mpirun -np 2, as root and on fewer cores
# than processes where CI needs it. Without OpenMPI (mpirun from openmpi-bin, libmpi.so.40
# from libopenmpi3) it prints why and exits 77, the tests' skip status.
if ! command -v mpirun >/dev/null 2>&1; then
  echo "SKIP: mpirun not found (install Debian's openmpi-bin and libopenmpi3: scripts/setup.sh)"
  exit 77
fi
if ! ldconfig -p 2>/dev/null | grep -q 'libmpi\.so\.40 '; then
  echo "SKIP: libmpi.so.40 not found (install Debian's libopenmpi3: scripts/setup.sh)"
  exit 77
fi
# Under ASan, OpenMPI's own leaks are suppressed (lsan-openmpi.supp); its components stay loaded
# at MPI_Finalize so their frames can be named.
here=$(cd "$(dirname "$0")" && pwd)
export OMPI_MCA_mca_base_component_disable_dlclose=1
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$here/lsan-openmpi.supp:print_suppressions=0"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
# vader's single-copy mechanism (CMA) needs ptrace rights containers often lack.
exec mpirun -np 2 --allow-run-as-root --oversubscribe --mca btl_vader_single_copy_mechanism none "$@"
