#!/usr/bin/env bash
# Multi-process tests of the gloo backend over 127.0.0.1, run by CTest
# (label `loopback`). Modes:
#   run CCLAB N ALGO [RENDEZVOUS [FLAGS]]  all-reduce sweep with --check 1 under
#                                  `cclab launch -n N` (RENDEZVOUS "": the default;
#                                  FLAGS: more bench flags); exit 0 proves #wrong == 0
#   redis-run CCLAB N ALGO DIR     the same through the Redis server that
#                                  `redis-start DIR` left in DIR
#   peers CCLAB N [FLAGS]          ours and every Gloo peer, checked, with --compare
#                                  (and FLAGS); bcube must be a skipped row at odd N;
#                                  with --timing span the header must keep it
#   connections CCLAB N            --connections shared, then row: rank 0's most open
#                                  sockets must be (N-1) per set of connections: the
#                                  world's, then ours and the peers', or one per row
#   fault CCLAB N [EAGER [SIZE]]   kill -9 one rank mid-run: launch and the
#                                  survivors must fail, naming it, without hanging
#   stall CCLAB N [EAGER [SIZE]]   SIGSTOP one rank mid-run: the survivors must time
#                                  out naming it, and launch must not leave it behind
#                                  (SIZE: each all-reduce's, default 64K; 16M sends
#                                  its messages as 1 MiB segments)
#   never-joins CCLAB              2 of 3 ranks start: both fail within the timeout
#                                  naming rank 2
#   spawn-refused CCLAB            launch -n 4 where the system refuses a rank's pipes
#                                  (open files used up): launch must name that rank,
#                                  stop the ranks it started at once and exit 1
#   env CCLAB CONVENTION N         N ranks started by hand (no launch) with
#                                  TF_CONFIG or OMPI_COMM_WORLD_* as their identity
#   dtypes CCLAB N                 every algorithm for every dtype (and op avg, max)
#   collectives CCLAB N            reduce-scatter, all-gather and broadcast (root N-1),
#                                  every algorithm, out of place and in place, checked
#   mpi CCLAB N                    ours and Open MPI's MPI_Allreduce (--algo all,mpi) under
#                                  mpirun, MPI on shared memory and loopback only
#   mpi-mismatch CCLAB             3 ranks under mpirun whose RANK swaps 0 and 1: every
#                                  rank must fail naming both numberings, no hang
#   mpi-absent CCLAB REASON        --algo all,mpi under cclab launch (no mpirun): the mpi
#                                  rows are skipped with REASON
#   hosts CCLAB                    4 ranks on 2 hosts emulated by scripts/emulate-hosts
#                                  (network namespaces, 1gbit between them): checked
#                                  rows, groups of 2 from TF_CONFIG's hosts, and auto
#                                  choosing by the grouped rule (needs root, else skipped)
#   partition CCLAB SIZE           the same 2 hosts; host 1's link is cut mid-run, so
#                                  no peer sees a connection close: every rank must
#                                  fail naming a peer (a timeout naming the rank it
#                                  waits for, or a peer of its own host that ended
#                                  first), and some rank must name one across the
#                                  cut (needs root)
#   memory CCLAB N                 launch -n N of a sweep whose buffers cannot fit any
#                                  machine: every rank must refuse it naming
#                                  -e/--maxbytes and counting the N ranks of this
#                                  host, and launch must exit 2 without a hang
#   redis-start DIR | redis-stop DIR   the Redis fixture (a free port on 127.0.0.1)
# Exit 77 means skipped (CTest SKIP_RETURN_CODE).
set -euo pipefail

mode=$1
shift

# mpirun_local N ARGS...: mpirun with N ranks on this machine, MPI confined to
# shared memory (btl self,vader) and its daemons to loopback; the gloo side
# meets through a file store in $dir and binds to 127.0.0.1.
mpirun_local() {
  local n=$1
  shift
  timeout 120 mpirun --allow-run-as-root --oversubscribe -n "$n" \
    --mca btl self,vader --mca oob_tcp_if_include lo \
    -x CCLAB_RENDEZVOUS="file:$dir/store" -x CCLAB_BIND=127.0.0.1 "$@"
}

