#!/bin/bash
# scripts/device-check.sh [--dry-run] [OUTDIR]: clinformer on the GPU of a
# Linux machine with no package registry, within 9 minutes, from the device
# kit (make device-bundle) or from a built source tree.
#
# Steps, each with its status and time: the kit's shared objects; the
# vendor's OpenCL driver (NVIDIA libnvidia-opencl.so.1, also under
# /usr/local/nvidia; AMD libamdocl64.so; Intel libigdrcl.so), written as an
# .icd file into a private vendors directory that OCL_ICD_VENDORS names (no
# root needed); clinformer devices; the test programs that need a device;
# the bench's quick matrix; n = 4096..65536 in Linformer, full and causal
# modes with B = 1 and 8; where python3 has torch with CUDA, the same
# lucidrains layer on PyTorch CUDA fp32 (TF32 off) side by side
# (bench/vs_pytorch.py with the kit's linformer wheel); and clinformer tune
# for the device (its tune file copied to OUTDIR/tune.txt).  Each step has a
# share of the budget (the bench's --budget inside a timeout); what did not
# fit is reported as cut.  Writes summary.txt, device-check.json and
# device-check.log to OUTDIR ($OUT, else ./device-check-out).  Left out:
# test_gpu_fill (launch geometry against an offline table, no device's
# behaviour), and in a dry run test_tune and test_batch_full too.
#
# --dry-run (or CLF_DEVICE_CHECK_DRY=1): every step at small sizes on
# whatever OpenCL device is present (a few minutes on a 2-core CPU); with
# no GPU driver found it falls back to the ICDs already visible.  A dry run
# is sized to finish: a step cut there fails it (exit 1).
#
# Environment: CLF_DEVICE_CHECK_BUDGET (seconds, default 540; dry 320),
# CLF_KIT (the kit directory), CLF_BUILD_DIR (a built tree, when run from
# the project root without a kit), CLINFORMER_DEVICE (the device to use),
# CLF_DEVICE_CHECK_KEEP=1 (keep the work directory).
# Exit status: 0 when no step failed, 1 otherwise, 2 for bad usage.
set -u

dry=${CLF_DEVICE_CHECK_DRY:-0}
out=""
while [ $# -gt 0 ]; do
    case $1 in
    --dry-run) dry=1 ;;
    -h | --help)
        sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'
        exit 0
        ;;
    -*)
        echo "device-check: unknown option $1 (--dry-run, --help)" >&2
        exit 2
        ;;
    *)
        [ -z "$out" ] || {
            echo "device-check: one output directory only" >&2
            exit 2
        }
        out=$1
        ;;
    esac
    shift
done
[ "$dry" = 1 ] || dry=0
out=${out:-${OUT:-device-check-out}}
mkdir -p "$out" || {
    echo "device-check: cannot create $out" >&2
    exit 1
}
out=$(cd "$out" && pwd)
if [ "$dry" = 1 ]; then
    budget=${CLF_DEVICE_CHECK_BUDGET:-320}
else
    budget=${CLF_DEVICE_CHECK_BUDGET:-540}
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/clf-device-check.XXXXXX") || exit 1
log=$out/device-check.log
: >"$log"
t_start=$SECONDS
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)

cleanup() { [ "${CLF_DEVICE_CHECK_KEEP:-0}" = 1 ] || rm -rf "$work"; }
trap cleanup EXIT

say() { # to the terminal and the log
    local line
    line=$(printf '[device-check %6.1f s] %s' "$((SECONDS - t_start))" "$*")
    echo "$line"
    echo "$line" >>"$log"
}

# ------------------------------------------------------------------ steps
STEP_NAMES=()
STEP_STATUS=()
STEP_SECS=()
STEP_BUDGET=()
STEP_NOTES=()
step_t0=0
step_budget=0

# The planned share of each step in seconds; a step that finishes early
# leaves its time to the next ones.
if [ "$dry" = 1 ]; then
    plan=(devices:20 verify:12 tests:130 bench_quick:50 bench_large:40 pytorch:30 tune:20)
