#!/usr/bin/env bash
# The tuning database and the tuner's options from the command line (CPU build enough): what
# `docmine info` says about the database (rows, rejected lines, or why it cannot be used: a
# directory, another format version, no path at all), which path wins (--tuning-db over
# DOCMINE_TUNING_DB over XDG_CACHE_HOME over HOME, as docs/ENVIRONMENT.md says), `docmine tune`'s
# option errors, and, with a GPU, `docmine tune` on 2 ranks failing (not hanging) when rank 0
# cannot write its --json file.
# usage: test_tune_cli.sh <docmine> <mpiexec>
set -u
dm=$1
mpiexec=${2:-mpiexec}
. "$(dirname "$0")/../testutil/cli_lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cpu=(--backend cpu)
# tuning_line <env...> -- <args...>: the "tuning" line of docmine info
tuning_line() {
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    env "${envs[@]}" "$dm" "${cpu[@]}" "$@" info 2>/dev/null | grep '^tuning '
}
has() { # has <name> <text> <regex>
    if printf '%s' "$2" | grep -Eq -- "$3"; then ok "$1"; else bad "$1: '$2' does not match /$3/"; fi
}

hdr=$'# docmine tuning database v1\n#kernel\tgpu\tcc\tclass\tblock\trake\tstrided\tlayout\ttile\tdefault_ms\ttuned_ms\tmsp_n\ttarget_n\tmode\tunix_time'
row=$'common.copy\tNVIDIA H200\t9.0\t30\t256\t4\t1\t0\t0\t0.43\t0.41\t134217728\t1073741824\tmsp\t1763690000'
row2=$'common.copy\tNVIDIA H200\t9.0\t29\t128\t2\t0\t0\t0\t0.2\t0.2\t1000\t536870912\tmsp\t1763690000'
printf '%s\n%s\n%s\n' "$hdr" "$row" "$row2" > "$tmp/good.tsv"
printf '%s\n%s\n%s\n' "$hdr" "$row" "garbage line" > "$tmp/onebad.tsv"
printf '# docmine tuning database v2\n%s\textra\n' "$row" > "$tmp/v2.tsv"
mkdir "$tmp/dir.tsv"
mkdir -p "$tmp/with space"
cp "$tmp/good.tsv" "$tmp/with space/db.tsv"

# ---- docmine info: what the database holds --------------------------------------------------
has "info: rows counted" "$(tuning_line DOCMINE_TUNING_DB="$tmp/good.tsv" --)" "database $tmp/good.tsv \(2 rows\)"
has "info: rejected lines said" "$(tuning_line DOCMINE_TUNING_DB="$tmp/onebad.tsv" --)" "\(1 row, 1 line rejected"
has "info: missing file" "$(tuning_line DOCMINE_TUNING_DB="$tmp/none/db.tsv" --)" "not yet written"
has "info: a directory is not a database" "$(tuning_line DOCMINE_TUNING_DB="$tmp/dir.tsv" --)" "unusable: .*Is a directory"
has "info: another format version" "$(tuning_line DOCMINE_TUNING_DB="$tmp/v2.tsv" --)" "unusable: .*format v2"
has "info: path with spaces" "$(tuning_line -- --tuning-db "$tmp/with space/db.tsv")" "database $tmp/with space/db.tsv \(2 rows\)"
has "info: no path known" "$(tuning_line -u HOME -u XDG_CACHE_HOME -u DOCMINE_TUNING_DB --)" "database none \(.*not kept"
# docmine info prints once on 2 ranks
n=$(DOCMINE_TUNING_DB="$tmp/good.tsv" "$mpiexec" -n 2 "$dm" "${cpu[@]}" info 2>/dev/null | grep -c '^tuning ')
[ "$n" = 1 ] && ok "info: one tuning line on 2 ranks" || bad "info: $n tuning lines on 2 ranks"

# a DOCMINE_TUNE that is no mode: said once on 2 ranks, and msp used
err=$(DOCMINE_TUNE=fast "$mpiexec" -n 2 "$dm" "${cpu[@]}" info 2>&1 >/dev/null)
n=$(printf '%s\n' "$err" | grep -c "DOCMINE_TUNE='fast'")
[ "$n" = 1 ] && ok "DOCMINE_TUNE=fast said once on 2 ranks" || bad "DOCMINE_TUNE=fast said $n times: $err"
has "DOCMINE_TUNE=fast: msp" "$(DOCMINE_TUNE=fast "$dm" "${cpu[@]}" info 2>/dev/null | grep '^tuning ')" "mode msp"

# ---- which path: option, environment, XDG_CACHE_HOME, HOME ----------------------------------
mkdir -p "$tmp/xdg/docmine" "$tmp/home/.cache/docmine"
has "path: --tuning-db wins over DOCMINE_TUNING_DB" \
    "$(tuning_line DOCMINE_TUNING_DB="$tmp/v2.tsv" -- --tuning-db "$tmp/good.tsv")" "database $tmp/good.tsv "
