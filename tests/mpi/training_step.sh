#!/bin/sh
# A data-parallel training step across two MPI processes, bit for bit with one process.
#   training_step.sh KILN_RUN MODULE N [direct|plugin]
# runs MODULE (a multi-device module of N participants) with kiln-run on N host devices in one
# process, then under mpirun -np 2 (tests/mpi/mpirun2.sh: N/2 participants per process, its
# all-reduces across the processes over MPI), every participant with inputs of its own
# (--participant-seeds: a batch of its own), and compares every participant's every output
# (its printed FNV-1a hash of the bytes, first values and sum). Both runs on the runtime
# directly (direct, the default: kiln-run --direct, the runtime's MPI world) or both through
# the PJRT plugin (plugin: one client with N devices, then one client across the two
# processes, its option mpi). Exit 77 (skip) without OpenMPI or the module.
set -u
run=$1 module=$2 n=$3 mode=${4:-direct}
case $mode in
  direct) how=--direct ;;
  plugin) how= ;;
  *) echo "FAIL: mode '$mode' is not direct or plugin"; exit 1 ;;
esac
here=$(dirname "$0")
if [ ! -f "$module" ]; then
  echo "SKIP: $module not found (the corpus: KILN_CORPUS_DIR)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$run" $how --backend=host --host-devices="$n" --participant-seeds --values=3 "$module" \
  >"$tmp/one.txt" 2>&1 || { cat "$tmp/one.txt"; echo "FAIL: the single-process run failed"; exit 1; }
# Each process writes to a file of its own (OMPI_COMM_WORLD_RANK names it): mpirun forwards the
# two processes' output in chunks that can split a line, so one shared stream interleaves
# mid-line now and then.
"$here/mpirun2.sh" sh -c 'exec "$@" >"$0.$OMPI_COMM_WORLD_RANK" 2>&1' "$tmp/two" \
  "$run" $how --mpi --backend=host --host-devices="$n" --participant-seeds --values=3 \
  "$module" >"$tmp/mpirun.txt" 2>&1
rc=$?
cat "$tmp/mpirun.txt" "$tmp"/two.[0-9]* >"$tmp/two.txt" 2>/dev/null
if [ $rc -eq 77 ]; then cat "$tmp/two.txt"; exit 77; fi
if [ $rc -ne 0 ]; then cat "$tmp/two.txt"; echo "FAIL: the two-process run failed ($rc)"; exit 1; fi
grep -E '^r[0-9]+p[0-9]+\.out[0-9]+ ' "$tmp/one.txt" | sort >"$tmp/one.out"
grep -E '^r[0-9]+p[0-9]+\.out[0-9]+ ' "$tmp/two.txt" | sort >"$tmp/two.out"
grep '^MPI: process' "$tmp/two.txt"
grep -E '^(host devices|ran on|ran through)' "$tmp/one.txt"
grep -E '^ran (on|through)' "$tmp/two.txt"
lines=$(wc -l <"$tmp/one.out")
if [ "$lines" -eq 0 ]; then cat "$tmp/one.txt"; echo "FAIL: no outputs printed"; exit 1; fi
if ! diff "$tmp/one.out" "$tmp/two.out"; then
  echo "FAIL: the two-process outputs differ from the single-process run's"
  exit 1
fi
distinct=$(sed 's/^r[0-9]*p[0-9]*\.//' "$tmp/one.out" | sort -u | wc -l)
echo "$lines output leaves of $n participants across 2 processes equal the single-process run bit for bit ($distinct distinct leaves; $mode)"