else
    plan=(devices:20 verify:60 tests:200 bench_quick:40 bench_large:90 pytorch:60 tune:60)
fi
# a budget below the plan's sum shrinks every share in proportion
plan_sum=0
for p in "${plan[@]}"; do plan_sum=$((plan_sum + ${p#*:})); done
if [ "$budget" -lt $((plan_sum + 10)) ]; then
    for i in "${!plan[@]}"; do
        p=${plan[$i]}
        plan[i]="${p%%:*}:$((${p#*:} * (budget - 10) / (plan_sum + 10)))"
    done
fi
planned() { # step -> its share
    local p
    for p in "${plan[@]}"; do [ "${p%%:*}" = "$1" ] && echo "${p#*:}"; done
}
later_shares() { # step -> sum of the shares after it
    local p seen=0 sum=0
    for p in "${plan[@]}"; do
        [ $seen = 1 ] && sum=$((sum + ${p#*:}))
        [ "${p%%:*}" = "$1" ] && seen=1
    done
    echo $sum
}

# step_begin NAME: sets step_budget (0: no time left for it)
step_begin() {
    local share left
    step_t0=$SECONDS
    share=$(planned "$1")
    # 10 s stay for the kill grace of a timeout and the summary
    left=$((budget - (SECONDS - t_start) - 10))
    if [ -z "$share" ]; then
        step_budget=$left
    else
        step_budget=$((left - $(later_shares "$1")))
        [ $step_budget -le $((2 * share)) ] || step_budget=$((2 * share))
        [ $step_budget -ge "$share" ] || step_budget=$((share < left ? share : left))
    fi
    [ $step_budget -ge 5 ] || step_budget=0
    say "step $1: started (budget ${step_budget} s)"
}

step_end() { # NAME STATUS NOTE
    STEP_NAMES+=("$1")
    STEP_STATUS+=("$2")
    STEP_SECS+=($((SECONDS - step_t0)))
    STEP_BUDGET+=("$step_budget")
    STEP_NOTES+=("$3")
    say "step $1: $2 in $((SECONDS - step_t0)) s${3:+ ($3)}"
}

# ------------------------------------------------------------------ layout
here=$(cd "$(dirname "$0")/.." && pwd)
kit=""
if [ -n "${CLF_KIT:-}" ]; then
    kit=$(cd "$CLF_KIT" && pwd)
elif [ -n "${CLF_BUILD_DIR:-}" ]; then
    kit=""
elif [ -f "$here/MANIFEST" ] && [ -x "$here/libexec/clinformer" ]; then
    kit=$here
elif [ -f "$here/device-bundle/MANIFEST" ]; then
    kit=$here/device-bundle
fi
if [ -n "$kit" ]; then
    ENV=("$kit/bin/clf-env")
    CLF=$kit/libexec/clinformer
    CLF_CMD=$kit/bin/clinformer
    TESTBIN=$kit/libexec/tests
    TOPSRC=$kit
    VSPY=$kit/bench/vs_pytorch.py
    LINF=$(ls "$kit"/python/linformer-* 2>/dev/null | head -1)
    tests=$(cd "$TESTBIN" 2>/dev/null && ls)
    where="kit $kit"
else
    build=${CLF_BUILD_DIR:-$here}
    build=$(cd "$build" && pwd)
    ENV=()
    CLF=$build/clinformer
    CLF_CMD=$CLF
    TESTBIN=$build/tests
    TOPSRC=$here
    VSPY=$here/bench/vs_pytorch.py
    LINF=${LINFORMER_DIST:-$(ls "$build"/device-bundle-cache/linformer-* 2>/dev/null | head -1)}
    tests=$(grep -lE 'tu_run\(.*, *1\)|tu_context\(\)|clf_context_create' \
        "$here"/tests/test_*.c 2>/dev/null | xargs -n1 basename 2>/dev/null |
        sed 's/\.c$//')
    where="source tree $here, build $build"
fi
# Test programs not run: test_gpu_fill checks launch geometry at a
# pretended compute-unit count against an offline table (CI's slow part
# runs it from the source tree; the kit carries none).  The dry run runs a
# fixed set sized to finish well within its share on a 2-core CPU: the
# tuner's suite (test_tune) and full mode at B = 8, n = 4096 on every way
# (test_batch_full) take minutes there, and CI's build part runs both.
left_out="test_gpu_fill"
[ "$dry" = 0 ] || left_out="$left_out test_tune test_batch_full"
kept=""
dropped=""
for t in $tests; do
    case " $left_out " in
    *" $t "*) dropped="$dropped $t" ;;
    *) kept="$kept $t" ;;
    esac
done
tests=${kept# }
export CLINFORMER_CACHE_DIR=$work/cache
mkdir -p "$CLINFORMER_CACHE_DIR"

say "clinformer device check$([ "$dry" = 1 ] && echo ', dry run'): budget ${budget} s, output $out"
say "using the $where"

# ------------------------------------------------------------- environment
step_begin host
host_note="$(uname -srm)"
glibc_have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{ print $2 }')
glibc_need=""
[ -n "$kit" ] && glibc_need=$(awk -F': ' '$1 == "glibc" { print $2 }' "$kit/MANIFEST")
host_status=ok
if [ -n "$glibc_need" ] && [ -n "$glibc_have" ] &&
    [ "$(printf '%s\n%s\n' "$glibc_need" "$glibc_have" | sort -t. -k1,1n -k2,2n | head -1)" != "$glibc_need" ]; then
    host_status=failed
    host_note="$host_note; glibc $glibc_have is older than the $glibc_need the kit was built for"
else
    host_note="$host_note; glibc ${glibc_have:-?}${glibc_need:+ (kit needs $glibc_need)}"
fi
for c in timeout ldd; do
    if ! command -v $c >/dev/null 2>&1; then
        host_status=failed
        host_note="$host_note; no $c on the PATH"
    fi
done
gpus=""
if command -v nvidia-smi >/dev/null 2>&1; then
    gpus=$(timeout 20 nvidia-smi -L 2>/dev/null | head -4 | tr '\n' ';')
fi
[ -z "$gpus" ] || host_note="$host_note; nvidia-smi: $gpus"
step_end host $host_status "$host_note"

# ------------------------------------------------------- shared objects
step_begin kit
kit_status=ok
kit_note=""
progs=("$CLF")
[ -n "$kit" ] && progs+=("$kit"/libexec/clinformer-bench)
for t in $tests; do progs+=("$TESTBIN/$t"); done
nf=""
for p in "${progs[@]}"; do
    if [ ! -e "$p" ]; then
        nf="$nf $(basename "$p"): missing;"
        continue
    fi
    [ -n "$kit" ] || continue # libtool wrappers: ldd cannot read them
    l=$(${ENV[@]+"${ENV[@]}"} ldd "$p" 2>&1)
    if echo "$l" | grep -q 'not found'; then
        nf="$nf $(basename "$p"): $(echo "$l" | awk '/not found/ { printf "%s ", $1 }');"
    fi
done
if [ -n "$nf" ]; then
    kit_status=failed
    kit_note="unresolved:$nf"
elif [ -n "$kit" ]; then
    l=$(${ENV[@]+"${ENV[@]}"} ldd "$CLF" 2>&1)
    echo "$l" >>"$log"
    for so in libclinformer libOpenCL libclblast libjansson libstdc++; do
        p=$(echo "$l" | awk -v s="$so" 'index($1, s) == 1 { print $3 }')
        [ -n "$p" ] || continue
        case $p in
        "$kit"/*) kit_note="$kit_note $so: kit;" ;;
        *) kit_note="$kit_note $so: $p;" ;;
        esac
    done
    kit_note="${#progs[@]} programs resolve;$kit_note"
else
    kit_note="${#progs[@]} programs present"
fi
step_end kit $kit_status "$kit_note"

# ------------------------------------------------------------ the driver
# find_lib NAME DIRS...: the first DIR/NAME, then ldconfig's cache
find_lib() {
    local name=$1 d
    shift
    for d in "$@"; do
        [ -e "$d/$name" ] && {
            echo "$d/$name"
            return 0
        }
    done
    for d in /sbin/ldconfig /usr/sbin/ldconfig ldconfig; do
        if command -v "$d" >/dev/null 2>&1; then
            "$d" -p 2>/dev/null | awk -v n="$name" '$1 == n { print $NF; exit }'
            return 0
        fi
    done
}
step_begin driver
libdirs=()
IFS=: read -r -a ldp <<<"${LD_LIBRARY_PATH:-}"
for d in "${ldp[@]}"; do [ -n "$d" ] && libdirs+=("$d"); done
libdirs+=(/usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu
    /lib/x86_64-linux-gnu /usr/lib64 /lib64 /usr/lib /lib)
vendors=$work/vendors
mkdir -p "$vendors"
found=""
for spec in nvidia:libnvidia-opencl.so.1 amd:libamdocl64.so intel:libigdrcl.so; do
    vendor=${spec%%:*}
    name=${spec#*:}
    extra=()
    case $vendor in
    amd) extra=(/opt/rocm/lib /opt/rocm/opencl/lib /opt/amdgpu-pro/lib64) ;;
    intel) extra=(/usr/lib/x86_64-linux-gnu/intel-opencl /usr/local/lib/intel-opencl
        /opt/intel/opencl) ;;
    esac
    path=$(find_lib "$name" "${libdirs[@]}" "${extra[@]}")
    [ -n "$path" ] || continue
    echo "$path" >"$vendors/$vendor.icd"
    found="$found $vendor:$path"
    # the driver's own libraries (libcuda beside libnvidia-opencl) must
    # resolve from where it lies
    case :${LD_LIBRARY_PATH:-}: in
    *:"$(dirname "$path")":*) ;;
    *)
        LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$(dirname "$path")"
        export LD_LIBRARY_PATH
        ;;
    esac
done
if [ -n "$found" ]; then
    export OCL_ICD_VENDORS=$vendors
    step_end driver ok "found${found}; .icd files in $vendors (OCL_ICD_VENDORS)"
    gpu_driver=1
else
    present=${OCL_ICD_VENDORS:-/etc/OpenCL/vendors}
    icds=$(ls "$present" 2>/dev/null | tr '\n' ' ')
    [ -f "$present" ] && icds=$present
    step_end driver fallback "no GPU OpenCL driver found (libnvidia-opencl.so.1, libamdocl64.so, libigdrcl.so); using the ICDs present: $present ${icds:-(none)}"
    gpu_driver=0
fi

# ----------------------------------------------------------------- devices
step_begin devices
devices_txt=$work/devices.txt
if [ $step_budget -eq 0 ]; then
    step_end devices cut "no time left"
else
    timeout -k 5 "$step_budget" ${ENV[@]+"${ENV[@]}"} "$CLF" devices >"$devices_txt" 2>&1
    rc=$?
    cat "$devices_txt" >>"$log"
    ndev=$(grep -c '^\[[0-9]*\]' "$devices_txt")
    ngpu=$(grep -c '^ *type GPU' "$devices_txt")
    if [ $rc -ne 0 ] || [ "$ndev" -eq 0 ]; then
        step_end devices failed "clinformer devices: exit $rc, $ndev devices: $(tail -1 "$devices_txt")"
    elif [ "$dry" = 0 ] && [ "$ngpu" -eq 0 ]; then
        step_end devices failed "$ndev devices, none a GPU: the figures would be a CPU's"
    else
        step_end devices ok "$ndev devices, $ngpu GPU; first: $(grep -m1 '^\[0\]' "$devices_txt" | sed 's/^\[0\] *//')"
    fi
fi

# ------------------------------------------------------------------ verify
# clinformer verify first: every attention way, GEMM way and softmax in
# every mode against the double-precision reference, with guard bands, for
# the step's budget less a margin; its JSON and any failure's files go to
# OUTDIR.
step_begin verify
if [ $step_budget -lt 10 ]; then
    step_end verify cut "no time left"
else
    timeout -k 5 "$step_budget" ${ENV[@]+"${ENV[@]}"} "$CLF" verify \
        --budget $((step_budget - 8)) --json "$out/verify.json" \
        --save "$out/verify-failures" >"$work/verify.txt" 2>&1
    rc=$?
    cat "$work/verify.txt" >>"$log"
    line=$(grep '^verify: [0-9]* passed' "$work/verify.txt" | sed 's/^verify: //')
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        step_end verify cut "timed out after $((SECONDS - step_t0)) s"
    elif [ $rc -ne 0 ] || [ -z "$line" ]; then
        step_end verify failed "exit $rc: ${line:-$(tail -1 "$work/verify.txt")}"
    else
        step_end verify ok "$line"
    fi
fi

# ------------------------------------------------------------------- tests
tests_txt=$work/tests.txt
: >"$tests_txt"
step_begin tests
if [ -z "$tests" ]; then
    step_end tests failed "no device test programs in $TESTBIN"
elif [ $step_budget -eq 0 ]; then
    step_end tests cut "no time left"
else
    t_end=$((SECONDS + step_budget))
    np=0 nf=0 ncut=0 nrun=0
    failed_names="" cut_names=""
    for t in $tests; do
        left=$((t_end - SECONDS))
        if [ $left -lt 3 ]; then
            ncut=$((ncut + 1))
            cut_names="$cut_names $t"
            printf '%-22s cut (no time left)\n' "$t" >>"$tests_txt"
            continue
        fi
        t0=$SECONDS
        echo "--- $t" >>"$log"
        (cd "$work" && top_srcdir=$TOPSRC top_builddir=$TOPSRC \
            CLINFORMER_REQUIRE_DEVICE=1 CK_VERBOSITY=silent \
            timeout -k 5 "$left" ${ENV[@]+"${ENV[@]}"} "$TESTBIN/$t") >"$work/$t.tap" 2>&1
        rc=$?
        cat "$work/$t.tap" >>"$log"
        ok=$(grep -c '^ok ' "$work/$t.tap")
        bad=$(grep -c '^not ok ' "$work/$t.tap")
        np=$((np + ok))
        nf=$((nf + bad))
        nrun=$((nrun + 1))
        if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
            ncut=$((ncut + 1))
            cut_names="$cut_names $t"
            st="cut (timed out after $((SECONDS - t0)) s)"
        elif [ $rc -ne 0 ] || [ "$bad" -gt 0 ] || [ "$ok" -eq 0 ]; then
            failed_names="$failed_names $t"
            st="FAILED (exit $rc)"
        else
            st=ok
        fi
        printf '%-22s %-10s %4d passed %3d failed %5d s\n' "$t" "$st" "$ok" "$bad" \
            $((SECONDS - t0)) >>"$tests_txt"
    done
    note="$nrun programs, $np passed, $nf failed"
    [ -z "$dropped" ] || note="$note; left out:$dropped"
    [ -z "$failed_names" ] || note="$note; failed:$failed_names"
    [ -z "$cut_names" ] || note="$note; cut:$cut_names"
    if [ -n "$failed_names" ]; then
        step_end tests failed "$note"
    elif [ $ncut -gt 0 ]; then
        step_end tests cut "$note"
    else
        step_end tests ok "$note"
    fi
fi

# ------------------------------------------------------------------- bench
declare -A BENCH_ARGS
# bench_step NAME ARGS...: the bench with --budget inside a timeout
bench_step() {
    local name=$1 b rc cut nrows
    shift
    step_begin "$name"
    if [ $step_budget -eq 0 ]; then
        step_end "$name" cut "no time left"
        return
    fi
    # the bench's budget leaves room for its start, the first calls and a
    # forward already started
    b=$((step_budget * 3 / 4))
    BENCH_ARGS[$name]="$* --budget $b"
    echo "--- clinformer bench $* --budget $b" >>"$log"
    timeout -k 5 "$step_budget" ${ENV[@]+"${ENV[@]}"} "$CLF" bench "$@" --budget "$b" \
        --json "$work/$name.json" >"$work/$name.txt" 2>"$work/$name.err"
    rc=$?
    cat "$work/$name.txt" "$work/$name.err" >>"$log"
    nrows=$(grep -Ec '^ +[0-9]+ +([0-9]+|-) +([0-9]+|-) +[0-9]+ +[0-9]+ +[0-9]+ +[a-z-]+ ' \
        "$work/$name.txt")
    cut=$(grep -c 'not run' "$work/$name.txt")
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        step_end "$name" cut "stopped at the step's ${step_budget} s: no JSON; $(tail -1 "$work/$name.err")"
    elif [ $rc -ne 0 ] || [ ! -s "$work/$name.json" ]; then
        step_end "$name" failed "exit $rc: $(grep -v '^\[' "$work/$name.err" | grep . | tail -1)"
    elif [ "$cut" -gt 0 ]; then
        step_end "$name" cut "$((nrows - cut)) rows measured, $cut not run (over the budget or too large)"
    else
        step_end "$name" ok "$nrows rows measured"
    fi
}

if [ "$dry" = 1 ]; then
    bench_step bench_quick --quick --n 256,512 --repeat 3
    bench_step bench_large --n 512,1024 --modes linformer,full,causal \
        --batch 1,2 --d-model 128 --heads 4 --k 64 --repeat 2
else
    bench_step bench_quick --quick
    bench_step bench_large --n 4096,8192,16384,32768,65536 \
        --modes linformer,full,causal --batch 1,8 --repeat 3
fi

# ----------------------------------------------------------------- pytorch
py_txt=$work/pytorch.txt
: >"$py_txt"
step_begin pytorch
py_json=""
if ! command -v python3 >/dev/null 2>&1; then
    step_end pytorch skipped "no python3"
elif [ $step_budget -eq 0 ]; then
    step_end pytorch cut "no time left"
else
    pyok=1
    python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read())' "$VSPY" \
        2>>"$log" || pyok=0
    # the linformer package: a wheel is importable as it is (pure Python)
    pypath=""
    case $LINF in
    *.whl) pypath=$LINF ;;
    *.tar.gz)
        mkdir -p "$work/py" && tar -xzf "$LINF" -C "$work/py" 2>>"$log" &&
            pypath=$(ls -d "$work"/py/linformer-* | head -1)
        ;;
    esac
    linf_note="linformer: ${LINF:+$(basename "$LINF")}"
    [ -n "$LINF" ] || linf_note="linformer: none bundled"
    if [ -n "$pypath" ] && ! python3 -c "import sys, zipfile, os
p = sys.argv[1]
ok = zipfile.ZipFile(p).getinfo('linformer/linformer.py') if p.endswith('.whl') \
    else os.path.isfile(os.path.join(p, 'linformer', 'linformer.py'))" "$pypath" 2>>"$log"; then
        pyok=0
        linf_note="$linf_note unreadable"
    fi
    have=$(python3 -c 'import torch, numpy, safetensors
print("cuda" if torch.cuda.is_available() else "cpu")' 2>/dev/null)
    if [ $pyok = 0 ]; then
        step_end pytorch failed "bench/vs_pytorch.py or the linformer package is broken; $linf_note"
    elif [ -z "$have" ]; then
        step_end pytorch skipped "python3 lacks torch, numpy or safetensors; vs_pytorch.py compiles, $linf_note readable"
    elif [ "$have" != cuda ] && [ "$dry" = 0 ]; then
        step_end pytorch skipped "torch $(python3 -c 'import torch; print(torch.__version__)') sees no CUDA device"
    else
        if [ "$dry" = 1 ]; then
            runs=("--n 256 --batch 1 --dim 128 --heads 4 --k 64 --repeat 2 --rounds 1")
        else
            runs=("--n 4096,16384,65536 --batch 1" "--n 4096,16384 --batch 8")
        fi
        t_end=$((SECONDS + step_budget))
        i=0 st=ok notes=""
        for r in "${runs[@]}"; do
            i=$((i + 1))
            left=$((t_end - SECONDS))
            if [ $left -lt 10 ]; then
                st="cut"
                notes="$notes run $i ($r) cut: no time left;"
                continue
            fi
            # shellcheck disable=SC2086
            (cd "$work" && PYTHONPATH=$pypath${PYTHONPATH:+:$PYTHONPATH} \
                PYTHONUNBUFFERED=1 timeout -k 5 "$left" python3 "$VSPY" \
                --clinformer "$CLF_CMD" --torch-device "$have" $r \
                --json "$work/pytorch-$i.json") >>"$py_txt" 2>&1
            rc=$?
            if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
                st="cut"
                notes="$notes run $i ($r) stopped at ${left} s;"
            elif [ $rc -ne 0 ]; then
                st=failed
                notes="$notes run $i ($r) exit $rc;"
            fi
        done
        cat "$py_txt" >>"$log"
        py_json=$(ls "$work"/pytorch-*.json 2>/dev/null)
        step_end pytorch $st "torch on $have, $(echo "$py_json" | grep -c . ) result files;${notes} $linf_note"
    fi
fi

# -------------------------------------------------------------------- tune
# clinformer tune on the device within the step's share; the tune file it
# stores (CLBlast's and the tiled kernel's parameters found fastest) is
# copied to OUTDIR/tune.txt.
tune_txt=$work/tune.txt
: >"$tune_txt"
step_begin tune
if [ $step_budget -eq 0 ]; then
    step_end tune cut "no time left"
else
    b=$((step_budget * 3 / 4))
    if [ "$dry" = 1 ]; then
        targs=(--seq-len 256 --d-model 128 --heads 4 --k 64 --budget "$b")
    else
        targs=(--budget "$b")
    fi
    echo "--- clinformer tune ${targs[*]}" >>"$log"
    timeout -k 5 "$step_budget" ${ENV[@]+"${ENV[@]}"} "$CLF" tune "${targs[@]}" \
        >"$tune_txt" 2>&1
    rc=$?
    cat "$tune_txt" >>"$log"
    tfile=$(ls "$CLINFORMER_CACHE_DIR"/tune-*.txt 2>/dev/null | head -1)
    [ -z "$tfile" ] || cp "$tfile" "$out/tune.txt"
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        step_end tune cut "stopped at the step's ${step_budget} s"
    elif [ $rc -ne 0 ]; then
        step_end tune failed "clinformer tune ${targs[*]}: exit $rc: $(tail -1 "$tune_txt")"
    else
        step_end tune ok "clinformer tune ${targs[*]}; ${tfile:+stored, copied to tune.txt; }$(tail -1 "$tune_txt")"
    fi
fi

# ----------------------------------------------------------------- summary
wall=$((SECONDS - t_start))
json_str() { # a JSON string of $1
    printf '"%s"' "$(printf '%s' "$1" | tr -d '\000-\010\013-\037' |
        sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' | awk 'NR > 1 { printf "\\n" } { printf "%s", $0 }')"
}
json_file() { # a JSON file's text, or null
    if [ -s "$1" ]; then cat "$1"; else echo null; fi
}
n_ok=0 n_failed=0 n_cut=0 n_skipped=0
for s in "${STEP_STATUS[@]}"; do
    case $s in
    ok | fallback) n_ok=$((n_ok + 1)) ;;
    failed) n_failed=$((n_failed + 1)) ;;
    cut) n_cut=$((n_cut + 1)) ;;
    *) n_skipped=$((n_skipped + 1)) ;;
    esac
