# Helpers of the scripts/check-*.sh checks.

# summary_field OUT RUN FIELD: the integer FIELD= of the plb-heft
# PLB_SUMMARY line in run folder RUN of a `plb simgrid --out OUT` (its
# stderr.txt); exits with a message when the folder or the line is missing.
summary_field() {
  local f="$1/runs/$2/stderr.txt" v
  [ -f "$f" ] || { echo "summary_field: no $f" >&2; exit 1; }
  v=$(grep -o 'plb: policy=plb-heft .*' "$f" | grep -o "$3=[0-9]*" | cut -d= -f2)
  [ -n "$v" ] || { echo "summary_field: no $3= in $f" >&2; exit 1; }
  echo "$v"
}

# verdict NAME MESSAGE TEST...: runs TEST (a `test` expression); prints
# "NAME: ok", or "NAME: FAIL: MESSAGE" and exits 1.
verdict() {
  local name=$1 message=$2
  shift 2
  if test "$@"; then
    echo "$name: ok"
  else
    echo "$name: FAIL: $message" >&2
    exit 1
  fi
}
