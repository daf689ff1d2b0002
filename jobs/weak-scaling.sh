#!/usr/bin/env bash
# Weak-scaling series of `docmine pipeline`: the same documents per GPU on 1, 2, 4, ... GPUs (one
# MPI rank per GPU), for one or more methods; then the CSV table and PNG plot
# (jobs/scaling-table.py). Under SLURM each point is one job (jobs/weak-scaling.sbatch, nodes x
# --ntasks-per-node = GPUs per node, --gpus-per-task=1); under plain mpiexec the points run one
# after the other on this machine.
#
#   jobs/weak-scaling.sh [options] [-- further pipeline options]
#     --launcher mpiexec|slurm   (default: slurm when sbatch exists, else mpiexec)
#     --gpus LIST                GPUs (ranks) per point, comma-separated (default 1,2,4)
#     --gpus-per-node G          SLURM: GPUs per node (default 4)
#     --methods LIST             flock,streamclust (default both)
#     --docs-per-gpu N           documents per rank (default 100000)
#     --out DIR                  series directory (default out/weak); point = DIR/<method>-<gpus>
#                                (a point's directory is emptied before it runs or is submitted;
#                                the table covers this series' points only, even where DIR holds
#                                points of an older one)
#     --docmine PATH             the binary (default build/apps/docmine)
#     --flock-args "ARGS"        pipeline options for the flock points only (e.g. "--neighbours 30")
#     --streamclust-args "ARGS"  pipeline options for the streamclust points only (e.g. "--k 10,20")
#     --repeats R                mpiexec: run each point R times and keep the fastest run's
#                                outputs (default 1; the first run of a point pays first-use costs
#                                such as a VM growing its memory, later runs measure the steady state)
#     --cores-per-rank C         mpiexec: bind rank r to cores r*C .. r*C+C-1 (taskset) and give it
#                                C OpenMP threads, so that every point runs each GPU with the same
#                                cores, as SLURM's --cpus-per-task does (default: OMP_NUM_THREADS
#                                when set, else the host's cores / its GPUs)
#     --bind-order physical|linear
#                                mpiexec: how the blocks of cores are cut (default physical: the
#                                logical CPUs ordered by socket and core, so that the hardware
#                                threads of one core fall in one block and a block of C CPUs is
#                                C / threads-per-core whole cores, as SLURM allocates cores;
#                                linear: CPUs r*C .. r*C+C-1, which on a host that numbers the
#                                second thread of every core after all first threads gives a
#                                1-GPU point C whole cores and the ranks of a full host half of
#                                that each)
#     --no-bind                  mpiexec: no binding (ranks share all cores; a 1-GPU point then
#                                also uses the cores of the GPUs it leaves idle)
#     --shared-baseline          mpiexec: after each method's series, run its 1-GPU point on
#                                every GPU of the largest point (G) at once (independent 1-rank
#                                runs, each on its own GPU and cores, run i on the documents rank
#                                i of the G-GPU point holds: --synth-share i/G;
#                                DIR/.shared/<method>-r<i>); prints and writes
#                                DIR/shared-host.csv: how much of the loss from 1 to G GPUs comes
#                                from the ranks sharing one host (the cores' clock, memory
#                                bandwidth, PCIe) and from the work of their shares, apart from
#                                their communication
#     --touch-memory GIB         mpiexec: before the series, write GIB GiB of host memory once
#                                (8 processes, then freed), so that a virtual machine whose
#                                memory is backed on its first use has backed it before the
#                                points run (on the 4-H200 VMs the 4-GPU points otherwise pay
#                                seconds of it: bench/RESULTS.md, session 14); bare-metal nodes
#                                need none
#     --dry-run                  print the commands only
#   A point that fails (no report.json) does not stop the series: the table marks it FAILED and
#   the driver exits 1; 2 on bad options.
#   Environment: DOCMINE_HUGEPAGES=0 keeps glibc's default pages (otherwise docmine gives its
#   large blocks transparent huge pages: jobs/README.md).
# Example (one 4-GPU machine, both methods, under 4 minutes on H200s):
#   jobs/weak-scaling.sh --launcher mpiexec --gpus 1,2,4 --docs-per-gpu 50000 --out out/weak \
#       --flock-args "--neighbours 30 --iterations 100"
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
launcher=""; gpus=1,2,4; gpn=4; methods=flock,streamclust; dpg=100000; out=out/weak
docmine=build/apps/docmine; dry=0; extra=(); fargs=""; sargs=""; repeats=1; cpr=""; bind=1; border=physical; shared=0; touch=0
while [ $# -gt 0 ]; do
    case $1 in --launcher|--gpus|--gpus-per-node|--methods|--docs-per-gpu|--out|--docmine|--flock-args|--streamclust-args|\
               --repeats|--cores-per-rank|--bind-order|--touch-memory)
        [ $# -ge 2 ] || { echo "weak-scaling.sh: $1 needs a value (see --help)" >&2; exit 2; } ;;
    esac
    case $1 in
    --launcher) launcher=$2; shift 2 ;;
    --gpus) gpus=$2; shift 2 ;;
    --gpus-per-node) gpn=$2; shift 2 ;;
    --methods) methods=$2; shift 2 ;;
    --docs-per-gpu) dpg=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --docmine) docmine=$2; shift 2 ;;
    --flock-args) fargs=$2; shift 2 ;;
    --streamclust-args) sargs=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --cores-per-rank) cpr=$2; shift 2 ;;
    --no-bind) bind=0; shift ;;
    --bind-order) border=$2; shift 2 ;;
    --shared-baseline) shared=1; shift ;;
    --touch-memory) touch=$2; shift 2 ;;
    --dry-run) dry=1; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,61p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "weak-scaling.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[ -n "$launcher" ] || { command -v sbatch >/dev/null 2>&1 && launcher=slurm || launcher=mpiexec; }
