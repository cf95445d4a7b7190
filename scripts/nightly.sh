#!/usr/bin/env bash
# Nightly AMP validation: every suite, checked against the stored baselines, one combined report,
# one history line per suite.  Run from anywhere; paths are relative to the repository root.
#
#   bash scripts/nightly.sh                 # GPU runner: base (GPU) profiles, `check --strict`
#   bash scripts/nightly.sh --dry-run       # CPU: the suites' cpu profiles; AMP is inactive there, so the
#                                           # expected outcome is INCONCLUSIVE and the exit code is 3
# Options:
#   --suite FILE          run only this suite file (repeatable; default: every suites/*.toml,
#                         or the space/comma separated list in $NIGHTLY_SUITES)
#   --set KEY=VALUE       override passed to every `ampbench run` (repeatable; also $NIGHTLY_SET,
#                         space separated), e.g. --set train.steps=4
#   --seeds LIST          comma-separated seeds for every suite (default: the profile's)
#   --out DIR             output folder (default: results/nightly/<UTC stamp>): runs/, report.md
#   --baselines DIR       baseline root (default: results/baselines); baselines are read from
#                         DIR/<device-slug>/<suite>.json
#   --history DIR         history folder (default: results/history; with --dry-run: OUT/history)
#   --save-baselines      after checking, write each suite's baseline (refresh on purpose: see docs/nightly.md)
#   --until-decided       `ampbench run --until-decided` against the suite's stored baseline: seeds are
#                         added (matched pairs) until every speed, memory, parity and history rule decides
#   --max-seeds N         with --until-decided: the seed cap per mode (default 8)
#   --budget DURATION     with --until-decided: the time budget per suite, e.g. 45m (default: none)
#   --run-arg ARG         passed verbatim to every `ampbench run` (repeatable), e.g. --run-arg --devices=all
#   --strict / --no-strict  INCONCLUSIVE exits 1 (default on GPU) / 3 (default with --dry-run)
#   --runs-only           run and check only (no history, report or dashboard): one job of a fan-out
#   --combine DIR...      run nothing: gather the run folders under each DIR (collected from several
#                         machines or CI jobs; runs without check.json are checked here), then one
#                         history update, one report and one dashboard; all remaining arguments are DIRs
#   --publish DIR         dashboard folder (default: OUT/site); `ampbench publish` over the history
#   --history-branch NAME keep the history in git branch NAME (a worktree at OUT/history-branch, committed
#                         there; created as an orphan branch the first time) instead of a plain folder
#   --push                with --history-branch: push the branch to origin (the nightly workflow does)
# Exit code (ampbench's contract, worst over all suites): 0 all PASS, 1 any FAIL (or INCONCLUSIVE
# with --strict), 2 ERROR (crashed trials, bad input, a suite that did not run), 3 only INCONCLUSIVE.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

PY="${PYTHON:-python3}"
ab() { "$PY" -m ampbench.cli "$@"; }

dry_run=0 strict="" save=0 out="" history="" baselines="results/baselines" seeds=""
runs_only=0 site="" branch="" push=0 until=0 max_seeds=8 budget=""
suites=() sets=() combine_dirs=() run_extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry_run=1 ;;
    --suite) suites+=("$2"); shift ;;
    --set) sets+=("$2"); shift ;;
    --seeds) seeds="$2"; shift ;;
    --out) out="$2"; shift ;;
    --baselines) baselines="$2"; shift ;;
    --history) history="$2"; shift ;;
    --save-baselines) save=1 ;;
    --until-decided) until=1 ;;
    --max-seeds) max_seeds="$2"; shift ;;
    --budget) budget="$2"; shift ;;
    --run-arg) run_extra+=("$2"); shift ;;
    --strict) strict=1 ;;
    --no-strict) strict=0 ;;
    --runs-only) runs_only=1 ;;
    --publish) site="$2"; shift ;;
    --history-branch) branch="$2"; shift ;;
    --push) push=1 ;;
    --combine) shift; combine_dirs=("$@"); [ $# -gt 0 ] || { echo "nightly.sh: --combine needs folders" >&2; exit 2; }; break ;;
    -h|--help) sed -n '2,37p' "$0"; exit 0 ;;
    *) echo "nightly.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

