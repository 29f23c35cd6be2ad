#!/usr/bin/env bash
# The documented commands, walked (issue 30): the shell blocks of docs/getting-started.md and of
# the README's PyTorch section run exactly as written, in order, in a fresh clone, and what the
# docs promise at each point is checked. ./run.sh test runs it.
#
#   tests/docs/docs_walk.sh [--head | --overlay PATH...]
#
# The tree under test: this repository's HEAD plus the working tree's uncommitted changes
# (tracked and untracked files git does not ignore; in CI the tree is clean, so it is HEAD);
# --head walks HEAD alone, --overlay PATH... adds only the changes under those paths. It is
# made into a scratch repository and the reader's `git clone <this repository> stagefrontier`
# (getting-started's first block) clones that.
#
# The blocks come from tests/docs/doc_commands.py (its docstring: the <!-- walk: ... -->
# directives a doc puts above a block that cannot run unattended as written; a block needing
# one and lacking it fails the walk). Each block runs with bash -e in the reader's terminal
# state (the directory the previous block left), HOME a directory of the walk's own (the
# README's ~/sf), in private /tmp, /dev/shm and network namespaces (the docs' fixed paths and
# ports clash with nothing; everything started is gone when the walk ends). The walk's state
# stays in $SF_DOCS_WALK_DIR (default ~/.cache/stagefrontier-docs-walk). The clone is made
# afresh every time with a fresh Bazel output base (removed at the end); what makes a second
# walk fast is the reader's ~/.bazelrc, which the walk writes: `build --disk_cache=` a
# directory under the walk's HOME, kept between walks (Bazel's disk cache is keyed by content
# and relative paths, so another clone path hits it: the demo's -c opt targets and the wheel,
# 4.6 min from nothing on 2 cores, took 6 s from it). The first walk on a machine (CI's fresh
# one) builds from nothing.
#
# Prints "//tests/docs:docs_walk PASSED" or "FAILED" last (./run.sh test counts it).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
walk=${SF_DOCS_WALK_DIR:-$HOME/.cache/stagefrontier-docs-walk}
block_timeout=${SF_DOCS_WALK_BLOCK_TIMEOUT:-1200}

verdict() {  # the last line, for ./run.sh test
  echo "docs walk: $1 in $SECONDS s"
  echo "//tests/docs:docs_walk $1"
}