case $launcher in mpiexec|slurm) ;; *) echo "weak-scaling.sh: --launcher must be mpiexec or slurm" >&2; exit 2 ;; esac
[[ $dpg =~ ^[0-9]+$ ]] && [ "$dpg" -gt 0 ] || { echo "weak-scaling.sh: --docs-per-gpu must be a positive integer" >&2; exit 2; }
[[ $repeats =~ ^[0-9]+$ ]] && [ "$repeats" -gt 0 ] || { echo "weak-scaling.sh: --repeats must be a positive integer" >&2; exit 2; }
[[ $touch =~ ^[0-9]+$ ]] || { echo "weak-scaling.sh: --touch-memory must be a whole number of GiB" >&2; exit 2; }
[ $dry -eq 1 ] || [ -x "$docmine" ] || { echo "weak-scaling.sh: $docmine not found (build first or pass --docmine)" >&2; exit 2; }
[ -n "$out" ] || { echo "weak-scaling.sh: --out must not be empty" >&2; exit 2; }
# the whole series is checked before any point runs or is submitted
IFS=, read -r -a glist <<< "$gpus"
[ ${#glist[@]} -gt 0 ] || { echo "weak-scaling.sh: --gpus is empty" >&2; exit 2; }
for i in "${!glist[@]}"; do
    g=${glist[$i]}
    [[ $g =~ ^[0-9]+$ ]] && [ $((10#$g)) -gt 0 ] || { echo "weak-scaling.sh: bad GPU count '$g'" >&2; exit 2; }
    glist[$i]=$((10#$g))
    for ((j = 0; j < i; j++)); do
        [ "${glist[$j]}" -ne "${glist[$i]}" ] || { echo "weak-scaling.sh: --gpus names $g twice" >&2; exit 2; }
    done
    if [ "$launcher" = slurm ]; then
        [[ $gpn =~ ^[0-9]+$ ]] && [ "$gpn" -gt 0 ] || { echo "weak-scaling.sh: --gpus-per-node must be a positive integer" >&2; exit 2; }
        g=${glist[$i]}; per=$(( g < gpn ? g : gpn ))
        [ $(( (g + gpn - 1) / gpn * per )) -eq "$g" ] || { echo "weak-scaling.sh: $g GPUs do not fill nodes of $gpn" >&2; exit 2; }
    fi
done
IFS=, read -r -a mlist <<< "$methods"
[ ${#mlist[@]} -gt 0 ] || { echo "weak-scaling.sh: --methods is empty" >&2; exit 2; }
for i in "${!mlist[@]}"; do
    case ${mlist[$i]} in flock|streamclust) ;; *) echo "weak-scaling.sh: unknown method '${mlist[$i]}'" >&2; exit 2 ;; esac
    for ((j = 0; j < i; j++)); do
        [ "${mlist[$j]}" != "${mlist[$i]}" ] || { echo "weak-scaling.sh: --methods names ${mlist[$i]} twice" >&2; exit 2; }
    done
done
# a word, and a command, as the shell reads them back (paths with spaces, the binder's script)
word() { case $1 in "" | *[!A-Za-z0-9_./:=,+%@-]*) printf "'%s'" "${1//\'/\'\\\'\'}" ;; *) printf '%s' "$1" ;; esac; }
show() { local a line="+"; for a in "$@"; do [ "$a" = "&" ] && line+=" &" || line+=" $(word "$a")"; done; echo "$line"; }
if [ "$launcher" = slurm ]; then
    # the jobs get the options in ARGS, split at white space (jobs/weak-scaling.sbatch)
    for w in "${extra[@]}"; do
        case $w in *[[:space:]]*) echo "weak-scaling.sh: '$w': under SLURM an option cannot hold white space (the jobs' ARGS is split at it)" >&2; exit 2 ;; esac
    done
fi
mkdir -p "$out"
[ -z "${GLIBC_TUNABLES:-}" ] || echo "GLIBC_TUNABLES=$GLIBC_TUNABLES"
status=0; points=()
if [ "$launcher" = mpiexec ]; then
    ncores=$(env -u OMP_NUM_THREADS nproc) # this process's cores (nproc alone obeys OMP_NUM_THREADS)
    # the cores of one GPU: OMP_NUM_THREADS, else the host's cores over its GPUs (or over the
    # largest point when no GPU is visible)
    if [ -z "$cpr" ]; then
        if [ -n "${OMP_NUM_THREADS:-}" ]; then cpr=$OMP_NUM_THREADS
        else
            ng=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
            if [ "${ng:-0}" -eq 0 ]; then ng=1; for g in "${glist[@]}"; do [ "$g" -gt "$ng" ] && ng=$g; done; fi
            cpr=$(( ncores / ng > 0 ? ncores / ng : 1 ))
        fi
    fi
    [[ $cpr =~ ^[0-9]+$ ]] && [ "$cpr" -gt 0 ] || { echo "weak-scaling.sh: --cores-per-rank must be a positive integer" >&2; exit 2; }
    if [ $bind -eq 1 ] && ! command -v taskset >/dev/null 2>&1; then
        echo "weak-scaling.sh: taskset not found: ranks not bound to cores" >&2; bind=0
    fi
    case $border in physical|linear) ;; *) echo "weak-scaling.sh: --bind-order must be physical or linear" >&2; exit 2 ;; esac
    # this process's CPUs in binding order, one per line (physical: by socket, core, CPU, from
    # lscpu; linear, or without lscpu: by number)
    cpus=$(taskset -pc $$ 2>/dev/null | sed 's/.*: *//' | tr ',' '\n' | awk -F- '{ b = $1; e = NF > 1 ? $2 : $1; for (c = b; c <= e; c++) print c }')
    [ -n "$cpus" ] || cpus=$(seq 0 $((ncores - 1)))
    if [ "$border" = physical ] && command -v lscpu >/dev/null 2>&1; then
        ordered=$(lscpu -p=CPU,CORE,SOCKET 2>/dev/null | awk -F, -v list="$(echo $cpus)" '
            BEGIN { n = split(list, l, " "); for (i = 1; i <= n; i++) mine[l[i]] = 1 }
            /^#/ { next }
            ($1 in mine) { printf "%d %d %d\n", ($3 == "" ? 0 : $3), ($2 == "" ? $1 : $2), $1 }' | sort -n -k1,1 -k2,2 -k3,3 | awk '{ print $3 }')
        [ "$(echo "$ordered" | grep -c .)" -eq "$(echo "$cpus" | grep -c .)" ] && cpus=$ordered
    fi
    # block b: CPUs b*C+1 .. b*C+C of that order, as a taskset list
    block() { echo "$cpus" | sed -n "$(($1 * cpr + 1)),$(($1 * cpr + cpr))p" | paste -sd, -; }
fi
if [ "$launcher" = mpiexec ] && [ "$touch" -gt 0 ]; then
    # 8 writers of GIB/8 each (python's bytearray(n) writes its n zero bytes), then freed
    per=$(( (touch * 1024 + 7) / 8 )) # MiB per writer
    echo "+ touching ${touch} GiB of host memory (8 x ${per} MiB)"
    if [ $dry -eq 0 ]; then
        start=$(date +%s.%N); tp=()
        for ((i = 0; i < 8; i++)); do python3 -c "import sys; b = bytearray(int(sys.argv[1]) << 20)" "$per" & tp+=($!); done
        for p in "${tp[@]}"; do wait "$p" || { echo "weak-scaling.sh: --touch-memory: a writer failed (too much memory?)" >&2; exit 1; }; done
        echo "  ($(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s)"
    fi
fi
# an older series' concurrent 1-GPU runs (--shared-baseline) and their table must not stand in
# for this series' (scaling-table.py reads every DIR/.shared/<method>-r*)
[ $dry -eq 1 ] || rm -f "$out/shared-host.csv"
for m in "${mlist[@]}"; do
    [ $dry -eq 1 ] || rm -rf "${out:?}/.shared/$m"-r*
    # the method's own options (word-split on purpose), then those after --
    if [ "$m" = flock ]; then read -r -a margs <<< "$fargs"; else read -r -a margs <<< "$sargs"; fi
    for g in "${glist[@]}"; do
        points+=("$m-$g")
        # an older series' outputs of this point must not stand in for a run of this one that fails
        [ $dry -eq 1 ] || rm -rf "${out:?}/$m-$g" "$out/$m-$g.log" "$out"/."$m-$g".run*
        if [ "$launcher" = mpiexec ]; then
            # each rank gets its share of the cores as OpenMP threads (oversubscribed OpenMP
            # threads cost flock 2.2x and 4.7x on 2 and 4 GPUs, bench/RESULTS.md), bound to those
            # cores unless --no-bind (the local rank picks its block of cores)
            omp=$cpr
            binder=()
            if [ $bind -eq 1 ]; then
                if [ $((g * cpr)) -le "$ncores" ]; then
                    blocks=$(for ((i = 0; i < g; i++)); do block $i; done | paste -sd';' -)
                    echo "  rank blocks of CPUs ($border order): $blocks"
                    # the local rank picks its block (field r + 1 of DM_CPU_BLOCKS)
                    binder=(env DM_CPU_BLOCKS="$blocks" sh -c 'r=${MPI_LOCALRANKID:-${OMPI_COMM_WORLD_LOCAL_RANK:-${PMI_RANK:-0}}}; c=$(echo "$DM_CPU_BLOCKS" | cut -d";" -f$((r + 1))); [ -n "$c" ] && taskset -c "$c" true 2>/dev/null && exec taskset -c "$c" "$@"; exec "$@"' bind)
                else
                    echo "weak-scaling.sh: $g ranks x $cpr cores exceed the $ncores cores: not bound" >&2
                fi
            fi
            failed=" " # the runs that exited with an error (a report of one is no success)
            for ((r = 1; r <= repeats; r++)); do
                dir=$out/$m-$g; [ "$repeats" -eq 1 ] || dir=$out/.$m-$g.run$r
                cmd=(env OMP_NUM_THREADS="$omp" mpiexec -n "$g" "${binder[@]}" "$docmine" pipeline --synthetic default --docs-per-rank "$dpg" --method "$m"
                     -o "$dir" "${margs[@]}" "${extra[@]}")
                show "${cmd[@]}"
                [ $dry -eq 0 ] || continue
                start=$(date +%s.%N)
                if ! "${cmd[@]}" 2>&1 | tee "$dir.log"; then  # the log holds the run's errors too
                    echo "weak-scaling.sh: $m-$g failed (log: $dir.log)" >&2
                    failed+="$r "
                fi
                echo "  ($(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s including start-up)"
            done
            best=1
            if [ "$repeats" -gt 1 ] && [ $dry -eq 0 ]; then
                # keep the successful run with the smallest pipeline time (the slowest rank's), drop
                # the others
                best=$(python3 - "$out" "$m-$g" "$repeats" "$failed" <<'PY'
import json, sys
out, point, n, failed = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split()
def total(r):
    if str(r) in failed:
        return float("inf")
    try:
        with open(f"{out}/.{point}.run{r}/report.json") as f:
            return float(json.load(f)["timers_s"]["pipeline.total"]["max"])
    except (OSError, ValueError, KeyError):
        return float("inf")
times = [total(r) for r in range(1, n + 1)]
best = min(range(1, n + 1), key=lambda r: times[r - 1])
print(best if times[best - 1] != float("inf") else 0)  # 0: no run succeeded with a report
print(" ".join(f"{t:.3f}" for t in times), file=sys.stderr)
PY
)
                if [ "$best" -eq 0 ]; then
                    echo "  no run of $m-$g succeeded with a report (log of the last: $out/$m-$g.log)"
                    best=$repeats
                else
                    echo "  kept run $best of $repeats for $m-$g"
                fi
                rm -rf "${out:?}/$m-$g"
                [ ! -d "$out/.$m-$g.run$best" ] || mv "$out/.$m-$g.run$best" "$out/$m-$g"
                mv "$out/.$m-$g.run$best.log" "$out/$m-$g.log"
                rm -rf "$out"/."$m-$g".run*
            fi
            # a point whose kept run exited with an error fails the series even where it left a report
            if [ $dry -eq 0 ] && [[ $failed == *" $best "* ]]; then
                echo "weak-scaling.sh: $m-$g: its run exited with an error (log: $out/$m-$g.log)" >&2
                status=1
            fi
        else
            nodes=$(( (g + gpn - 1) / gpn )); per=$(( g < gpn ? g : gpn ))
            # the parameters travel in the environment (--export=ALL): sbatch --export=ALL,NAME=VALUE
            # splits at every comma, which would cut ARGS such as "--k 10,20"
            cmd=(env DOCMINE="$docmine" METHOD="$m" DOCS_PER_GPU="$dpg" OUT="$out" ARGS="${margs[*]} ${extra[*]}"
                 sbatch --parsable --nodes="$nodes" --ntasks-per-node="$per" --gpus-per-task=1 --export=ALL
                 "$here/weak-scaling.sbatch")
            show "${cmd[@]}"
            if [ $dry -eq 0 ]; then
                job=$("${cmd[@]}") || { echo "weak-scaling.sh: sbatch failed for $m-$g" >&2; status=1; continue; }
                echo "  job $job"
            fi
        fi
    done
    if [ "$launcher" = mpiexec ] && [ $shared -eq 1 ]; then
        # the 1-GPU point on every GPU of the largest point at once: independent runs, each with
        # its own GPU and block of cores and the documents of rank i of that point (its share of
        # the G-GPU corpus: the shares' work differs, e.g. streamclust's local search), so that
        # they share the host and do the ranks' work as the ranks of that point do but do not
        # communicate
        G=1; for g in "${glist[@]}"; do [ "$g" -gt "$G" ] && G=$g; done
        sdir=$out/.shared; pids=()
        [ $dry -eq 1 ] || mkdir -p "$sdir"
        for ((i = 0; i < G; i++)); do
            tset=()
            if [ $bind -eq 1 ] && [ $((G * cpr)) -le "$ncores" ]; then tset=(taskset -c "$(block "$i")"); fi
            cmd=(env CUDA_VISIBLE_DEVICES="$i" OMP_NUM_THREADS="$cpr" "${tset[@]}" mpiexec -n 1 "$docmine" pipeline --synthetic default
                 --docs-per-rank "$dpg" --synth-share "$i/$G" --method "$m" -o "$sdir/$m-r$i" "${margs[@]}" "${extra[@]}")
            show "${cmd[@]}" "&"
            [ $dry -eq 0 ] || continue
            "${cmd[@]}" > "$sdir/$m-r$i.log" 2>&1 &
            pids+=($!)
        done
        for p in "${pids[@]}"; do
            wait "$p" || { echo "weak-scaling.sh: a concurrent 1-GPU run of $m failed (logs in $sdir)" >&2; status=1; }
        done
    fi
done
plist=$(IFS=,; echo "${points[*]}")
if [ "$launcher" = mpiexec ] && [ $dry -eq 0 ]; then
    # exit 1 when a point has no report (the table marks it)
    "$here/scaling-table.py" "$out" --points "$plist" || status=1
else
    echo "when the jobs have finished: $(word "$here/scaling-table.py") $(word "$out") --points $(word "$plist")"
fi
exit $status
