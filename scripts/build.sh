#!/bin/sh
# Installs the Debian packages clinformer needs (when missing), then
# configures and builds it in the source tree.  Extra configure flags come
# from CLF_CONFIGURE_FLAGS (CI passes --enable-werror).
set -eu
cd "$(dirname "$0")/.."
sh scripts/install-deps.sh
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt configure ]; then
    autoreconf -fi
fi
if [ ! -f Makefile ] || [ configure -nt Makefile ] || [ -n "${CLF_CONFIGURE_FLAGS:-}" ]; then
    # shellcheck disable=SC2086
    ./configure ${CLF_CONFIGURE_FLAGS:-}
fi
make -j"$(nproc)"
