#!/usr/bin/env bash
# Multi-process tests of `cclab train --backend gloo` under `cclab launch`,
# run by CTest (label `loopback`). Modes:
#   equiv CCLAB N ALGO DIR   N gloo workers x batch 8 against 1 worker x batch
#                            8N (weights within 1e-5, see trainer_test.cc for
#                            the derivation) and against N threads workers
#                            (bitwise: same schedule, same summation order)
#   kill-resume CCLAB DIR    SIGKILL worker 1 mid-epoch: the chief stops with
#                            an error naming it; a relaunch resumes from the
#                            backup and ends with the uninterrupted run's hash
#   cut-resume CCLAB DIR     the same across 2 emulated hosts of 2 workers
#                            (scripts/emulate-hosts; root only, else skipped),
#                            host 1's link cut 0.3 s after the first backup:
#                            every worker fails naming a peer (a timeout, or
#                            a worker of its own host that ended first), and a
#                            relaunch resumes to the same hash as an uncut run
set -euo pipefail

mode=$1
shift

# Max |a - b| over the weights of two checkpoints (format: checkpoint.h),
# read independently of the C++ code; also how far `a` is from `start`.
compare_weights() {
  python3 - "$@" <<'PY'
import struct, sys
def weights(path):
    b = open(path, 'rb').read()
    assert b[:8] == b'CCLABCKP', path
    (meta,) = struct.unpack_from('<Q', b, 8)
    (n,) = struct.unpack_from('<Q', b, 16 + meta)
    return struct.unpack_from('<%df' % n, b, 24 + meta)
a, b = weights(sys.argv[1]), weights(sys.argv[2])
assert len(a) == len(b), (len(a), len(b))
print('%.3g' % max(abs(x - y) for x, y in zip(a, b)))
PY
}

final_of() { grep -o "final step=.*" "$1" | tail -1; }
hash_of() { final_of "$1" | sed 's/.*weights_sha256=//'; }

# DIR/resumed.out must resume from a backup and end as DIR/ref.out, the run
# that was not interrupted; sets fail=1 where not.
expect_resumed() {
  cat "$1/resumed.out"
  grep -Eq "^\[0\] resumed from step [1-9][0-9]*, epoch [0-9]+$" "$1/resumed.out" ||
    { echo "FAIL: no 'resumed from step K, epoch E' line"; fail=1; }
  echo "uninterrupted: $(final_of "$1/ref.out")"
  echo "resumed:       $(final_of "$1/resumed.out")"
  [[ $(final_of "$1/ref.out") == $(final_of "$1/resumed.out") ]] ||
    { echo "FAIL: resumed run ends differently from the uninterrupted one"; fail=1; }
}

