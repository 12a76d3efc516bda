#!/usr/bin/env bash
# Makes two OpenCL platforms visible to the sycl-backend-opencl tests:
#   * PoCL (Debian package `pocl-opencl-icd`, listed in /etc/OpenCL/vendors/pocl.icd), and
#   * Intel's CPU runtime (PyPI `intel-opencl-rt` + `intel-cmplr-lib-rt`), installed into a
#     private venv (nothing system-wide).
#
# Idempotent: the venv and the .icd directory are reused when present.
#
# Usage:
#   eval "$(backends/opencl/ci-setup.sh)"      # prints `export ...` lines on stdout
# The same lines are also written to "$VENV/opencl-env.sh" (printed on stderr), so
#   . /work/main/.ci-venv/opencl-env.sh
# works too. Progress messages go to stderr only.
#
# Environment knobs: SYCL_RS_CI_VENV (default: <repo>/.ci-venv), PYTHON (default python3).
#
# Notes:
#   * libintelocl.so carries RUNPATH=$ORIGIN, so its dependencies (libimf, libsvml, libtbb,
#     ...) resolve from the venv's lib dir without LD_LIBRARY_PATH. We deliberately do NOT put
#     the venv's lib dir on LD_LIBRARY_PATH: it also holds its own libOpenCL.so.1 (an ICD
#     loader) that would shadow the system ocl-icd loader.
#   * The wheel's own etc/OpenCL/vendors/intel-cpu.icd holds an unrewritten conda placeholder
#     path, so we write our own .icd with the absolute library path.
#   * OCL_ICD_VENDORS replaces /etc/OpenCL/vendors, so pocl.icd is copied next to ours.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="${SYCL_RS_CI_VENV:-$repo/.ci-venv}"
python="${PYTHON:-python3}"

log() { echo "ci-setup(opencl): $*" >&2; }

if [ ! -x "$venv/bin/pip" ]; then
    log "creating venv $venv"
    "$python" -m venv "$venv" >&2
fi

lib="$venv/lib/libintelocl.so"
if [ ! -e "$lib" ] || [ ! -e "$venv/lib/libimf.so" ]; then
    log "installing intel-opencl-rt + intel-cmplr-lib-rt (large download)"
    "$venv/bin/pip" install --disable-pip-version-check -q intel-opencl-rt intel-cmplr-lib-rt >&2
fi
if [ ! -e "$lib" ]; then
    log "libintelocl.so not found under $venv/lib after install"
    exit 1
fi

icd_dir="$venv/icd"
mkdir -p "$icd_dir"
printf '%s\n' "$(readlink -f "$lib")" > "$icd_dir/intel-cpu.icd"
for f in /etc/OpenCL/vendors/*.icd; do
    [ -e "$f" ] || continue
    case "$(basename "$f")" in
        intel-cpu.icd) ;; # ours wins
        *) cp -f "$f" "$icd_dir/" ;;
    esac
done

env_file="$venv/opencl-env.sh"
{
    echo "export OCL_ICD_VENDORS=$icd_dir"
} > "$env_file"
log "wrote $env_file"
cat "$env_file"
