# scripts/gpu-check-queue.sh — scripts/gpu-check's commands under one deadline
# (sourced there): a step whose output is logged (run_logged), and a queue of jobs
# run N at a time (add_job, run_queue), each under a time budget cut to what
# the deadline leaves; then each kind of job read back as a log with an index
# (write_log) and one verdict (judge).
#
# The caller sets `started` and `deadline` (seconds of $SECONDS), `work` (a
# scratch folder with jobs/ in it), `dry_run` (1: each command is written,
# not run, and sleeps GPU_CHECK_DRY_SLEEP seconds), an array `queue`, and
# defines `note STATUS TEXT` (judge's verdicts go there).
#
# A job is "KIND|NAME|BUDGET|COMMAND" (COMMAND's words joined by \x1f); job N
# writes its output to $work/jobs/N.log and "status seconds limit" to N.rc.
# Statuses beyond the command's own: 124/137 stopped at its limit, 125 not run
# (the deadline left under 10 s), 126 a sanitizer job that ran no test case.
# shellcheck shell=bash disable=SC2154  # started, deadline, work, dry_run, queue: the caller's

left() { echo $(( deadline - SECONDS )); }
limit() {  # limit BUDGET: the budget, or what the deadline leaves if less
  local l; l=$(left)
  echo $(( $1 < l ? $1 : l ))
}
# run_logged [-q] LOG BUDGET COMMAND...: COMMAND under timeout, its output
# appended to LOG and shown (-q: only its last lines, when it fails); returns
# its status (124: out of time). In a dry run it writes the command instead
# (and sleeps GPU_CHECK_DRY_SLEEP seconds).
run_logged() {
  local shown_to=/dev/stdout
  if [[ $1 == -q ]]; then shown_to=/dev/null; shift; fi
  local log="$1" budget="$2"; shift 2
  local t from=0; t=$(limit "$budget")
  [[ -f "$log" ]] && from=$(wc -l < "$log")
  echo "=== [$((SECONDS - started)) s] $(shown "$@") (at most ${t} s)" | tee -a "$log"
  if [[ $t -lt 5 ]]; then echo "not run: the deadline leaves ${t} s" | tee -a "$log"; return 124; fi
  if [[ $dry_run -eq 1 ]]; then
    # shellcheck disable=SC2016  # the inner bash expands them
    timeout "$t" bash -c 'echo "would run: $1"; sleep "${GPU_CHECK_DRY_SLEEP:-0}"' _ "$(shown "$@")" 2>&1 |
      tee -a "$log" > "$shown_to"
  else
    timeout --kill-after=5 "$t" "$@" < /dev/null 2>&1 | tee -a "$log" > "$shown_to"
  fi
  local rc="${PIPESTATUS[0]}"
  [[ $rc -ne 0 && $shown_to == /dev/null ]] && tail -n +"$((from + 2))" "$log" | tail -n 25
  [[ $rc -eq 124 || $rc -eq 137 ]] && echo "STOPPED after ${t} s (its budget, or the deadline)" | tee -a "$log"
  return "$rc"
}
took() { echo "$(( SECONDS - $1 )) s"; }
shown() { local q; q="$(printf '%q ' "$@")"; echo "${q% }"; }  # a command as the shell would read it

add_job() {  # add_job KIND NAME BUDGET COMMAND...
  local kind="$1" name="$2" budget="$3"; shift 3
  local IFS=$'\x1f'
  queue+=("$kind|$name|$budget|$*")
}

run_job() {  # run_job N KIND BUDGET COMMAND...: the job's output to N.log, "status seconds limit" to N.rc
  local n="$1" kind="$2" budget="$3" t0=$SECONDS t rc; shift 3
  t=$(limit "$budget")
  if [[ $t -lt 10 ]]; then echo "125 0" > "$work/jobs/$n.rc"; return; fi
  if [[ $dry_run -eq 1 ]]; then
    # shellcheck disable=SC2016  # the inner bash expands them
    timeout "$t" bash -c 'echo "would run: $1"; sleep "${GPU_CHECK_DRY_SLEEP:-0}"' _ "$(shown "$@")" > "$work/jobs/$n.log" 2>&1
  else
    timeout --kill-after=5 "$t" "$@" > "$work/jobs/$n.log" 2>&1 < /dev/null
  fi
  rc=$?
  # A sanitizer job (any but the tour's) passes only having run its one test
  # case: an exit 0 without it is a name that matched nothing.
  if [[ $rc -eq 0 && $kind != tour && $dry_run -eq 0 ]] && ! grep -q ' in 1 test case)' "$work/jobs/$n.log"; then
    rc=126
  fi
  echo "$rc $((SECONDS - t0)) $t" > "$work/jobs/$n.rc"
}
run_queue() {  # run_queue N: every job of the queue, N at a time, in queue order
  local n kind name budget command running=0 words
  echo
  echo "=== [$((SECONDS - started)) s] ${#queue[@]} jobs, $1 at a time, until $((deadline - started)) s"
  for n in "${!queue[@]}"; do
    IFS='|' read -r kind name budget command <<<"${queue[$n]}"
    IFS=$'\x1f' read -r -a words <<<"$command"
    while [[ $running -ge $1 ]]; do wait -n; running=$((running - 1)); done
    echo "[$((SECONDS - started)) s] start $kind: $name"
    run_job "$n" "$kind" "$budget" "${words[@]}" &
    running=$((running + 1))
  done
  wait
}