done
final="device-check: $n_ok ok, $n_failed failed, $n_cut cut, $n_skipped skipped in $wall s (budget $budget s)"

{
    echo "clinformer device check$([ "$dry" = 1 ] && echo ' (dry run)'), $started"
    echo "$where"
    [ -z "$kit" ] || sed -n 's/^\(version\|glibc\|linformer\): /  \1: /p' "$kit/MANIFEST"
    echo
    echo "steps:"
    for i in "${!STEP_NAMES[@]}"; do
        printf '  %-12s %-9s %4s s  (budget %s s) %s\n' "${STEP_NAMES[$i]}" \
            "${STEP_STATUS[$i]}" "${STEP_SECS[$i]}" "${STEP_BUDGET[$i]}" "${STEP_NOTES[$i]}"
    done
    echo
    echo "== clinformer devices"
    cat "$devices_txt" 2>/dev/null
    echo
    echo "== device tests"
    cat "$tests_txt"
    for b in bench_quick bench_large; do
        echo
        echo "== $b: clinformer bench ${BENCH_ARGS[$b]:-(not run)}"
        cat "$work/$b.txt" 2>/dev/null
    done
    echo
    echo "== pytorch (bench/vs_pytorch.py)"
    if [ -s "$py_txt" ]; then
        cat "$py_txt"
    else
        for i in "${!STEP_NAMES[@]}"; do
            [ "${STEP_NAMES[$i]}" = pytorch ] && echo "(not run: ${STEP_NOTES[$i]})"
        done
    fi
    echo
    echo "== tune: clinformer tune ${targs[*]:-(not run)}"
    cat "$tune_txt" 2>/dev/null
    echo
    echo "$final"
} >"$out/summary.txt"