out="${out:-results/nightly/$(date -u +%Y%m%dT%H%M%SZ)}"
combining=0
[ ${#combine_dirs[@]} -gt 0 ] && combining=1

if [ "$combining" = 0 ]; then
  if [ ${#suites[@]} -eq 0 ]; then
    if [ -n "${NIGHTLY_SUITES:-}" ]; then
      read -r -a suites <<< "${NIGHTLY_SUITES//,/ }"
    else
      suites=(suites/*.toml)
    fi
  fi
  for s in "${suites[@]}"; do
    [ -f "$s" ] || { echo "nightly.sh: suite file not found: $s" >&2; exit 2; }
  done
else
  for d in "${combine_dirs[@]}"; do
    [ -d "$d" ] || { echo "nightly.sh: --combine: folder not found: $d" >&2; exit 2; }
  done
fi
if [ -n "${NIGHTLY_SET:-}" ]; then
  read -r -a extra <<< "$NIGHTLY_SET"
  sets+=("${extra[@]}")
fi

if [ "$dry_run" = 1 ]; then
  profile=(--profile cpu)
  strict="${strict:-0}"
  history="${history:-$out/history}"   # CPU lines never go into the committed GPU history
elif [ "$combining" = 1 ]; then
  profile=(--profile collected)
  strict="${strict:-1}"
  history="${history:-results/history}"
else
  profile=(--profile default)
  strict="${strict:-1}"
  history="${history:-results/history}"
  if ! ab env --require-gpu 2>/dev/null; then
    echo "nightly.sh: Paddle sees no GPU here; the nightly needs paddlepaddle-gpu and a GPU (or use --dry-run)" >&2
    exit 2
  fi
fi
strict_arg=()
[ "$strict" = 1 ] && strict_arg=(--strict)
set_args=()
for kv in "${sets[@]+"${sets[@]}"}"; do set_args+=(--set "$kv"); done
seed_args=()
[ -n "$seeds" ] && seed_args=(--seeds "$seeds")

runs_root="$out/runs"
mkdir -p "$runs_root" || exit 2
site="${site:-$out/site}"

# ---------------------------------------------------------------- history in a git branch
hist_repo="${NIGHTLY_HISTORY_REPO:-.}"   # the repository holding the history branch (default: this one)
branch_dir=""
open_history_branch() {  # a worktree of $branch at OUT/history-branch; history = its history/ folder
  branch_dir="$(cd "$out" && pwd)/history-branch"
  if git -C "$hist_repo" fetch -q origin "+refs/heads/$branch:refs/remotes/origin/$branch" 2>/dev/null; then
    git -C "$hist_repo" worktree add -q --detach "$branch_dir" "origin/$branch" || return 2
  elif git -C "$hist_repo" rev-parse -q --verify "refs/heads/$branch" >/dev/null; then
    git -C "$hist_repo" worktree add -q --detach "$branch_dir" "$branch" || return 2
  else  # first night: an orphan branch holding only the history
    git -C "$hist_repo" worktree add -q --detach "$branch_dir" || return 2
    git -C "$branch_dir" checkout -q --orphan "nightly-history-tmp-$$" && git -C "$branch_dir" rm -rqf . >/dev/null
  fi
  history="$branch_dir/history"
  mkdir -p "$history"
}
close_history_branch() {  # commit the new lines (and archived reports) on $branch; push with --push
  # the history's lock files (.<name>.lock: history append/accept hold them) are not history
  git -C "$branch_dir" add -A -- history ':(exclude,glob)history/**/.*.lock' || return 2
  if ! git -C "$branch_dir" diff --cached --quiet; then
    git -C "$branch_dir" -c user.name="${GIT_AUTHOR_NAME:-ampbench nightly}" \
      -c user.email="${GIT_AUTHOR_EMAIL:-ampbench-nightly@users.noreply.github.com}" \
      commit -qm "nightly $(date -u +%Y-%m-%dT%H:%M:%SZ): ${#run_dirs[@]} run(s)" || return 2
  fi
  git -C "$branch_dir" update-ref "refs/heads/$branch" HEAD || return 2
  if [ "$push" = 1 ]; then
    git -C "$branch_dir" push -q origin "HEAD:refs/heads/$branch" || return 2
  fi
  echo "history: committed on branch $branch"
}
if [ -n "$branch" ] && [ "$runs_only" = 0 ]; then
  open_history_branch || { echo "nightly.sh: cannot open history branch $branch in $hist_repo" >&2; exit 2; }
fi
mkdir -p "$history" || exit 2
echo "nightly: ${#suites[@]} suite(s), ${#combine_dirs[@]} collected folder(s), profile ${profile[1]}, output $out"

check_exit() {  # RUN_DIR: the exit code its verdict of record (check.json) holds, judged nothing again
  ab check "$1" --recorded >/dev/null
  echo $?
}

worst=0
combine() {  # worst exit code: 2 > 1 > 3 > 0
  local a=$1 b=$2
  for c in 2 1 3; do
    if [ "$a" = "$c" ] || [ "$b" = "$c" ]; then echo "$c"; return; fi
  done
  echo 0
}
list_runs() { find "$runs_root" -mindepth 2 -maxdepth 2 -type d | sort; }  # runs/<suite>/<run-id>
run_dirs=()
results=()
t_start=$(date +%s)

run_suite() {  # SUITE_FILE: run, check against its baseline, optionally save a baseline
  local suite=$1 before rc_run run_dir name slug base_file rc
  before="$(list_runs)"
  echo "=== $suite"
  local until_args=()
  if [ "$until" = 1 ]; then
    until_args=(--until-decided --max-seeds "$max_seeds" ${budget:+--budget "$budget"})
    base_file="$(ab baseline path "$suite" --dir "$baselines")" && [ -f "$base_file" ] \
      && until_args+=(--baseline "$base_file")
  fi
  # The run's own check (no baseline) is dropped from the log: `ab check` below prints the one that
  # counts, against the baseline (each suite's table once).
  ab run "$suite" "${profile[@]}" "${seed_args[@]+"${seed_args[@]}"}" "${set_args[@]+"${set_args[@]}"}" \
    "${until_args[@]+"${until_args[@]}"}" "${run_extra[@]+"${run_extra[@]}"}" \
    --out "$runs_root" --no-report | sed '/^ampbench check: /,$d'
  rc_run=${PIPESTATUS[0]}
  run_dir="$(comm -13 <(echo "$before") <(list_runs) | head -n 1)"
  if [ -z "$run_dir" ] || [ ! -f "$run_dir/run.json" ]; then
    echo "nightly: $suite produced no run folder (ampbench run exited $rc_run)" >&2
    results+=("$suite: ERROR (no run, exit $rc_run)")
    worst=$(combine "$worst" 2)
    return
  fi
  name="$(basename "$(dirname "$run_dir")")"
  base_file="$(ab baseline path "$run_dir" --dir "$baselines")" || base_file="$baselines/unknown/$name.json"
  slug="$(basename "$(dirname "$base_file")")"
  local base_arg=()
  if [ -f "$base_file" ]; then
    base_arg=(--baseline "$base_file")
  else
    echo "nightly: no baseline $base_file: $name is judged on its own (save one with --save-baselines)"
  fi
  # The history (when this job keeps one) is the baseline of the history rules: the runs since its last
  # change point (pooled); with fewer than 3 of them, the stored baseline with the history's drift.
  local hist_arg=()
  [ "$runs_only" = 0 ] && [ -n "$(ls -A "$history" 2>/dev/null)" ] && hist_arg=(--history "$history")
  ab check "$run_dir" "${base_arg[@]+"${base_arg[@]}"}" "${hist_arg[@]+"${hist_arg[@]}"}" \
    "${strict_arg[@]+"${strict_arg[@]}"}"
  rc=$?
  # Save unless trials crashed: judged by the run's own check (no baseline), so that a deliberate
  # suite change, which the old baseline refuses (config hash mismatch, exit 2), can be re-baselined.
  if [ "$save" = 1 ] && [ "$rc_run" != 2 ]; then
    ab baseline save "$run_dir" -o "$base_file" || rc=$(combine "$rc" 2)
  fi
  run_dirs+=("$run_dir")
  results+=("$suite: exit $rc, device $slug, $run_dir")
  worst=$(combine "$worst" "$rc")
}

collect_run() {  # RUN_DIR from another machine/job: its own check.json decides, else check it here;
  # then, when the history holds lines of its suite, against the runs since the last change point too
  local run_dir=$1 rc rc_hist
  if [ -f "$run_dir/check.json" ]; then
    rc="$(check_exit "$run_dir")" || rc=2
  else
    ab check "$run_dir" "${strict_arg[@]+"${strict_arg[@]}"}"
    rc=$?
  fi
  if [ -f "$history/$(basename "$(dirname "$run_dir")").jsonl" ]; then
    ab check "$run_dir" --history "$history" "${strict_arg[@]+"${strict_arg[@]}"}"
    rc_hist=$?
    rc=$(combine "$rc" "$rc_hist")
  fi
  run_dirs+=("$run_dir")
  results+=("$(basename "$(dirname "$run_dir")"): exit $rc, $run_dir")
  worst=$(combine "$worst" "$rc")
}

if [ "$combining" = 1 ]; then
  while IFS= read -r f; do
    collect_run "$(dirname "$f")"
  done < <(find "${combine_dirs[@]}" -name run.json -not -path "*/history-branch/*" | sort)
  [ ${#run_dirs[@]} -gt 0 ] || { echo "nightly.sh: --combine: no run folders (run.json) under ${combine_dirs[*]}" >&2; exit 2; }
else
  for suite in "${suites[@]}"; do run_suite "$suite"; done
fi

if [ "$runs_only" = 0 ] && [ ${#run_dirs[@]} -gt 0 ]; then
  for run_dir in "${run_dirs[@]}"; do
    ab history append "$run_dir" "$history" --archive-report || worst=$(combine "$worst" 2)
  done
  ab report "${run_dirs[@]}" -o "$out/report.md" --html --history "$history" || worst=$(combine "$worst" 2)
  ab publish "$history" -o "$site" ${NIGHTLY_REPO_URL:+--repo-url "$NIGHTLY_REPO_URL"} || worst=$(combine "$worst" 2)
  if [ -n "$branch_dir" ]; then
    close_history_branch || worst=$(combine "$worst" 2)
  fi
fi
printf '%s\n' "${run_dirs[@]+"${run_dirs[@]}"}" > "$out/runs.txt"
{
  echo "nightly $(date -u +%Y-%m-%dT%H:%M:%SZ) profile=${profile[1]} strict=$strict exit=$worst"
  echo "elapsed_s=$(( $(date +%s) - t_start ))"
  printf '%s\n' "${results[@]+"${results[@]}"}"
} | tee "$out/summary.txt"
exit "$worst"
