#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (as root) for proofbatch: Debian's HOL
# Light, the dependency its package forgets, and a virtualenv with the project.
set -euo pipefail
cd "$(dirname "$0")/.."

export DEBIAN_FRONTEND=noninteractive
# hol-light's package forgets libnum-ocaml-dev; bubblewrap boxes every check
# (runner/checks/sandbox.py).
packages=(hol-light libnum-ocaml-dev bubblewrap)
packages+=(slurm-wlm munge slurmdbd mariadb-server)   # the dev Slurm cluster (slurm/)
packages+=(chromium)   # tests/reporting/test_report.py renders the HTML report headless
# proofbatch build-native: ocamlopt and Dynlink (ocaml), ocamlfind, camlp5 with camlp-streams
# to read HOL Light's syntax (runner/provers/hol_light/native/native_build.py)
packages+=(ocaml ocaml-findlib camlp5 libcamlp-streams-ocaml-dev util-linux)
# A HOL Light checkout built as s2n-bignum-bench builds it (scripts/build-hol-light-checkout.sh:
# its hol_lib rules ask ocamlfind for zarith) and s2n-bignum's arm objects, which its proofs read
# (README, "s2n-bignum, as the bench's users have it").
packages+=(libzarith-ocaml-dev binutils-aarch64-linux-gnu git make)
python3 -c 'import ensurepip' 2>/dev/null || packages+=(python3-venv)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -e '.[test]'
