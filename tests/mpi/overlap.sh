#!/bin/sh
# Overlap across processes: an all-reduce the pipeline makes asynchronous runs on 2 host
# devices in 2 processes (one each, under mpirun) with custom calls around it. Replica 1's
# call before the all-reduce (a gate) waits until replica 0's call after the all-reduce-start
# (a signal, scheduled between start and done) has created a flag file. Only a start that
# returns before its peer arrives lets that happen: a start that ran the whole collective over
# MPI held replica 0 until replica 1 arrived, and the gate gives up after 20 s. The results
# must then equal one process's. Then three async collectives open at once across them.
#   overlap.sh KILN_RUN HANDLER_LIB (exit 77 without OpenMPI)
set -u
run=$1 lib=$2
here=$(dirname "$0")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/overlap.hlo" <<'HLO'
HloModule overlap, replica_count=2

red {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}

ENTRY e {
  x = f32[8] parameter(0)
  rid = u32[] replica-id()
  g = f32[8] custom-call(x, rid), custom_call_target="kiln_mpi_test_gate", api_version=API_VERSION_STATUS_RETURNING, custom_call_has_side_effect=true
  ar = f32[8] all-reduce(g), replica_groups={{0,1}}, to_apply=red
  y = f32[8] custom-call(x), custom_call_target="kiln_mpi_test_signal", api_version=API_VERSION_STATUS_RETURNING, custom_call_has_side_effect=true
  ROOT t = (f32[8], f32[8]) tuple(ar, y)
}
HLO
# The schedule this relies on: the gate, the start, the signal, the done, in that order.
order=$("$run" --direct --backend=host --host-devices=2 --thunks --compile-only \
  --ffi=kiln_mpi_test_gate="$lib":legacy=kiln_mpi_test_gate \
  --ffi=kiln_mpi_test_signal="$lib":legacy=kiln_mpi_test_signal "$tmp/overlap.hlo" 2>&1 |
  sed -n 's/^ *\(custom-call\|collective\) \([^ ]*\) \([^ ]*\).*/\2 \3/p' | tr '\n' ' ')
case $order in
  *'g "kiln_mpi_test_gate" all-reduce-start all-reduce-start y "kiln_mpi_test_signal" all-reduce-start all-reduce-done'*) ;;
  *) echo "FAIL: the schedule is not gate, start, signal, done: $order"; exit 1 ;;
esac
ffi="--ffi=kiln_mpi_test_gate=$lib:legacy=kiln_mpi_test_gate --ffi=kiln_mpi_test_signal=$lib:legacy=kiln_mpi_test_signal"
# The expected outputs: one process, both replicas (no flag needed: the gate waits there too,
# for a flag that replica 0 creates in the same process).
KILN_TEST_FLAG="$tmp/flag1" "$run" --direct --backend=host --host-devices=2 $ffi --values=8 \
  "$tmp/overlap.hlo" >"$tmp/one.txt" 2>&1 || { cat "$tmp/one.txt"; echo "FAIL: one process"; exit 1; }
start=$(date +%s)
KILN_TEST_FLAG="$tmp/flag2" "$here/mpirun2.sh" sh -c 'exec "$@" >"$0.$OMPI_COMM_WORLD_RANK" 2>&1' \
  "$tmp/two" "$run" --direct --mpi --backend=host --host-devices=2 $ffi --values=8 \
  "$tmp/overlap.hlo" >"$tmp/mpirun.txt" 2>&1
rc=$?
took=$(($(date +%s) - start))
cat "$tmp/mpirun.txt" "$tmp"/two.[0-9]* >"$tmp/two.txt" 2>/dev/null
if [ $rc -eq 77 ]; then cat "$tmp/two.txt"; exit 77; fi
if [ $rc -ne 0 ]; then cat "$tmp/two.txt"; echo "FAIL: the two-process run failed ($rc, ${took} s)"; exit 1; fi
grep -E '^r[0-9]+p[0-9]+\.out[0-9]+ ' "$tmp/one.txt" | sort >"$tmp/one.out"
grep -E '^r[0-9]+p[0-9]+\.out[0-9]+ ' "$tmp/two.txt" | sort >"$tmp/two.out"
cat "$tmp/two.out"
test -s "$tmp/one.out" || { cat "$tmp/one.txt"; echo "FAIL: no outputs"; exit 1; }
diff "$tmp/one.out" "$tmp/two.out" || { echo "FAIL: outputs differ from one process"; exit 1; }
echo "replica 1 passed its gate while replica 0's all-reduce was under way across processes (${took} s)"

# Three async collectives across the processes open at once (all-reduce, all-gather and
# collective-permute starts, then their dones): each participant's later MPI collective waits
# for its earlier ones, so their messages cannot cross; three runs, each equal to one process.
cat > "$tmp/crossed.hlo" <<'HLO'
HloModule crossed, replica_count=2

red {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}

ENTRY e {
  x = f32[4096] parameter(0)
  z = f32[2048] parameter(1)
  ar = f32[4096] all-reduce(x), replica_groups={{0,1}}, to_apply=red
  ag = f32[4096] all-gather(z), dimensions={0}, replica_groups={{0,1}}
  cp = f32[2048] collective-permute(z), source_target_pairs={{0,1},{1,0}}
  ROOT t = (f32[4096], f32[4096], f32[2048]) tuple(ar, ag, cp)
}
HLO
"$run" --direct --backend=host --host-devices=2 --participant-seeds "$tmp/crossed.hlo" \
  >"$tmp/c1.txt" 2>&1 || { cat "$tmp/c1.txt"; echo "FAIL: crossed, one process"; exit 1; }
grep -E '^r[0-9]+p[0-9]+\.out[0-9]+ ' "$tmp/c1.txt" | sort >"$tmp/c1.out"
for i in 1 2 3; do
  rm -f "$tmp"/c2.[0-9]*
  "$here/mpirun2.sh" sh -c 'exec "$@" >"$0.$OMPI_COMM_WORLD_RANK" 2>&1' "$tmp/c2" \
    "$run" --direct --mpi --backend=host --host-devices=2 --participant-seeds \
    "$tmp/crossed.hlo" >"$tmp/cm.txt" 2>&1 ||
    { cat "$tmp/cm.txt" "$tmp"/c2.[0-9]*; echo "FAIL: crossed, two processes, run $i"; exit 1; }
  cat "$tmp"/c2.[0-9]* | grep -E '^r[0-9]+p[0-9]+\.out[0-9]+ ' | sort >"$tmp/c2.out"
  diff "$tmp/c1.out" "$tmp/c2.out" || { echo "FAIL: crossed, run $i differs"; exit 1; }
done
echo "three async collectives open at once across processes: 3 runs equal one process's"