case $mode in
  equiv)
    cclab=$1 n=$2 algo=$3 dir=$4
    rm -rf "$dir" && mkdir -p "$dir"
    "$cclab" train --make-data "$dir/data" >/dev/null
    common=(--data "$dir/data" --epochs 1 --shard-policy data --optimizer sgd --lr 0.05
      --hidden 64,32 --seed 3 --bucket-mb 0.01 --timeout-ms 20000)
    timeout 120 "$cclab" launch -n "$n" -- "$cclab" train --backend gloo --algo "$algo" \
      --per-replica-batch 8 --model-dir "$dir/gloo" "${common[@]}" >"$dir/gloo.out" 2>&1 ||
      { cat "$dir/gloo.out"; echo "FAIL: gloo run"; exit 1; }
    "$cclab" train --ranks "$n" --algo "$algo" --per-replica-batch 8 "${common[@]}" >"$dir/threads.out"
    "$cclab" train --ranks 1 --per-replica-batch $((8 * n)) --model-dir "$dir/one" \
      "${common[@]}" >"$dir/one.out"
    cat "$dir/gloo.out"
    fail=0
    [[ $(hash_of "$dir/gloo.out") == $(hash_of "$dir/threads.out") ]] ||
      { echo "FAIL: gloo and threads replicas differ: $(final_of "$dir/threads.out")"; fail=1; }
    diff=$(compare_weights "$dir"/gloo/ckpt-*.cclab "$dir"/one/ckpt-*.cclab)
    echo "max |w_gloo${n} - w_1| = $diff (tolerance 1e-5)"
    python3 -c "import sys; sys.exit(0 if float('$diff') <= 1e-5 else 1)" ||
      { echo "FAIL: $n gloo workers differ from 1 worker with batch $((8 * n)) by $diff"; fail=1; }
    steps=$(final_of "$dir/one.out" | cut -d' ' -f2)
    [[ $(final_of "$dir/gloo.out" | cut -d' ' -f2) == "$steps" ]] ||
      { echo "FAIL: the runs took different step counts ($steps for 1 worker)"; fail=1; }
    ((fail)) || rm -rf "$dir"
    exit $fail
    ;;
  kill-resume)
    cclab=$1 dir=$2
    rm -rf "$dir" && mkdir -p "$dir"
    "$cclab" train --make-data "$dir/data" >/dev/null
    args=(train --backend gloo --data "$dir/data" --epochs 3 --per-replica-batch 16 --hidden 256,256
      --seed 5 --save-every 20 --timeout-ms 5000)
    timeout 150 "$cclab" launch -n 2 -- "$cclab" "${args[@]}" --backup-dir "$dir/backup_ref" \
      >"$dir/ref.out" 2>&1 || { cat "$dir/ref.out"; echo "FAIL: uninterrupted run"; exit 1; }

    timeout 150 "$cclab" launch -n 2 -- "$cclab" "${args[@]}" --backup-dir "$dir/backup" \
      >"$dir/killed.out" 2>&1 &
    launcher=$!
    for _ in $(seq 300); do  # until the first backup exists
      compgen -G "$dir/backup/ckpt-*.cclab" >/dev/null && break
      sleep 0.05
    done
    victim=""
    for child in $(pgrep -P "$(pgrep -P "$launcher" -d ,)" -d ' ' 2>/dev/null || true); do
      tr '\0' '\n' <"/proc/$child/environ" 2>/dev/null | grep -qx "RANK=1" && victim=$child
    done
    [[ -n $victim ]] || { kill "$launcher"; wait "$launcher" || true; cat "$dir/killed.out";
      echo "FAIL: worker 1 not found running"; exit 1; }
    kill -9 "$victim"
    status=0
    wait "$launcher" || status=$?
    cat "$dir/killed.out"
    fail=0
    ((status != 0 && status != 124)) || { echo "FAIL: killed run exited $status"; fail=1; }
    grep -Eq "^\[0\] cclab: .*lost rank 1" "$dir/killed.out" ||
      { echo "FAIL: the chief did not name the lost worker"; fail=1; }
    grep -q "final step" "$dir/killed.out" && { echo "FAIL: killed run finished"; fail=1; }

    timeout 150 "$cclab" launch -n 2 -- "$cclab" "${args[@]}" --backup-dir "$dir/backup" \
      >"$dir/resumed.out" 2>&1 || { cat "$dir/resumed.out"; echo "FAIL: relaunch"; exit 1; }
    expect_resumed "$dir"
    ((fail)) || rm -rf "$dir"
    exit $fail
    ;;
  cut-resume)
    cclab=$1 dir=$2
    "$(dirname "$0")/../scripts/emulate-hosts" --probe 2>/dev/null ||
      { echo "SKIP: emulating hosts needs root and ip netns"; exit 77; }
    rm -rf "$dir" && mkdir -p "$dir"
    "$cclab" train --make-data "$dir/data" >/dev/null
    args=(train --backend gloo --data "$dir/data" --epochs 3 --per-replica-batch 16 --hidden 256,256
      --seed 5 --save-every 10 --timeout-ms 3000)
    hosts=("$(dirname "$0")/../scripts/emulate-hosts" --hosts 2 --ranks-per-host 2 --timeout 100)
    timeout 150 "${hosts[@]}" -- "$cclab" "${args[@]}" --backup-dir "$dir/backup_ref" \
      >"$dir/ref.out" 2>&1 || { cat "$dir/ref.out"; echo "FAIL: uncut run"; exit 1; }
    # The first backup comes after 10 of the 384 steps; 0.3 s later the
    # workers are well inside the run, however fast the machine.
    status=0
    timeout 150 "${hosts[@]}" --grace 10 --cut 1@0.3 --cut-after "$dir/backup/ckpt-*.cclab" \
      -- "$cclab" "${args[@]}" --backup-dir "$dir/backup" >"$dir/cut.out" 2>&1 || status=$?
    cat "$dir/cut.out"
    fail=0
    ((status == 1)) || { echo "FAIL: the cut run exited $status (expected 1: a worker failed)"; fail=1; }
    grep -q "final step" "$dir/cut.out" && { echo "FAIL: the cut run finished"; fail=1; }
    for r in 0 1 2 3; do
      grep -Eq "^\[$r\] cclab: training stopped in step [0-9]+ \(epoch [0-9]+\): rank $r: (timed out after 3000 ms in .*waiting for rank [0-3]$|lost rank [0-3] )" "$dir/cut.out" ||
        { echo "FAIL: worker $r did not fail naming a peer"; fail=1; }
    done
    timeout 150 "${hosts[@]}" -- "$cclab" "${args[@]}" --backup-dir "$dir/backup" \
      >"$dir/resumed.out" 2>&1 || { cat "$dir/resumed.out"; echo "FAIL: relaunch"; exit 1; }
    expect_resumed "$dir"
    ((fail)) || rm -rf "$dir"
    exit $fail
    ;;
  *)
    echo "loopback_test.sh: unknown mode '$mode'" >&2
    exit 2
    ;;
esac