{
    echo "{"
    echo "  \"schema\": \"clinformer-device-check/1\","
    echo "  \"dry_run\": $([ "$dry" = 1 ] && echo true || echo false),"
    echo "  \"started\": $(json_str "$started"),"
    echo "  \"host\": $(json_str "$(uname -srm)"),"
    echo "  \"where\": $(json_str "$where"),"
    echo "  \"budget_s\": $budget,"
    echo "  \"wall_s\": $wall,"
    echo "  \"gpu_driver_found\": $([ "${gpu_driver:-0}" = 1 ] && echo true || echo false),"
    echo "  \"steps\": ["
    for i in "${!STEP_NAMES[@]}"; do
        [ "$i" -eq 0 ] || echo "    ,"
        echo "    {\"name\": $(json_str "${STEP_NAMES[$i]}"), \"status\": $(json_str "${STEP_STATUS[$i]}"), \"seconds\": ${STEP_SECS[$i]}, \"budget_s\": ${STEP_BUDGET[$i]}, \"note\": $(json_str "${STEP_NOTES[$i]}")}"
    done
    echo "  ],"
    echo "  \"devices\": $(json_str "$(cat "$devices_txt" 2>/dev/null)"),"
    echo "  \"tests\": $(json_str "$(cat "$tests_txt")"),"
    echo "  \"bench_quick\": $(json_file "$work/bench_quick.json"),"
    echo "  \"bench_large\": $(json_file "$work/bench_large.json"),"
    echo "  \"pytorch\": ["
    first=1
    for f in $py_json; do
        [ $first = 1 ] || echo "    ,"
        first=0
        json_file "$f"
    done
    echo "  ],"
    echo "  \"tune\": $(json_str "$(cat "$tune_txt" 2>/dev/null)"),"
    echo "  \"summary\": $(json_str "$final")"
    echo "}"
} >"$out/device-check.json"

say "wrote $out/summary.txt, $out/device-check.json, $out/device-check.log"
say "$final"
# A dry run is sized to finish every step: a cut there would hide what a
# faster host runs, so it fails.
if [ "$dry" = 1 ] && [ $n_cut -gt 0 ]; then
    say "a dry run must cut nothing: $n_cut steps cut"
    exit 1
fi
[ $n_failed -eq 0 ]
