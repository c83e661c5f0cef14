"""Builds the clinformer extension: the project's C library, then a cffi
module over it.

By default the library is built here from the project's sources (the
directory above this one, or $CLINFORMER_SOURCE_DIR) as a static,
position-independent archive and linked into the extension, so the wheel
needs no installed libclinformer; its dependencies (OpenCL ICD loader,
CLBlast, jansson) are linked as shared libraries found by pkg-config.
CLINFORMER_USE_SYSTEM=1 links an installed libclinformer through
`pkg-config clinformer` instead.
"""

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _clinformer_cdef  # noqa: E402

# Files configure writes into a tree it is run in; an in-tree configured
# checkout must not be built from out of tree (automake refuses), so such a
# tree is copied without them.
BUILD_PRODUCTS = (
    "config.status", "config.log", "config.h", "libtool", "stamp-h1",
    "Makefile", "*.o", "*.lo", "*.la", ".libs", ".deps", ".dirstamp",
    "autom4te.cache", "_build", "clinformer.pc", "version.h", "python",
    ".git", "*.log", "*.trs", "cl_sources.c",
)


def project_root():
    root = os.environ.get("CLINFORMER_SOURCE_DIR")
    root = Path(root).resolve() if root else HERE.parent
    if not (root / "configure.ac").is_file() or not (
        root / "include" / "clinformer.h"
    ).is_file():
        sys.exit(
            "clinformer: no project sources at %s (configure.ac, "
            "include/clinformer.h). Build the package from the project "
            "tree (pip install ./python) or set CLINFORMER_SOURCE_DIR to "
            "a clinformer checkout." % root
        )
    return root


def run(cmd, cwd):
    print("clinformer: (cd %s && %s)" % (cwd, " ".join(map(shlex.quote, cmd))),
          flush=True)
    subprocess.run(cmd, cwd=str(cwd), check=True)


def pkg_config(*args):
    try:
        out = subprocess.run(["pkg-config", *args], check=True,
                             stdout=subprocess.PIPE, universal_newlines=True)
    except FileNotFoundError:
        sys.exit("clinformer: pkg-config not found (Debian: pkg-config)")
    except subprocess.CalledProcessError:
        sys.exit("clinformer: pkg-config %s failed; install the -dev "
                 "packages scripts/install-deps.sh lists" % " ".join(args))
    return shlex.split(out.stdout)


def source_tree(root, temp):
    """The tree to configure from: root itself, or a clean copy of it when
    root was configured in place."""
    if not (root / "config.status").exists():
        return root
    copy = temp / "src"
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(str(root), str(copy),
                    ignore=shutil.ignore_patterns(*BUILD_PRODUCTS))
    return copy


def build_static_library(temp):
    root = project_root()
    temp.mkdir(parents=True, exist_ok=True)
    src = source_tree(root, temp)
    if not (src / "configure").is_file():
        run(["autoreconf", "-fi"], src)
    build = temp / "build"
    build.mkdir(exist_ok=True)
    if not (build / "config.status").is_file():
        run([str(src / "configure"), "--disable-shared", "--enable-static",
             "--with-pic", "--without-mpi", "--disable-dependency-tracking"],
            build)
    jobs = os.environ.get("CLINFORMER_JOBS", "2")
    run(["make", "-j" + jobs, "libclinformer.la"], build)
    archive = build / ".libs" / "libclinformer.a"
    if not archive.is_file():
        sys.exit("clinformer: make did not produce %s" % archive)
    return src, build, archive


class BuildExt(build_ext):
    def run(self):
        temp = Path(self.build_temp).resolve() / "clinformer-c"
        ext = self.extensions[0]
        if os.environ.get("CLINFORMER_USE_SYSTEM") == "1":
            cflags = pkg_config("--cflags", "clinformer")
            libs = pkg_config("--libs", "clinformer")
            # An installation outside the loader's default path is still
            # found at import time.
            libdir = pkg_config("--variable=libdir", "clinformer")
            if libdir:
                libs.append("-Wl,-rpath," + libdir[0])
            include = []
        else:
            src, build, archive = build_static_library(temp)
            include = [str(src / "include"), str(build / "include")]
            cflags = pkg_config("--cflags", "OpenCL", "clblast", "jansson")
            # The archive's symbols stay inside the extension.
            libs = [str(archive), "-Wl,--exclude-libs,ALL"]
            libs += pkg_config("--libs", "OpenCL", "clblast", "jansson")
            libs += ["-lm", "-lpthread"]
        ext.sources = [self.generate(temp)]
        # cffi leaves an unchanged generated file untouched, so setuptools
        # would keep an extension linked another way (system or static
        # library, another archive): always relink; it is one file.
        self.force = True
        ext.include_dirs = include + [a[2:] for a in cflags if a.startswith("-I")]
        ext.extra_compile_args = [a for a in cflags if not a.startswith("-I")]
        ext.extra_link_args = libs
        super().run()

    def generate(self, temp):
        import cffi

        ffi = cffi.FFI()
        ffi.cdef(_clinformer_cdef.CDEF)
        ffi.set_source(_clinformer_cdef.MODULE, _clinformer_cdef.SOURCE)
        temp.mkdir(parents=True, exist_ok=True)
        path = temp / "_clinformer.c"
        ffi.emit_c_code(str(path))
        return str(path)


setup(
    ext_modules=[
        Extension("clinformer._clinformer", sources=["placeholder.c"],
                  py_limited_api=True,
                  define_macros=[("Py_LIMITED_API", "0x03080000")])
    ],
    cmdclass={"build_ext": BuildExt},
    options={"bdist_wheel": {"py_limited_api": "cp38"}},
)
