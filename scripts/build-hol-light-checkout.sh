#!/usr/bin/env bash
# Builds a HOL Light checkout with Debian 12's OCaml 4.13 and camlp5 8.00.04,
# the way s2n-bignum-bench's setup.sh builds it (HOLLIGHT_USE_MODULE=1).
#
#   scripts/build-hol-light-checkout.sh SRC REV DEST [plain|module|native]
#
# SRC is anything `git clone` takes (https://github.com/jrh13/hol-light.git, a
# local mirror); REV the commit (the bench pins 5e62421). The build kind:
#   plain   HOL Light's own `make`: pa_j.cmo and a hol.sh that loads the core
#           from source (about 30 s; loading it takes about 3 min of CPU)
#   module  plain, then `make HOLLIGHT_USE_MODULE=1 hol_lib.cma hol.sh`: hol.sh
#           loads the compiled Hol_lib, as the bench's setups (`open Hol_lib;;`)
#           need (about 40 s more)
#   native  module, then `make HOLLIGHT_USE_MODULE=1 hol_lib.cmxa`, which
#           `proofbatch build-native` links (572 s more here, under load)
# Needs (Debian): ocaml ocaml-findlib camlp5 libcamlp-streams-ocaml-dev
# libnum-ocaml-dev libzarith-ocaml-dev (the hol_lib rules ask ocamlfind for
# zarith even where OCaml 4.13 uses num), git, make.
set -euo pipefail
if (($# < 3)); then
    sed -n '2,19p' "$0" >&2
    exit 2
fi
src=$1 rev=$2 dest=$3 kind=${4:-module}
case $kind in plain|module|native) ;; *) echo "unknown build kind: $kind (plain, module or native)" >&2; exit 2;; esac

if [ ! -d "$dest/.git" ]; then
    git clone -q "$src" "$dest"
fi
git -C "$dest" checkout -q "$rev"
cd "$dest"
make
# The Makefile compiles pa_j.cmo against camlp-streams' Stream when OCaml is
# 4.13; the toplevel then stops at `Undefined_global "Stream"`, since 4.13's
# own Stream is the one camlp5o.cma links. Rebuild it against the stdlib's.
# The stamp holds the digest of our rebuild: a second run of this script
# leaves it alone, or make would rebuild hol_lib (and its native cache key).
stamp=.proofbatch-pa_j.sha256
if ! sha256sum -c --status "$stamp" 2>/dev/null; then
    ocamlc -safe-string -c -pp "camlp5r pa_lexer.cmo pa_extend.cmo q_MLast.cmo" -I "$(camlp5 -where)" pa_j.ml
    sha256sum pa_j.cmo > "$stamp"
fi
if [ "$kind" != plain ]; then
    make HOLLIGHT_USE_MODULE=1 hol_lib.cma hol.sh
fi
if [ "$kind" = native ]; then
    make HOLLIGHT_USE_MODULE=1 hol_lib.cmxa
fi