need_mpirun() {
  if ! command -v mpirun >/dev/null; then
    echo "SKIP: mpirun not installed (Debian: openmpi-bin; scripts/setup installs it)"
    exit 77
  fi
}

# find_rank LAUNCHER_PID R: the pid of rank R of the `timeout cclab launch` job
# LAUNCHER_PID (a grandchild with RANK=R in its environment); empty if it
# does not appear within 20 s.
find_rank() {
  local child
  for _ in $(seq 200); do
    for child in $(pgrep -P "$(pgrep -P "$1" -d ,)" -d ' ' 2>/dev/null || true); do
      if tr '\0' '\n' <"/proc/$child/environ" 2>/dev/null | grep -qx "RANK=$2"; then
        echo "$child"
        return
      fi
    done
    sleep 0.1
  done
}

# expect_checked_table FILE [N]: rank 0's table in FILE (with or without
# launch's "[0] " prefix) reports N ranks, when N is given, and #wrong 0;
# otherwise says why and sets fail=1.
expect_checked_table() {
  if [[ $# -ge 2 ]] && ! grep -qF "# cclab bench: backend gloo, ranks $2," "$1"; then
    echo "FAIL: rank 0 did not report $2 ranks"
    fail=1
  fi
  grep -qF "# #wrong total: 0 (OK)" "$1" || { echo "FAIL: no #wrong total 0"; fail=1; }
}

# Exits 77 (skipped) unless network namespaces can be made here.
need_netns() {
  "$(dirname "$0")/../scripts/emulate-hosts" --probe 2>/dev/null ||
    { echo "SKIP: emulating hosts needs root and ip netns"; exit 77; }
}

bench_args=(bench --backend gloo -b 1K -e 256K -f 8 -n 2 -w 1 --check 1 --timeout-ms 20000)

case $mode in
  run)
    cclab=$1 n=$2 algo=$3
    rdzv=()
    [[ $# -ge 4 && -n $4 ]] && rdzv=(--rendezvous "$4")
    exec timeout 120 "$cclab" launch -n "$n" "${rdzv[@]}" -- "$cclab" "${bench_args[@]}" --algo "$algo" \
      "${@:5}"
    ;;
  eager)
    # Every algorithm with --eager LIMIT (0: every message through Gloo's
    # rendezvous), at sizes on both sides of the default 256K limit.
    cclab=$1 n=$2 limit=$3
    exec timeout 120 "$cclab" launch -n "$n" -- "$cclab" "${bench_args[@]}" -e 1M -f 32 \
      --algo all --eager "$limit"
    ;;
  peers)
    cclab=$1 n=$2
    shift 2  # the rest: extra bench flags (e.g. --inplace --interleave)
    out=$(mktemp)
    status=0
    peers=gloo-ring,gloo-ring-chunked,gloo-hd,gloo-bcube,gloo-fn-ring,gloo-fn-bcube
    # At 4 ranks Gloo's own AllreduceBcube intermittently returns wrong sums
    # under load (about one row in eight runs; it never waits for its sends),
    # so its correctness is not a property of ours to gate on there.
    ((n == 4)) && peers=${peers/gloo-bcube,/}
    # The stream reference row rides along: checked by what arrived.
    timeout 120 "$cclab" launch -n "$n" -- "$cclab" "${bench_args[@]}" -e 64K --compare \
      --algo "all,$peers,stream" "$@" >"$out" 2>&1 || status=$?
    cat "$out"
    fail=0
    ((status == 0)) || { echo "FAIL: exit status $status"; fail=1; }
    expect_checked_table "$out"
    (($(grep -c "^\[0\] # compare .* ratio [0-9.]*x.*, stream [0-9.]* us (ours" "$out") == 3)) ||
      { echo "FAIL: expected 3 compare lines (1K, 8K, 64K), each with the stream's time"; fail=1; }
    (($(grep -Ec "^\[0\] +[0-9]+ +[0-9]+ +[a-z0-9]+ +sum +stream +[0-9.]+ +[0-9.]+ +[0-9.]+ +0 " "$out") == 3)) ||
      { echo "FAIL: expected 3 checked stream rows"; fail=1; }
    if [[ " $* " == *" -d f16 "* ]] &&
      ! grep -Eq "^\[0\] +[0-9]+ +[0-9]+ +f16 +sum +gloo-ring +[0-9.]+ +[0-9.]+ +[0-9.]+ +0 " "$out"; then
      echo "FAIL: no checked f16 gloo-ring row"
      fail=1
    fi
    # Ranks on one kernel keep --timing span (the header says so).
    if [[ " $* " == *" --timing span "* ]] && ! grep -qF ", timing span (" "$out"; then
      echo "FAIL: --timing span not in the header"
      fail=1
    fi
    if ((n % 2 == 1)); then
      grep -q "gloo-bcube  skipped: gloo::AllreduceBcube needs an even rank count" "$out" ||
        { echo "FAIL: bcube not skipped at $n ranks"; fail=1; }
    elif ((n == 2)); then
      grep -Eq "gloo-bcube +[0-9.]+ +[0-9.]+ +[0-9.]+ +0 +[0-9.]+ +[0-9.]+$" "$out" ||
        { echo "FAIL: no checked bcube row at $n ranks"; fail=1; }
      # cpu(us), summed over the rank processes, is never zero.
      awk '$6 == "gloo-bcube" && !($(NF - 1) > 0) { bad = 1 } END { exit bad }' "$out" ||
        { echo "FAIL: a gloo-bcube row without cpu time"; fail=1; }
    fi
    rm -f "$out"
    exit $fail
    ;;
  connections)
    cclab=$1 n=$2
    fail=0
    for layout in shared row; do
      out=$(mktemp)
      timeout 120 "$cclab" launch -n "$n" -- "$cclab" "${bench_args[@]}" --connections "$layout" \
        --algo ring,direct,gloo-ring,gloo-hd -e 64K -n 100 >"$out" 2>&1 &
      job=$!
      most=0
      rank0=$(find_rank "$job" 0)
      # Rows keep their connections to the end of the sweep, so the most
      # sockets seen at once is the count of them all.
      while [[ -n $rank0 ]] && kill -0 "$rank0" 2>/dev/null; do
        # (find fails once the rank has exited; so does the pipeline)
        now=$({ find "/proc/$rank0/fd" -lname 'socket:*' 2>/dev/null || true; } | wc -l)
        ((now > most)) && most=$now
        sleep 0.02
      done
      status=0
      wait "$job" || status=$?
      cat "$out"
      ((status == 0)) || { echo "FAIL: $layout: exit status $status"; fail=1; }
      expect_checked_table "$out" "$n"
      sets=$([[ $layout == row ]] && echo 4 || echo 2)  # 4 rows; shared: ours, the peers'
      expected=$(((n - 1) * (1 + sets)))                # and the world's
      echo "$layout: rank 0 had at most $most sockets open (expected $expected)"
      ((most == expected)) || { echo "FAIL: $layout: $most sockets, not $expected"; fail=1; }
      rm -f "$out"
    done
    exit "$fail"
    ;;
  hosts)
    cclab=$1
    need_netns
    out=$(mktemp)
    status=0
    timeout 140 "$(dirname "$0")/../scripts/emulate-hosts" --hosts 2 --ranks-per-host 2 \
      --timeout 120 -- "$cclab" "${bench_args[@]}" -f 16 --algo ring,hier,direct,auto \
      >"$out" 2>&1 || status=$?
    cat "$out"
    fail=0
    ((status == 0)) || { echo "FAIL: exit status $status"; fail=1; }
    expect_checked_table "$out" 4
    grep -qF "[0] # check 1, timeout 20000 ms, group size 2 (hier, rings)" "$out" ||
      { echo "FAIL: the ranks were not grouped by host (group size 2)"; fail=1; }
    # 1K and 16K: direct ((ranks-1) x bytes at most 64 KiB); 256K: hier in
    # its fewest chunks, one wave of 4.
    (($(grep -c "^\[0\] #   auto: direct (built-in size rule for ranks in groups of 2" "$out") == 2)) ||
      { echo "FAIL: expected auto to choose direct at 1K and 16K"; fail=1; }
    grep -q "^\[0\] #   auto: hier:4 (built-in size rule for ranks in groups of 2" "$out" ||
      { echo "FAIL: expected auto to choose hier:4 at 256K"; fail=1; }
    rm -f "$out"
    exit "$fail"
    ;;
  hosts-hd)
    # Reduce-scatter's hier with hd between the hosts needs a power of two of
    # them, judged by the hosts, not by the default grouping: 2 hosts of 6
    # run it (the default, groups of 4, would be 3 groups); 3 hosts of 2 skip
    # its rows under --inner all.
    cclab=$1
    need_netns
    out=$(mktemp)
    fail=0
    # run_hosts HOSTS PER_HOST INNER: the sweep on those hosts, checked.
    run_hosts() {
      local status=0
      timeout 140 "$(dirname "$0")/../scripts/emulate-hosts" --hosts "$1" --ranks-per-host "$2" \
        --timeout 120 -- "$cclab" bench --backend gloo --coll reducescatter --algo hier \
        --inner "$3" -b 4K -e 4K -n 2 -w 1 --timeout-ms 20000 >"$out" 2>&1 || status=$?
      cat "$out"
      ((status == 0)) || { echo "FAIL: $1 hosts of $2: exit status $status"; fail=1; }
      expect_checked_table "$out" $(($1 * $2))
    }
    run_hosts 2 6 hd
    grep -qE "^\[0\] +4080 +1020 +f32 +sum +hier/hd +[0-9.]+ " "$out" ||
      { echo "FAIL: 2 hosts of 6: no hier/hd row"; fail=1; }
    run_hosts 3 2 all
    grep -qF "hier/hd  skipped: hd between the groups of reducescatter's hier needs a power-of-two number of groups, got 3 (groups of 2" "$out" ||
      { echo "FAIL: 3 hosts of 2: the hier/hd row was not skipped naming 3 groups"; fail=1; }
    grep -qE "^\[0\] +[0-9]+ +[0-9]+ +f32 +sum +hier +[0-9.]+ " "$out" ||
      { echo "FAIL: 3 hosts of 2: no hier row"; fail=1; }
    rm -f "$out"
    exit "$fail"
    ;;
  partition)
    cclab=$1 size=$2
    need_netns
    out=$(mktemp)
    status=0
    # Ranks 0 1 on host 0, 2 3 on host 1; the cut comes 3 s in, after the
    # rendezvous where the machine is not loaded, while the all-reduces run
    # (3 s collective timeout). On a loaded machine it may come during the
    # set-up: a rank must still fail naming a peer.
    timeout 100 "$(dirname "$0")/../scripts/emulate-hosts" --hosts 2 --ranks-per-host 2 \
      --timeout 60 --grace 10 --cut 1@3 -- "$cclab" bench --backend gloo -b "$size" -e "$size" \
      -n 100000 -w 0 --check 0 --algo ring --timeout-ms 3000 >"$out" 2>&1 || status=$?
    cat "$out"
    fail=0
    ((status == 1)) || { echo "FAIL: expected exit status 1 (a rank failed), got $status"; fail=1; }
    grep -qF "emulate-hosts: cut host 1's link" "$out" || { echo "FAIL: the link was not cut"; fail=1; }
    across=0
    for r in 0 1 2 3; do
      peer=$(sed -nE "s/^\[$r\] cclab: rank $r: (timed out after 3000 ms in .*waiting for rank ([0-9]+)$|lost rank ([0-9]+) .*)/\2\3/p" "$out" | head -1)
      if [[ -z $peer ]]; then
        echo "FAIL: rank $r did not fail naming a peer"
        fail=1
        continue
      fi
      ((r / 2 != peer / 2)) && across=1
    done
    ((across)) || { echo "FAIL: no rank named a peer across the cut"; fail=1; }
    rm -f "$out"
    exit "$fail"
    ;;
  redis-run)
    cclab=$1 n=$2 algo=$3 dir=$4
    if [[ ! -f $dir/port ]]; then
      echo "SKIP: no Redis server (redis-server not installed; scripts/setup installs it)"
      exit 77
    fi
    exec "$0" run "$cclab" "$n" "$algo" "redis://127.0.0.1:$(cat "$dir/port")"
    ;;
  redis-start)
    dir=$1
    # A server an earlier start left (ctest --repeat runs the fixture's setup
    # again; an interrupted run skips its cleanup) stops first.
    [[ -f $dir/pid ]] && kill "$(cat "$dir/pid")" 2>/dev/null || true
    rm -rf "$dir" && mkdir -p "$dir"
    if ! command -v redis-server >/dev/null; then
      echo "SKIP: redis-server not installed"
      exit 0  # the tests that need it skip
    fi
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      port=$((20000 + RANDOM % 20000))
      (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue  # taken
      redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
        --daemonize no --dir "$dir" >"$dir/log" 2>&1 &
      echo $! >"$dir/pid"
      for _ in $(seq 50); do
        if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then
          echo "$port" >"$dir/port"
          echo "redis-server pid $(cat "$dir/pid") on 127.0.0.1:$port"
          exit 0
        fi
        sleep 0.1
      done
      kill "$(cat "$dir/pid")" 2>/dev/null || true
    done
    echo "could not start redis-server; its log:" >&2
    cat "$dir/log" >&2
    exit 1
    ;;
  redis-stop)
    dir=$1
    [[ -f $dir/pid ]] && kill "$(cat "$dir/pid")" 2>/dev/null || true
    rm -rf "$dir"
    ;;
  fault | stall)
    cclab=$1 n=$2
    eager=(--eager "${3:-256K}")  # 0: the rendezvous path
    size=${4:-64K}
    victim=$((n - 1))
    out=$(mktemp)
    # fault: kill -9, a peer that is gone (20 s collective timeout, so the
    # error must come from the broken connection); stall: SIGSTOP, a peer that
    # never answers (3 s timeout). Many iterations: the run is still going
    # when the signal comes.
    signal=KILL timeout_ms=20000 grace_ms=15000
    [[ $mode == stall ]] && signal=STOP timeout_ms=3000 grace_ms=2000
    timeout 120 "$cclab" launch -n "$n" --grace-ms "$grace_ms" -- "$cclab" bench --backend gloo \
      -b "$size" -e "$size" -n 100000 -w 0 --check 0 --algo ring --timeout-ms "$timeout_ms" "${eager[@]}" \
      >"$out" 2>&1 &
    launcher=$!
    pid=$(find_rank "$launcher" "$victim")
    if [[ -z $pid ]]; then
      echo "FAIL: rank $victim never started"
      kill "$launcher" 2>/dev/null || true  # timeout stops launch, launch stops the ranks
      wait "$launcher" || true
      cat "$out"
      exit 1
    fi
    sleep 2  # rendezvous done, collectives under way
    kill -"$signal" "$pid"
    start=$SECONDS
    status=0
    wait "$launcher" || status=$?
    cat "$out"
    fail=0
    ((status != 0 && status != 124)) || { echo "FAIL: launch exited $status"; fail=1; }
    # Rank 0 prints the table's head before the sweep and each row as it
    # comes, so a run that fails keeps what it printed.
    grep -q "^\[0\] # cclab bench: backend gloo" "$out" ||
      { echo "FAIL: rank 0 printed no table head before the failure"; fail=1; }
    if [[ $mode == fault ]]; then
      grep -q "rank $victim (pid $pid) was killed by signal 9" "$out" ||
        { echo "FAIL: launch did not name rank $victim"; fail=1; }
      grep -Eq "^\[[0-9]+\] cclab: .*lost rank $victim" "$out" ||
        { echo "FAIL: no survivor named rank $victim"; fail=1; }
    else
      grep -Eq "^\[[0-9]+\] cclab: rank [0-9]+: timed out after 3000 ms in .*rank $victim" "$out" ||
        { echo "FAIL: no survivor timed out naming rank $victim"; fail=1; }
      # 3 s timeout, 2 s grace, then launch's SIGTERM and SIGKILL of the stopped rank.
      ((SECONDS - start < 60)) || { echo "FAIL: took $((SECONDS - start)) s"; fail=1; }
    fi
    kill -0 "$pid" 2>/dev/null && { echo "FAIL: rank $victim (pid $pid) left running"; fail=1; }
    for child in $(pgrep -P "$launcher" -d ' ' || true); do
      echo "FAIL: process $child of the run still running"
      fail=1
    done
    rm -f "$out"
    exit $fail
    ;;
  memory)
    # 4 TiB all-reduces out of place: 8 TiB of buffers a rank.
    cclab=$1 n=$2
    out=$(mktemp)
    status=0
    timeout 60 "$cclab" launch -n "$n" -- "$cclab" bench --backend gloo -b 4096G -e 4096G -n 1 \
      -w 0 >"$out" 2>&1 || status=$?
    cat "$out"
    fail=0
    ((status == 2)) || { echo "FAIL: launch exited $status (want 2)"; fail=1; }
    want="cclab: -e/--maxbytes: allreduce of 4398046511104 bytes out of place on the $n rank(s) \
this machine holds needs $((n * 8192)).0 GiB, more than this machine's"
    refused=$(grep -cF "$want" "$out" || true)
    # Launch stops the rest once one rank exits, so some may not get to say it.
    ((refused >= 1)) || { echo "FAIL: no rank refused naming -e/--maxbytes and $n ranks"; fail=1; }
    if grep -v "^\[[0-9]*\] cclab: -e/--maxbytes: \|^cclab launch: " "$out"; then
      echo "FAIL: the lines above are neither a refusal nor launch's own"
      fail=1
    fi
    rm -f "$out"
    exit $fail
    ;;
  never-joins)
    cclab=$1
    dir=$(mktemp -d)
    pids=()
    for r in 0 1; do
      RANK=$r WORLD_SIZE=3 CCLAB_RENDEZVOUS=file:$dir CCLAB_BIND=127.0.0.1 timeout 60 \
        "$cclab" bench --backend gloo -b 1K -e 1K -n 1 -w 0 --timeout-ms 2000 >"$dir/out$r" 2>&1 &
      pids+=($!)
    done
    fail=0
    for r in 0 1; do
      status=0
      wait "${pids[$r]}" || status=$?
      cat "$dir/out$r"
      ((status == 1)) || { echo "FAIL: rank $r exited $status (want 1)"; fail=1; }
      grep -q "rank $r: rendezvous .* of 3 ranks failed within 2000 ms: rank(s) 2 never joined" \
        "$dir/out$r" || { echo "FAIL: rank $r did not name rank 2"; fail=1; }
    done
    rm -rf "$dir"
    exit $fail
    ;;
  spawn-refused)
    cclab=$1
    dir=$(mktemp -d)
    # Descriptors 3-35 inherited and at most 40 open: launch's own check (two
    # per rank plus 32) passes, the pipes of rank 1 or 2 do not. Rank 0 would
    # wait 60 s at rendezvous for the missing ranks.
    start=$SECONDS
    status=0
    bash -c 'for fd in $(seq 3 35); do eval "exec $fd</dev/null"; done; ulimit -n 40; exec "$@"' _ \
      timeout 120 "$cclab" launch -n 4 --rendezvous "file:$dir" -- "$cclab" bench --backend gloo \
      -b 1K -e 1K -n 1 -w 0 --timeout-ms 60000 --json "$dir/r.json" >"$dir/out" 2>&1 || status=$?
    cat "$dir/out"
    fail=0
    ((status == 1)) || { echo "FAIL: launch exited $status (want 1)"; fail=1; }
    grep -qE "^cclab launch: cannot start rank [1-3] of 4: pipe: Too many open files; stopping the [1-3] started$" \
      "$dir/out" || { echo "FAIL: launch did not name the rank it could not start"; fail=1; }
    ((SECONDS - start < 30)) || { echo "FAIL: took $((SECONDS - start)) s"; fail=1; }
    if pgrep -f "$dir/r.json" >/dev/null; then  # the ranks' command line names it
      echo "FAIL: ranks left running: $(pgrep -f "$dir/r.json" -d ' ')"
      pkill -9 -f "$dir/r.json" || true
      fail=1
    fi
    rm -rf "$dir"
    exit $fail
    ;;
  env)
    cclab=$1 convention=$2 n=$3
    dir=$(mktemp -d)
    # Two ranks per loopback address (127.0.0.1, 127.0.0.2, ...): with TF_CONFIG
    # each binds to its task's host, and `hier` groups the ranks by host.
    addr() { echo "127.0.0.$(($1 / 2 + 1)):$((23000 + $1))"; }
    workers=()
    for ((r = 1; r < n; r++)); do workers+=("\"$(addr $r)\""); done
    cluster="{\"chief\": [\"$(addr 0)\"], \"worker\": [$(IFS=,; echo "${workers[*]}")]}"
    pids=()
    for ((r = 0; r < n; r++)); do
      case $convention in
        tf_config)
          if ((r == 0)); then task='{"type": "chief", "index": 0}'; else
            task="{\"type\": \"worker\", \"index\": $((r - 1))}"; fi
          identity=(TF_CONFIG="{\"cluster\": $cluster, \"task\": $task}")
          ;;
        ompi)
          identity=(OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=$n
            OMPI_COMM_WORLD_LOCAL_RANK=$r OMPI_COMM_WORLD_LOCAL_SIZE=$n CCLAB_BIND=127.0.0.1)
          ;;
        *) echo "loopback_test.sh: unknown convention '$convention'" >&2; exit 2 ;;
      esac
      env -u RANK -u WORLD_SIZE -u CCLAB_BIND "${identity[@]}" CCLAB_RENDEZVOUS="file:$dir/store" \
        timeout 120 "$cclab" "${bench_args[@]}" --algo all >"$dir/out$r" 2>&1 &
      pids+=($!)
    done
    fail=0
    for ((r = 0; r < n; r++)); do
      status=0
      wait "${pids[$r]}" || status=$?
      ((status == 0)) || { cat "$dir/out$r"; echo "FAIL: rank $r exited $status"; fail=1; }
    done
    cat "$dir/out0"
    expect_checked_table "$dir/out0" "$n"
    if [[ $convention == tf_config ]] && ((n % 2 == 0 && n > 2)); then
      grep -q "group size 2 (hier, rings)" "$dir/out0" || { echo "FAIL: hier not grouped by host"; fail=1; }
    fi
    rm -rf "$dir"
    exit $fail
    ;;
  dtypes)
    cclab=$1 n=$2
    runs=("f64 sum" "f16 sum" "bf16 sum" "i32 sum" "i64 prod" "u8 max" "f32 avg" "f32 min")
    for run in "${runs[@]}"; do
      read -r dtype op <<<"$run"
      echo "== $dtype $op"
      timeout 120 "$cclab" launch -n "$n" -- "$cclab" "${bench_args[@]}" -e 8K --algo all \
        --dtype "$dtype" --op "$op" || { echo "FAIL: $dtype $op"; exit 1; }
    done
    ;;
  collectives)
    cclab=$1 n=$2
    for coll in reducescatter allgather broadcast; do
      for place in "" --inplace; do
        echo "== $coll $place"
        out=$(mktemp)
        # --group-size 2 at 4 ranks: rings runs two rings, hier two groups
        # (on one host the default, a group of all ranks, makes each the ring).
        timeout 120 "$cclab" launch -n "$n" -- "$cclab" "${bench_args[@]}" --coll "$coll" \
          --root $((n - 1)) --algo all $place $( ((n % 2 == 0)) && echo --group-size 2) \
          >"$out" 2>&1 || { cat "$out"; echo "FAIL: $coll $place"; exit 1; }
        fail=0
        expect_checked_table "$out" "$n"
        # Every algorithm at 1K, 8K and 64K: ring, hd, direct, rings, hier and
        # biring (reduce-scatter, all-gather); ring, tree, hd, rings and biring
        # (broadcast).
        algos=$([[ $coll == broadcast ]] && echo 5 || echo 6)
        rows=$(grep -Ec "^\[0\] +[0-9]+ +[0-9]+ +f32 +(sum|none) +[a-z]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +0 " "$out" || true)
        cat "$out"
        rm -f "$out"
        ((fail == 0)) || exit 1
        ((rows == 3 * algos)) || { echo "FAIL: $rows checked rows, expected $((3 * algos))"; exit 1; }
      done
    done
    ;;
  mpi)
    cclab=$1 n=$2
    need_mpirun
    dir=$(mktemp -d)
    status=0
    # The identity must come from mpirun (OMPI_COMM_WORLD_*), not from these.
    unset RANK WORLD_SIZE TF_CONFIG
    mpirun_local "$n" "$cclab" "${bench_args[@]}" -e 64K --compare --algo all,mpi \
      >"$dir/out" 2>&1 || status=$?
    cat "$dir/out"
    fail=0
    ((status == 0)) || { echo "FAIL: exit status $status"; fail=1; }
    expect_checked_table "$dir/out" "$n"
    # 1K, 8K, 64K: a checked mpi row each (#wrong 0) and a compare line each.
    (($(grep -Ec "^ +[0-9]+ +[0-9]+ +f32 +sum +mpi +[0-9.]+ +[0-9.]+ +[0-9.]+ +0 +[0-9.]+ +[0-9.]+$" "$dir/out") == 3)) ||
      { echo "FAIL: expected 3 checked mpi rows"; fail=1; }
    (($(grep -c "^# compare .* ratio [0-9.]*x" "$dir/out") == 3)) ||
      { echo "FAIL: expected 3 compare lines"; fail=1; }
    rm -rf "$dir"
    exit $fail
    ;;
  mpi-mismatch)
    cclab=$1
    need_mpirun
    dir=$(mktemp -d)
    # RANK wins over Open MPI's variables for the gloo identity: ranks 0 and 1
    # trade places, rank 2 keeps its own (and must still fail with the others).
    cat >"$dir/rank.sh" <<EOS