has "path: DOCMINE_TUNING_DB wins over XDG_CACHE_HOME" \
    "$(tuning_line DOCMINE_TUNING_DB="$tmp/good.tsv" XDG_CACHE_HOME="$tmp/xdg" --)" "database $tmp/good.tsv "
has "path: XDG_CACHE_HOME wins over HOME" \
    "$(tuning_line -u DOCMINE_TUNING_DB XDG_CACHE_HOME="$tmp/xdg" HOME="$tmp/home" --)" "database $tmp/xdg/docmine/tuning.tsv "
has "path: HOME last" \
    "$(tuning_line -u DOCMINE_TUNING_DB -u XDG_CACHE_HOME HOME="$tmp/home" --)" "database $tmp/home/.cache/docmine/tuning.tsv "

# ---- docmine tune: option errors (before any GPU is needed) ---------------------------------
expect "tune: --db without a value" 2 "option '--db' needs a value" -- "$dm" "${cpu[@]}" tune --db
expect "tune: --mode without a value" 2 "option '--mode' needs a value" -- "$dm" "${cpu[@]}" tune --list --mode
expect "tune: unknown mode" 2 "unknown mode 'fast'" -- "$dm" "${cpu[@]}" tune --mode fast
expect "tune: --size overflowing" 2 "bad --size '99999999999999999999999'" -- "$dm" "${cpu[@]}" tune --list --size 99999999999999999999999
expect "tune: --size negative" 2 "bad --size '-1'" -- "$dm" "${cpu[@]}" tune --list --size -1
expect "tune: --repeats with junk" 2 "bad --repeats '5x'" -- "$dm" "${cpu[@]}" tune --list --repeats 5x
exits "tune: --list with good options" 0 "" -- "$dm" "${cpu[@]}" tune --list --size 4096 --repeats 3
has "tune: --list names --mode" "$("$dm" "${cpu[@]}" tune --list --mode model 2>/dev/null | head -1)" "\(mode model\)"
has "tune: --list names the global --tune" "$("$dm" "${cpu[@]}" --tune exhaustive tune --list 2>/dev/null | head -1)" "\(mode exhaustive\)"

# ---- with a GPU: a --json rank 0 cannot write fails every rank, no hang ----------------------
if "$dm" info 2>/dev/null | grep -q '^ranks .*backend cuda'; then
    exits "tune: unwritable --json on 2 ranks" 1 "nonexistent-dir/t.json" -- \
        timeout 120 "$mpiexec" -n 2 "$dm" tune --no-store --kernels common.copy --json /nonexistent-dir/t.json
    # a database that cannot take the choices (not a tuning database: never overwritten): the
    # choices of this run's searches are used, not thrown away for the defaults
    printf 'my notes\n' > "$tmp/notes.txt"
    err=$(DOCMINE_TUNE=msp DOCMINE_TUNING_DB="$tmp/notes.txt" "$dm" pipeline --synthetic 2000 --method streamclust -o "$tmp/pl" 2>&1 >/dev/null)
    rc=$?
    [ "$rc" = 0 ] && ok "tune: a database that cannot be written: the run works" || bad "tune: unwritable database: exit $rc: $err"
    has "tune: the choice not stored is said" "$err" "could not store the choice"
    printf '%s' "$err" | grep -q "failed .*using the default" && bad "tune: a search's choice thrown away: $err" ||
        ok "tune: the searches' choices kept"
    [ "$(cat "$tmp/notes.txt")" = "my notes" ] && ok "tune: the notes left as they were" || bad "tune: the notes changed"
    # a model row (tune --mode model) does not replace a measured (msp) row of the same key
    "$dm" tune --kernels common.copy --mode msp --db "$tmp/m.tsv" >/dev/null 2>&1
    before=$(grep -v '^#' "$tmp/m.tsv" 2>/dev/null | cut -f1-4,14 | sort)
    "$dm" tune --kernels common.copy --mode model --db "$tmp/m.tsv" >/dev/null 2>&1
    after=$(grep -v '^#' "$tmp/m.tsv" 2>/dev/null | cut -f1-4,14 | sort)
    if [ -n "$before" ] && printf '%s\n' "$before" | grep -q "msp$" && [ "$before" = "$after" ]; then
        ok "tune: a model row keeps the measured row"
    else bad "tune: a model row replaced the measured one: before [$before] after [$after]"; fi
    # no database path at all: the kernels are tuned and printed and nothing is stored, as the
    # header line says (every kernel failed before its search, exit 1)
    out=$(env -u HOME -u XDG_CACHE_HOME -u DOCMINE_TUNING_DB "$dm" tune --kernels common.copy 2>&1)
    rc=$?
    [ "$rc" = 0 ] && ok "tune: no database path: exit 0" || bad "tune: no database path: exit $rc: $out"
    has "tune: no database path: said" "$out" "database none .*nothing is stored"
    has "tune: no database path: tuned all the same" "$out" "^common\.copy +[0-9]"
else
    echo "skip tune --json on 2 ranks, an unwritable database and no database path: no GPU"
fi
finish
