"""HOL Light: s2n-bignum-bench's corpus layout, checks forked from loaded
images, bytecode or compiled, and the serve, build-native and extract
commands. ``PROVER`` is what the registry (runner/prover_registry.py)
knows of it.

One subpackage a job, each saying in its ``__init__`` what it owns and may
import: native/ compiles HOL Light natively; costs/ prices images for the
planner; session/ runs checks in images (bytecode and native) and serves
them; extract/ cuts proof files into a corpus. What they all share stays
here: the installation (install.py), the OCaml lexer (ocaml_lexer.py), the
context tree (contexts.py), the loads a file makes (load_graph.py) and the
OCaml driver (ml/, found by path). These import none of the subpackages;
native/ imports none of them either, costs/ only native/, session/ native/
and costs/, extract/ none (tests/test_layout.py checks it).

Kept light: every module of this package, and the registry, imports it;
what the descriptor calls imports the backend when it is called.
"""

from __future__ import annotations

from pathlib import Path

from ...prover_registry import ProverDescriptor


def _load(corpus: Path, answers: Path | None = None):
    from ...corpus import load_corpus

    return load_corpus(corpus, answers)


def _backend(config):
    from ...errors import InputError
    from ...checks.sandbox import for_sweep
    from .session.backend import HolLightBackend
    from .install import find_hol_light
    from .runtime import of_config
    from .session.native_auto import native_backend

    install = find_hol_light(config.hol_light)
    root = Path(config.context_root or Path.cwd())
    if not root.is_dir():
        raise InputError(root, "context root is not a directory", "pass --context-root an existing directory")
    if config.mode != "bytecode":
        return native_backend(config, install, root)      # --mode native|auto
    # Checks are boxed (runner/checks/sandbox.py); their own output is kept in OUT/logs.
    return HolLightBackend(install, root, grace_s=config.grace, max_images=config.max_images,
                           sandbox_config=for_sweep(config), log_dir=Path(config.out) / "logs",
                           context_proofs=config.context_proofs, runtime=of_config(config))


def _refuses(text: str) -> str | None:
    from .ocaml_lexer import only_comments

    if only_comments(text):
        return ("answer is empty (whitespace and comments only); write one OCaml expression of "
                "type tactic, e.g. ARITH_TAC")
    return None


def _served_runtime(served: str, asked: str | None) -> str | None:
    from .runtime import DEFAULT, parse

    # A served check sets its own s, o and i (hol_check.ml); its image
    # settled before serving, as the server's setting said.
    own, want = parse(served or "default", "the server's runtime"), parse(asked) if asked else DEFAULT
    if own.settle != want.settle:
        return (f"serves images that settled with settle={own.settle} (--runtime {own.key}), "
                f"not settle={want.settle}")
    return None


def _runtime_of(config) -> str:
    from .runtime import of_config

    return of_config(config).key


def _map_runtime_holds(measured: str, swept: str) -> bool:
    from .runtime import holds_under

    return holds_under(measured, swept)


def _offline_mode(request):
    from .costs.simulate_modes import offline_mode

    return offline_mode(request)


def _offline_plans(problems, prove_secs, choices, profiled, builds):
    from .costs.plans import offline_plans

    return offline_plans(problems, prove_secs, choices, profiled, builds)


PROVER = ProverDescriptor(
    name="hol-light",
    title="HOL Light",
    layout="<problem-id>/setup.ml and query.txt folders (s2n-bignum-bench's layout)",
    recognises=None,            # the default: any corpus no other prover recognises
    load=_load,
    build=_backend,
    offline_plans=_offline_plans,
    offline_mode=_offline_mode,
    refuses=_refuses,
    options=("hol_light", "context_root", "runtime"),
    corpus_defaults=("context_root",),      # needs/loadt resolve from where the sweep started
    commands=(
        ("serve", "runner.provers.hol_light.session.command_serve",
         "keep HOL Light images loaded and serve checks to `proofbatch run --server DIR`, "
         "so a killed runner resumes without reloading HOL Light"),
        ("build-native", "runner.provers.hol_light.native.command_build_native",
         "compile HOL Light natively (core, server, answer front end) into the cache"),
        ("extract", "runner.provers.hol_light.extract.command_extract",
         "cut HOL Light proof files into a corpus: one problem per top-level theorem"),
    ),
    modal_maps=True,
    served_runtime=_served_runtime,
    runtime_of=_runtime_of,
    map_runtime_holds=_map_runtime_holds,
)