# What a job ended as, in words: passed, or why not.
job_rc() { local rc; read -r rc _ < "$work/jobs/$1.rc" 2>/dev/null || rc=125; echo "$rc"; }
job_line() {  # job_line N: how job N ended, one line for the log's index
  local rc secs t
  read -r rc secs t < "$work/jobs/$1.rc" 2>/dev/null || rc=125
  case $rc in
    0) echo "passed in ${secs} s" ;;
    124|137) echo "STOPPED at its limit of ${t} s" ;;
    125) echo "not run: the deadline left no room" ;;
    126) echo "ran no test case: its name did not match one (exit 0)" ;;
    9) echo "sanitizer errors: $(grep -Eo '(ERROR|RACECHECK) SUMMARY: .*' "$work/jobs/$1.log" | head -n 1)" ;;
    4) echo "skipped: $(grep -Eo 'SKIPPED: .*|needs a CUDA GPU.*' "$work/jobs/$1.log" | head -n 1)" ;;
    *) local why
       why="$(grep -E 'error:|✘|FAILED|No test cases matched|No tests ran' "$work/jobs/$1.log" | head -n 1)"
       [[ -n "$why" ]] || why="$(grep -v '^[[:space:]]*$' "$work/jobs/$1.log" | tail -n 1)"
       echo "exit $rc in ${secs} s: ${why:0:300}" ;;
  esac
}
job_word() {  # job_word N: how job N ended, in a word or two (for the summary line)
  local rc; rc=$(job_rc "$1")
  case $rc in
    124|137) echo "stopped at its time limit" ;; 9) echo "sanitizer errors" ;; 4) echo "skipped" ;;
    126) echo "ran no test case" ;; 3) echo "a verdict failed" ;; *) echo "exit $rc" ;;
  esac
}
write_log() {  # write_log KIND FILE: an index of KIND's jobs, then each job's output
  local n kind name budget command words
  {
    for n in "${!queue[@]}"; do
      IFS='|' read -r kind name budget command <<<"${queue[$n]}"
      [[ $kind == "$1" ]] && echo "== $kind: $name: $(job_line "$n")"
    done
    for n in "${!queue[@]}"; do
      IFS='|' read -r kind name budget command <<<"${queue[$n]}"
      [[ $kind == "$1" ]] || continue
      echo
      echo "==================== $kind: $name"
      IFS=$'\x1f' read -r -a words <<<"$command"
      echo "\$ $(shown "${words[@]}")"
      cat "$work/jobs/$n.log" 2>/dev/null
      echo "-- $(job_line "$n")"
    done
  } >> "$2"
}
judge() {  # judge KIND WHAT UNITS: one summary entry for KIND's jobs, "WHAT: n of m UNITS"
  local n kind name budget command rc all=0 ok=0 bad=() cut=0
  for n in "${!queue[@]}"; do
    IFS='|' read -r kind name budget command <<<"${queue[$n]}"
    [[ $kind == "$1" ]] || continue
    all=$((all + 1)); rc=$(job_rc "$n")
    if [[ $rc -eq 0 ]]; then ok=$((ok + 1)); elif [[ $rc -eq 125 ]]; then cut=$((cut + 1))
    else bad+=("$name ($(job_word "$n"))"); fi
  done
  [[ $all -eq 0 ]] && return
  local text="$2: $ok of $all $3"
  [[ ${#bad[@]} -gt 0 ]] && text+="; not: $(printf '%s, ' "${bad[@]:0:3}" | sed 's/, $//')"
  [[ ${#bad[@]} -gt 3 ]] && text+=" and $(( ${#bad[@]} - 3 )) more"
  [[ $cut -gt 0 ]] && text+="; $cut not run: the deadline came first"
  note "$(( all - ok ))" "$text"
}