if [ -z "${SF_DOCS_WALK_INSIDE:-}" ]; then
  case "$walk" in /tmp | /tmp/*) echo "SF_DOCS_WALK_DIR must not be under /tmp (made private)" >&2
    verdict FAILED; exit 1 ;; esac
  mkdir -p "$walk"
  exec 9>"$walk/lock"
  flock -n 9 || { echo "docs walk: waiting for another walk to finish"; flock 9; }
  # Private PID, mount and network namespaces: every process the docs start dies with the walk.
  if [ "$(id -u)" = 0 ] && unshare --pid --fork --mount --net --mount-proc true 2>/dev/null; then
    SF_DOCS_WALK_INSIDE=1 exec unshare --pid --fork --mount --net --mount-proc \
      --propagation private "$0" "$@"
  fi
  echo "docs walk: no private namespaces (not root, or unshare refused): the docs' ports," \
    "/tmp and /dev/shm paths are the machine's"
  SF_DOCS_WALK_INSIDE=none
fi

fail_count=0
failures=()
fail() {  # fail DOC BLOCK|- MESSAGE: one failed promise; the walk goes on and fails at the end
  local where="$1, block $2"
  [ "$2" = - ] && where=$1
  failures+=("$where: $(head -n 1 <<<"$3")")
  echo "docs walk: FAIL: $where: $3" >&2
  fail_count=$((fail_count + 1))
}

# --- the tree under test, as a repository to clone ---------------------------------------
mode=worktree
overlay=(.)
case "${1:-}" in
  --head) mode=head; overlay=() ;;
  --overlay) shift; overlay=("$@"); [ $# -gt 0 ] || { echo "--overlay needs paths" >&2; exit 2; } ;;
  "") ;;
  *) sed -n '2,10p' "$0" >&2; exit 2 ;;
esac
home="$walk/home"
origin="$walk/origin"
rm -rf "$origin" "$walk/tmp" "$walk/logs" "$home/stagefrontier" "$home/sf"
mkdir -p "$home" "$walk/tmp" "$walk/logs"
git -c advice.detachedHead=false clone -q --no-hardlinks "$root" "$origin" \
  && git -C "$origin" checkout -q -B main || { verdict FAILED; exit 1; }  # (CI may be detached)
if [ ${#overlay[@]} -gt 0 ]; then
  changed=$(cd "$root" && { git diff --name-only --diff-filter=d HEAD -- "${overlay[@]}"
    git ls-files -o --exclude-standard -- "${overlay[@]}"; })  # staged or not, and new files
  deleted=$(cd "$root" && git diff --name-only --diff-filter=D HEAD -- "${overlay[@]}")
  if [ -n "$changed$deleted" ]; then
    (cd "$root" && printf '%s\n' $changed | tar -cf - -T - 2>/dev/null) | tar -xf - -C "$origin"
    for f in $deleted; do rm -f "$origin/$f"; done
    git -C "$origin" add -A
    git -C "$origin" -c user.name="docs walk" -c user.email=docs-walk@localhost commit -q \
      -m "docs walk: the working tree's uncommitted changes"
    echo "docs walk: HEAD $(git -C "$root" rev-parse --short HEAD) plus the working tree's changes to:"
    printf '  %s\n' $changed $deleted
  else
    echo "docs walk: HEAD $(git -C "$root" rev-parse --short HEAD) (no uncommitted changes under ${overlay[*]})"
  fi
else
  echo "docs walk: HEAD $(git -C "$root" rev-parse --short HEAD) ($mode)"
fi

if [ "$SF_DOCS_WALK_INSIDE" = 1 ]; then
  ip link set lo up
  mount --bind "$walk/tmp" /tmp
  mount -t tmpfs -o size=4g tmpfs /dev/shm
fi

# The reader's environment: a HOME of the walk's own (its ~/.bazelrc names the disk cache kept
# between walks), nothing from a test harness.
export HOME="$home"
disk_cache="$HOME/.cache/bazel-disk"
[ "$(du -sm "$disk_cache" 2>/dev/null | cut -f1)" -gt 4096 ] 2>/dev/null && rm -rf "$disk_cache"
echo "build --disk_cache=$disk_cache" >"$HOME/.bazelrc"
unset PYTHONPATH LD_PRELOAD TEST_TMPDIR TEST_SRCDIR RUNFILES_DIR
clone="$HOME/stagefrontier"  # where getting-started's `git clone ... stagefrontier` puts it
state="$walk/logs"

# run_block DOC N: runs block N of DOC's extracted list ($state/blocks.json) in the reader's
# current directory ($state/cwd); a background block is left running (pid in BG_PIDS).
BG_PIDS=()
BG_NAMES=()
run_block() {
  local doc=$1 n=$2 json=$3 text directive line lang script log cwd rc fixture src
  text=$(jq -r .text <<<"$json")
  directive=$(jq -r .directive <<<"$json")
  line=$(jq -r .line <<<"$json")
  lang=$(jq -r .lang <<<"$json")
  cwd=$(cat "$state/cwd")
  echo
  echo "== $doc, block $n (line $line, $directive):"
  sed 's/^/   | /' <<<"$text"
  if [ "$directive" = skip ]; then
    echo "   (skipped: $(jq -r .reason <<<"$json"))"
    return 0
  fi
  while read -r p; do  # placeholders: the walk's values
    [ -n "$p" ] || continue
    local name value
    name=$(jq -r --arg p "$p" '.placeholders[$p]' <<<"$json")
    case "$name" in
      repository) value=$origin ;;
      *) fail "$doc" "$n" "placeholder $p = $name: the walk has no value named $name"; return 1 ;;
    esac
    echo "   ($p is $value)"
    text=${text//"$p"/$value}
  done < <(jq -r '.placeholders | keys[]' <<<"$json")
  while read -r fixture; do  # fixtures: the reader's own files
    [ -n "$fixture" ] || continue
    src=$(jq -r --arg f "$fixture" '.fixtures[$f]' <<<"$json")
    echo "   ($fixture is $src)"
    cp "$origin/$src" "$cwd/$fixture" || { fail "$doc" "$n" "fixture $src"; return 1; }
  done < <(jq -r '.fixtures | keys[]' <<<"$json")
  script="$state/${doc//\//_}.$n.sh"
  log="$state/${doc//\//_}.$n.log"
  # The block's text verbatim after a 4-line header; a failing command names its doc line.
  {
    echo "set -e"
    echo "trap 'echo \"docs walk: $doc, block $n, line \$((LINENO + $((line - 4)))): exit status \$? from: \$BASH_COMMAND\" >&2' ERR"
    printf 'cd %q\n' "$cwd"
    echo "# --- $doc, block $n, line $line ($lang)"
    printf '%s\n' "$text"
    printf 'pwd >%q\n' "$state/cwd"
  } >"$script"
  if [ "$directive" = background ]; then
    set -m  # its own process group, SIGINT not ignored: Ctrl-C reaches it as in a terminal
    bash "$script" </dev/null >"$log" 2>&1 &
    local pid=$!
    set +m
    sleep 3
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid"
      fail "$doc" "$n" "exited (status $?) instead of running: $(tail -n 5 "$log")"
      return 1
    fi
    echo "   (running in the background, pid $pid; log $log)"
    BG_PIDS+=("$pid")
    BG_NAMES+=("$doc, block $n")
    return 0
  fi
  timeout -k 10 "$block_timeout" bash "$script" </dev/null 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] && return 0
  [ "$rc" = 124 ] && fail "$doc" "$n" "did not finish in $block_timeout s (a server? mark it <!-- walk: background -->)" \
    || fail "$doc" "$n" "exit status $rc ($(grep -m1 '^docs walk: ' "$log" || tail -n 1 "$log"))"
  return 1
}

# stop_background DOC: Ctrl-C (SIGINT to the process group) to each background block, last
# started first; each must exit with status 0 within 30 s ("they flush and exit").
stop_background() {
  local i pid rc
  for ((i = ${#BG_PIDS[@]} - 1; i >= 0; i--)); do
    pid=${BG_PIDS[$i]}
    kill -INT -- "-$pid" 2>/dev/null
    rc=
    for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      kill -KILL -- "-$pid" 2>/dev/null
      fail "${BG_NAMES[$i]%%, block*}" "${BG_NAMES[$i]##*block }" "still running 30 s after Ctrl-C"
    else
      wait "$pid"; rc=$?
      [ "$rc" = 0 ] && echo "   (${BG_NAMES[$i]}: stopped with Ctrl-C, exit status 0)" \
        || fail "${BG_NAMES[$i]%%, block*}" "${BG_NAMES[$i]##*block }" "exit status $rc after Ctrl-C"
    fi
  done
  BG_PIDS=()
  BG_NAMES=()
}

# blocks DOC [--section REGEX]: the extracted blocks, one JSON object a line, into $state/blocks.json
blocks() {
  if ! /usr/bin/python3 "$origin/tests/docs/doc_commands.py" "$origin/$1" "${@:2}" \
    >"$state/blocks.json" 2>"$state/extract.err"; then
    sed 's|'"$origin"'/||' "$state/extract.err" >&2
    fail "$1" - "the walk cannot run this doc's blocks as written: $(sed 's|'"$origin"'/||' "$state/extract.err" | sed -n 1,3p)"
    return 1
  fi
  sed -i 's|'"$origin"'/||' "$state/blocks.json"
}

# --- docs/getting-started.md ---------------------------------------------------------------
doc=docs/getting-started.md
echo "$HOME" >"$state/cwd"  # the reader starts in their home directory
seen_demo=0 seen_job=0 walked=1
if blocks "$doc"; then
  n=0
  while IFS= read -r json; do
    n=$((n + 1))
    run_block "$doc" "$n" "$json" || { walked=0; break; }
    text=$(jq -r .text <<<"$json")
    log="$state/${doc//\//_}.$n.log"
    if [[ "$text" == *"./run.sh demo"* ]]; then
      # README and section 1: `sfctl suspects` names data on rank 11 with CLEAR; part 2's
      # capture report names aten::mm.
      seen_demo=1
      out=$(sed -n '/^\$ sfctl suspects --job demo/,/^\$ sfctl health/p' "$log")
      [[ "$out" == *CLEAR* ]] || fail "$doc" "$n" "./run.sh demo: no CLEAR verdict for job demo: $out"
      grep -Eq '^ *1 +data +11 ' <<<"$out" \
        || fail "$doc" "$n" "./run.sh demo: (data, 11) is not the first suspect: $out"
      grep -q 'aten::mm' <(sed -n '/^\$ sfctl capture-report/,$p' "$log") \
        || fail "$doc" "$n" "./run.sh demo: the capture report does not name aten::mm"
    fi
    if [[ "$text" == *"sfctl suspects --job mine"* ]]; then
      # Section 2: rank 2 slow in forward -> CLEAR (forward, 2).
      seen_job=1
      sed -n '/^job mine, window/,$p' "$log" >"$state/mine.before"
      out=$(cat "$state/mine.before")
      [[ "$out" == *CLEAR* ]] || fail "$doc" "$n" "sfctl suspects --job mine: not CLEAR: $out"
      grep -Eq '^ *1 +forward +2 ' <<<"$out" \
        || fail "$doc" "$n" "sfctl suspects --job mine: (forward, 2) is not the first suspect: $out"
      suspects_cmd=$(grep 'sfctl suspects --job mine' <<<"$text" | tail -n 1)
    fi
  done <"$state/blocks.json"
  # "Stop the daemons with Ctrl-C: they flush and exit; restart the coordinator on the same
  # --data-dir and sfctl answers as before."
  coordinator_block=$(grep -m1 -n 'stagefrontier-coordinator' "$state/blocks.json" | cut -d: -f1)
  stop_background
  if [ "$seen_job" = 1 ] && [ -n "$coordinator_block" ]; then
    echo
    echo "== $doc: the coordinator again on the same --data-dir, then the same sfctl line"
    run_block "$doc" "$coordinator_block" "$(sed -n "${coordinator_block}p" "$state/blocks.json")"
    (cd "$(cat "$state/cwd")" && sleep 2 && eval "$suspects_cmd") </dev/null >"$state/mine.after" 2>&1
    diff "$state/mine.before" "$state/mine.after" >/dev/null \
      || fail "$doc" "$coordinator_block" "after a restart on the same --data-dir sfctl answers differently: $(diff "$state/mine.before" "$state/mine.after" | sed -n 1,10p)"
    cat "$state/mine.after"
    stop_background
  fi
  [ "$seen_demo" = 1 ] || [ "$walked" = 0 ] || fail "$doc" - "no block runs ./run.sh demo"
  [ "$seen_job" = 1 ] || [ "$walked" = 0 ] || fail "$doc" - "no block runs sfctl suspects --job mine"
fi

# --- README.md, "PyTorch: pip install and one launcher change" -----------------------------
doc=README.md
echo "$clone" >"$state/cwd"  # the README's commands run in the repository
if [ -x "$clone/bazel-bin/daemon/coordinator/stagefrontier-coordinator" ] && blocks "$doc" --section '^PyTorch: `pip install`'; then
  # The README's job needs a coordinator and a sidecar (its "Using it"): the clone's, on their
  # defaults (127.0.0.1:7311; segments in /dev/shm, the stub's default too).
  source "$clone/deploy/demo/pipeline.sh"
  sf_init "$state/pytorch" "$clone/bazel-bin"
  sf_start_coordinator 7311 7312 --step-deadline-ms 10000 || fail "$doc" - "the walk's coordinator"
  "$SF_BIN/daemon/sidecar/stagefrontier-sidecar" --coordinator "$SF_COORD" --node node0 \
    >"$SF_WORK/sidecar.log" 2>&1 &
  SF_SIDECAR_PID_node0=$!
  n=0 seen_torchrun=0 walked=1
  while IFS= read -r json; do
    n=$((n + 1))
    run_block "$doc" "$n" "$json" || { walked=0; break; }
    text=$(jq -r .text <<<"$json")
    [[ "$text" == *"stagefrontier-torchrun"*"--rdzv_id run42"* ]] || continue
    seen_torchrun=1
    # The venv is made from the system Python and sees Debian's torch; the wheel is in the
    # venv only ("the system Python ... does not see the wheel").
    got=$("$HOME/sf/bin/python" -c 'import sys, torch, stagefrontier
print(sys.base_prefix, torch.__version__, torch.__file__, stagefrontier.__file__)' 2>&1)
    echo "   ~/sf/bin/python: $got"
    read -r base tv tfile sfile <<<"$got"
    [ "$base" = /usr ] || fail "$doc" "$n" "the venv is not made from /usr/bin/python3: $got"
    [[ "$tv" == 1.13* && "$tfile" == /usr/lib/python3/dist-packages/torch/* ]] \
      || fail "$doc" "$n" "the venv does not see Debian's torch 1.13: $got"
    [[ "$sfile" == "$HOME/sf/lib/python3"*"/site-packages/stagefrontier/"* ]] \
      || fail "$doc" "$n" "stagefrontier is not the venv's: $got"
    /usr/bin/python3 -c 'import stagefrontier' 2>/dev/null \
      && fail "$doc" "$n" "the system Python sees a stagefrontier package (the README says it does not)"
    # "marks data, forward, backward, grad_sync and optimizer in every rank": 8 ranks report
    # the five stages to the coordinator.
    grep -q "epoch 2:" "$state/README.md.$n.log" || fail "$doc" "$n" "train.py did not run 3 epochs"
    sf_wait_steps run42 20 30 || fail "$doc" "$n" "job run42: steps did not reach the coordinator"
    health=$(sf_ctl --json health --job run42)
    ranks=$(jq '[.ranks[] | select(.state == "reporting" or .state == "finished" or .state == "done")] | length' <<<"$health")
    [ "$(jq '.ranks | length' <<<"$health")" = 8 ] || fail "$doc" "$n" "job run42 has not 8 ranks: $health"
    stages=$(sf_ctl --json steps --job run42 --from 5 --to 5 | jq -r '.stages | join(" ")')
    echo "   job run42: $(jq '.ranks | length' <<<"$health") ranks ($ranks reporting), stages: $stages"
    for s in data forward backward grad_sync optimizer; do
      [[ " $stages " == *" $s "* ]] || fail "$doc" "$n" "job run42: stage $s not marked (stages: $stages)"
    done
  done <"$state/blocks.json"
  [ "$seen_torchrun" = 1 ] || [ "$walked" = 0 ] || fail "$doc" - "no block runs ~/sf/bin/stagefrontier-torchrun ... --rdzv_id run42"
  sf_stop_all
elif [ ! -x "$clone/bazel-bin/daemon/coordinator/stagefrontier-coordinator" ]; then
  fail "$doc" - "not walked: getting-started left no coordinator in bazel-bin"
fi

if [ -d "$clone" ]; then  # the clone's output base goes; the disk cache stays
  output_base=$(cd "$clone" && bazel info output_base 2>/dev/null)
  (cd "$clone" && bazel shutdown >/dev/null 2>&1)
  [[ "$output_base" == "$HOME/.cache/bazel/"* ]] && { chmod -R u+w "$output_base"; rm -rf "$output_base"; }
fi
echo
if [ "$fail_count" -gt 0 ]; then
  echo "docs walk: $fail_count failed promise(s):"
  printf '  %s\n' "${failures[@]}"
  verdict FAILED
  exit 1
fi
verdict PASSED
