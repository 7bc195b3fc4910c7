# shellcheck shell=bash
# Times the parts of a long script: `part NAME COMMAND...` runs COMMAND and
# records its wall time; at exit (success or failure) the script prints
# every part's time and the total, under the label given to `parts_init`.
# Sourced by scripts/test.sh and .ci/run. COMMAND runs in an `||` context,
# so a shell function given as COMMAND runs without errexit: it must
# return its own failures.
parts_init() {
  PARTS_LABEL=$1
  PARTS_START=$SECONDS
  PARTS=()
  trap parts_report EXIT
}
part() {
  local name=$1 t0=$SECONDS rc=0
  shift
  "$@" || rc=$?
  PARTS+=("$(printf '%6d s  %s%s' $((SECONDS - t0)) "$name" "$([ "$rc" = 0 ] || echo " (FAILED, exit $rc)")")")
  return "$rc"
}
parts_report() {
  local rc=$?
  echo "$PARTS_LABEL: time per part"
  [ "${#PARTS[@]}" = 0 ] || printf '  %s\n' "${PARTS[@]}"
  printf '  %6d s  total%s\n' $((SECONDS - PARTS_START)) "$([ "$rc" = 0 ] || echo " (stopped, exit $rc)")"
}
