#!/bin/sh
# The public header compiles warning-free for an embedder: as C89 (but for
# the long long fields of the API), C99, C11, C++11 and C++17 under
# -Wall -Wextra -pedantic -Werror, and it leaves the OpenCL API version to
# the caller (defined before or after it, or not at all).  Output is TAP.
# cl_version.h's "Defaulting to 300" #pragma message is a note, not a
# warning, so it does not fail -Werror.
set -u
srcdir=${top_srcdir:-.}
builddir=${top_builddir:-.}
cc=${CC:-cc}
cxx=${CXX:-c++}
inc="-I$srcdir/include -I$builddir/include ${OPENCL_CFLAGS:-}"
strict="-Wall -Wextra -pedantic -Werror"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
failed=0

# A translation unit that uses a few declarations of the header.
cat >"$tmp/uses.h" <<'EOF'
static int
uses_header(void)
{
    clf_context *ctx = 0;
    clf_context_destroy(ctx);
    return clf_version() != 0 && clf_strerror(CLF_EINVALID_ARGUMENT) != 0;
}
EOF
printf '#include <clinformer.h>\n#include "uses.h"\n%s\n' \
    'int main(void) { return uses_header() ? 0 : 1; }' >"$tmp/plain.c"
cp "$tmp/plain.c" "$tmp/plain.cpp"

# The header first, then the caller's own target version: no redefinition.
cat >"$tmp/define_after.c" <<'EOF'
#include <clinformer.h>
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include "uses.h"
int main(void) { return uses_header() ? 0 : 1; }
EOF

# No version defined at all: OpenCL 2.0 declarations stay visible.
cat >"$tmp/opencl20.c" <<'EOF'
#include <clinformer.h>
#include "uses.h"
int
main(void)
{
    cl_command_queue(CL_API_CALL * create)(
        cl_context, cl_device_id, const cl_queue_properties *, cl_int *) =
        clCreateCommandQueueWithProperties;
    void *(CL_API_CALL * svm_alloc)(cl_context, cl_svm_mem_flags, size_t,
                                    cl_uint) = clSVMAlloc;
    return uses_header() && create != 0 && svm_alloc != 0 ? 0 : 1;
}
EOF

# The library's own setting, defined before the header, still works.
printf '#define CL_TARGET_OPENCL_VERSION 120\n' >"$tmp/define_120.c"
cat "$tmp/plain.c" >>"$tmp/define_120.c"

check() { # name, compiler, flags, file
    name=$1
    comp=$2
    flags=$3
    file=$4
    n=$((n + 1))
    # shellcheck disable=SC2086
    if $comp $flags $strict $inc -I"$tmp" -c "$tmp/$file" \
        -o "$tmp/out.o" >"$tmp/log" 2>&1; then
        echo "ok $n - $name"
    else
        echo "not ok $n - $name"
        sed 's/^/# /' "$tmp/log" | head -30
        failed=$((failed + 1))
    fi
}

check_cxx() { # as check, skipped without a C++ compiler
    if command -v "${cxx%% *}" >/dev/null 2>&1; then
        check "$@"
    else
        n=$((n + 1))
        echo "ok $n - $1 # SKIP no C++ compiler ($cxx)"
    fi
}

echo "1..9"
check header_c89_pedantic_clean "$cc" "-std=c89 -Wno-long-long" plain.c
check header_c99_pedantic_clean "$cc" "-std=c99" plain.c
check header_c11_pedantic_clean "$cc" "-std=c11" plain.c
check_cxx header_cxx11_pedantic_clean "$cxx" "-std=c++11" plain.cpp
check_cxx header_cxx17_pedantic_clean "$cxx" "-std=c++17" plain.cpp
check header_then_define_300_no_redefinition "$cc" "-std=c99" \
    define_after.c
check header_no_version_keeps_opencl20_declarations "$cc" "-std=c99" \
    opencl20.c
check header_define_120_first_compiles "$cc" "-std=c99" define_120.c
check header_define_300_on_command_line "$cc" \
    "-std=c11 -DCL_TARGET_OPENCL_VERSION=300" opencl20.c
test $failed -eq 0