#!/usr/bin/env bash
r=\$OMPI_COMM_WORLD_RANK
((r < 2)) && r=\$((1 - r))
status=0
RANK=\$r WORLD_SIZE=3 $cclab ${bench_args[*]} -e 1K --algo all,mpi \
  >"$dir/out\$OMPI_COMM_WORLD_RANK" 2>&1 || status=\$?
echo \$status >"$dir/status\$OMPI_COMM_WORLD_RANK"
EOS
    chmod +x "$dir/rank.sh"
    start=$SECONDS
    status=0
    # By default mpirun stops the job when the first rank exits non-zero, which
    # can be before the others have printed; here every rank must be heard (and
    # each rank's own status is checked: mpirun then exits 0).
    mpirun_local 3 --mca orte_abort_on_non_zero_status 0 "$dir/rank.sh" >"$dir/mpirun.out" 2>&1 ||
      status=$?
    fail=0
    ((status != 124)) || { echo "FAIL: mpirun timed out"; fail=1; }
    ((SECONDS - start < 60)) || { echo "FAIL: took $((SECONDS - start)) s"; fail=1; }
    for r in 0 1 2; do
      cat "$dir/out$r"
      [[ $(cat "$dir/status$r" 2>/dev/null) == 1 ]] ||
        { echo "FAIL: MPI rank $r exited '$(cat "$dir/status$r" 2>/dev/null)' (want 1)"; fail=1; }
      g=$r
      ((r < 2)) && g=$((1 - r))
      grep -q "cclab: --algo mpi: MPI_COMM_WORLD must have the gloo communicator's ranks; this process is MPI rank $r of 3 and gloo rank $g of 3" \
        "$dir/out$r" || { echo "FAIL: MPI rank $r did not name both numberings"; fail=1; }
    done
    grep -q "gloo rank 2 of 3, but another process differs" "$dir/out2" ||
      { echo "FAIL: rank 2 did not say that another process differs"; fail=1; }
    rm -rf "$dir"
    exit $fail
    ;;
  mpi-absent)
    cclab=$1 reason=$2
    out=$(mktemp)
    status=0
    env -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_RANK timeout 120 "$cclab" launch -n 2 -- \
      "$cclab" "${bench_args[@]}" -e 64K --compare --algo all,mpi >"$out" 2>&1 || status=$?
    cat "$out"
    fail=0
    ((status == 0)) || { echo "FAIL: exit status $status"; fail=1; }
    expect_checked_table "$out"
    (($(grep -cF "    mpi  skipped: $reason" "$out") == 3)) ||
      { echo "FAIL: expected 3 mpi rows skipped with '$reason'"; fail=1; }
    (($(grep -c "^\[0\] # compare .*: no peer row" "$out") == 3)) ||
      { echo "FAIL: expected 3 compare lines without a peer row"; fail=1; }
    rm -f "$out"
    exit $fail
    ;;
  *)
    echo "loopback_test.sh: unknown mode '$mode'" >&2
    exit 2
    ;;
esac
